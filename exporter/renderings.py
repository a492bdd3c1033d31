"""The previous export's rendered records, mapped from its bundle's Arrow file and kept as
Arrow columns: an export after a small edit reuses almost all of them, and most of their
bytes are never read at all (the records table copies them, column to column)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from .contract.bundle import RECORDS


class Renderings:
    """id -> (render key, title, bytes) of each record of the previous export; empty when
    there is no readable bundle (the export then renders everything)."""

    def __init__(self, ids: list[str], keys: list[str], titles: list[str],
                 json: pa.Array) -> None:
        self.rows = {record_id: row for row, record_id in enumerate(ids)}
        self.keys = keys
        self.titles = titles
        self.json = json  # one contiguous binary array, a row per record
        self._offsets: list[int] | None = None  # each row's start in its data, then the end

    @classmethod
    def read(cls, folder: Path) -> Renderings:
        try:
            # No copy: the map backs the columns, and stays open as long as they do.
            table = pa.ipc.open_file(pa.memory_map(str(folder / RECORDS))).read_all()
            json = _one_array(table.column("json"))
        except (OSError, pa.ArrowException):
            return cls.empty()
        ids, keys, titles = (table.column(name).to_pylist()
                             for name in ("id", "render_key", "title"))
        return cls(ids, keys, titles, json)

    @classmethod
    def empty(cls) -> Renderings:
        return cls([], [], [], pa.array([], pa.large_binary()))

    def find(self, record_id: str, key: str) -> int | None:
        """The row of the record's previous rendering if it was rendered from `key`."""
        row = self.rows.get(record_id)
        return row if row is not None and self.keys[row] == key else None

    def bytes_of(self, rows: list[int]) -> list[bytes]:
        """Rows' bytes, sliced from the map (Arrow's `take` would load pyarrow.compute, a
        seventh of a small export's time)."""
        if not rows:
            return []
        buffers = self.json.buffers()
        if self._offsets is None:
            self._offsets = np.frombuffer(buffers[1], np.int64)[
                self.json.offset:self.json.offset + len(self.json) + 1].tolist()
        offsets, data = self._offsets, memoryview(buffers[2])  # type: ignore[arg-type]
        return [bytes(data[offsets[row]:offsets[row + 1]]) for row in rows]

    def column(self, rows: list[int], fresh: list[bytes]) -> pa.Array:
        """A binary column: row n is previous row `rows[n]`, or `fresh[-rows[n] - 1]` where
        `rows[n]` is negative; one contiguous array, as written from a list. Runs of
        consecutive rows are copied as slices (after a small edit, a few long runs)."""
        new = pa.array(fresh, pa.large_binary())
        pieces: list[pa.Array] = []
        start = 0
        for n in range(1, len(rows) + 1):
            if n < len(rows) and rows[n] == rows[n - 1] + (1 if rows[n - 1] >= 0 else -1):
                continue  # the run goes on
            first = rows[start]
            if first >= 0:
                pieces.append(self.json.slice(first, n - start))
            else:
                pieces.append(new.slice(-first - 1, n - start))
            start = n
        if len(pieces) == 1:
            return pieces[0]
        return pa.concat_arrays(pieces) if pieces else new


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array, without a copy when it is one chunk already (as written)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
