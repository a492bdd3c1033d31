"""An index's vectors, mapped from their `.npy` file and let go of after each use.

A search by meaning reads every vector of a group, or those of its closest lists
(`sidecar.lists`): at 500,000 records the vectors are 488 MiB. Read through a map, each page
read stays mapped into the process, so its resident memory would soon hold them all, on top
of the kernel's page cache that already holds them. After a search, `release` unmaps the
pages from the process (`MADV_DONTNEED`): they stay in the page cache, shared and given up
under pressure, and the next search maps them again from there, without reading the disk:
at 500,000 records it costs a semantic search (every vector) about 6 ms and a hybrid one
1.5 ms (bench/RESULTS.md). Two searches at once
are safe: one's release makes the other map its pages again, never read other bytes (the
map is of a file, read-only)."""

from __future__ import annotations

import math
import mmap
import os
from pathlib import Path

import numpy as np

FileIdentity = tuple[int, int, int, int]  # device, inode, size, modification time
_DROP = getattr(mmap, "MADV_DONTNEED", None)  # (Linux and most Unix; elsewhere kept mapped)
SCAN = 65_536  # rows compared at once by a whole scan (64 MiB of 256 float32 each)


class Vectors:
    """A float array stored by `numpy.save`, mapped read-only (`array`)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(file)
            start = file.tell()
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            info = os.fstat(file.fileno())
        # An export links a file it did not change into the next build: the same identity
        # (not its change time, which a new link moves). It never writes into a file.
        self.identity: FileIdentity = (info.st_dev, info.st_ino, info.st_size,
                                       info.st_mtime_ns)
        count = math.prod(shape)
        if fortran or len(self._map) < start + count * dtype.itemsize:
            raise ValueError(f"{path}: not a whole array in C order")
        self.array: np.ndarray = np.frombuffer(self._map, dtype, count, start).reshape(shape)
        self._start = start
        self._row_bytes = dtype.itemsize * math.prod(shape[1:])

    def compare(self, vector: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """`array @ vector` (float32), for every row or for `rows`: every row a part of SCAN
        at a time, each part's pages let go of once compared, so that a scan never holds
        them all."""
        if rows is not None:
            try:
                return np.asarray(self.array[rows] @ vector, np.float32)
            finally:
                self.release()
        out = np.empty(len(self.array), np.float32)
        for first in range(0, len(self.array), SCAN):
            out[first:first + SCAN] = self.array[first:first + SCAN] @ vector
            self.release(first, first + SCAN)
        return out

    def release(self, first: int = 0, stop: int | None = None) -> None:
        """Unmap the pages of rows `first` to `stop` (every row) from the process; they stay
        in the page cache."""
        if _DROP is None or not len(self._map):
            return
        begin = (self._start + first * self._row_bytes) // mmap.PAGESIZE * mmap.PAGESIZE
        end = len(self._map) if stop is None else min(
            len(self._map), self._start + stop * self._row_bytes)
        if end > begin:
            self._map.madvise(_DROP, begin, end - begin)
