"""Files to download whole, from the public records only: the Darwin Core Archive of the
species (for GBIF), and a CSV table of each collection (for people: spreadsheets).

Each is an `OutputFile` with a fingerprint over the records it holds, so an export that
changes none of them neither renders nor writes it again. One that does renders only the
parts it changed: the rows are made in parts of about `PART` records, each part's text kept
in the cache under a fingerprint of its records (`Cache.part`). Where a part ends depends on
the ids of its records alone (a record whose id hashes to a multiple of `PART` ends one),
not on their positions, so a record added or removed changes only the part it falls in."""

from __future__ import annotations

import csv
import functools
import io
import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from . import dwc_archive
from .cache import Cache
from .config import NodeConfig
from .contract.bundle import DOWNLOADS
from .render import Rendered, fingerprint, json_of
from .schemas import Collection
from .writer import OutputFile

SPECIES = "species"
# The CSV's first columns; the collection's content fields follow, in schema order.
LEAD = ("id", "url", "title", "access", "created_at", "updated_at")
PART = 64  # records a part, on average


def csv_path(collection: str) -> str:
    return f"{DOWNLOADS}/{collection}.csv"


def download_files(node: NodeConfig, collections: dict[str, Collection],
                   public: dict[str, tuple[list[Rendered], list[str]]],
                   cache: Cache) -> list[OutputFile]:
    """The archive and one CSV a collection. `public` holds, by collection, the public
    records in list order and their fingerprints: restricted records never reach here. The
    same files go to site_out/ and to the bundle (the sidecar serves them): each is
    rendered once."""
    files = []
    for name, (records, prints) in public.items():
        collection = collections[name]
        files.append(OutputFile(csv_path(name), fingerprint("csv", name, *prints),
                                functools.cache(functools.partial(
                                    _csv_of, collection, records, prints, cache))))
    records, prints = public.get(SPECIES, ([], []))
    identity = (node.id, node.name, node.description, node.publisher, node.contact,
                node.licence, node.language, node.base_url)
    files.append(OutputFile(dwc_archive.ARCHIVE_PATH,
                            fingerprint("dwca", *identity, *prints),
                            functools.cache(functools.partial(
                                _archive_of, node, records, prints, cache))))
    return files


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


def _csv_of(collection: Collection, records: list[Rendered], prints: list[str],
            cache: Cache) -> bytes:
    parts = _parts(cache, csv_path(collection.name), records, prints, (),
                   lambda served: (csv_rows(collection, served),))
    text = csv_header(collection) + "".join(part[0] for part in parts)
    return text.encode("utf-8-sig")  # the mark makes spreadsheets read UTF-8


def _archive_of(node: NodeConfig, records: list[Rendered], prints: list[str],
                cache: Cache) -> bytes:
    parts = _parts(cache, dwc_archive.ARCHIVE_PATH, records, prints, (node.language,),
                   lambda served: dwc_archive.rows(node, served))
    return dwc_archive.archive(node, parts)


def _parts(cache: Cache, download: str, records: list[Rendered], prints: list[str],
           context: tuple[str, ...],
           make: Callable[[list[dict[str, Any]]], tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The text of each part of one download, from the cache or made now from the records'
    served JSON. `context` holds whatever else the text depends on."""
    parts = []
    start = 0
    for end, r in enumerate(records, start=1):
        if end == len(records) or zlib.crc32(r.id.encode()) % PART == 0:
            span = slice(start, end)
            parts.append(cache.part(download, fingerprint(download, *context, *prints[span]),
                                    functools.partial(_made, make, records[span])))
            start = end
    return parts


def _made(make: Callable[[list[dict[str, Any]]], tuple[str, ...]],
          records: list[Rendered]) -> tuple[str, ...]:
    return make([json.loads(data) for data in json_of(records)])


def csv_header(collection: Collection) -> str:
    return _lines([[*LEAD, *_fields(collection)]])


def csv_rows(collection: Collection, records: list[dict[str, Any]]) -> str:
    """One row a record: the lead columns, then each content field (docs/darwin-core.md
    describes the cells of lists)."""
    names = (*LEAD, *_fields(collection))
    return _lines([cell(record.get(name)) for name in names] for record in records)


def _fields(collection: Collection) -> list[str]:
    return [name for name in collection.content_fields if name not in LEAD]


def _lines(rows: Any) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


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
