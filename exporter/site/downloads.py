"""Files to download whole, from the public records only: the Darwin Core Archive of the
species (for GBIF), and a CSV table of each collection (for people: spreadsheets).

Each is an `OutputFile` with a fingerprint over the records it holds, so an export that
changes none of them neither renders nor writes it again. One that does renders only the
parts it changed: the rows are made in parts of about `PART` records, each part's text kept
in the cache under a fingerprint of its records (`Cache.part`). Where a part ends depends on
the ids of its records alone (a record whose id hashes to a multiple of `PART` ends one),
not on their positions, so a record added or removed changes only the part it falls in."""

from __future__ import annotations

import codecs
import functools
import json
import zlib
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from exporter.contract.bundle import DOWNLOADS
from exporter.darwincore import archive as dwc_archive
from exporter.pipeline import forks as aside
from exporter.pipeline.cache import Cache, Part
from exporter.pipeline.outputs import OutputFile, Pieces
from exporter.project.config import NodeConfig
from exporter.project.schemas import Collection
from exporter.site.csv_lines import csv_lines
from exporter.site.served import Rendered, fingerprint, json_of

SPECIES = "species"
# The CSV's first columns; the collection's content fields follow, in schema order.
LEAD = ("id", "url", "title", "access", "created_at", "updated_at")
PART = 64  # records a part, on average
ASIDE_FROM = 512  # records to make parts of, from which they are made in a process aside
Make = Callable[[list[dict[str, Any]]], Part]


def csv_path(collection: str) -> str:
    return f"{DOWNLOADS}/{collection}.csv"


def download_files(node: NodeConfig, collections: dict[str, Collection],
                   public: dict[str, tuple[list[Rendered], list[str]]],
                   cache: Cache, unchanged: Callable[[str, str], bool],
                   stack: ExitStack) -> list[OutputFile]:
    """The archive and one CSV a collection. `public` holds, by collection, the public
    records in list order and their fingerprints: restricted records never reach here. The
    same files go to site_out/ and to the bundle (the sidecar serves them): each is
    rendered once. Of the downloads to render (`unchanged(path, fingerprint)` is false), the
    parts the cache lacks are made aside while the export renders the pages, where there are
    enough of them (`_made_aside`); `stack` stops that work if the export ends first."""
    csvs = {name: _Download(csv_path(name), records, prints, (CSV_FORM,),
                            functools.partial(_csv_part, collections[name]))
            for name, (records, prints) in public.items()}
    records, prints = public.get(SPECIES, ([], []))
    archive = _Download(dwc_archive.ARCHIVE_PATH, records, prints,
                        (dwc_archive.ARCHIVE_FORM, node.language),
                        functools.partial(dwc_archive.rows, node))
    identity = (node.id, node.name, node.description, node.publisher, node.contact,
                node.licence, node.language, node.base_url)
    # Each file's fingerprint is that of its parts' keys, which stand for its records'
    # fingerprints, in order (`_Download.parts`).
    prints_of = {**{download.path: fingerprint("csv", CSV_FORM, name, *download.keys)
                    for name, download in csvs.items()},
                 archive.path: fingerprint("dwca", dwc_archive.ARCHIVE_FORM, *identity,
                                           *archive.keys)}
    ready = _made_aside([download for download in (*csvs.values(), archive)
                         if not unchanged(download.path, prints_of[download.path])],
                        cache, stack)
    files = [OutputFile(download.path, prints_of[download.path],
                        functools.cache(functools.partial(
                            _csv_of, collections[name], download, cache, ready)))
             for name, download in csvs.items()]
    files.append(OutputFile(archive.path, prints_of[archive.path],
                            functools.cache(functools.partial(
                                _archive_of, node, archive, cache, ready))))
    return files


def make_parts(node: NodeConfig, collections: dict[str, Collection],
               public: dict[str, tuple[list[Rendered], list[str]]], cache: Cache) -> None:
    """Have the cache hold every part of these downloads (made aside where many are
    missing). A whole export that takes a download as an earlier build had it makes none of
    its parts; the first export brought up to date after it (`delta`) would make them all."""
    with ExitStack() as stack:
        for file in download_files(node, collections, public, cache,
                                   lambda path, print_: False, stack):
            file.render()


def manifest_section(node: NodeConfig, counts: dict[str, int],
                     names: Sequence[str]) -> dict[str, Any]:
    """The manifest's `downloads`: where each file is, and what it holds."""
    return {
        "darwin_core_archive": {
            "url": f"{node.base_url}/{dwc_archive.ARCHIVE_PATH}", "type": "DWC_ARCHIVE",
            "collection": SPECIES, "records": counts.get(SPECIES, 0),
            "description": "Darwin Core Archive (Taxon core; Distribution, Description, "
                           "VernacularName, SpeciesProfile) of the public species, with EML "
                           "metadata: register it with GBIF as a DWC_ARCHIVE endpoint",
        },
        "csv": {name: {"url": f"{node.base_url}/{csv_path(name)}",
                       "records": counts.get(name, 0)} for name in names},
    }


@dataclass(frozen=True)
class _Download:
    """One download's rows: made from `records` (with their fingerprints `prints`) in parts,
    by `make`; `context` holds whatever else the text depends on."""

    path: str
    records: list[Rendered]
    prints: list[str]
    context: tuple[str, ...]
    make: Make

    @functools.cached_property
    def parts(self) -> list[tuple[str, slice]]:
        """Each part's cache key and records."""
        out = []
        start = 0
        for end in _part_ends([r.id for r in self.records]):
            out.append((_part_key(self.path, self.context, tuple(self.prints[start:end])),
                        slice(start, end)))
            start = end
        return out

    @property
    def keys(self) -> list[str]:
        return [key for key, _ in self.parts]

    def texts(self, cache: Cache) -> list[Part]:
        """The text of each part, from the cache or made now. The cache keeps these parts
        of the download (`Cache.keep_parts`): in a process that exports again and again
        (`delta`), not every part it ever made."""
        texts = [cache.part(self.path, key, functools.partial(
                     _made, self.make, self.records[span])) for key, span in self.parts]
        cache.keep_parts(self.path, [key for key, _ in self.parts])
        return texts


