"""The private bundle: everything the sidecar serves, including restricted records.

This format is the one contract between exporter and sidecar. It lives under
`.fednode/bundle/`, never under `site_out/`:

- `meta.json`     format version, node id, base URL, ledger position
- `manifest.json` `schema.json` `index.html`: the exact bytes of the static files
- `records.parquet` one row per live record (public and restricted): collection, id,
  access, title, created_at, updated_at, content_hash, position (list order within its
  collection), render_key (what the bytes were rendered from), json (the served bytes)
- `events.parquet` the ledger: seq, at, op, collection, id, access, hash
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .ledger import Event
from .render import Rendered
from .writer import OutputFile, constant

FORMAT = 1
META = "meta.json"
MANIFEST = "manifest.json"
SCHEMA = "schema.json"
INDEX = "index.html"
RECORDS = "records.parquet"
EVENTS = "events.parquet"

RECORD_COLUMNS = pa.schema([
    ("collection", pa.string()),
    ("id", pa.string()),
    ("access", pa.string()),
    ("title", pa.string()),
    ("created_at", pa.string()),
    ("updated_at", pa.string()),
    ("content_hash", pa.string()),
    ("position", pa.int64()),
    ("render_key", pa.string()),
    ("json", pa.binary()),
])


def records_table(ordered: list[Rendered], positions: list[int]) -> bytes:
    columns: dict[str, list[Any]] = {
        "collection": [r.collection for r in ordered],
        "id": [r.id for r in ordered],
        "access": [r.access for r in ordered],
        "title": [r.title for r in ordered],
        "created_at": [r.created_at for r in ordered],
        "updated_at": [r.updated_at for r in ordered],
        "content_hash": [r.content_hash for r in ordered],
        "position": positions,
        "render_key": [r.key for r in ordered],
        "json": [r.json for r in ordered],
    }
    return _parquet(columns, RECORD_COLUMNS)


EVENT_COLUMNS = pa.schema([
    ("seq", pa.int64()),
    ("at", pa.string()),
    ("op", pa.string()),
    ("collection", pa.string()),
    ("id", pa.string()),
    ("access", pa.string()),
    ("hash", pa.string()),
])


def events_table(events: list[Event]) -> bytes:
    columns = {name: [getattr(e, name) for e in events] for name in EVENT_COLUMNS.names}
    return _parquet(columns, EVENT_COLUMNS)


def _parquet(columns: dict[str, list[Any]], schema: pa.Schema) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), sink, compression="zstd")
    return sink.getvalue()


def read_rendered(folder: Path) -> dict[str, tuple[str, str, bytes]]:
    """The previous export's rendered records: id -> (render key, title, bytes). Empty if
    there is no readable bundle; the export then renders everything."""
    try:
        table = pq.read_table(folder / RECORDS, columns=["id", "render_key", "title", "json"])
    except (OSError, pa.ArrowException):
        return {}
    columns = [table.column(name).to_pylist() for name in ("id", "render_key", "title", "json")]
    return {record_id: (key, title, data) for record_id, key, title, data in zip(*columns,
                                                                                  strict=True)}


def bundle_files(*, node_id: str, base_url: str, ledger_seq: int, manifest: bytes,
                 schema: bytes, index: bytes, records: bytes, events: bytes
                 ) -> Iterator[OutputFile]:
    build = hashlib.sha256(manifest + schema + index + records + events).hexdigest()[:16]
    meta = json.dumps({"format": FORMAT, "build": build, "node_id": node_id,
                       "base_url": base_url, "ledger_seq": ledger_seq}, indent=2).encode()
    for name, data in ((MANIFEST, manifest), (SCHEMA, schema), (INDEX, index),
                       (RECORDS, records), (EVENTS, events), (META, meta)):
        yield constant(name, data, hashlib.sha256(data).hexdigest())
