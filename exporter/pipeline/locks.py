"""The node's private folder and who writes in it: the folders' modes (`private_folder`),
one export of a node at a time (`exclusive`), and the lock descriptors this process holds,
which a forked child lets go of so that a lock goes with the exporting process alone."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exporter.shared.errors import ExportError

PRIVATE = 0o700  # the bundle and the cache: only the node's own user enters
# The private folder, `builds/` and each build: only the owner lists or changes them, but
# others (a web server's user) may pass through to the public site tree, the one thing in
# them not protected by its own mode. Secret, keys, lock and bundle files are all 0600.
PASSAGE = 0o711

_HELD: set[int] = set()  # descriptors of the export locks this process holds


@contextmanager
def exclusive(private: Path) -> Iterator[None]:
    """One export of a node at a time: a second one stops with an error rather than write
    into the same build. The lock goes with the process, however it ends."""
    private_folder(private, PASSAGE)
    descriptor = os.open(private / "export.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportError("another `fednode export` of this node is running; let it "
                              "finish, then export again") from None
        hold(descriptor)
        yield
    finally:
        let_go(descriptor)


def hold(descriptor: int) -> None:
    """Count a lock's descriptor among those this process holds, for a forked child to let
    go of (`release_inherited_locks`)."""
    _HELD.add(descriptor)


def let_go(descriptor: int) -> None:
    """Close a lock's descriptor held with `hold`: the lock is free again."""
    _HELD.discard(descriptor)
    os.close(descriptor)


def release_inherited_locks() -> None:
    """In a forked child: close its copies of the lock descriptors, so that the lock is held
    by the exporting process alone and goes when it goes."""
    for descriptor in _HELD:
        os.close(descriptor)
    _HELD.clear()


def private_folder(path: Path, mode: int = PRIVATE) -> Path:
    """Make `path` (and missing parents) a folder only its owner can enter (or, with
    PASSAGE, list)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def replace_private(path: Path, data: bytes) -> None:
    """Make `path` a file of `data` only its owner can read, in one step: written aside
    (a name of this process's own, so that two writers never share one) and renamed over."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(data)
    os.replace(temporary, path)
