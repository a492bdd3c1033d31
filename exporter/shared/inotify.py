"""Linux's inotify, as much of it as fednode's watches need: one non-blocking descriptor,
watches added and removed by path, and the queued events read without waiting. Where there
is no inotify (not Linux, or its limits reached), `Inotify.open()` gives None and the
caller looks at the files themselves."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from pathlib import Path
from typing import NamedTuple

# linux/inotify.h: a file written, its metadata changed, created, deleted or renamed in or
# out; the watched folder itself deleted or moved; a watch gone; events lost.
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ISDIR = 0x4000, 0x8000, 0x40000000
CHANGES = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
           | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class WatchEvent(NamedTuple):
    wd: int
    mask: int
    name: str  # of the file in the watched folder; "" for the folder itself


class Inotify:
    """One inotify descriptor, non-blocking and closed on exec."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self.fd = fd

    @classmethod
    def open(cls) -> Inotify | None:
        if sys.platform != "linux":
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def add(self, folder: Path, mask: int = CHANGES) -> int | None:
        """Watch a folder (a symbolic link to one is followed); None if it cannot be."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), mask)
        return wd if wd >= 0 else None

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # a watch gone already is no error here

    def read(self) -> list[WatchEvent]:
        """Every event queued now, without waiting."""
        events: list[WatchEvent] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size:at + _EVENT.size + length].rstrip(b"\0")
                events.append(WatchEvent(wd, mask, os.fsdecode(name)))
                at += _EVENT.size + length

    def close(self) -> None:
        os.close(self.fd)
