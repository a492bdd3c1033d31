"""Write the private bundle (its format is `contract.bundle`); `renderings` reads back the
previous export's rendered records."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator

import pyarrow as pa

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
from .contract.wire import COLLECTIONS
from .render import Rendered
from .renderings import Renderings, runs
from .writer import OutputFile, constant

_TYPES = {"string": pa.string(), "int64": pa.int64(), "large_binary": pa.large_binary(),
          "digest": pa.binary(DIGEST_SIZE)}


def _arrow(columns: tuple[tuple[str, str], ...]) -> pa.Schema:
    return pa.schema([(name, _TYPES[kind]) for name, kind in columns])


# The records table's columns that are a `Rendered` attribute (its other columns: `position`,
# `item`, `digest`).
_ATTRIBUTES = {"collection": "collection", "id": "id", "access": "access", "title": "title",
               "created_at": "created_at", "updated_at": "updated_at",
               "content_hash": "content_hash", "render_key": "key"}


def records_table(ordered: list[Rendered], positions: list[int], previous: Renderings
                  ) -> bytes:
    """The records in `ordered` (list order, `positions` beside them), stored by collection,
    then access group, then list order (`contract.bundle`). Renderings taken from `previous`
    are copied column to column: a reused rendering was made from the same render key, so
    its row is the same in every column but `position`."""
    rank = {name: index for index, name in enumerate(COLLECTIONS)}
    stored = sorted(range(len(ordered)),  # stable: list order within a group
                    key=lambda n: (rank[ordered[n].collection], ordered[n].access))
    ordered = [ordered[n] for n in stored]
    positions = [positions[n] for n in stored]
    rows: list[int] = []
    fresh: list[Rendered] = []
    served: list[bytes] = []
    for r in ordered:
        if r.fresh is None:
            rows.append(r.row)
        else:
            fresh.append(r)
            served.append(r.fresh)
            rows.append(-len(fresh))
    schema, spans = _arrow(RECORD_COLUMNS), runs(rows)
    columns: dict[str, pa.Array] = {
        name: previous.column(name, pa.array([getattr(r, attribute) for r in fresh],
                                             schema.field(name).type), spans)
        for name, attribute in _ATTRIBUTES.items()}
    columns["position"] = pa.array(positions, pa.int64())
    columns["item"], columns["digest"] = previous.columns(spans, served)
    table = pa.table([columns[name] for name in schema.names], schema=schema)
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)  # one record batch: each column one contiguous buffer
    return sink.getvalue()


def events_table(events: list[Event]) -> bytes:
    return events_parquet(events_arrow(events))


def events_arrow(events: list[Event]) -> pa.Table:
    """The events as the bundle's events table holds them."""
    columns = {name: [getattr(e, name) for e in events] for name, _ in EVENT_COLUMNS}
    return pa.Table.from_pydict(columns, schema=_arrow(EVENT_COLUMNS))


def events_parquet(table: pa.Table) -> bytes:
    import pyarrow.parquet as pq  # here: the events table is made aside, in a process of its own

    sink = io.BytesIO()
    pq.write_table(table.combine_chunks(), sink, compression="zstd")
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