@functools.lru_cache(maxsize=8192)
def _part_key(path: str, context: tuple[str, ...], prints: tuple[str, ...]) -> str:
    """A part's cache key: remembered for the last few thousand parts (an export brought up
    to date, `delta`, asks again for every part of a download it remakes, all but one
    unchanged: hashing their fingerprints again would take 0.05 s an edit at 100,000
    records)."""
    return fingerprint(path, *context, *prints)


@functools.lru_cache(maxsize=8)
def _ends_of(ids: tuple[str, ...]) -> list[int]:
    return [end for end, record_id in enumerate(ids, start=1)
            if end == len(ids) or zlib.crc32(record_id.encode()) % PART == 0]


def _part_ends(ids: list[str]) -> list[int]:
    """Where the parts of records with these ids (in list order) end: after a record whose
    id's CRC-32 is a multiple of `PART`, so that an edit, an addition or a removal moves
    the ends of one part only. The last few lists' are remembered (an export brought up to
    date, `delta`, asks again for the same ids; the species' CSV and archive share them)."""
    return _ends_of(tuple(ids))


def _csv_of(collection: Collection, download: _Download, cache: Cache,
            ready: Callable[[], None]) -> Pieces:
    """The CSV as its parts, written one after the other (not joined: `writer.Pieces`)."""
    ready()
    head = codecs.BOM_UTF8 + csv_header(collection).encode()  # the mark: spreadsheets read UTF-8
    return Pieces((head, *(part[0] for part in download.texts(cache))))


def _archive_of(node: NodeConfig, download: _Download, cache: Cache,
                ready: Callable[[], None]) -> bytes:
    ready()
    return dwc_archive.archive(node, download.texts(cache))


def _csv_part(collection: Collection, served: list[dict[str, Any]]) -> Part:
    return (csv_rows(collection, served).encode(),)


def _made(make: Make, records: list[Rendered]) -> Part:
    return make([json.loads(data) for data in json_of(records)])


def _made_aside(downloads: list[_Download], cache: Cache,
                stack: ExitStack) -> Callable[[], None]:
    """Start making the parts the cache lacks in a process of their own, if there are
    enough of them to be worth one (a first export; an edit makes one part a download).
    What is returned waits for them and gives them to the cache; it does nothing after the
    first call, or where nothing was started."""
    if not aside.forks():
        return lambda: None
    todo = [(download, key, span) for download in downloads
            for key, span in download.parts if not cache.has_part(download.path, key)]
    if sum(span.stop - span.start for _, _, span in todo) < ASIDE_FROM:
        return lambda: None
    work = aside.Aside(_make_parts, [(download.make, download.records[span])
                                     for download, _, span in todo])
    stack.callback(work.cancel)

    @functools.cache
    def ready() -> None:
        for (download, key, _), part in zip(todo, work.result(), strict=True):
            cache.add_part(download.path, key, part)
    return ready


def _make_parts(jobs: list[tuple[Make, list[Rendered]]]) -> list[Part]:
    """Each job's part. The records of a part common to several downloads (the species' CSV
    and archive) are decoded once for all of them."""
    alike: dict[tuple[str, str, int], list[int]] = {}
    for n, (_, records) in enumerate(jobs):
        alike.setdefault((records[0].id, records[-1].id, len(records)), []).append(n)
    out: list[Part] = [()] * len(jobs)
    for numbers in alike.values():
        served = [json.loads(data) for data in json_of(jobs[numbers[0]][1])]
        for n in numbers:
            out[n] = jobs[n][0](served)
    return out


def csv_header(collection: Collection) -> str:
    return _lines([[*LEAD, *_fields(collection)]])


def csv_rows(collection: Collection, records: list[dict[str, Any]]) -> str:
    """One row a record: the lead columns, then each content field (docs/darwin-core.md
    describes the cells of lists), each safe to open in a spreadsheet."""
    names = (*LEAD, *_fields(collection))
    return _lines([inert(cell(record.get(name))) for name in names] for record in records)


# What a spreadsheet takes for the start of a formula (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CSV_FORM = "2"  # of the download's cells (2: made inert against spreadsheet formulas)


def inert(text: str) -> str:
    """A cell a spreadsheet shows as text: one starting as a formula does (a checklist's
    `=HYPERLINK("http://...")`) gets a leading apostrophe, which spreadsheets hide; a
    number ("-3.5") is left as it is. The download is made for spreadsheets (it opens with a
    byte-order mark for them); the records' JSON and the Darwin Core archive keep the value
    as it is."""
    if not text.startswith(FORMULA_STARTS):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text


def _fields(collection: Collection) -> list[str]:
    return [name for name in collection.content_fields if name not in LEAD]


def _lines(rows: Any) -> str:
    return csv_lines(rows, "\r\n")


def cell(value: Any) -> str:
    """A field as one cell: a list's items joined by "; ", a table's values by ", "."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "; ".join(cell(item) for item in value)
    if isinstance(value, dict):  # a list inside a table (pathways) is joined by "/"
        return ", ".join("/".join(map(cell, item)) if isinstance(item, list) else cell(item)
                         for item in value.values() if item not in ("", None, []))
    return str(value)
