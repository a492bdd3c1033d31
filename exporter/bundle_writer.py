"""Write the private bundle (its format is `contract.bundle`); `renderings` reads back the
previous export's rendered records."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .contract.bundle import (
    CHANGES,
    DIGEST_SIZE,
    EVENT_COLUMNS,
    EVENTS,
    FORMAT,
    INDEX,
    MANIFEST,
    META,
    OPENAPI,
    RECORD_COLUMNS,
    RECORDS,
    SCHEMA,
    Meta,
)
from .contract.feed import Event
from .render import Rendered
from .renderings import Renderings
from .writer import OutputFile, constant

_TYPES = {"string": pa.string(), "int64": pa.int64(), "large_binary": pa.large_binary(),
          "digest": pa.binary(DIGEST_SIZE)}


def _arrow(columns: tuple[tuple[str, str], ...]) -> pa.Schema:
    return pa.schema([(name, _TYPES[kind]) for name, kind in columns])


def records_table(ordered: list[Rendered], positions: list[int], previous: Renderings
                  ) -> bytes:
    """`ordered`'s renderings taken from `previous` are copied column to column (their bytes
    and digests)."""
    rows: list[int] = []
    fresh: list[bytes] = []
    for r in ordered:
        if r.fresh is None:
            rows.append(r.row)
        else:
            fresh.append(r.fresh)
            rows.append(-len(fresh))
    items, digests = previous.columns(rows, fresh)
    columns: dict[str, Any] = {
        "collection": [r.collection for r in ordered],
        "id": [r.id for r in ordered],
        "access": [r.access for r in ordered],
        "title": [r.title for r in ordered],
        "created_at": [r.created_at for r in ordered],
        "updated_at": [r.updated_at for r in ordered],
        "content_hash": [r.content_hash for r in ordered],
        "position": positions,
        "render_key": [r.key for r in ordered],
        "item": items,
        "digest": digests,
    }
    table = pa.Table.from_pydict(columns, schema=_arrow(RECORD_COLUMNS)).combine_chunks()
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)  # one record batch: each column one contiguous buffer
    return sink.getvalue()


def events_table(events: list[Event]) -> bytes:
    columns = {name: [getattr(e, name) for e in events] for name, _ in EVENT_COLUMNS}
    return _parquet(columns, _arrow(EVENT_COLUMNS))


def _parquet(columns: dict[str, list[Any]], schema: pa.Schema) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), sink, compression="zstd")
    return sink.getvalue()


def bundle_files(*, node_id: str, base_url: str, sidecar_url: str, manifest: bytes,
                 schema: bytes, openapi: bytes, index: bytes, changes: bytes, records: bytes,
                 events: bytes, search: str, origins: list[str]) -> Iterator[OutputFile]:
    files = ((MANIFEST, manifest), (SCHEMA, schema), (OPENAPI, openapi), (INDEX, index),
             (CHANGES, changes),
             (RECORDS, records), (EVENTS, events))
    hashed = [(name, data, hashlib.sha256(data)) for name, data in files]  # each once: the
    digest = hashlib.sha256()  # records alone are 190 MB at 100,000 records
    for _, _, each in hashed:
        digest.update(each.digest())
    digest.update(search.encode())
    digest.update(" ".join(origins).encode())
    meta = Meta(format=FORMAT, build=digest.hexdigest()[:16], node_id=node_id,
                base_url=base_url, sidecar_url=sidecar_url, search=search,
                origins=origins).to_json()
    for name, data, each in (*hashed, (META, meta, hashlib.sha256(meta))):
        yield constant(name, data, each.hexdigest())
