"""Whether anything in one folder may have changed since last asked, at the cost of one
system call: on Linux, an inotify descriptor on the folder, polled without waiting. The
kernel queues an event before the call that changed the folder returns, so a change made
before a request is seen by that request's poll. Elsewhere, or where inotify cannot be had,
the answer is always "maybe", and the caller looks at the files themselves.

A server attaches the watch to its event loop (`attach`): the loop then reads the events as
they come, with the sockets, and `changed()` is a flag, at no system call. A request's bytes
are read in an iteration of the loop no earlier than the events queued before them, and its
handler runs in a later one, so it still sees every change made before it was sent."""

from __future__ import annotations

import asyncio
import ctypes
import os
import select
import struct
import sys
from pathlib import Path

# linux/inotify.h: a file in the folder written, its metadata changed, created, deleted or
# renamed in or out; the folder itself deleted or moved; the watch gone; events lost.
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
         | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class FolderWatch:
    """`changed()`: True the first time, whenever the folder may have changed since the last
    call, and always while there is no watch (not Linux, inotify's limits reached, the folder
    missing: then each call tries to watch it again). A forked process makes a watch of its
    own, never reading its parent's (unless attached to a loop, which a fork does not take)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._owner: int | None = None  # the process the descriptor belongs to
        self._fd: int | None = None
        self._poll: select.poll | None = None
        self._wd: int | None = None  # the folder's watch, while it holds
        self._libc: ctypes.CDLL | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # reading the events, if any
        self._dirty = True  # attached: an event came since the last call

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have `loop` read the events as they come (where there is a watch to read)."""
        if self._owner != os.getpid():
            self._open()
        if self._fd is not None:
            loop.add_reader(self._fd, self._read)
            self._loop, self._dirty = loop, True

    def _read(self) -> None:
        if not self._drain():  # the folder went, or events were lost: watch afresh
            self._add()
        self._dirty = True

    def changed(self) -> bool:
        if self._loop is not None:
            if self._wd is None:
                self._add()
                self._dirty = False
                return True
            dirty, self._dirty = self._dirty, False
            return dirty
        if self._owner != os.getpid():
            self._open()
            return True
        if self._poll is None:
            return True
        if self._wd is None:
            self._add()
            return True
        if self._poll.poll(0):
            if not self._drain():  # the folder went, or events were lost: watch afresh
                self._add()
            return True
        return False

    def _open(self) -> None:
        # A parent's descriptor (self._fd, after a fork) is left alone: never read here, and
        # not closed either, since the child may have closed that number and reused it.
        self._owner = os.getpid()
        self._fd = self._poll = self._wd = None
        if sys.platform != "linux":
            return
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._add()

    def _add(self) -> None:
        assert self._libc is not None and self._fd is not None
        if self._wd is not None:
            self._libc.inotify_rm_watch(self._fd, self._wd)  # gone already, or moved away
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(self.folder), _MASK)
        self._wd = wd if wd >= 0 else None

    def _drain(self) -> bool:
        """Read every queued event; False if one says the watch no longer holds (events of a
        watch given up before, such as the IN_IGNORED its removal queues, count for nothing)."""
        assert self._fd is not None
        holds = True
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return holds
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                if mask & _IN_Q_OVERFLOW or (wd == self._wd and mask & (
                        _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF)):
                    holds = False
                at += _EVENT.size + length

    def close(self) -> None:
        if self._fd is not None and self._owner == os.getpid():
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
        self._loop = None
        self._fd = self._poll = self._wd = None
        self._owner = None
