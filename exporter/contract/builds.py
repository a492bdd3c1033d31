"""Which build a reader reads, and how it keeps it: the contract between the export, which
writes builds and switches them in, and the sidecars, which read them.

    .fednode/current -> builds/<name>   the published build
    .fednode/builds/<name>/             a build: site/, bundle/ and the export's records
    .fednode/readers/<name>.lock        that build's readers' lock

A reader pins the build `current` names (`pin`): it takes a shared lock on that build's
lock file, then checks that `current` still names the build. An export writes only into a
build whose lock it holds exclusively, and never into the current one, so a build pinned
this way is a published build and stays exactly as published until the pin is released,
however many exports run and however they end. The lock files are never removed: a lock
on a file that was replaced would keep nobody out.

A build is told from another by its identity (`identity`): the folder `current` names and
the version of that build's meta.json. The folder alone could be the same name rewritten
by a later export (once no reader pins it); a file's time alone is kept by a hard link.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

BUILDS = "builds"
CURRENT = "current"
READERS = "readers"
META = "meta.json"  # in a build's bundle: its version tells one build from another
# The names a build may have. An export writes into the build before last (the two take
# turns), or, while a reader still pins that one, into another free name.
NAMES = ("a", "b", "c", "d", "e", "f", "g", "h")
PIN_ATTEMPTS = 50  # a reader meeting an export mid-switch tries again, 20 ms apart

Identity = tuple[str, tuple[int, int, int, int] | None]


def lock_file(private: Path, name: str) -> Path:
    """The readers' lock of build `name`, in the private folder `.fednode/`."""
    return private / READERS / f"{name}.lock"


def identity(bundle: Path) -> Identity:
    """What tells the build the bundle path shows now from any other: the real folder it
    leads to and the version of that folder's meta.json (time, size, change time, inode)."""
    folder = os.path.realpath(bundle)
    try:
        info = os.stat(os.path.join(folder, META))
        return folder, (info.st_mtime_ns, info.st_size, info.st_ctime_ns, info.st_ino)
    except OSError:
        return folder, None


class Pin:
    """A build held for reading: the bundle folder it was read from (`folder`), and the
    descriptor whose shared lock keeps every export out of that build until `release`."""

    def __init__(self, folder: Path, descriptor: int | None) -> None:
        self.folder = folder
        self._descriptor = descriptor

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # the lock goes with the descriptor
            self._descriptor = None


class PinFailed(Exception):
    """`current` kept moving while a reader tried to pin it."""


def pin(bundle: Path) -> Pin:
    """Pin the build that the bundle path (`.fednode/bundle`) shows now. A bundle path that
    does not lead into a build (a plain folder) is read as it is, unpinned."""
    for _ in range(PIN_ATTEMPTS):
        folder = os.path.realpath(bundle)
        build = os.path.dirname(folder)
        builds = os.path.dirname(build)
        name = os.path.basename(build)
        if os.path.basename(builds) != BUILDS or name not in NAMES:
            return Pin(Path(folder), None)
        private = Path(os.path.dirname(builds))
        try:
            descriptor = _open_lock(private, name)
        except OSError:
            return Pin(Path(folder), None)  # (a read-only private folder: nothing exports)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # an export holds it: it is no longer current
            os.close(descriptor)
            time.sleep(0.02)
            continue
        if os.path.realpath(bundle) == folder:
            return Pin(Path(folder), descriptor)
        os.close(descriptor)  # switched meanwhile: pin the new one
    raise PinFailed(f"{bundle} kept changing while it was read")


def _open_lock(private: Path, name: str) -> int:
    path = lock_file(private, name)
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)


def hold_exclusive(private: Path, name: str) -> int | None:
    """For an export: the descriptor of build `name`'s lock, held exclusively, or None
    where a reader pins that build. The lock goes when the descriptor is closed."""
    path = lock_file(private, name)
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor
