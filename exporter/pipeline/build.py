"""The export pipeline, top to bottom: load → validate → ledger → render → write.

Everything is gathered and validated before anything is written; the ledger is brought
up to date next, then the static site and the private bundle are both written into a build
folder and switched in together (see `writer`)."""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from exporter.contract.feed import (
    CHANGES_PATH,
    SNAPSHOT_CHUNK,
    PublicChanges,
    public_changes,
    snapshot_chunk,
    snapshot_path,
)
from exporter.contract.layout import FOLDER_LIMIT, record_file
from exporter.contract.wire import (
    COLLECTIONS,
    LIST_LIMIT_DEFAULT,
    NO_COLLECTION,
    NO_COLLECTION_FILE,
    NO_ENDPOINT,
    NO_ENDPOINT_FILE,
    PUBLIC,
    encode,
    error_body,
    format_time,
    list_page,
    parse_time,
)
from exporter.indexing import search_index
from exporter.library import documents as library
from exporter.pipeline import bundle_files as bundle_writer
from exporter.pipeline.cache import Cache, SortKey
from exporter.pipeline.forks import Aside
from exporter.pipeline.ledger import Current, Event, Ledger, catch_up
from exporter.pipeline.previous import Renderings
from exporter.pipeline.switch import (
    OutputFile,
    Release,
    TreeStats,
    checkpoint,
    constant,
    exclusive,
    published_pending,
)
from exporter.project.config import NodeConfig, Project, load_node_config
from exporter.project.content import SourceRecord, discover, read_all
from exporter.project.schemas import Collection, collections
from exporter.shared.errors import ContentError, ExportError, Problem
from exporter.site import downloads, openapi, pages, redirects
from exporter.site import folders as layout
from exporter.site.served import (
    Rendered,
    fingerprint,
    json_of,
    manifest,
    render_record,
    schema_document,
    served_views,
)

# progress(phase, done, total) for the phases reading, ledger, rendering, writing site,
# indexing and writing bundle, in this order: called with done = 0 when a phase starts, now
# and then while it runs, and with done = total when it ends.
Progress = Callable[[str, int, int], None]


def _quiet(phase: str, done: int, total: int) -> None:
    pass


@dataclass
class BuildReport:
    public: Counter[str] = field(default_factory=Counter)
    restricted: Counter[str] = field(default_factory=Counter)
    events: int = 0
    site: TreeStats | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # said after the summary
    made: Made | None = None  # what the export left, if asked to keep it (`build(keep=)`)

    def summary(self) -> str:
        counts = ", ".join(f"{name} {self.public[name] + self.restricted[name]}"
                           for name in COLLECTIONS)
        site = self.site or TreeStats(0, 0, 0)
        return (f"exported {counts}; {sum(self.restricted.values())} restricted kept private; "
                f"{site.written} files written, {site.reused} unchanged, {site.removed} removed;"
                f" {self.events} ledger events; {self.seconds:.2f}s")


@dataclass
class Content:
    node: NodeConfig
    collections: dict[str, Collection]
    records: list[SourceRecord]
    cache: Cache
    paths: set[str]  # every content file read
    sort_keys: dict[str, SortKey]  # record id -> its place in lists (before the id)
    documents: list[library.Document]  # the library's PDFs, read


@dataclass
class Made:
    """What a whole export left in memory: where `delta` starts the next one from."""

    project: Project
    content: Content
    ordered: list[SourceRecord]  # every record, in list order
    rendered: list[Rendered]  # the same, as served
    ledger: Ledger
    public: dict[str, Public]
    changes: PublicChanges
    people: pages.Site
    related: pages.Related
    sources: dict[str, SourceRecord]  # each public record's content, by id
    schema: bytes
    openapi: bytes
    index: bytes  # the home page
    release: Release  # the build now current, with what both builds hold


