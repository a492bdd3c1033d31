"""The whole export, top to bottom: load → validate → ledger → render → write → record.

Everything is gathered and validated before anything is written; the ledger is brought
up to date next, then the static site and the private bundle, assembled from the table of
outputs (`assembly`), are both written into a build folder and switched in together
(`switch`); last, what the export read is recorded (`inputs`), so that the next one can
tell that nothing changed (`export`)."""

from __future__ import annotations

import functools
import gc
import hashlib
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime

from exporter.contract.feed import PublicChanges, public_changes
from exporter.contract.layout import FOLDER_LIMIT
from exporter.contract.signing import ROTATIONS_FILE, Identity
from exporter.contract.wire import COLLECTIONS, PUBLIC, encode
from exporter.indexing import search_index
from exporter.library import documents as library
from exporter.pipeline import bundle_files as bundle_writer
from exporter.pipeline import inputs
from exporter.pipeline.assembly import (
    BUNDLE,
    SITE,
    Bundled,
    Parts,
    assemble,
    by_collection,
    download_files,
    snapshots,
)
from exporter.pipeline.cache import Cache, SortKey
from exporter.pipeline.forks import Aside
from exporter.pipeline.ledger import Current, Event, Ledger, catch_up
from exporter.pipeline.previous import Renderings
from exporter.pipeline.report import BuildReport, Progress, TreeStats
from exporter.pipeline.stamps import stamped_events
from exporter.pipeline.switch import (
    OutputFile,
    Release,
    checkpoint,
    exclusive,
    published_pending,
)
from exporter.project.config import NodeConfig, Project, load_node_config
from exporter.project.content import SourceRecord, discover, read_all
from exporter.project.placeholders import placeholder_bodies
from exporter.project.schemas import Collection, collections
from exporter.shared.errors import ContentError, ExportError, Problem
from exporter.site import folders as layout
from exporter.site import library_page, openapi, pages
from exporter.site.served import Rendered, render_record, schema_document


def _quiet(phase: str, done: int, total: int) -> None:
    pass


@dataclass
class Content:
    """The project's content, read and validated (`load`)."""

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
    parts: Parts  # what the outputs were made from (`Parts.kept`)
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
          folder_limit: int = FOLDER_LIMIT, keep: bool = False,
          looked: inputs.Looked | None = None) -> BuildReport:
    """Export the project whole: static files to site_out/, the private bundle to .fednode/,
    and the record of what it read (`inputs`; `looked`: what a look just found, else looked
    at now). `keep`: the report holds what the export left in memory (`BuildReport.made`)."""
    if looked is None:
        looked = inputs.look(project, inputs.Last.read(project), base_url=base_url,
                             folder_limit=folder_limit)
    # An export allocates millions of objects and frees almost none before it ends: the
    # cyclic garbage collector would only walk them again and again (a third of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build(project, now=now, frozen=frozen, base_url=base_url,
                      progress=progress or _quiet, folder_limit=folder_limit, keep=keep,
                      looked=looked)
    finally:
        if collecting:
            gc.enable()


def _build(project: Project, *, now: datetime | None, frozen: bool, base_url: str | None,
           progress: Progress, folder_limit: int, keep: bool,
           looked: inputs.Looked) -> BuildReport:
    started = time.perf_counter()
    try:
        content = load(project, base_url=base_url, progress=progress)  # (writes caches)
        with exclusive(project.private):
            report = _write_all(project, content, now=now, frozen=frozen, progress=progress,
                                folder_limit=folder_limit, keep=keep)
            said = [str(problem) for problem in
                    placeholder_bodies(content.records, content.cache.placeholders)]
            report.warnings += said
            try:
                inputs.remember(project, looked, report, said)
            except OSError as exc:  # published already: only the next export is slower
                report.warnings.append(f"the export is published, but what it read could "
                                       f"not be recorded ({exc}); the next export runs whole")
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
    identity = Identity.load(project.private, project.root / ROTATIONS_FILE,
                             frozen=frozen)  # (a first export makes the key)
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
        report = _write_trees(project, content, identity, ordered, ledger, events, release,
                              from_ledger, index, passages, aside, progress=progress,
                              folder_limit=folder_limit, keep=keep, pending=pending)
    ledger.write(events)
    checkpoint("appended")
    return report


def _from_ledger(events: list[Event], base_url: str) -> tuple[PublicChanges, bytes]:
    """The public change list and the bundle's events table: each a pass over every event."""
    return public_changes(events, base_url), bundle_writer.events_table(events)


def _write_trees(project: Project, content: Content, identity: Identity,
                 ordered: list[SourceRecord],
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
    changes, events_table = from_ledger.result()
    parts = _parts(content, identity, rendered, dict(report.public), changes, release, aside)
    site = assemble(SITE, parts)
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
    searchable = index.result()
    progress("indexing", len(rendered), len(rendered))
    progress("encoding library", 0, len(content.documents))
    indexed = searchable + passages.result()
    progress("encoding library", len(content.documents), len(content.documents))
    checkpoint("indexed")
    progress("writing bundle", 0, len(rendered))
    parts.bundled = Bundled(records, events_table, indexed)
    release.write("bundle", assemble(BUNDLE, parts))
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
        report.made = Made(project, content, ordered, rendered, ledger, parts.kept(), release)
    return report


def _parts(content: Content, identity: Identity, rendered: list[Rendered],
           counts: dict[str, int],
           changes: PublicChanges, release: Release, aside: ExitStack) -> Parts:
    """Every part the outputs are made from (`assembly.Parts`). The download parts the
    cache lacks are made aside (`aside` stops that work if the export fails) while the
    rest is."""
    node, known, cache = content.node, content.collections, content.cache
    public = by_collection([r for r in rendered if r.public])
    chunks = snapshots(node, public, cache)
    offered = download_files(node, known, public, cache,
                             functools.partial(release.unchanged, "site"), aside)
    people = pages.site_of(node, known, counts, library_page.has_page(content.documents))
    sources = {r.id: r for r in content.records if r.access == PUBLIC}
    related = pages.relations({name: group.records for name, group in public.items()},
                              sources, cache)
    return Parts(node, identity, known, counts, public, sources, related, people,
                 content.documents,
                 changes, hashlib.sha256(changes.body), chunks, offered,
                 schema_document(known), encode(openapi.document(node, known)),
                 pages.home(people))


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


def _positions(ordered: list[Rendered]) -> list[int]:
    counter: Counter[str] = Counter()
    positions = []
    for r in ordered:
        positions.append(counter[r.collection])
        counter[r.collection] += 1
    return positions
