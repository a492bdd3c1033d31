"""What an export writes, in one table: every output of the static site (`SITE`) and of the
private bundle (`BUNDLE`), each with how it makes its files for a whole export and which of
them an edit in place changes (`delta`: records that keep their id, collection, access,
place in the lists and links).

Both exports assemble their trees here (`assemble`), from the same inputs (`Parts`), so an
output added to a table is written by both, and the bytes of an output a delta export makes
again are those a whole export makes (`tests/exporter/pipeline/test_delta.py` compares both
trees after runs of edits). The costly inputs (the downloads, the snapshot chunks, the
records table, the search index) are made by each export as fits it, with the helpers here
where both share them (`download_files`, `snapshots`)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple, TypeAlias

from exporter.contract.feed import (
    CHANGES_PATH,
    SNAPSHOT_CHUNK,
    PublicChanges,
    snapshot_chunk,
    snapshot_path,
)
from exporter.contract.layout import record_file
from exporter.contract.page_urls import record_href
from exporter.contract.signing import Identity
from exporter.contract.wire import (
    COLLECTIONS,
    LIST_LIMIT_DEFAULT,
    NO_COLLECTION,
    NO_COLLECTION_FILE,
    NO_ENDPOINT,
    NO_ENDPOINT_FILE,
    error_body,
    list_page,
)
from exporter.darwincore import archive as dwc_archive
from exporter.library import documents as library
from exporter.pipeline import bundle_files as bundle_writer
from exporter.pipeline.cache import Cache
from exporter.pipeline.switch import OutputFile, constant
from exporter.project.config import NodeConfig
from exporter.project.content import SourceRecord
from exporter.project.schemas import Collection
from exporter.site import downloads, library_page, pages, redirects
from exporter.site.served import Rendered, fingerprint, json_of, manifest, served_views


@dataclass(frozen=True)
class Public:
    """The public records of one collection, in list order, with their fingerprints."""

    records: list[Rendered]
    prints: list[str]


def by_collection(public: list[Rendered]) -> dict[str, Public]:
    """The public records (`public`, in list order) by collection, every collection named.
    Restricted records never reach this function's callers."""
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


@dataclass
class Bundled:
    """The bundle's parts that are made once the site is written: the records table's
    files, the events table and the digest of the search indexes."""

    records: list[OutputFile]
    events: bytes
    search: str


@dataclass
class Parts:
    """What the outputs are made from. A whole export makes every part; a delta export
    takes the last export's (`kept`) with the parts its edits change made again."""

    node: NodeConfig
    identity: Identity  # what the manifest is signed with
    known: dict[str, Collection]
    counts: dict[str, int]  # public records by collection
    public: dict[str, Public]
    sources: dict[str, SourceRecord]  # each public record's content, by id
    related: pages.Related
    people: pages.Site
    documents: list[library.Document]  # the library's PDFs
    changes: PublicChanges
    changes_hash: bundle_writer.Hash  # of `changes.body`: for site_out/ and the bundle alike
    chunks: dict[tuple[str, int], SnapshotChunk]  # by collection and offset (`snapshots`)
    downloads: list[OutputFile]  # the same files in both trees, each rendered once
    schema: bytes
    openapi: bytes
    index: bytes  # the home page
    bundled: Bundled | None = field(default=None, init=False)  # once the site is written

    @functools.cached_property
    def sync(self) -> tuple[list[OutputFile], dict[str, object]]:
        """The snapshot chunks and the public change list, and the manifest's description
        of them."""
        changes_digest = self.changes_hash.hexdigest()
        files = [*(chunk.file for chunk in self.chunks.values()),
                 constant(CHANGES_PATH, self.changes.body, changes_digest)]
        section = {
            "seq": self.changes.seq,
            "snapshots": [chunk.entry for chunk in self.chunks.values()],
            "changes": {"url": f"{self.node.base_url}/{CHANGES_PATH}",
                        "items": self.changes.body.count(b"\n"), "sha256": changes_digest},
        }
        return files, section

    @functools.cached_property
    def manifest(self) -> bytes:
        """The manifest, in site_out/api/ and in the bundle."""
        node, counts = self.node, self.counts
        return manifest(node, self.known, counts, self.changes.updated_at, self.sync[1],
                        downloads.manifest_section(node, counts, list(self.known)),
                        self.identity)

    def kept(self) -> Parts:
        """These parts as the next delta export starts from them: without the downloads,
        whose files hold their bytes once rendered (a delta export makes those of the
        collections it changes, `download_files`)."""
        return replace(self, downloads=[])