def load(project: Project, *, base_url: str | None = None,
         progress: Progress = _quiet) -> Content:
    """Read and validate all content; raise ContentError listing every problem."""
    problems: list[Problem] = []
    try:
        node = load_node_config(project, base_url)
    except ContentError as exc:
        problems.extend(exc.problems)
        node = None
    known = collections()
    files, found = discover(project.content, known)
    problems.extend(found)
    cache = Cache.load(project.cache)
    records: list[SourceRecord] = []
    sort_keys: dict[str, SortKey] = {}
    progress("reading", 0, len(files))
    # The cache's records first, then the files it does not have, read (by worker
    # processes when there are many); records keep the order of the files.
    found_in: dict[int, tuple[list[SourceRecord], list[SortKey]]] = {}
    unread = []
    for n, source in enumerate(files):
        cached = cache.records(source, known[source.collection])
        if cached is None:
            unread.append(n)
        else:
            found_in[n] = cached
    for done, (n, (got, found)) in enumerate(
            zip(unread, read_all([files[n] for n in unread]), strict=True), start=1):
        source, collection = files[n], known[files[n].collection]
        problems.extend(found)
        keys = [collection.sort_key(record.fields) for record in got]
        if not found:
            cache.remember(source, got, keys)
        found_in[n] = got, keys
        if done % 2000 == 0:
            progress("reading", done + len(files) - len(unread), len(files))
    for n in range(len(files)):
        got, keys = found_in.pop(n)
        records.extend(got)
        sort_keys.update(zip((record.id for record in got), keys, strict=True))
    progress("reading", len(files), len(files))
    problems.extend(_duplicates(records))
    # The PDFs of the library's records that are fine are read whatever else is wrong:
    # every problem is said at once (`check` named a broken PDF only once all else was
    # right, a second round of fixing).
    wrong = {problem.path for problem in problems}
    documents, found = library.documents(
        project.root, [r for r in records if r.path not in wrong], project.cache,
        keep=not problems and node is not None)
    problems.extend(found)
    if problems or node is None:
        raise ContentError(problems)
    return Content(node, known, records, cache, {source.rel for source in files}, sort_keys,
                   documents)


def _duplicates(records: list[SourceRecord]) -> list[Problem]:
    first: dict[str, SourceRecord] = {}
    problems = []
    for record in records:
        if not record.id:
            continue
        seen = first.setdefault(record.id.lower(), record)
        if seen is not record:
            problems.append(Problem(record.path, record.line_of("id"), "id",
                                    f"duplicate: also used by {seen.path}:{seen.line_of('id')}"))
    return problems


def build(project: Project, *, now: datetime | None = None, frozen: bool = False,
          base_url: str | None = None, progress: Progress | None = None,
          folder_limit: int = FOLDER_LIMIT, keep: bool = False) -> BuildReport:
    """Export the project: static files to site_out/, the private bundle to .fednode/.
    `keep`: the report holds what the export left in memory (`BuildReport.made`)."""
    # An export allocates millions of objects and frees almost none before it ends: the
    # cyclic garbage collector would only walk them again and again (a third of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build(project, now=now, frozen=frozen, base_url=base_url,
                      progress=progress or _quiet, folder_limit=folder_limit, keep=keep)
    finally:
        if collecting:
            gc.enable()


def _build(project: Project, *, now: datetime | None, frozen: bool, base_url: str | None,
           progress: Progress, folder_limit: int, keep: bool) -> BuildReport:
    started = time.perf_counter()
    try:
        content = load(project, base_url=base_url, progress=progress)  # (writes caches)
        with exclusive(project.private):
            report = _write_all(project, content, now=now, frozen=frozen, progress=progress,
                                folder_limit=folder_limit, keep=keep)
    except OSError as exc:
        raise not_written(exc) from None
    report.seconds = time.perf_counter() - started
    return report


def not_written(exc: OSError) -> ExportError:
    """What an export that could not write says."""
    return ExportError(f"cannot write the export: {exc.strerror}: {exc.filename}; site_out/ "
                       f"and the bundle still hold one whole build. Free space or fix the "
                       f"permissions, then export again")


