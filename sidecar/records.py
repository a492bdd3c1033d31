"""The records of one bundle, held for reading: by id, and in list order per collection and
access group. A record read is a dictionary lookup and a slice; a list page is a slice of
the caller's rows. No query engine, no thread: both run on the event loop in microseconds.

The served bytes stay in the bundle's Arrow file, mapped into memory, not copied: they are
the file's pages, shared by every worker process on the machine and paged in as read. The
visibility rule is not here: `service` asks for the rows of the groups a caller holds."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from exporter.contract.wire import COLLECTIONS

# A caller's merged rows are kept for this many (collection, groups) pairs: callers share
# few distinct sets of groups (anonymous, and each kind of partner key).
MERGED_KEPT = 256
DIGEST = 16  # bytes of a record's SHA-256 kept for its validator


class Records:
    """Every live record of one bundle, public and restricted."""

    def __init__(self, path: Path) -> None:
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()  # no copy
        json = table.column("json")
        chunk = json.chunk(0) if json.num_chunks == 1 else json.combine_chunks()
        buffers = chunk.buffers()
        self._offsets = np.frombuffer(buffers[1], np.int64)[chunk.offset:
                                                            chunk.offset + len(chunk) + 1]
        self._data = memoryview(buffers[2]) if len(chunk) else memoryview(b"")
        self._keep = chunk  # the map lives as long as the array does
        ids = table.column("id").to_pylist()
        self._row = {record_id: row for row, record_id in enumerate(ids)}
        collections = table.column("collection").to_pylist()
        access = table.column("access").to_pylist()
        self.collection = collections  # row -> its collection
        self.access = access  # row -> its access group
        positions = table.column("position").to_numpy()
        # (collection, group) -> its rows, in list order
        found: dict[tuple[str, str], list[int]] = {}
        for row, pair in enumerate(zip(collections, access, strict=True)):
            found.setdefault(pair, []).append(row)
        self._rows: dict[tuple[str, str], np.ndarray] = {}
        for pair, rows in found.items():
            array = np.asarray(rows, np.int64)
            self._rows[pair] = array[np.argsort(positions[array], kind="stable")]
        self._positions = positions
        # row -> its updated_at, in seconds since 1970 (the ledger's resolution)
        self._updated = _seconds(table.column("updated_at").to_pylist())
        # row -> the first 16 bytes of the SHA-256 of its bytes, made when first asked for
        self._digests = bytearray(DIGEST * len(ids))
        self._digested = np.zeros(len(ids), bool)
        # (collection, groups) -> those rows in list order, and their updated_at beside them
        self._merged: OrderedDict[tuple[str, tuple[str, ...]],
                                  tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def row(self, record_id: str) -> int | None:
        return self._row.get(record_id)

    def body(self, row: int) -> bytes:
        """The exported bytes of one record."""
        return bytes(self._data[self._offsets[row]:self._offsets[row + 1]])

    def bodies(self, rows: Sequence[int] | np.ndarray) -> list[bytes]:
        offsets, data = self._offsets, self._data
        return [bytes(data[offsets[row]:offsets[row + 1]]) for row in rows]

    def joined(self, rows: np.ndarray, separator: bytes, head: bytes, tail: bytes) -> bytes:
        """`head`, the rows' bytes with `separator` between them, then `tail`: copied once,
        straight from the map."""
        data = self._data
        pieces: list[bytes | memoryview] = [head]
        for start, end in zip(self._offsets[rows].tolist(), self._offsets[rows + 1].tolist(),
                              strict=True):
            pieces += (data[start:end], separator)
        if len(pieces) > 1:
            pieces[-1] = tail  # in place of the last separator
        else:
            pieces.append(tail)
        return b"".join(pieces)

    def digest(self, row: int) -> bytes:
        """The first DIGEST bytes of the SHA-256 of a record's bytes: what a validator (an
        ETag) of them is made from, made once, when first asked for, not on every request."""
        start = row * DIGEST
        if not self._digested[row]:
            self._digests[start:start + DIGEST] = hashlib.sha256(
                self._data[self._offsets[row]:self._offsets[row + 1]]).digest()[:DIGEST]
            self._digested[row] = True
        return bytes(self._digests[start:start + DIGEST])

    def digests(self, rows: np.ndarray) -> bytes:
        """The rows' digests, one after the other."""
        for row in rows[~self._digested[rows]].tolist():
            self.digest(row)
        return np.frombuffer(self._digests, f"V{DIGEST}")[rows].tobytes()

    def listed(self, collection: str, groups: Sequence[str]) -> np.ndarray:
        """The rows of `collection` in the given access groups, in list order."""
        return self._listed(collection, groups)[0]

    def listed_since(self, collection: str, groups: Sequence[str], since: str) -> np.ndarray:
        """Those of `listed` updated at or after `since` (an RFC 3339 UTC time), in order."""
        rows, times = self._listed(collection, groups)
        return rows[times >= _seconds([since])[0]]

    def _listed(self, collection: str, groups: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if collection not in COLLECTIONS:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        key = (collection, tuple(sorted(set(groups))))
        found = self._merged.get(key)
        if found is not None:
            self._merged.move_to_end(key)
            return found
        parts = [self._rows[(collection, group)] for group in key[1]
                 if (collection, group) in self._rows]
        if len(parts) == 1:
            merged = parts[0]
        elif parts:
            merged = np.concatenate(parts)
            merged = merged[np.argsort(self._positions[merged], kind="stable")]
        else:
            merged = np.zeros(0, np.int64)
        found = self._merged[key] = (merged, self._updated[merged])
        if len(self._merged) > MERGED_KEPT:
            self._merged.popitem(last=False)
        return found


def _seconds(times: Sequence[str]) -> np.ndarray:
    """RFC 3339 UTC times (`...Z`, whole seconds) as seconds since 1970; a missing one as the
    smallest number, before every time."""
    return np.array([time[:-1] for time in times], dtype="datetime64[s]").astype(np.int64)