@dataclass
class Sitemap:
    """The sitemaps' lines (`pages.url_line`), held from one delta export to the next: an
    edit changes its records' `lastmod`, and only the sitemap files holding them change."""

    base_url: str
    lines: list[str]
    entry: dict[str, int]  # public record id -> its line

    @classmethod
    def of(cls, base_url: str, public: dict[str, Public], library: bool) -> Sitemap:
        """The lines of every public record (`public`, by collection), as a whole export
        writes them (`library`: the node has a library page)."""
        entries = pages.sitemap_entries(
            base_url, {name: group.records for name, group in public.items()}, library)
        base = len(base_url)
        entry = {url[base:].rpartition("/")[2][:-5]: n
                 for n, (url, modified) in enumerate(entries) if modified}
        return cls(base_url, [pages.url_line(*line) for line in entries], entry)

    def renewed(self, fresh: list[Rendered]) -> list[OutputFile]:
        """The sitemap files holding the lines of the `fresh` records, those lines made
        again from them."""
        changed: set[int] = set()
        for r in fresh:
            n = self.entry[r.id]
            self.lines[n] = pages.url_line(self.base_url + record_href(r.collection, r.id),
                                           r.updated_at)
            changed.add(n)
        return pages.sitemap_files(self.base_url, self.lines, changed) if changed else []