def _write_all(project: Project, content: Content, *, now: datetime | None, frozen: bool,
               progress: Progress, folder_limit: int, keep: bool) -> BuildReport:
    """Ledger, rendering and both trees, under the export lock."""
    # Whatever can refuse the export (the ledger unreadable, the clock behind it, a frozen
    # ledger behind the content) does before anything is staged or forked: a refused export
    # leaves every file as it was, the build not current included.
    progress("ledger", 0, len(content.records))
    catch_up(project.ledger, published_pending(project.private))
    ledger = Ledger.load(project.ledger)
    events = stamped_events(project, ledger, (
        Current(r.collection, r.id, r.hash, r.access) for r in content.records),
        now=now, frozen=frozen, whole=True)
    if events:
        ledger.writable()  # refused now, before anything is published
    pending = ledger.pending(events)  # written to the file once the build is published
    ledger.apply(events)  # in memory only, until then
    progress("ledger", len(content.records), len(content.records))
    with ExitStack() as aside:  # work done in other processes, stopped if the export fails
        # The search index (embedding new text is the slowest step), the library's passages
        # (their sentence encoding) and what the whole ledger gives are made aside, on the
        # other core, while the pages render.
        release = Release.stage(project.private, {"site": project.site_out,
                                                  "bundle": project.bundle})
        aside.callback(release.close)
        ordered = _in_list_order(content)
        index = search_index.Index(release.tree("bundle"), release.live_tree("bundle"),
                                   [(r.collection, r.id, r.hash, r.access) for r in ordered],
                                   {r.id: r for r in content.records}, content.collections)
        aside.callback(index.cancel)
        passages = library.Building(release.tree("bundle"), release.live_tree("bundle"),
                                    content.documents)
        aside.callback(passages.cancel)
        from_ledger = Aside(_from_ledger, ledger.events, content.node.base_url)
        aside.callback(from_ledger.cancel)
        report = _write_trees(project, content, ordered, ledger, events, release,
                              from_ledger, index, passages, aside, progress=progress,
                              folder_limit=folder_limit, keep=keep, pending=pending)
    ledger.write(events)
    return report


def stamped_events(project: Project, ledger: Ledger, current: Iterable[Current], *,
                   now: datetime | None, frozen: bool, whole: bool) -> list[Event]:
    """The events that bring the ledger to `current` (`whole`: every record; else only
    those given, as `Ledger.reconcile` says), stamped with this export's second, which is
    claimed (`_claim`). Refused where the ledger must not change (`frozen`) or where the
    clock is behind it."""
    stamp = _second_of(datetime.now(UTC))
    if now is None:
        # The second of the last export here, with events or without (`_claim`), and of
        # the ledger's last event (a killed export's, or one made elsewhere).
        last_at = max(filter(None, (ledger.last_at, _claimed(project))), default=None)
        if last_at and format_time(stamp) <= last_at:
            last = parse_time(last_at)
            if last - datetime.now(UTC) <= timedelta(seconds=2):
                # The last export began in this second (or, killed by an older fednode,
                # stamped the next): this one's events get the second after it, once that
                # has come.
                _wait_for(last + timedelta(seconds=1))
                stamp = _second_of(datetime.now(UTC))
        _claim(project, stamp)
    events = ledger.reconcile(current, now or stamp, whole=whole)
    if frozen and events:
        raise ExportError(
            f"the ledger is behind the content ({len(events)} change(s)); run `fednode export` "
            f"where the content is edited and commit {project.ledger.name} with it")
    if events and now is None and ledger.last_at and format_time(stamp) <= ledger.last_at:
        # Stamping last+1s would make the time of these events depend on earlier ones,
        # restricted ones included: refuse rather than let that be read.
        raise ExportError(
            f"this machine's clock ({format_time(stamp)}) is behind the last event in "
            f"{project.ledger.name} ({ledger.last_at}); set the clock right (or wait until "
            f"then) and export again")
    return events


def _from_ledger(events: list[Event], base_url: str) -> tuple[PublicChanges, bytes]:
    """The public change list and the bundle's events table: each a pass over every event."""
    return public_changes(events, base_url), bundle_writer.events_table(events)


