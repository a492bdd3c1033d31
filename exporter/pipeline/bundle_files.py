"""Write the private bundle (its format is `contract.bundle`); `renderings` reads back the
previous export's rendered records."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TypeAlias

import pyarrow as pa

from exporter.contract.bundle import (
    CHANGES,
    EVENT_COLUMNS,
    EVENTS,
    FORMAT,
    INDEX,
    MANIFEST,
    META,
    OPENAPI,
    RECORD_COLUMNS,
    SCHEMA,
    Meta,
    arrow_schema,
    column,
    segment_path,
    segments,
)
from exporter.contract.feed import Event
from exporter.contract.wire import COLLECTIONS
from exporter.pipeline.outputs import OutputFile, Placed, constant, placed
from exporter.pipeline.previous import Renderings, runs, spliced
from exporter.site.served import Rendered

Hash: TypeAlias = "hashlib._Hash"  # a hash object, as hashlib.sha256 returns

# The records table's columns that are a `Rendered` attribute (its other columns: `position`,
# `item`, `digest`).
_ATTRIBUTES = {"collection": "collection", "id": "id", "access": "access", "title": "title",
               "created_at": "created_at", "updated_at": "updated_at",
               "content_hash": "content_hash", "render_key": "key"}


def records_tables(ordered: list[Rendered], positions: list[int], previous: Renderings
                   ) -> Iterator[pa.Table]:
    """The records in `ordered` (list order, `positions` beside them), stored by collection,
    then access group, then list order, in segments (`contract.bundle`), made one segment at
    a time: the served bytes of one segment are joined at once, never the node's (200 MB at
    100,000 records, each byte copied again into its segment). Renderings taken from
    `previous` are copied column to column: a reused rendering was made from the same
    render key, so its row is the same in every column but `position`. Every column is made
    afresh (not a slice of another array), as an edit's segment is (`records_replaced`):
    the Arrow file of a slice holds other bytes for the same rows."""
    rank = {name: index for index, name in enumerate(COLLECTIONS)}
    stored = sorted(range(len(ordered)),  # stable: list order within a group
                    key=lambda n: (rank[ordered[n].collection], ordered[n].access))
    ordered = [ordered[n] for n in stored]
    positions = [positions[n] for n in stored]
    schema = arrow_schema(RECORD_COLUMNS)
    for first, stop in segments([r.collection for r in ordered], [r.access for r in ordered]):
        rows: list[int] = []
        fresh: list[Rendered] = []
        served: list[bytes] = []
        for r in ordered[first:stop]:
            if r.fresh is None:
                rows.append(r.row)
            else:
                fresh.append(r)
                served.append(r.fresh)
                rows.append(-len(fresh))
        new = _made_columns(fresh, served)
        spans = runs(rows)
        columns = {name: previous.column(name, made, spans) for name, made in new.items()}
        columns["position"] = pa.array(positions[first:stop], pa.int64())
        yield pa.table([columns[name] for name in schema.names], schema=schema)


def _made_columns(fresh: list[Rendered], served: list[bytes]) -> dict[str, pa.Array]:
    """The records table's columns but `position` for records rendered now (`served`: their
    served bytes), in their order."""
    schema = arrow_schema(RECORD_COLUMNS)
    columns: dict[str, pa.Array] = {
        name: pa.array([getattr(r, attribute) for r in fresh], schema.field(name).type)
        for name, attribute in _ATTRIBUTES.items()}
    columns["item"], columns["digest"] = Renderings.made(served)
    return columns


def records_files(tables: Iterable[pa.Table], private: Path, made: Iterable[int] | None = None,
                  kept: Mapping[str, str] | None = None) -> list[OutputFile]:
    """The files of the records table's segments (`contract.bundle.segments`; `tables` is
    taken one at a time, and a segment written is not held), each with
    the hex SHA-256 of its content but the served bytes as its fingerprint (the `digest`
    column stands for them: hashing them all took a tenth of a second at 100,000 records).
    Each of `made` (all, where None) is written ahead (`writer.Placed`) from its table's own
    buffers, neither gathered in memory nor written twice; each other one has the
    fingerprint `kept` (a build's outputs) gives its path, and is made only if the writer
    cannot link it from that build."""
    numbers = None if made is None else set(made)
    found = []
    for n, table in enumerate(tables):
        if numbers is not None and n not in numbers:
            assert kept is not None
            found.append(OutputFile(segment_path(n), kept[segment_path(n)],
                                    functools.partial(lambda t: bytes(_ipc(t)), table)))
            continue
        path = placed(private, f"records-{n:05d}.arrow")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # (a killed export's, if this process's number came round again)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # the bundle's
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        found.append(constant(segment_path(n), Placed(path), hashlib.sha256(
            _ipc(table.drop_columns(["item"]))).hexdigest()))
    return found


def _ipc(table: pa.Table) -> memoryview:
    """The table's Arrow file, not copied again."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return memoryview(sink.getvalue())


def records_replaced(table: pa.Table, rows: dict[int, tuple[Rendered, int]]) -> pa.Table:
    """A segment of the records table (as `records_tables` made it) with the rows numbered
    in `rows` replaced by those records, each with its position: what `records_tables` makes
    of the same records, without looking at the others."""
    fresh = [rows[n] for n in sorted(rows)]
    schema = arrow_schema(RECORD_COLUMNS)
    new = _made_columns([r for r, _ in fresh], [r.served() for r, _ in fresh])
    new["position"] = pa.array([position for _, position in fresh], pa.int64())
    spans: list[tuple[bool, int, int]] = []
    start = 0
    for made, n in enumerate(sorted(rows)):
        spans.extend([(True, start, n - start), (False, made, 1)])
        start = n + 1
    spans.append((True, start, table.num_rows - start))
    spans = [span for span in spans if span[2]]
    return pa.table([spliced(column(table, name), new[name], spans) for name in schema.names],
                    schema=schema)


def events_table(events: list[Event]) -> bytes:
    return events_parquet(events_arrow(events))


def events_arrow(events: list[Event]) -> pa.Table:
    """The events as the bundle's events table holds them."""
    columns = {name: [getattr(e, name) for e in events] for name, _ in EVENT_COLUMNS}
    return pa.Table.from_pydict(columns, schema=arrow_schema(EVENT_COLUMNS))


def events_parquet(table: pa.Table) -> bytes:
    import pyarrow.parquet as pq  # here: the events table is made aside, in a process of its own

    sink = io.BytesIO()
    pq.write_table(table.combine_chunks(), sink, compression="zstd")
    return sink.getvalue()


def bundle_files(*, node_id: str, base_url: str, sidecar_url: str, manifest: bytes,
                 schema: bytes, openapi: bytes, index: bytes, changes: tuple[bytes, Hash],
                 records: list[OutputFile], events: bytes, search: str, origins: list[str]
                 ) -> Iterator[OutputFile]:
    """The bundle's files but its indexes. `changes`: the public change list and its hash,
    made for site_out/ already (30 MB at 100,000 records)."""
    files = ((MANIFEST, manifest), (SCHEMA, schema), (OPENAPI, openapi), (INDEX, index))
    hashed: list[tuple[str, bytes | memoryview | Placed, Hash]] = [
        *((name, data, hashlib.sha256(data)) for name, data in files),  # each once
        (CHANGES, *changes)]
    events_hash = hashlib.sha256(events)
    # The build's digest: of every file's, in the order of the bundle's description (each
    # segment of the records table by its content but the served bytes: `records_files`).
    digest = hashlib.sha256()
    for part in (*(each.digest() for _, _, each in hashed),
                 *(bytes.fromhex(segment.fingerprint) for segment in records),
                 events_hash.digest()):
        digest.update(part)
    digest.update(search.encode())
    digest.update(" ".join(origins).encode())
    meta = Meta(format=FORMAT, build=digest.hexdigest()[:16], node_id=node_id,
                base_url=base_url, sidecar_url=sidecar_url, search=search,
                origins=origins).to_json()
    yield from records
    for name, data, each in (*hashed, (EVENTS, events, events_hash),
                             (META, meta, hashlib.sha256(meta))):
        yield constant(name, data, each.hexdigest())
