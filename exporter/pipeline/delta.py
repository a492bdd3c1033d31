"""An export brought up to date from the last one this process made, for `fednode export
--watch` (docs/architecture.md, "Delta exports").

A whole export passes over every record some twenty times; at 100,000 records that is
seconds even when one file changed. Under `--watch` the process keeps what its last export
made (`build.Made`), and inotify names the files saved since. When each of them is a record
file read before, and every record in it keeps its id, collection, access and place in the
lists, and the species it names (the publisher's usual edit: a field, a body, a title),
only the outputs that hold a changed record are made again:

- its record file and page, the list page and snapshot chunk holding it, the collection's
  downloads, the sitemaps (their `lastmod`), the manifest and the public change list;
- the collection's pages for people, where its title changed (a title no other page
  shows: a record that other pages link to keeps its title, or the export is whole);
- in the bundle: the records table, the events table and the search index (one document).

Which files of each output an edit changes is said beside the output, in the table both
exports assemble their trees from (`assembly`): each is made by the same function a whole
export uses, from the same inputs, so its bytes are the same
(`tests/exporter/pipeline/test_delta.py` compares every file with a whole export's after runs
of edits). The writer brings the
other build up to date from the paths the last two exports changed, not by comparing every
output. Anything else (a file added, removed or renamed, an id, access or order changed,
node.toml, the library, a file another export wrote meanwhile) is exported whole."""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import os
import stat
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from exporter.contract.bundle import column
from exporter.contract.feed import SNAPSHOT_CHUNK, Event
from exporter.indexing import search_index
from exporter.library import documents as library
from exporter.pipeline import bundle_files as bundle_writer
from exporter.pipeline import inputs
from exporter.pipeline.assembly import (
    BUNDLE,
    SITE,
    Bundled,
    Edits,
    Sitemap,
    assemble,
    download_files,
    snapshots,
)
from exporter.pipeline.build import BuildReport, Made, Progress, _quiet, build
from exporter.pipeline.cache import SortKey
from exporter.pipeline.change_list import ChangeList
from exporter.pipeline.forks import Aside
from exporter.pipeline.ledger import Current
from exporter.pipeline.previous import Renderings
from exporter.pipeline.stamps import stamped_events
from exporter.pipeline.switch import (
    Data,
    OutputFile,
    Release,
    TreeStats,
    checkpoint,
    exclusive,
)
from exporter.project.config import Project
from exporter.project.content import LIBRARY, SourceFile, SourceRecord, is_read, read, version_of
from exporter.shared import word_vectors
from exporter.shared.errors import ContentError, ExportError
from exporter.shared.fileversion import version_at
from exporter.site import downloads, network, pages
from exporter.site.served import Rendered, render_record


@dataclass
class State:
    """What the last export of this process left, and where each record is in it."""

    made: Made
    counts: tuple[Counter[str], Counter[str]]  # public, restricted records by collection
    row: dict[str, int]  # record id -> its index in `made.ordered` and `made.rendered`
    place: dict[str, int]  # public record id -> its index in its collection's public list
    held: dict[str, list[str]]  # content file -> the ids of its records, in order
    source_at: dict[str, int]  # record id -> its index in `made.content.records`
    stale: dict[str, set[str]]  # tree -> paths at which the other build differs
    named: set[str]  # the scientific names some public record names (pages link by them)
    ledger: tuple[int, ...] | None  # the ledger file's version as the export left it
    renderings: Renderings  # the whole export's records table, which reused rows are of
    sitemap: Sitemap  # the sitemaps' lines, each edit's brought up to date
    segments: list[pa.Table]  # the records table of the build now current, in segments
    feed: ChangeList
    group_row: dict[str, int]  # record id -> its row in its access group's search index
    groups: set[str]  # the access groups records are in
    pending: set[str] = field(default_factory=set)  # files an export refused, read again
    prepared: bool = False  # `Session.prepare` ran

    @classmethod
    def after(cls, made: Made, report: BuildReport) -> State:
        """The state of a whole export just published. Every rendering is taken from its
        bundle from now on (the records table is spliced from it)."""
        renderings = Renderings.read(made.project.bundle)
        row: dict[str, int] = {}
        group_row: dict[str, int] = {}
        counted: Counter[str] = Counter()
        for n, r in enumerate(made.rendered):
            row[r.id] = n
            r.row, r.source, r.fresh = renderings.rows[r.id], renderings, None
            group_row[r.id] = counted[r.access]
            counted[r.access] += 1
        held: dict[str, list[str]] = {}
        for record in made.content.records:
            held.setdefault(record.path, []).append(record.id)
        public = made.parts.public
        place = {r.id: n for group in public.values() for n, r in enumerate(group.records)}
        named = {name for names in made.content.cache.names.values() for name in names}
        release = made.release
        return cls(made, (report.public.copy(), report.restricted.copy()), row, place, held,
                   {r.id: n for n, r in enumerate(made.content.records)},
                   {tree: release.stale(tree) for tree in ("site", "bundle")}, named,
                   version_at(made.project.ledger), renderings,
                   Sitemap.of(made.content.node.base_url, public, made.parts.people.library),
                   renderings.tables,
                   ChangeList.of(made.ledger.events, made.parts.changes), group_row,
                   set(counted))


def _rendered(files: list[OutputFile]) -> list[Data]:
    return [f.render() for f in files]


def _records(state: State, fresh: dict[int, Rendered], private: Path
             ) -> tuple[list[pa.Table], list[OutputFile]]:
    """The records table's segments with the rows numbered in `fresh` replaced (each keeps
    its position), and their files: only the segments holding them are made again; the
    others are as the build now current records them."""
    starts = list(itertools.accumulate((t.num_rows for t in state.segments), initial=0))
    replaced: dict[int, dict[int, tuple[Rendered, int]]] = {}
    for row, r in fresh.items():
        n = bisect.bisect_right(starts, row) - 1
        local = row - starts[n]
        position = column(state.segments[n], "position")[local].as_py()
        replaced.setdefault(n, {})[local] = (r, position)
    tables = list(state.segments)
    for n, rows in replaced.items():
        tables[n] = bundle_writer.records_replaced(tables[n], rows)
    return tables, bundle_writer.records_files(tables, private, replaced,
                                               state.made.release.outputs["bundle"])


class Session:
    """The exports of one `fednode export --watch`: whole, or brought up to date (`delta`)
    where the files saved since allow it."""

    def __init__(self, project: Project, *, frozen: bool = False,
                 base_url: str | None = None, now: datetime | None = None) -> None:
        """`frozen`, `base_url` and `now` are given to every export, as `build` takes
        them (`now`: the time their events are stamped with; None: the clock's)."""
        self.project = project
        self.frozen = frozen
        self.base_url = base_url
        self.now = now
        self.state: State | None = None
        self.whole = 0  # exports made whole, and brought up to date: for tests and benches
        self.deltas = 0
        self.failures: list[Exception] = []  # delta exports that failed (then made whole)

    def export(self, changed: set[Path] | None, progress: Progress = _quiet) -> BuildReport:
        """Export after the files `changed` were saved (None: not known, or the first)."""
        state, self.state = self.state, None  # dropped unless the export ends well
        if state is not None and changed is not None and not self.frozen:
            paths = state.pending | {str(path) for path in changed}
            try:
                report = export(state, paths, now=self.now)
            except ContentError:
                state.pending = paths  # nothing written: read them again next time
                self.state = state
                raise
            except Exception as exc:  # failed part way: the whole export below starts
                self.failures.append(exc)  # afresh, and says what is wrong if anything is
                report = None
            if report is not None:
                self.deltas += 1
                self.state = state
                return report
        report = build(self.project, now=self.now, frozen=self.frozen,
                       base_url=self.base_url, progress=progress, keep=True)
        self.whole += 1
        assert report.made is not None
        try:
            self.state = State.after(report.made, report)
        except Exception as exc:  # (the bundle just written unreadable?) the next is whole
            self.failures.append(exc)
            self.state = None
        report.made = None
        return report

    def prepare(self) -> None:
        """After a whole export, what the first export brought up to date after it would
        otherwise do, for whoever has time to wait for it now (`fednode export --watch`,
        before it waits for a save): load the word vectors, make the download parts the
        cache lacks (a download taken as an earlier build had it, after a base_url changed
        and changed back, has none), and make the other build hold what the current one
        holds (after an export that changed every file, 200,000 links at 100,000 records). A
        save meanwhile is exported once this ends."""
        state = self.state
        if state is None or state.prepared:
            return
        state.prepared = True
        made = state.made
        try:
            word_vectors.Embedder.model()  # (which an edit's index update needs: see `export`)
            downloads.make_parts(made.content.node, made.content.collections, {
                name: (group.records, group.prints)
                for name, group in made.parts.public.items()}, made.content.cache)
        except Exception as exc:  # (the next export makes what is missing, or says why)
            self.failures.append(exc)
        with ExitStack() as held:
            try:
                held.enter_context(exclusive(made.project.private))
            except ExportError:
                return  # another export runs: the next one here is whole anyway
            try:
                if made.release.mirror(state.stale):
                    state.stale = {tree: set() for tree in state.stale}
            except Exception as exc:  # (the next export refuses to resume what failed midway)
                self.failures.append(exc)


@dataclass
class _Edit:
    """One changed record: as it was and as it is."""

    before: Rendered
    record: SourceRecord
    row: int


def export(state: State, paths: Iterable[str], *, now: datetime | None = None
           ) -> BuildReport | None:
    """Bring the export up to date with the files at `paths`; None where it must be whole
    (the module's docstring says when). Raises ContentError, touching nothing, where a file
    has problems. `now`: as `build` takes it."""
    started = time.perf_counter()
    made = state.made
    project, content = made.project, made.content
    sources: dict[str, SourceFile] = {}
    for path in sorted(paths):
        source = _source(project, content.paths, path)
        if source is None:
            return None
        sources[source.rel] = source  # (one file, however it was named)
    read_now = [(source, *read(source, content.collections[source.collection]))
                for source in sources.values()]
    problems = [problem for _, _, found in read_now for problem in found]
    if problems:  # what a whole export would say: every other file is as it found it
        raise ContentError(problems)
    edits: list[_Edit] = []
    for source, records, _ in read_now:
        if [r.id for r in records] != state.held[source.rel]:
            return None
        for record in records:
            n = state.row[record.id]
            before = made.rendered[n]
            if record.hash != before.content_hash:
                edits.append(_Edit(before, record, n))
    keys = {e.record.id: content.collections[e.record.collection].sort_key(e.record.fields)
            for e in edits}
    if any(not _in_place(state, edit, keys) for edit in edits):
        return None
    with exclusive(project.private):
        published = inputs.published(project)
        report = _write(state, edits, keys, started, now)
        if report is not None:  # what the build now published read, for the next command
            inputs.renew(project, published, ((s.rel, s.version) for s in sources.values()),
                         report)
        return report


def _source(project: Project, read_before: set[str], path: str) -> SourceFile | None:
    """The content file at `path`, if an export may bring it up to date: a record file of
    a collection (not the library's) that the last export read."""
    try:  # (a link is followed, as `content.discover` follows it; one that points nowhere
        # is left to a whole export, which says so)
        rel = Path(os.path.abspath(path)).relative_to(os.path.abspath(project.root)).as_posix()
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] != "content" or parts[1] == LIBRARY or \
            not is_read(parts[2]) or rel not in read_before:
        return None
    return SourceFile(parts[1], str(project.root / rel), rel, *version_of(info))


def _in_place(state: State, edit: _Edit, keys: dict[str, SortKey]) -> bool:
    """Whether the record's edit leaves every other output as it was: same access and
    place in the lists (`keys`: the new sort keys of every record edited now), and, for
    pages, the same links."""
    made, record, before = state.made, edit.record, edit.before
    collection = made.content.collections[record.collection]
    if record.access != before.access or record.collection != before.collection:
        return False
    place = (keys[record.id], record.id)
    for neighbour, earlier in ((edit.row - 1, True), (edit.row + 1, False)):
        if 0 <= neighbour < len(made.ordered):
            other = made.ordered[neighbour]
            if other.collection != record.collection:
                continue
            theirs = (keys.get(other.id) or made.content.sort_keys[other.id], other.id)
            if (theirs > place) if earlier else (theirs < place):
                return False
    if not before.public:
        return True
    naming = pages.NAMES_SPECIES.get(record.collection, ("", ""))[0]
    if naming and pages.names_of(record.fields.get(naming)) != made.content.cache.names.get(
            before.key, []):
        return False  # it links to other species now
    title = str(record.fields.get(collection.title_field, ""))
    if title != before.title and (made.parts.related.get(record.id) or (
            record.collection == "species" and title in state.named)):
        return False  # other pages show its title, or would link to it now
    return True


def _write(state: State, edits: list[_Edit], keys: dict[str, SortKey], started: float,
           now: datetime | None) -> BuildReport | None:
    """Bring both trees up to date with the `edits` (`keys`: their records' sort keys) in
    the build the current one replaced, and switch it in; None where the builds or the
    ledger are not as this process left them (another export, or a `git pull`, ran)."""
    made = state.made
    project, ledger = made.project, made.ledger
    if version_at(project.ledger) != state.ledger:
        return None  # written since by something else (a `git pull`): read it again, whole
    report = BuildReport(public=state.counts[0].copy(), restricted=state.counts[1].copy())
    release = Release.resume(made.release) if edits else None
    if edits and release is None:
        return None  # the builds are not as this process left them: another export ran
    try:
        events = stamped_events(project, ledger, (
            Current(e.record.collection, e.record.id, e.record.hash, e.record.access)
            for e in edits), now=now, frozen=False, whole=False)
    except BaseException:
        if release is not None:
            release.close()
        raise
    if release is None:  # saved as it was: nothing to export, but the second is claimed
        report.site = TreeStats(0, len(made.release.outputs.get("site", {})), 0)
        report.seconds = time.perf_counter() - started
        return report
    with ExitStack() as aside:
        aside.callback(release.close)  # however this ends: the resumed build is let go
        report.events = len(events)
        if events:
            ledger.writable()  # refused now, before anything is published
        pending = ledger.pending(events)  # written to the file once the build is published
        ledger.apply(events)
        rendered, changed = _applied(state, edits, keys)
        with ThreadPoolExecutor(4, thread_name_prefix="fednode-delta") as threads:
            report.site = _write_trees(state, release, edits, rendered, changed, events,
                                       aside, threads)
            release.publish(pending)
    ledger.write(events)
    state.ledger = version_at(project.ledger)
    made.release = release
    state.pending = set()
    report.seconds = time.perf_counter() - started
    return report


def _applied(state: State, edits: list[_Edit], keys: dict[str, SortKey]
             ) -> tuple[list[Rendered], Edits]:
    """Render the edited records, each in place of what the last export made of it (in
    `state.made`, its `parts` included): each as rendered now, and what the public ones
    change (`assembly.Edits`)."""
    made = state.made
    content, ledger, parts = made.content, made.ledger, made.parts
    node, known = content.node, content.collections
    retitled: set[str] = set()
    rendered: list[Rendered] = []
    for edit in edits:
        record = edit.record
        r = render_record(record, ledger.entries[record.id], known[record.collection], node,
                          Renderings.empty())
        rendered.append(r)
        made.rendered[edit.row] = r
        made.ordered[edit.row] = record
        content.records[state.source_at[record.id]] = record
        content.sort_keys[record.id] = keys[record.id]
        if not r.public:
            continue
        group = parts.public[r.collection]
        at = state.place[r.id]
        group.records[at], group.prints[at] = r, r.key
        parts.sources[r.id] = record
        shown, before = pages.vernaculars([r, edit.before]) if r.collection == "species" \
            else ("", "")
        if node.network is not None:  # (a hub's lists name each record's member)
            member, was = network.sources([r, edit.before])
            shown, before = f"{shown}\x1e{member}", f"{before}\x1e{was}"
        if r.title != edit.before.title or shown != before:  # what its list shows of it
            retitled.add(r.collection)
        for _, other in parts.related.get(r.id, []):
            parts.related[other.id] = [(section, r if x is edit.before else x)
                                       for section, x in parts.related[other.id]]
        content.cache.names[r.key] = content.cache.names.get(edit.before.key, [])
    return rendered, Edits([r for r in rendered if r.public], state.place, retitled,
                           state.sitemap)