def _write_trees(project: Project, content: Content, ordered: list[SourceRecord],
                 ledger: Ledger, events: list[Event], release: Release,
                 from_ledger: Aside[tuple[PublicChanges, bytes]], index: search_index.Index,
                 passages: library.Building, aside: ExitStack, *, progress: Progress,
                 folder_limit: int, keep: bool, pending: bytes) -> BuildReport:
    """Render every output and write both trees into the build, then switch it in."""
    previous = Renderings.read(project.bundle)
    rendered = _render(content, ordered, ledger, previous, progress)
    report = BuildReport(seconds=0.0, events=len(events))
    for r in rendered:
        (report.public if r.public else report.restricted)[r.collection] += 1

    node, known = content.node, content.collections
    public = _by_collection([r for r in rendered if r.public])
    changes, events_arrow = from_ledger.result()
    changes_hash = hashlib.sha256(changes.body)  # (for site_out/ and the bundle alike)
    sync_files, sync_section = _sync_files(
        node, snapshots(node, public, content.cache), changes, changes_hash)
    download_files = downloads.download_files(
        node, known, {name: (group.records, group.prints) for name, group in public.items()},
        content.cache, functools.partial(release.unchanged, "site"), aside)
    manifest_bytes = manifest(node, known, dict(report.public), changes.updated_at,
                              sync_section, downloads.manifest_section(
                                  node, dict(report.public), list(known)))
    schema_bytes = schema_document(known)
    openapi_bytes = encode(openapi.document(node, known))
    people = pages.site_of(node, known, dict(report.public))
    index_bytes = pages.home(people)
    sources = {r.id: r for r in content.records if r.access == PUBLIC}
    listed = {name: group.records for name, group in public.items()}
    related = pages.relations(listed, sources, content.cache)
    page_files = pages.files(people, known, listed, sources, related)

    routing = redirects.redirects_file(
        node.sidecar_url, [(name, r.id) for name, group in public.items() for r in group.records])

    site = [*_static_files(node, public, manifest_bytes, schema_bytes, index_bytes),
            constant("api/openapi.json", openapi_bytes,
                     hashlib.sha256(openapi_bytes).hexdigest()),
            constant(redirects.FILE, routing, hashlib.sha256(routing).hexdigest()),
            *sync_files, *library.published(content.documents), *page_files,
            *download_files]  # last: their parts may be in the making aside meanwhile
    # The whole public tree is known: refuse it before any tree is written.
    layout.check_folders((f.path for f in site), folder_limit)
    checkpoint("ledger")
    report.site = _write(release, "site", site, "writing site", progress)
    checkpoint("site")
    # The cache is complete once the site is written (its digests, names and download parts
    # were all asked for): it is saved aside meanwhile, and the export ends once it is.
    saving = Aside(content.cache.save, content.paths)
    aside.callback(saving.cancel)
    # What needs nothing of the index is made while it ends aside.
    records = bundle_writer.records_files(bundle_writer.records_tables(
        rendered, _positions(rendered), previous), project.private)
    progress("indexing", 0, len(rendered))
    indexed = index.result() + passages.result()
    progress("indexing", len(rendered), len(rendered))
    checkpoint("indexed")
    progress("writing bundle", 0, len(rendered))
    private = [*library.private(content.documents), *download_files, *bundle_writer.bundle_files(
        node_id=node.id, base_url=node.base_url, sidecar_url=node.sidecar_url,
        manifest=manifest_bytes, schema=schema_bytes, openapi=openapi_bytes, index=index_bytes,
        changes=(changes.body, changes_hash),
        records=records,
        events=events_arrow, search=indexed,
        origins=node.allowed_origins)]
    release.write("bundle", private)
    progress("writing bundle", len(rendered), len(rendered))
    checkpoint("bundle")
    release.publish(pending)
    try:
        saving.result()
    except (OSError, ExportError, ChildProcessError) as exc:
        # Published already: the export succeeded, and says so; only the next one is slower.
        report.warnings.append(f"the export is published, but its cache could not be saved "
                               f"({exc}); the next export reads every file again")
    if keep:
        report.made = Made(project, content, ordered, rendered, ledger, public, changes, people,
                           related, sources, schema_bytes, openapi_bytes, index_bytes,
                           release)
    return report


