"""Files to download whole, from the public records only: the Darwin Core Archive of the
species (for GBIF), and a CSV table of each collection (for people: spreadsheets).

Each is an `OutputFile` with a fingerprint over the records it holds, so an export that
changes none of them neither renders nor writes it again."""

from __future__ import annotations

import csv
import functools
import io
import json
from collections.abc import Sequence
from typing import Any

from . import dwc_archive
from .config import NodeConfig
from .contract.bundle import DOWNLOADS
from .render import Rendered, fingerprint, json_of
from .schemas import Collection
from .writer import OutputFile

SPECIES = "species"
# The CSV's first columns; the collection's content fields follow, in schema order.
LEAD = ("id", "url", "title", "access", "created_at", "updated_at")


def csv_path(collection: str) -> str:
    return f"{DOWNLOADS}/{collection}.csv"


def download_files(node: NodeConfig, collections: dict[str, Collection],
                   public: dict[str, tuple[list[Rendered], list[str]]]) -> list[OutputFile]:
    """The archive and one CSV a collection. `public` holds, by collection, the public
    records in list order and their fingerprints: restricted records never reach here. The
    same files go to site_out/ and to the bundle (the sidecar serves them): each is
    rendered once."""
    files = []
    for name, (records, prints) in public.items():
        collection = collections[name]
        files.append(OutputFile(csv_path(name), fingerprint("csv", name, *prints),
                                functools.cache(functools.partial(
                                    _csv_of, collection, records))))
    records, prints = public.get(SPECIES, ([], []))
    identity = (node.id, node.name, node.description, node.publisher, node.contact,
                node.licence, node.language, node.base_url)
    files.append(OutputFile(dwc_archive.ARCHIVE_PATH,
                            fingerprint("dwca", *identity, *prints),
                            functools.cache(lambda: dwc_archive.archive(node,
                                                                         _served(records)))))
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


def _csv_of(collection: Collection, records: list[Rendered]) -> bytes:
    return csv_table(collection, _served(records))


def _served(records: list[Rendered]) -> list[dict[str, Any]]:
    return [json.loads(data) for data in json_of(records)]


def csv_table(collection: Collection, records: list[dict[str, Any]]) -> bytes:
    """One row a record: the lead columns, then each content field (docs/darwin-core.md
    describes the cells of lists)."""
    fields = [name for name in collection.content_fields if name not in LEAD]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([*LEAD, *fields])
    for record in records:
        writer.writerow([cell(record.get(name)) for name in (*LEAD, *fields)])
    return out.getvalue().encode("utf-8-sig")  # the mark makes spreadsheets read UTF-8


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
