"""The export pipeline, top to bottom: load → validate → ledger → render → write.

Everything is gathered and validated before anything is written; the ledger is brought
up to date next, then the static site and the private bundle are each swapped in whole."""

from __future__ import annotations

import functools
import hashlib
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from . import bundle
from .cache import Cache
from .config import NodeConfig, Project, load_node_config
from .content import SourceRecord, discover, read
from .contract.feed import (
    CHANGES_PATH,
    SNAPSHOT_CHUNK,
    PublicChanges,
    public_changes,
    snapshot_chunk,
    snapshot_path,
)
from .contract.wire import COLLECTIONS, LIST_LIMIT_DEFAULT, list_page
from .errors import ContentError, ExportError, Problem
from .ledger import Current, Ledger
from .render import (
    Rendered,
    fingerprint,
    index_html,
    manifest,
    render_record,
    schema_document,
)
from .schemas import Collection, collections
from .writer import OutputFile, TreeStats, constant, write_tree

Progress = Callable[[str, int, int], None]


@dataclass
class BuildReport:
    public: Counter[str] = field(default_factory=Counter)
    restricted: Counter[str] = field(default_factory=Counter)
    events: int = 0
    site: TreeStats | None = None
    seconds: float = 0.0

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


def load(project: Project, *, base_url: str | None = None,
         progress: Progress | None = None) -> Content:
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
    for done, source in enumerate(files, start=1):
        got = cache.records(source, known[source.collection])
        if got is None:
            got, found = read(source, known[source.collection])
            problems.extend(found)
            if not found:
                cache.remember(source.rel, source.mtime_ns, source.size, got)
        records.extend(got)
        if progress and done % 5000 == 0:
            progress("read", done, len(files))
    problems.extend(_duplicates(records))
    if problems or node is None:
        raise ContentError(problems)
    return Content(node, known, records, cache, {source.rel for source in files})


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
          base_url: str | None = None, progress: Progress | None = None) -> BuildReport:
    """Export the project: static files to site_out/, the private bundle to .fednode/."""
    started = time.perf_counter()
    content = load(project, base_url=base_url, progress=progress)
    ledger = Ledger.load(project.ledger)
    stamp = _second_after(datetime.now(UTC))
    events = ledger.reconcile(
        (Current(r.collection, r.id, r.hash, r.access) for r in content.records),
        now or stamp)
    if frozen and events:
        raise ExportError(
            f"the ledger is behind the content ({len(events)} change(s)); run `fednode export` "
            f"where the content is edited and commit {project.ledger.name} with it")
    ledger.append(events)

    previous = bundle.read_rendered(project.bundle)
    rendered = [render_record(r, ledger.entries[r.id], content.collections[r.collection],
                              content.node, previous) for r in content.records]
    order = {name: index for index, name in enumerate(COLLECTIONS)}
    rendered.sort(key=lambda r: (order[r.collection], r.created_at, r.id))
    report = BuildReport(seconds=0.0, events=len(events))
    for r in rendered:
        (report.public if r.public else report.restricted)[r.collection] += 1

    node, known = content.node, content.collections
    public = _by_collection([r for r in rendered if r.public])
    changes = public_changes(ledger.events, node.base_url)
    sync_files, sync_section = _sync_files(node, public, changes, content.cache)
    manifest_bytes = manifest(node, known, dict(report.public), changes.updated_at,
                              sync_section)
    schema_bytes = schema_document(known)
    index_bytes = index_html(node, known, dict(report.public))

    if now is None and events:
        _wait_for(stamp)  # publish no time that has not come yet
    report.site = write_tree(
        project.site_out,
        itertools.chain(_static_files(node, public, manifest_bytes, schema_bytes, index_bytes),
                        sync_files),
        project.cache / "site_out.fingerprints.json",
        progress=(lambda done: progress("write", done, len(rendered))) if progress else None,
    )
    write_tree(project.bundle, bundle.bundle_files(
        node_id=node.id, base_url=node.base_url, sidecar_url=node.sidecar_url,
        manifest=manifest_bytes, schema=schema_bytes, index=index_bytes, changes=changes.body,
        records=bundle.records_table(rendered, _positions(rendered)),
        events=bundle.events_table(ledger.events)),
        project.cache / "bundle.fingerprints.json")
    content.cache.save(keep=content.paths)
    report.seconds = time.perf_counter() - started
    return report


def _second_after(moment: datetime) -> datetime:
    """The time an export stamps its events with: the whole second after it began. The
    export publishes nothing before that second has come (`_wait_for`), so the next export
    begins in it or later and stamps a later second: each export's events get a time of
    their own, however quickly exports follow one another, and it depends on nothing but the
    clock (not on earlier, perhaps restricted, events)."""
    return moment.replace(microsecond=0) + timedelta(seconds=1)


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


def _sync_files(node: NodeConfig, public: dict[str, Public], changes: PublicChanges,
                cache: Cache) -> tuple[list[OutputFile], dict[str, object]]:
    """Snapshot chunks and the public change list, and the manifest's description of them."""
    files: list[OutputFile] = []
    snapshots = []
    used: dict[str, str] = {}
    for name, group in public.items():
        for offset in range(0, len(group.records), SNAPSHOT_CHUNK):
            chunk = group.records[offset:offset + SNAPSHOT_CHUNK]
            print_ = fingerprint("snapshot", name, str(offset),
                                 *group.prints[offset:offset + SNAPSHOT_CHUNK])
            render = functools.partial(snapshot_chunk, [r.json for r in chunk])
            digest = cache.digests.get(print_) or hashlib.sha256(render()).hexdigest()
            used[print_] = digest
            path = snapshot_path(name, offset)
            files.append(OutputFile(path, print_, render))
            snapshots.append({"collection": name, "url": f"{node.base_url}/{path}",
                              "offset": offset, "records": len(chunk), "sha256": digest})
    cache.digests = used
    changes_digest = hashlib.sha256(changes.body).hexdigest()
    files.append(constant(CHANGES_PATH, changes.body, changes_digest))
    section = {
        "seq": changes.seq,
        "snapshots": snapshots,
        "changes": {"url": f"{node.base_url}/{CHANGES_PATH}",
                    "items": changes.body.count(b"\n"), "sha256": changes_digest},
    }
    return files, section


def _static_files(node: NodeConfig, public: dict[str, Public], manifest_bytes: bytes,
                  schema_bytes: bytes, index_bytes: bytes) -> Iterator[OutputFile]:
    """Every public file but the sync files."""
    for path, data in (("api/manifest.json", manifest_bytes), ("api/schema.json", schema_bytes),
                       ("index.html", index_bytes)):
        yield constant(path, data, hashlib.sha256(data).hexdigest())
    for name, group in public.items():
        items, prints = group.records, group.prints
        for r, print_ in zip(items, prints, strict=True):
            yield constant(f"api/{name}/{r.id}.json", r.json, print_)
        total = len(items)
        for offset in range(0, max(total, 1), LIST_LIMIT_DEFAULT):
            page = items[offset:offset + LIST_LIMIT_DEFAULT]
            page_print = fingerprint(node.base_url, name, str(offset), str(total),
                                     *prints[offset:offset + LIST_LIMIT_DEFAULT])

            def render(page: list[Rendered] = page, offset: int = offset,
                       total: int = total, name: str = name) -> bytes:
                return list_page(node.base_url, name, [r.json for r in page], total=total,
                                 limit=LIST_LIMIT_DEFAULT, offset=offset)

            yield OutputFile(f"api/{name}/offset/{offset}.json", page_print, render)
            if offset == 0:
                yield OutputFile(f"api/{name}/index.json", page_print, render)