def _in_list_order(content: Content) -> list[SourceRecord]:
    """Every record in list order: by collection, then by the collection's sort key
    (`Collection.sort_key`), then by id."""
    rank = {name: index for index, name in enumerate(COLLECTIONS)}
    keys = content.sort_keys
    return sorted(content.records, key=lambda r: (rank[r.collection], keys[r.id], r.id))


def _render(content: Content, ordered: list[SourceRecord], ledger: Ledger,
            previous: Renderings, progress: Progress) -> list[Rendered]:
    """Every record as served, in list order (`ordered`)."""
    total = len(ordered)
    progress("rendering", 0, total)
    rendered = []
    for done, r in enumerate(ordered, start=1):
        rendered.append(render_record(r, ledger.entries[r.id], content.collections[r.collection],
                                      content.node, previous))
        if done % 2000 == 0:
            progress("rendering", done, total)
    progress("rendering", total, total)
    return rendered


def _write(release: Release, tree: str, files: list[OutputFile], phase: str,
           progress: Progress) -> TreeStats:
    progress(phase, 0, len(files))
    stats = release.write(tree, files, lambda done: progress(phase, done, len(files)))
    progress(phase, len(files), len(files))
    return stats


def _second_of(moment: datetime) -> datetime:
    """The time an export stamps its events with: the whole second in which it began, a
    time that has come before anything is published. Each export gets a second of its own:
    one that begins in the second the last export began in (with events or without,
    `_claim`) waits for the next (`_write_all`). The time depends on nothing but the clock
    and when exports ran here, never on what earlier (perhaps restricted) events were; only
    a ledger holding a later second than any export here began in (one killed after stamping
    the next second, or one made on another machine) is waited for as it is."""
    return moment.replace(microsecond=0)


STAMP = "stamp"  # in .fednode/: the second the last export began in, with events or not


def _claimed(project: Project) -> str | None:
    try:
        text = (project.private / STAMP).read_text("ascii").strip()
        return format_time(parse_time(text))
    except (OSError, ValueError):
        return None  # none yet, or unreadable: the ledger's last event alone decides


def _claim(project: Project, stamp: datetime) -> None:
    """Every export claims the second it began in, whether it makes events or not: the next
    one, if it begins in that second, waits for the next. Were only the ledger's last event
    counted, a public edit exported in the second of an export that changed only restricted
    records would be stamped a second later than after one that changed nothing: the public
    times would tell that something restricted changed."""
    path = project.private / STAMP
    path.with_name(STAMP + ".tmp").write_text(format_time(stamp) + "\n", "ascii")
    os.replace(path.with_name(STAMP + ".tmp"), path)


def _wait_for(moment: datetime) -> None:
    delay = (moment - datetime.now(UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)


def _positions(ordered: list[Rendered]) -> list[int]:
    counter: Counter[str] = Counter()
    positions = []
    for r in ordered:
        positions.append(counter[r.collection])
        counter[r.collection] += 1
    return positions


@dataclass(frozen=True)
class Public:
    """The public records of one collection, in list order, with their fingerprints."""

    records: list[Rendered]
    prints: list[str]


def _by_collection(public: list[Rendered]) -> dict[str, Public]:
    """Restricted records never reach this function's callers."""
    grouped: dict[str, Public] = {name: Public([], []) for name in COLLECTIONS}
    for r in public:
        group = grouped[r.collection]
        group.records.append(r)
        group.prints.append(r.key)
    return grouped


class SnapshotChunk(NamedTuple):
    """One snapshot chunk: its file, and its description in the manifest."""

    file: OutputFile
    entry: dict[str, object]


def snapshots(node: NodeConfig, public: dict[str, Public], cache: Cache, *,
              remade: set[tuple[str, int]] | None = None,
              kept: dict[tuple[str, int], SnapshotChunk] | None = None
              ) -> dict[tuple[str, int], SnapshotChunk]:
    """Every snapshot chunk, by collection and offset, in the manifest's order. `remade`:
    only these chunks are made again, the others taken from `kept` (a delta export's); their
    bytes are made once and held, where a whole export, which makes many, renders a chunk
    the cache has no digest for twice rather than hold them all."""
    found: dict[tuple[str, int], SnapshotChunk] = {}
    used: dict[str, str] = {}
    for name, group in public.items():
        for offset in range(0, len(group.records), SNAPSHOT_CHUNK):
            if remade is not None and (name, offset) not in remade:
                assert kept is not None
                found[(name, offset)] = kept[(name, offset)]
                continue
            chunk = group.records[offset:offset + SNAPSHOT_CHUNK]
            print_ = fingerprint("snapshot", name, str(offset),
                                 *group.prints[offset:offset + SNAPSHOT_CHUNK])
            path = snapshot_path(name, offset)
            render = functools.partial(_snapshot, chunk)
            if remade is None:
                file = OutputFile(path, print_, render)
                digest = cache.digests.get(print_) or hashlib.sha256(render()).hexdigest()
            else:
                data = render()
                digest = hashlib.sha256(data).hexdigest()
                file = constant(path, data, print_)
            used[print_] = digest
            found[(name, offset)] = SnapshotChunk(file, {
                "collection": name, "url": f"{node.base_url}/{path}", "offset": offset,
                "records": len(chunk), "sha256": digest})
    if remade is None:
        cache.digests = used
    else:
        cache.digests.update(used)
    return found


def _sync_files(node: NodeConfig, chunks: dict[tuple[str, int], SnapshotChunk],
                changes: PublicChanges, changes_hash: bundle_writer.Hash
                ) -> tuple[list[OutputFile], dict[str, object]]:
    """SnapshotChunk chunks and the public change list (`changes_hash`: its SHA-256), and the
    manifest's description of them."""
    changes_digest = changes_hash.hexdigest()
    files = [*(chunk.file for chunk in chunks.values()),
             constant(CHANGES_PATH, changes.body, changes_digest)]
    section = {
        "seq": changes.seq,
        "snapshots": [chunk.entry for chunk in chunks.values()],
        "changes": {"url": f"{node.base_url}/{CHANGES_PATH}",
                    "items": changes.body.count(b"\n"), "sha256": changes_digest},
    }
    return files, section


def _snapshot(chunk: list[Rendered]) -> bytes:
    return snapshot_chunk(served_views(chunk))


def _static_files(node: NodeConfig, public: dict[str, Public], manifest_bytes: bytes,
                  schema_bytes: bytes, index_bytes: bytes) -> Iterator[OutputFile]:
    """Every public file but the sync files."""
    for path, data in (("api/manifest.json", manifest_bytes), ("api/schema.json", schema_bytes),
                       ("index.html", index_bytes),
                       (NO_ENDPOINT_FILE, error_body("not_found", NO_ENDPOINT)),
                       (NO_COLLECTION_FILE, error_body("not_found", NO_COLLECTION))):
        yield constant(path, data, hashlib.sha256(data).hexdigest())
    for name, group in public.items():
        for r, print_ in zip(group.records, group.prints, strict=True):
            yield OutputFile(record_file(name, r.id), print_, r.served)
        yield from list_pages(node, name, group)


def list_pages(node: NodeConfig, name: str, group: Public,
               offsets: Iterable[int] | None = None) -> Iterator[OutputFile]:
    """A collection's list pages (those at `offsets` only, if given: multiples of the page
    size)."""
    items, prints = group.records, group.prints
    total = len(items)
    for offset in range(0, max(total, 1), LIST_LIMIT_DEFAULT) if offsets is None else offsets:
        page = items[offset:offset + LIST_LIMIT_DEFAULT]
        page_print = fingerprint(node.base_url, name, str(offset), str(total),
                                 *prints[offset:offset + LIST_LIMIT_DEFAULT])

        def render(page: list[Rendered] = page, offset: int = offset) -> bytes:
            return list_page(node.base_url, name, json_of(page), total=total,
                             limit=LIST_LIMIT_DEFAULT, offset=offset)

        yield OutputFile(f"api/{name}/offset/{offset}.json", page_print, render)
        if offset == 0:
            yield OutputFile(f"api/{name}/index.json", page_print, render)
