"""Waiting for the content to change, for `fednode export --watch`: the folders an export
reads (content/ and each collection folder in it) are watched with inotify, so a saved edit
wakes the export at once and nothing is scanned while nothing changes. Names the export
does not read (`content.is_read`: hidden, set aside with "_", an editor's swap, backup or
autosave files) wake nothing. Where there is no inotify, the same folders are looked at
every `POLL` seconds instead.

A file the export reads may be a symbolic link to a file elsewhere (a folder shared with
others): the export reads the file it points to, so the folder that file is in is watched
too, and an edit there wakes the watch for the link (else the site would keep the old
text). A linked collection folder is watched where it points.

A change made while an export runs is queued, and `wait` returns at once for it: the watch
is made before the first export, so no edit is ever missed."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from exporter.project.content import is_read, version_of
from exporter.shared.inotify import (
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVE_SELF,
    IN_Q_OVERFLOW,
    Inotify,
)

QUIET = 0.1  # seconds without events before an export starts: a save is often several writes
SETTLE = 1.0  # but no longer than this after the first event, however busy the folder
POLL = 1.0  # seconds between looks at the files, where there is no inotify


class ContentWatch:
    """`wait()` returns once something the export reads may have changed since the last
    call (or since the watch was made), and the edits have settled for `QUIET` seconds.
    `taken()` says which files changed, where inotify named them all."""

    def __init__(self, content: Path, *, inotify: bool = True) -> None:
        self.content = content
        self._inotify = Inotify.open() if inotify else None
        self._folders: dict[int, Path] = {}  # watch descriptor -> folder
        # watch descriptor -> name in that folder -> the links (in watched folders) to it
        self._targets: dict[int, dict[str, list[Path]]] = {}
        self._links: set[Path] = set()  # those links
        # The files of collection folders that changed since `taken` was last called; None
        # where something else changed, or what changed is not known (the first export).
        self._changed: set[Path] | None = None
        # What the files were at the last look, when polling. With inotify, polling is only
        # a stand-in while content/ cannot be watched (gone), and starts from nothing.
        self._seen = self._look() if self._inotify is None else set()
        if self._inotify is not None:
            self._watch_all()
            self._polling_from_now()  # the first export follows

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a change has settled; False if `timeout` seconds pass without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._inotify is not None and not self._folders:
            self._watch_all()  # content/ had gone, or was too big to watch: try again
            if self._folders and self._look() != self._seen:
                self._unknown()
                return True  # what it holds changed since polling last looked (or is back)
        if self._inotify is None or not self._folders:
            return self._poll(deadline)
        while not self._changes(self._remaining(deadline)):
            if deadline is not None and time.monotonic() >= deadline:
                return False
        settled = time.monotonic() + SETTLE
        while self._changes(QUIET) and time.monotonic() < settled:
            pass
        return True

    def taken(self) -> set[Path] | None:
        """The files that changed since the last call (None: not known, or not only files
        in collection folders), and from now on, none."""
        changed, self._changed = self._changed, set()
        return changed

    def _unknown(self) -> None:
        self._changed = None

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def __enter__(self) -> ContentWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @staticmethod
    def _remaining(deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _changes(self, timeout: float | None) -> bool:
        """Whether an event that matters came within `timeout` seconds (None: for ever)."""
        assert self._inotify is not None
        ready = select.select([self._inotify.fd], [], [], timeout)[0]
        if not ready:
            return False
        matters = relink = False
        for event in self._inotify.read():
            if event.mask & IN_Q_OVERFLOW:
                self._unknown()
                self._watch_all()  # events were lost: watch every folder afresh
                self._polling_from_now()
                return True
            linked = self._targets.get(event.wd, {})
            if event.name in linked or (linked and not event.name):
                matters = True  # a linked file (or the folder it is in) changed
                self._linked_changed(linked.get(event.name) or [
                    link for links in linked.values() for link in links])
                relink = relink or not event.name
            folder = self._folders.get(event.wd)
            if event.mask & IN_IGNORED:
                self._folders.pop(event.wd, None)  # that folder went
            if folder == self.content and event.mask & (IN_IGNORED | IN_DELETE_SELF
                                                        | IN_MOVE_SELF):
                self._unknown()
                self._drop_all()  # content/ went, or moved away with its folders
                return True
            if folder is None or (event.name and not is_read(event.name)):
                continue
            matters = True
            relink = relink or (event.name != "" and (
                folder / event.name in self._links or os.path.islink(folder / event.name)))
            if folder == self.content or not event.name or event.mask & IN_ISDIR:
                self._unknown()  # node.toml, a folder, or the collection folder itself
            elif self._changed is not None:
                self._changed.add(folder / event.name)
            if folder == self.content and event.mask & IN_ISDIR:
                self._watch_all()  # a collection folder came, went or was renamed
                if not self._folders:
                    self._polling_from_now()
                    return True
        if relink and self._folders:
            self._watch_links()  # a link came, went or was pointed elsewhere
        return matters

    def _linked_changed(self, links: list[Path]) -> None:
        for link in links:
            if link.parent == self.content or self._changed is None:
                self._unknown()  # node.toml
            else:
                self._changed.add(link)

    def _watch_all(self) -> None:
        """Watch content/ and every collection folder in it (again: watching a folder twice
        gives back its watch)."""
        assert self._inotify is not None
        self._folders.clear()
        for folder in [self.content, *self._collections()]:
            wd = self._inotify.add(folder)
            if wd is not None:
                self._folders[wd] = folder
            elif folder.is_dir():  # there, but not watched (the limit on watches reached):
                self._drop_all(gone=False)  # poll, rather than miss its changes
                return
        self._watch_links()

    def _watch_links(self) -> None:
        """Watch the folder of each file a watched folder links to (again: the links are
        looked for afresh)."""
        assert self._inotify is not None
        targets: dict[Path, list[Path]] = {}
        for folder in list(self._folders.values()):
            try:
                entries = [entry for entry in os.scandir(folder)
                           if is_read(entry.name) and entry.is_symlink()]
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir():
                    continue  # a linked folder: followed by its own watch
                targets.setdefault(Path(os.path.realpath(entry.path)), []).append(
                    Path(entry.path))
        for wd in set(self._targets) - set(self._folders):
            self._inotify.remove(wd)  # (not a watched folder's own: that stays)
        self._targets = {}
        self._links = {link for links in targets.values() for link in links}
        for target, links in targets.items():
            watch = self._inotify.add(target.parent)
            if watch is None:
                if target.parent.is_dir():  # the limit on watches reached: poll instead
                    self._drop_all(gone=False)
                    return
                continue  # pointing nowhere: the export says so
            self._targets.setdefault(watch, {})[target.name] = links

    def _polling_from_now(self) -> None:
        """Where the folders could not all be watched, poll from what is there now: called
        where "changed" is said anyway (or the first export follows), so that the next look
        finds only what changes after it, not everything since polling last looked."""
        if not self._folders:
            self._seen = self._look()

    def _drop_all(self, *, gone: bool = True) -> None:
        assert self._inotify is not None
        for wd in {*self._folders, *self._targets}:
            self._inotify.remove(wd)
        self._folders.clear()
        self._targets.clear()
        self._links.clear()
        self._inotify.read()  # the removals' own events
        if gone:
            self._seen = set()  # polled until content/ is back: whatever is there then is new

    def _collections(self) -> list[Path]:
        try:
            return [Path(entry.path) for entry in os.scandir(self.content)
                    if is_read(entry.name) and entry.is_dir()]
        except OSError:
            return []

    def _poll(self, deadline: float | None) -> bool:
        while True:
            seen = self._look()
            if seen != self._seen:
                self._seen = seen
                self._unknown()
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(POLL if deadline is None else min(POLL, self._remaining(deadline) or 0))

    def _look(self) -> set[tuple[str, int, int, int, int]]:
        """What each file the export reads is (name, and its version: `version_of`), for
        polling: a time restored by a tool still changes the change time."""
        seen = set()
        for folder in [self.content, *self._collections()]:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if not is_read(entry.name) or entry.is_dir():
                    continue  # a folder's time changes with its files: they are looked at
                try:
                    info = entry.stat()
                except OSError:
                    continue
                seen.add((entry.path, *version_of(info)))
        return seen
