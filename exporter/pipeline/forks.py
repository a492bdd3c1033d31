"""Work an export hands to a forked process of its own, to run on another core while the
export goes on. (On a thread it would share the export's one core's worth of Python: the
GIL. Embedding is mostly a Python loop over tokens.)

`Aside(function, *arguments)` starts it; `.result()` waits for what it returned, or raises
what it raised; `.cancel()` stops it unasked. The child is a fork: it starts at once, with
everything the export has loaded, and sends back only its result. It dies with the export,
however that ends, and lets go of the export's lock, so a killed export leaves nothing
running and nothing locked.

A fork copies one thread. A lock another thread holds at that moment stays held in the
child for ever, so the work forks only from a process with one thread (the `fednode
export` command); elsewhere (a process that also serves, such as the test suite) it runs on
a thread, as it did before. Where the child dies, the work is done here when its result is
asked for."""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import select
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from exporter.pipeline import locks

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def forks() -> bool:
    """Whether work can be handed to a forked process here and now."""
    return sys.platform == "linux" and threading.active_count() == 1


def cores(most: int) -> int:
    """The cores this process may use (a container's, not the host's), `most` at most: how
    many processes to share work among."""
    return min(len(os.sched_getaffinity(0)), most) if sys.platform == "linux" else 1


_IN_CHILD = False


def in_child() -> bool:
    """Whether this process is a child `Aside` forked (work that limits its own process's
    resources may do so only there)."""
    return _IN_CHILD


def child_started(parent: int) -> None:
    """In a forked child of the export, first thing: die with the parent, and let go of the
    export lock (a child holding it would refuse the next export until it ended)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    locks.release_inherited_locks()
    global _IN_CHILD
    _IN_CHILD = True


class Aside(Generic[T]):
    def __init__(self, function: Callable[..., T], *arguments: Any, redo: bool = True) -> None:
        """`redo=False`: where the child dies, `result` raises ChildProcessError rather than
        do the work here (work that may have killed it: reading a hostile file)."""
        self._call = (function, arguments)
        self._redo = redo
        self._child: tuple[int, int] | None = None  # pid, the pipe's read end
        self._thread: ThreadPoolExecutor | None = None
        self._future: Future[T] | None = None
        if forks():
            self._child = _fork(function, arguments)
        else:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="fednode-aside")
            self._future = self._thread.submit(function, *arguments)

    def result(self, timeout: float | None = None) -> T:
        """What the work returned (or raise what it raised). With `timeout`, a TimeoutError
        if it has not ended by then: a child is killed; a thread cannot be, and is left to
        end on its own."""
        if self._future is not None:
            try:
                return self._future.result(timeout)
            finally:
                self.cancel()
        if self._child is not None:
            pid, pipe = self._child
            if timeout is not None and not select.select([pipe], [], [], timeout)[0]:
                self.cancel()
                raise TimeoutError(f"not done within {timeout:g} s")
            self._child = None
            # Unpickled as it is read: never the whole answer in memory twice (the public
            # change list and the downloads' parts are hundreds of MB at 100,000 records).
            with open(pipe, "rb") as reader:
                try:
                    outcome = pickle.load(reader)
                except Exception:  # (cut short: the child died while it wrote)
                    outcome = None
            _, status = os.waitpid(pid, 0)
            if status == 0 and outcome is not None:
                done, value = outcome
                if done:
                    return value  # type: ignore[no-any-return]
                raise value
        if not self._redo:
            raise ChildProcessError("the process doing it ended without an answer")
        function, arguments = self._call  # the child died: do it here
        return function(*arguments)

    def cancel(self, wait: bool = False) -> None:
        """Stop the work if it still runs; idempotent. Work on a thread cannot be stopped:
        it is left to finish, or with `wait`, waited for."""
        if self._thread is not None:
            self._thread.shutdown(wait=wait, cancel_futures=True)
            self._thread = None
        if self._child is not None:
            pid, pipe = self._child
            self._child = None
            os.close(pipe)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)


def _fork(function: Callable[..., Any], arguments: tuple[Any, ...]) -> tuple[int, int]:
    parent = os.getpid()
    read, write = os.pipe()
    # The child never collects what it inherits: an object of the parent's whose finalizer
    # touches state that only the parent's other threads held (a connection, a library's
    # handle) would crash the child when its garbage collector ran. (Frozen objects are
    # also left untouched in memory, so the pages the processes share stay shared.)
    gc.freeze()
    try:
        pid = os.fork()
    finally:
        if os.getpid() == parent:
            gc.unfreeze()
    if pid:
        os.close(write)
        return pid, read
    status = 1
    try:  # the child: never returns, never runs the parent's exit handlers
        os.close(read)
        child_started(parent)
        try:
            outcome = (True, function(*arguments))
        except Exception as exc:  # raised again by the parent's `result`
            outcome = (False, exc)
        with open(write, "wb") as out:  # pickled as it is written, not held whole
            pickle.dump(outcome, out, protocol=pickle.HIGHEST_PROTOCOL)
        status = 0
    finally:
        os._exit(status)