@dataclass(frozen=True)
class Edits:
    """What the edits a delta export brings up to date change: public records rendered
    again, each in the place it had in its collection's list (`delta._in_place`)."""

    fresh: list[Rendered]  # the public records rendered again
    place: dict[str, int]  # public record id -> its index in its collection's list
    retitled: set[str]  # collections one of whose records in `fresh` has a new title
    sitemap: Sitemap

    @property
    def touched(self) -> set[str]:
        """The collections holding a record in `fresh`."""
        return {r.collection for r in self.fresh}

    def offsets(self, size: int) -> dict[str, set[int]]:
        """By collection, the offsets (multiples of `size`) of the runs of `size` records
        in its list that hold a record in `fresh`."""
        found: dict[str, set[int]] = {}
        for r in self.fresh:
            found.setdefault(r.collection, set()).add(self.place[r.id] // size * size)
        return found


Make = Callable[[Parts], Iterable[OutputFile]]
Remake = Callable[[Parts, Edits], Iterable[OutputFile]]
# What an edit in place does to an output: "whole": it is made whole again (its files are
# compared with the last build's by fingerprint: those unchanged are not written); "kept":
# it is left as it is (none of its inputs can change); else the files it changes.
Edited: TypeAlias = Remake | Literal["whole", "kept"]


@dataclass(frozen=True)
class Output:
    """One output of a tree: what it is, its files in a whole export, and in a delta one."""

    name: str
    whole: Make
    edited: Edited


def assemble(table: tuple[Output, ...], parts: Parts, edits: Edits | None = None
             ) -> list[OutputFile]:
    """The files of a tree's outputs (`SITE` or `BUNDLE`), in the table's order: all of
    them (`edits` None), or those the `edits` change."""
    files: list[OutputFile] = []
    for output in table:
        if edits is None or output.edited == "whole":
            files.extend(output.whole(parts))
        elif callable(output.edited):
            files.extend(output.edited(parts, edits))
    return files


def _constant(path: str, data: bytes) -> OutputFile:
    return constant(path, data, hashlib.sha256(data).hexdigest())


def _api_files(parts: Parts) -> Iterator[OutputFile]:
    """Each collection's record files and list pages."""
    for name, group in parts.public.items():
        for r, print_ in zip(group.records, group.prints, strict=True):
            yield OutputFile(record_file(name, r.id), print_, r.served)
        yield from list_pages(parts.node, name, group)


def _api_edited(parts: Parts, edits: Edits) -> Iterator[OutputFile]:
    """The files of the records edited, and the list pages holding them."""
    for r in edits.fresh:
        yield OutputFile(record_file(r.collection, r.id), r.key, r.served)
    for name, found in edits.offsets(LIST_LIMIT_DEFAULT).items():
        yield from list_pages(parts.node, name, parts.public[name], sorted(found))


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


def _redirects(parts: Parts) -> Iterator[OutputFile]:
    """The CDN's routing: each public record's path to the sidecar, and the rest."""
    yield _constant(redirects.FILE, redirects.redirects_file(parts.node.sidecar_url, [
        (name, r.id) for name, group in parts.public.items() for r in group.records]))


def _pages(parts: Parts) -> list[OutputFile]:
    """The pages for people: each collection's and each public record's, the sitemaps,
    robots.txt, the style sheet and the library's page. (An edit of the library is
    exported whole: `_pages_edited` has no library page to make.)"""
    listed = {name: group.records for name, group in parts.public.items()}
    return [*pages.files(parts.people, parts.known, listed, parts.sources, parts.related),
            *library_page.files(parts.people, parts.documents, parts.sources)]


def _pages_edited(parts: Parts, edits: Edits) -> Iterator[OutputFile]:
    """The pages of the records edited, and of the species whose germination chart shows an
    edited result (`charts`), their collections' pages where a title changed (no other page
    shows it: `delta._in_place`), and the sitemaps holding their lastmod."""
    for name in edits.retitled:
        yield from pages.collection_pages(parts.people, parts.known[name],
                                          parts.public[name].records)
    again = {r.id: r for r in edits.fresh}
    for r in edits.fresh:
        if r.collection == "germination":
            again.update((x.id, x) for _, x in parts.related.get(r.id, []))
    for r in again.values():
        yield pages.record_page(parts.people, parts.known[r.collection], r,
                                parts.sources[r.id], parts.related.get(r.id, []))
    yield from edits.sitemap.renewed(edits.fresh)


def _bundle_files(parts: Parts) -> Iterator[OutputFile]:
    """The bundle's files but its indexes and the library (`bundle_files.bundle_files`)."""
    node, late = parts.node, parts.bundled
    if late is None:
        raise RuntimeError("the bundle is assembled once its records table, events table "
                           "and search indexes are made (`Parts.bundled`)")
    return bundle_writer.bundle_files(
        node_id=node.id, base_url=node.base_url, sidecar_url=node.sidecar_url,
        manifest=parts.manifest, schema=parts.schema, openapi=parts.openapi, index=parts.index,
        changes=(parts.changes.body, parts.changes_hash), records=late.records,
        events=late.events, search=late.search, origins=node.allowed_origins)


DOWNLOADS = Output("downloads", lambda parts: parts.downloads, "whole")  # (see download_files)

# The static site, site_out/, in the order a whole export writes it (the downloads last:
# their parts may be in the making aside meanwhile).
SITE: tuple[Output, ...] = (
    Output("manifest", lambda parts: [_constant("api/manifest.json", parts.manifest)],
           "whole"),
    Output("schema", lambda parts: [_constant("api/schema.json", parts.schema)], "kept"),
    Output("home page", lambda parts: [_constant("index.html", parts.index)], "kept"),
    Output("error bodies", lambda parts: [
        _constant(NO_ENDPOINT_FILE, error_body("not_found", NO_ENDPOINT)),
        _constant(NO_COLLECTION_FILE, error_body("not_found", NO_COLLECTION))], "kept"),
    Output("record files and list pages", _api_files, _api_edited),
    Output("openapi", lambda parts: [_constant("api/openapi.json", parts.openapi)], "kept"),
    Output("redirects", _redirects, "kept"),  # (ids and access are as they were)
    Output("sync files", lambda parts: parts.sync[0], "whole"),  # (see snapshots)
    Output("library", lambda parts: library.published(parts.documents), "kept"),
    Output("pages for people", _pages, _pages_edited),
    DOWNLOADS,
)

# The private bundle.
BUNDLE: tuple[Output, ...] = (
    Output("library", lambda parts: library.private(parts.documents), "kept"),
    DOWNLOADS,
    Output("bundle files", _bundle_files, "whole"),
)


def download_files(node: NodeConfig, known: dict[str, Collection], public: dict[str, Public],
                   cache: Cache, unchanged: Callable[[str, str], bool], aside: ExitStack, *,
                   touched: set[str] | None = None) -> list[OutputFile]:
    """The downloads (`downloads.download_files`): every collection's, or, for a delta
    export, only the CSVs of the `touched` collections and the Darwin Core archive if
    species are among them."""
    chosen = public if touched is None else {name: public[name] for name in touched}
    files = downloads.download_files(
        node, known, {name: (group.records, group.prints) for name, group in chosen.items()},
        cache, unchanged, aside)
    if touched is None or downloads.SPECIES in touched:
        return files
    return [f for f in files if f.path != dwc_archive.ARCHIVE_PATH]


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


def _snapshot(chunk: list[Rendered]) -> bytes:
    return snapshot_chunk(served_views(chunk))
