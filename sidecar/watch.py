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
import os
import select
from pathlib import Path

from exporter.shared.inotify import (
    CHANGES,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_Q_OVERFLOW,
    Inotify,
)


class FolderWatch:
    """`changed()`: True the first time, whenever the folder may have changed since the last
    call, and always while there is no watch (not Linux, inotify's limits reached, the folder
    missing: then each call tries to watch it again). A forked process makes a watch of its
    own, never reading its parent's (unless attached to a loop, which a fork does not take)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._owner: int | None = None  # the process the descriptor belongs to
        self._inotify: Inotify | None = None
        self._poll: select.poll | None = None
        self._wd: int | None = None  # the folder's watch, while it holds
        self._loop: asyncio.AbstractEventLoop | None = None  # reading the events, if any
        self._dirty = True  # attached: an event came since the last call

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have `loop` read the events as they come (where there is a watch to read)."""
        if self._owner != os.getpid():
            self._open()
        if self._inotify is not None:
            loop.add_reader(self._inotify.fd, self._read)
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
        # A parent's descriptor (after a fork) is left alone: never read here, and not
        # closed either, since the child may have closed that number and reused it.
        self._owner = os.getpid()
        self._poll = self._wd = None
        self._inotify = Inotify.open()
        if self._inotify is None:
            return
        self._poll = select.poll()
        self._poll.register(self._inotify.fd, select.POLLIN)
        self._add()

    def _add(self) -> None:
        assert self._inotify is not None
        if self._wd is not None:
            self._inotify.remove(self._wd)  # gone already, or moved away
        self._wd = self._inotify.add(self.folder, CHANGES)

    def _drain(self) -> bool:
        """Read every queued event; False if one says the watch no longer holds (events of a
        watch given up before, such as the IN_IGNORED its removal queues, count for nothing)."""
        assert self._inotify is not None
        return not any(event.mask & IN_Q_OVERFLOW or (event.wd == self._wd and event.mask & (
            IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) for event in self._inotify.read())

    def close(self) -> None:
        if self._inotify is not None and self._owner == os.getpid():
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._inotify.fd)
            self._inotify.close()
        self._loop = None
        self._inotify = self._poll = self._wd = None
        self._owner = None
