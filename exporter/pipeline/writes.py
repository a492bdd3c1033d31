"""Writing the files of a build's tree: by a few threads while the export renders the next
ones (`Writes`), each file new (never written into: builds share files through hard links),
with its tree's mode; and removing files with the folders they leave empty."""

from __future__ import annotations

import itertools
import os
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from exporter.pipeline.outputs import Data, Pieces, Placed
from exporter.shared.errors import ExportError

_IOV_MAX = 1024  # buffers a writev takes at most (Linux)


def safe_join(root: str, relative: str) -> str:
    """Join under root, refusing absolute paths, `.` and `..` (as pelican's writer does)."""
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        raise ExportError(f"refusing to write outside the output folder: {relative!r}")
    return root + "/" + relative


# Fault injection for the kill tests: FEDNODE_EXPORT_KILL_AFTER_WRITES=<n> kills the export
# with SIGKILL once it has written n files into a build (its own process's writes only).
_KILL_AFTER = int(os.environ.get("FEDNODE_EXPORT_KILL_AFTER_WRITES") or 0)
_KILL_PID = os.getpid()
_kill_count = itertools.count(1)


def _counted_write() -> None:
    """Count a file written, and kill the export at the count asked for."""
    if next(_kill_count) >= _KILL_AFTER and os.getpid() == _KILL_PID:
        os.kill(os.getpid(), signal.SIGKILL)


class Writes:
    """Files written by a few threads while the caller renders the next ones: creating a
    file is the kernel's work, which runs beside Python's rendering on another core. Files
    go to the threads in batches of `BATCH`, or fewer where they hold `BATCH_BYTES` (one
    hand-over a file cost the rendering thread more than the write itself: a future, a queue
    and a semaphore each time). At most `PENDING` batches, and `PENDING_BYTES` of bytes
    made for them, wait, so memory stays small whatever the files' sizes (a snapshot chunk
    is 20 MB at 10,000 records); the first error is raised, once every write has ended."""

    THREADS = 3
    BATCH = 64
    BATCH_BYTES = 8 << 20
    PENDING = 8
    PENDING_BYTES = 32 << 20

    def __enter__(self) -> Writes:
        self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="fednode-write")
        self._slots = threading.BoundedSemaphore(self.PENDING)
        self._errors: list[OSError] = []
        self._batch: list[tuple[str, Data, int]] = []
        self._batch_bytes = 0
        self._room = threading.Condition()
        self._pending_bytes = 0  # of the batches sent and not yet written
        return self

    def put(self, path: str, data: Data, mode: int) -> None:
        """Have `data` written to the new file `path`, with `mode`, by one of the threads."""
        self._batch.append((path, data, mode))
        self._batch_bytes += _made_size(data)
        if len(self._batch) >= self.BATCH or self._batch_bytes >= self.BATCH_BYTES:
            self._send()

    def _send(self) -> None:
        if self._errors:
            raise self._errors[0]
        batch, size, self._batch, self._batch_bytes = self._batch, self._batch_bytes, [], 0
        with self._room:  # (one batch is always let through, however large)
            while self._pending_bytes and self._pending_bytes + size > self.PENDING_BYTES:
                self._room.wait()
            self._pending_bytes += size
        self._slots.acquire()
        self._pool.submit(self._run, batch, size)

    def _run(self, batch: list[tuple[str, Data, int]], size: int) -> None:
        try:
            for path, data, mode in batch:
                write_file(path, data, mode)
        except OSError as exc:
            self._errors.append(exc)
        finally:
            with self._room:
                self._pending_bytes -= size
                self._room.notify_all()
            self._slots.release()

    def __exit__(self, *failed: object) -> None:
        if self._batch and failed[0] is None and not self._errors:
            self._send()
        # Batches not begun are dropped when the export has failed: it ends sooner.
        self._pool.shutdown(wait=True, cancel_futures=failed[0] is not None)
        if self._errors and failed[0] is None:
            raise self._errors[0]


def _made_size(data: Data) -> int:
    """The bytes an output's data holds that were made for it: none for a file written
    ahead, nor for pieces (parts the export cache holds whatever is written)."""
    return memoryview(data).nbytes if isinstance(data, bytes | memoryview) else 0


def write_file(path: str, data: Data, mode: int, replace: bool = False) -> None:
    """Write `data` as the file `path`, with `mode`: a new file (`replace`: or one there,
    truncated), or a file written ahead (`Placed`) moved there."""
    if isinstance(data, Placed):
        os.rename(data.path, path)  # (no file is at `path`: it was removed if there was)
        return
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
    descriptor = os.open(path, flags, mode)
    try:
        if isinstance(data, Pieces):
            _write_pieces(descriptor, data.pieces)
        else:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)
    if _KILL_AFTER:
        _counted_write()


def _write_pieces(descriptor: int, pieces: Sequence[bytes | memoryview]) -> None:
    """Write the pieces one after the other, `_IOV_MAX` at a time (a write may take part of
    them: it goes on from where it stopped)."""
    for start in range(0, len(pieces), _IOV_MAX):
        batch = [memoryview(piece) for piece in pieces[start:start + _IOV_MAX] if piece]
        first = 0
        while first < len(batch):
            written = os.writev(descriptor, batch[first:])
            while first < len(batch) and written >= len(batch[first]):
                written -= len(batch[first])
                first += 1
            if written:
                batch[first] = batch[first][written:]


def make_folders(folder: str, mode: int) -> None:
    """`os.makedirs`, but every folder it makes gets `mode` (makedirs gives the parents it
    makes the default mode)."""
    if os.path.isdir(folder):
        return
    make_folders(folder.rpartition("/")[0], mode)
    try:
        os.mkdir(folder, mode)
    except FileExistsError:
        pass


def remove_file(root: str, relative: str) -> None:
    """Remove a file of a tree, and the folders it leaves empty."""
    path = safe_join(root, relative)
    os.unlink(path)
    folder = path.rpartition("/")[0]
    while folder != root:
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = folder.rpartition("/")[0]
