"""The records of one bundle, held for reading: by id, and in list order per collection and
access group. A record read is a dictionary lookup and a read of its bytes; a list page is
a slice of the caller's rows. No query engine, no thread: both run on the event loop in
microseconds.

The served bytes stay in the bundle's Arrow files (the records table's segments) and are
read from them by offset (`bundle.StoredItems`: a system call and a copy of the record's
bytes, under a microsecond more than a copy out of a map), not kept mapped: the process's
memory does not grow with the records it serves, and the files' pages are the kernel's page
cache, shared by every worker process on the machine. Each row's bytes are followed by a
comma there (`bundle.ITEM_END`), so a run of consecutive rows of one segment is cut out as
one read, already separated as a JSON list's items; a list page is a few such runs (one for
a caller holding one access group, but where a segment of the group's rows ends: the export
keeps each group's rows together, and cuts them into segments by their own count, so rows a
caller may not see never split its runs). The other columns, each row's digest for its ETag
among them, are read once, when the bundle is loaded. The visibility rule is not here:
`service` asks for the rows of the groups a caller holds."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from exporter.contract.bundle import (
    DIGEST_SIZE,
    ITEM_END,
    SegmentFile,
    StoredItems,
    read_records,
    records_of,
)
from exporter.contract.wire import AFTER_EVERY_TIME, COLLECTIONS

# A caller's merged rows are kept for this many (collection, groups) pairs: callers share
# few distinct sets of groups (anonymous, and each kind of partner key).
MERGED_KEPT = 256
_END = len(ITEM_END)


class Listing(NamedTuple):
    """A caller's rows of one collection, in list order, and beside each the number of its
    run (`Records.joined` reads a run of rows at once); None where only a
    page's runs are worth finding (rows filtered for one request)."""

    rows: np.ndarray
    runs: np.ndarray | None


