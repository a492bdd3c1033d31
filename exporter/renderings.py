"""The previous export's rendered records, mapped from its bundle's Arrow file and kept as
Arrow columns: an export after a small edit reuses almost all of them, and most of their
bytes are never read at all (the records table copies them, column to column)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from .contract.bundle import DIGEST_SIZE, ITEM_END, RECORDS, column


class Renderings:
    """id -> (render key, title, bytes) of each record of the previous export; empty when
    there is no readable bundle (the export then renders everything)."""

    def __init__(self, ids: list[str], keys: list[str], titles: list[str], items: pa.Array,
                 digests: pa.Array, table: pa.Table | None = None) -> None:
        self.rows = {record_id: row for row, record_id in enumerate(ids)}
        self.keys = keys
        self.titles = titles
        self.items = items  # one contiguous binary array, a row per record (`ITEM_END` after)
        self.digests = digests  # each row's served bytes' digest
        self.table = table  # the whole records table
        self._offsets: list[int] | None = None  # each row's start in its data, then the end

    @classmethod
    def read(cls, folder: Path) -> Renderings:
        try:
            # No copy: the map backs the columns, and stays open as long as they do.
            table = pa.ipc.open_file(pa.memory_map(str(folder / RECORDS))).read_all()
            items, digests = column(table, "item"), column(table, "digest")
        except (OSError, KeyError, pa.ArrowException):  # none, or of an older format
            return cls.empty()
        ids, keys, titles = (table.column(name).to_pylist()
                             for name in ("id", "render_key", "title"))
        return cls(ids, keys, titles, items, digests, table)

    @classmethod
    def empty(cls) -> Renderings:
        return cls([], [], [], pa.array([], pa.large_binary()), pa.array([], _DIGEST))

    def find(self, record_id: str, key: str) -> int | None:
        """The row of the record's previous rendering if it was rendered from `key`."""
        row = self.rows.get(record_id)
        return row if row is not None and self.keys[row] == key else None

    def bytes_of(self, rows: list[int]) -> list[bytes]:
        """Rows' served bytes, sliced from the map (Arrow's `take` would load
        pyarrow.compute, a seventh of a small export's time)."""
        return list(map(bytes, self.views_of(rows)))

    def views_of(self, rows: list[int]) -> list[memoryview]:
        """Rows' served bytes as views of the map, not copied (for bytes joined at once)."""
        if not rows:
            return []
        buffers = self.items.buffers()
        if self._offsets is None:
            self._offsets = np.frombuffer(buffers[1], np.int64)[
                self.items.offset:self.items.offset + len(self.items) + 1].tolist()
        offsets, data = self._offsets, memoryview(buffers[2])  # type: ignore[arg-type]
        return [data[offsets[row]:offsets[row + 1] - len(ITEM_END)] for row in rows]

    def columns(self, runs: Runs, fresh: list[bytes]) -> tuple[pa.Array, pa.Array]:
        """The records table's `item` and `digest` columns, made of `runs` (see `runs`) of
        previous rows and of rows made from the served bytes `fresh`."""
        items = pa.array([served + ITEM_END for served in fresh], pa.large_binary())
        digests = pa.array([hashlib.sha256(served).digest()[:DIGEST_SIZE] for served in fresh],
                           _DIGEST)
        return spliced(self.items, items, runs), spliced(self.digests, digests, runs)

    def column(self, name: str, new: pa.Array, runs: Runs) -> pa.Array:
        """Another column of the records table, made as `columns` makes theirs: a row
        rendered from the same key has the same value in every column but `position`."""
        previous = column(self.table, name) if self.table is not None else new
        return spliced(previous, new, runs)


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


def spliced(previous: pa.Array, new: pa.Array, runs: Runs) -> pa.Array:
    """The runs' rows (of `previous`, or of `new`), one contiguous array, as written from a
    list."""
    pieces = [(previous if old else new).slice(first, length) for old, first, length in runs]
    if len(pieces) == 1:
        return pieces[0]
    return pa.concat_arrays(pieces) if pieces else new
