"""The previous export's rendered records, mapped from its bundle's Arrow file and kept as
Arrow columns: an export after a small edit reuses almost all of them, and most of their
bytes are never read at all (the records table copies them, column to column)."""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from exporter.contract.bundle import DIGEST_SIZE, ITEM_END, RECORDS, Items, read_records, records_of


class Renderings:
    """id -> (render key, title, times, bytes) of each record of the previous export; empty
    when there is no readable bundle (the export then renders everything)."""

    def __init__(self, tables: list[pa.Table]) -> None:
        self.tables = tables  # the records table's segments (`contract.bundle.segments`)
        self.table = records_of(tables)  # the same, as one table (its columns chunked)
        ids, self.keys, self.titles = (self.table.column(name).to_pylist()
                                       for name in ("id", "render_key", "title"))
        self.rows = {record_id: row for row, record_id in enumerate(ids)}
        self.items = self.table.column("item")  # a row per record (`ITEM_END` after)
        self.digests = self.table.column("digest")  # each row's served bytes' digest
        self._items: Items | None = None

    @classmethod
    def read(cls, folder: Path) -> Renderings:
        try:
            # No copy: the map backs the columns, and stays open as long as they do.
            return cls(read_records(folder / RECORDS))
        except (OSError, KeyError, ValueError, pa.ArrowException):  # none, or of an older format
            return cls.empty()

    @classmethod
    def empty(cls) -> Renderings:
        return cls([])

    def find(self, record_id: str, key: str) -> int | None:
        """The row of the record's previous rendering if it was rendered from `key`."""
        row = self.rows.get(record_id)
        return row if row is not None and self.keys[row] == key else None

    def times(self, row: int) -> tuple[str, str]:
        """A row's `created_at` and `updated_at`, as rendered from its key."""
        return self._created[row], self._updated[row]

    @cached_property
    def _created(self) -> list[str]:  # (read when a rendering is first reused)
        return self.table.column("created_at").to_pylist()

    @cached_property
    def _updated(self) -> list[str]:
        return self.table.column("updated_at").to_pylist()

    def bytes_of(self, rows: list[int]) -> list[bytes]:
        """Rows' served bytes, sliced from the map (Arrow's `take` would load
        pyarrow.compute, a seventh of a small export's time)."""
        return list(map(bytes, self.views_of(rows)))

    def views_of(self, rows: list[int]) -> list[memoryview | bytes]:
        """Rows' served bytes as views of the map, not copied (for bytes joined at once)."""
        if not rows:
            return []
        if self._items is None:
            self._items = Items(self.items.chunks)
        return self._items.views(rows)

    @staticmethod
    def made(served: list[bytes]) -> tuple[pa.Array, pa.Array]:
        """The `item` and `digest` columns of records rendered now, from their served
        bytes."""
        # One join, and the offsets: the same array (and Arrow file) as `pa.array` of each
        # row's bytes with ITEM_END added (a copy a row), in half its time (0.25 s, not
        # 0.5-0.65 s, for the 100,000 records of bench/export_speed.py's node).
        ends = np.fromiter(map(len, served), np.int64, len(served))
        ends += len(ITEM_END)
        offsets = np.zeros(len(served) + 1, np.int64)
        np.cumsum(ends, out=offsets[1:])
        joined = ITEM_END.join(served) + ITEM_END if served else b""
        items = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), len(served), [None, pa.py_buffer(offsets), pa.py_buffer(joined)])
        digests = pa.array([hashlib.sha256(data).digest()[:DIGEST_SIZE] for data in served],
                           _DIGEST)
        return items, digests

    def column(self, name: str, new: pa.Array, runs: Runs) -> pa.Array:
        """A column of the records table made of `runs` (see `runs`) of previous rows and of
        rows of `new`: a row rendered from the same key has the same value in every column
        but `position`."""
        return spliced(self.table.column(name), new, runs)


_DIGEST = pa.binary(DIGEST_SIZE)
# (from the previous rows?, first row, rows): consecutive rows of the previous table or of
# the rows made now
Runs = list[tuple[bool, int, int]]


def runs(rows: list[int]) -> Runs:
    """Row n of a new table is previous row `rows[n]`, or the new row `-rows[n] - 1` where
    `rows[n]` is negative: the runs of consecutive rows that make it (after a small edit,
    a few long runs)."""
    if not rows:
        return []
    at = np.asarray(rows, np.int64)
    step = np.where(at[:-1] >= 0, 1, -1)
    breaks = np.flatnonzero((at[1:] != at[:-1] + step) | ((at[1:] >= 0) != (at[:-1] >= 0))) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(rows)]))
    return [(first >= 0, first if first >= 0 else -first - 1, end - start)
            for first, start, end in zip(at[starts].tolist(), starts.tolist(), ends.tolist(),
                                         strict=True)]


def spliced(previous: pa.Array | pa.ChunkedArray, new: pa.Array, runs: Runs) -> pa.Array:
    """The runs' rows (of `previous`, or of `new`), one contiguous array made afresh (never
    a slice of another: its Arrow file would differ), as written from a list; or, where they
    are one whole segment of `previous` as it was read, that segment's array (its Arrow file
    is the file it was read from: a whole export that changed nothing copies nothing)."""
    if len(runs) == 1 and runs[0][0] and isinstance(previous, pa.ChunkedArray):
        _, first, length = runs[0]
        at = 0
        for chunk in previous.chunks:
            if at == first and len(chunk) == length and chunk.offset == 0:
                return chunk
            at += len(chunk)
    pieces: list[pa.Array] = []
    for old, first, length in runs:
        piece = (previous if old else new).slice(first, length)
        pieces.extend(piece.chunks if isinstance(piece, pa.ChunkedArray) else [piece])
    return pa.concat_arrays(pieces) if pieces else new.slice(0, 0)