class Records:
    """Every live record of one bundle, public and restricted."""

    def __init__(self, folder: Path) -> None:
        files: list[SegmentFile] = []
        try:
            self._load(records_of(read_records(folder, files)), files)
        except BaseException:
            for one in files:
                one.file.close()
            raise

    def _load(self, table: pa.Table, files: list[SegmentFile]) -> None:
        """Every column but the served bytes read into memory, which are read from `files`
        when asked for: the table's maps are dropped with it."""
        self._items = StoredItems(table.column("item").chunks, files)
        # row -> the first 16 bytes of the SHA-256 of its served bytes, made by the export
        width = f"V{DIGEST_SIZE}"
        self._digests = np.concatenate([np.zeros(0, width), *(
            np.frombuffer(digest.buffers()[1], width)[digest.offset:digest.offset + len(digest)]
            for digest in table.column("digest").chunks if len(digest))])
        self._row = {record_id: row
                     for row, record_id in enumerate(table.column("id").to_pylist())}
        # row -> its collection and access group: a few strings, each held once
        collections = _shared(table.column("collection"))
        access = _shared(table.column("access"))
        self.collection = collections  # row -> its collection
        self.access = access  # row -> its access group
        positions = np.array(table.column("position").to_numpy(), np.int64)  # (copied)
        # (collection, group) -> its rows, in list order
        found: dict[tuple[str, str], list[int]] = {}
        for row, pair in enumerate(zip(collections, access, strict=True)):
            found.setdefault(pair, []).append(row)
        self._rows: dict[tuple[str, str], np.ndarray] = {}
        for pair, rows in found.items():
            array = np.asarray(rows, np.int64)
            self._rows[pair] = array[np.argsort(positions[array], kind="stable")]
        # As the export writes it (`contract.bundle`), a group's rows of a collection are
        # consecutive in the file, in list order. Then the runs a caller's page is cut from
        # end only where it passes from one of the caller's groups to another (or where its
        # updated_since leaves out a row of its own): how many there are, and so what a page
        # costs, depends on the records it may see alone, never on those between them that
        # it may not. A file not written so (by an older export) is cut row by row, at a
        # cost that depends on the number of rows alone (`joined`).
        self.grouped = all(bool(np.all(np.diff(rows) == 1)) for rows in self._rows.values())
        # row -> a number for its (collection, group): a run never passes from one group's
        # rows to another's, even where the file has them side by side (whether it does
        # depends on the groups between them, which a caller may not hold)
        self._group = np.zeros(len(collections), np.int64)
        for number, group_rows in enumerate(self._rows.values()):
            self._group[group_rows] = number
        # ... nor from one segment of the file to the next (a read is of one segment's file;
        # where a group's rows are cut into segments depends on its rows alone)
        self._group = self._group * max(len(self._items.bases), 1) + self._items.segment
        self._positions = positions
        # row -> its updated_at, in seconds since 1970 (the ledger's resolution)
        self._updated = _column_seconds(table.column("updated_at"))
        # (collection, groups) -> those rows in list order, their updated_at and their runs
        self._merged: OrderedDict[tuple[str, tuple[str, ...]],
                                  tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()

    def row(self, record_id: str) -> int | None:
        return self._row.get(record_id)

    def ids(self) -> Iterable[tuple[str, int]]:
        """Every record's id and row."""
        return self._row.items()

    def body(self, row: int) -> bytes:
        """The exported bytes of one record."""
        return bytes(self._items.span(row, row))[:-_END]

    def bodies(self, rows: Sequence[int] | np.ndarray) -> list[bytes]:
        return list(map(bytes, self._items.views(rows)))

    def joined(self, listing: Listing, start: int, stop: int, head: bytes, tail: bytes
               ) -> bytes:
        """`head`, the bytes of the listing's rows from `start` to `stop` separated by commas,
        then `tail`: each of their runs read at once."""
        rows = listing.rows[start:stop]
        if not len(rows):
            return head + tail
        runs = self.runs_of(rows) if listing.runs is None else listing.runs[start:stop]
        span = self._items.span
        if runs[0] == runs[-1]:  # one run, as a caller holding one group of a segment gets
            return b"".join((head, span(int(rows[0]), int(rows[-1]))[:-_END], tail))
        breaks = np.flatnonzero(runs[1:] != runs[:-1]) + 1  # where a run starts, but the first
        starts = rows[np.concatenate(([0], breaks))].tolist()
        ends = rows[np.concatenate((breaks - 1, [len(rows) - 1]))].tolist()
        pieces: list[bytes | memoryview] = [head]
        pieces += [span(first, last) for first, last in zip(starts, ends, strict=True)]
        pieces[-1] = pieces[-1][:-_END]
        pieces.append(tail)
        return b"".join(pieces)

    def runs_of(self, rows: np.ndarray) -> np.ndarray:
        """Beside each of `rows`, the number of its run: rows of one group that follow each
        other in the file, in `rows` too. In a file not grouped as the export writes it, each
        row is a run of its own."""
        if not self.grouped or not len(rows):
            return np.arange(len(rows))
        group = self._group[rows]
        starts = (np.diff(rows) != 1) | (group[1:] != group[:-1])
        return np.concatenate(([0], np.cumsum(starts)))

    def digest(self, row: int) -> bytes:
        """The first 16 bytes of the SHA-256 of a record's bytes: what a validator (an
        ETag) of them is made from."""
        return self._digests[row].tobytes()  # type: ignore[no-any-return]

    def digests(self, rows: np.ndarray) -> bytes:
        """The rows' digests, one after the other."""
        return self._digests[rows].tobytes()  # type: ignore[no-any-return]

    def listed(self, collection: str, groups: Sequence[str]) -> Listing:
        """The rows of `collection` in the given access groups, in list order."""
        rows, _, runs = self._listed(collection, groups)
        return Listing(rows, runs)

    def listed_since(self, collection: str, groups: Sequence[str], since: str) -> Listing:
        """Those of `listed` updated at or after `since` (an RFC 3339 UTC time), in order."""
        rows, times, _ = self._listed(collection, groups)
        if since == AFTER_EVERY_TIME:
            return Listing(rows[:0], None)
        return Listing(rows[times >= _seconds([since])[0]], None)

    def _listed(self, collection: str, groups: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if collection not in COLLECTIONS:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
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
        found = self._merged[key] = (merged, self._updated[merged], self.runs_of(merged))
        if len(self._merged) > MERGED_KEPT:
            self._merged.popitem(last=False)
        return found


def _shared(column: pa.ChunkedArray) -> list[str]:
    """A column of a few distinct strings as a list holding each of them once (made from
    Arrow's dictionary of it: no string a row)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    distinct = encoded.dictionary.to_pylist()
    return [distinct[n] for n in encoded.indices.to_numpy(zero_copy_only=False).tolist()]


def _column_seconds(times: pa.ChunkedArray) -> np.ndarray:
    """`_seconds` of a column, read by Arrow (no string a row)."""
    parsed = pc.strptime(times, format="%Y-%m-%dT%H:%M:%SZ", unit="s", error_is_null=True)
    seconds = pc.fill_null(parsed.cast(pa.int64()), np.iinfo(np.int64).min)
    return np.asarray(seconds.to_numpy(), np.int64)


def _seconds(times: Sequence[str]) -> np.ndarray:
    """RFC 3339 UTC times (`...Z`, whole seconds) as seconds since 1970; a missing one as the
    smallest number, before every time."""
    return np.array([time[:-1] for time in times], dtype="datetime64[s]").astype(np.int64)