def _write_trees(state: State, release: Release, edits: list[_Edit],
                 rendered: list[Rendered], changed: Edits, events: list[Event],
                 aside: ExitStack, threads: ThreadPoolExecutor) -> TreeStats:
    """Write what the `edits` change of each tree (`assembly`) into the resumed build
    (`rendered`: their records as rendered now); the site's stats. The records table, the
    downloads (one after the other: they share the parts made aside), then the change
    list's hash and the events table are made on `threads`, the first two started as soon
    as the work `aside` is forked (the search index, and the download parts the cache
    lacks, if many: no process is forked while other threads run), while the pages are:
    most of their work (copying, compressing, hashing, writing) lets the others run."""
    made = state.made
    project, content, last = made.project, made.content, made.parts
    node, known = content.node, content.collections
    bundle, live_bundle = release.tree("bundle"), release.live_tree("bundle")
    assert live_bundle is not None
    # The word vectors are loaded in this process, once: the process the index is brought
    # up to date in, forked from it, has them, rather than read them again at every edit.
    word_vectors.Embedder.model()
    index = Aside(search_index.update, bundle, live_bundle, search_index.index_version(known),
                  state.groups, [search_index.Change(e.record, state.group_row[e.record.id],
                                                     e.before.content_hash) for e in edits],
                  known)
    # (waited for where it runs on a thread: nothing writes into the build afterwards)
    aside.callback(functools.partial(index.cancel, wait=True))
    offered = download_files(node, known, last.public, content.cache,
                             lambda path, print_: False, aside, touched=changed.touched)
    records_work = threads.submit(_records, state, {
        state.renderings.rows[r.id]: r for r in rendered}, project.private)
    made_downloads = threads.submit(_rendered, offered)
    offered = [OutputFile(f.path, f.fingerprint,
                          functools.partial(lambda n: made_downloads.result()[n], n))
               for n, f in enumerate(offered)]
    state.feed.add(events, node.base_url)
    changes = state.feed.changes
    changes_hash = threads.submit(hashlib.sha256, changes.body)  # (30 MB: beside the rest)
    events_work = threads.submit(bundle_writer.events_parquet, state.feed.events)
    chunks = snapshots(node, last.public, content.cache, kept=last.chunks, remade={
        (name, offset) for name, found in changed.offsets(SNAPSHOT_CHUNK).items()
        for offset in found})
    parts = replace(last, changes=changes, changes_hash=changes_hash.result(), chunks=chunks,
                    downloads=offered)
    checkpoint("ledger")
    site, state.stale["site"] = release.write_changes("site", assemble(SITE, parts, changed),
                                                      state.stale["site"])
    checkpoint("site")
    state.segments, records = records_work.result()
    passages = library.build(bundle, live_bundle, content.documents)
    indexed = index.result()
    parts.bundled = Bundled(records, events_work.result(), indexed + passages)
    _, state.stale["bundle"] = release.write_changes("bundle", assemble(BUNDLE, parts, changed),
                                                     state.stale["bundle"])
    checkpoint("bundle")
    made.parts = parts.kept()
    return site
