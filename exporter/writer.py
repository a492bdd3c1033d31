"""Write a whole output tree safely: into a staging folder beside the target, then swap it
in with renames, so readers see the old tree or the new one, never a mix.

Files whose fingerprint matches the previous build are hard-linked from the live tree
instead of being rendered again; that is what makes an export after a one-record edit
cheap. A tree's fingerprints are trusted only while the live folder is the very folder
they were recorded for (its inode), so a hand-edited or half-swapped tree is rebuilt."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import ExportError


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative, forward slashes
    fingerprint: str  # equal fingerprints promise equal bytes
    render: Callable[[], bytes]


def constant(path: str, data: bytes, fingerprint: str) -> OutputFile:
    """An output whose bytes are already known."""
    return OutputFile(path, fingerprint, lambda: data)


@dataclass(frozen=True)
class TreeStats:
    written: int
    reused: int
    removed: int


def safe_join(root: str, relative: str) -> str:
    """Join under root, refusing absolute paths, `.` and `..` (as pelican's writer does)."""
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        raise ExportError(f"refusing to write outside the output folder: {relative!r}")
    return root + "/" + relative


def write_tree(target: Path, files: Iterable[OutputFile], fingerprints: Path,
               progress: Callable[[int], None] | None = None) -> TreeStats:
    """Build the tree next to `target` and swap it in. Raises before touching `target`
    if anything fails; leftovers of an interrupted run are removed first."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    _sweep(target)
    previous = _load_fingerprints(fingerprints, target)
    staging = parent / f"{target.name}.staging-{os.getpid()}"
    staging.mkdir()
    recorded: dict[str, str] = {}
    written = reused = 0
    made_dirs: set[str] = set()
    live, stage = str(target), str(staging)
    try:
        for count, item in enumerate(files, start=1):
            if progress and count % 1000 == 0:
                progress(count)
            if item.path in recorded:
                raise ExportError(f"two outputs claim the same path: {item.path}")
            destination = safe_join(stage, item.path)
            folder = destination.rpartition("/")[0]
            if folder not in made_dirs:
                os.makedirs(folder, exist_ok=True)
                made_dirs.add(folder)
            if previous.get(item.path) == item.fingerprint:
                try:
                    os.link(safe_join(live, item.path), destination)
                    reused += 1
                    recorded[item.path] = item.fingerprint
                    continue
                except OSError:
                    pass  # fall through and render it again
            _write(destination, item.render())
            written += 1
            recorded[item.path] = item.fingerprint
        fingerprints.parent.mkdir(parents=True, exist_ok=True)
        temporary = fingerprints.with_suffix(".tmp")
        temporary.write_text(json.dumps({"inode": staging.stat().st_ino, "files": recorded},
                                        separators=(",", ":")))
        os.replace(temporary, fingerprints)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    removed = len(set(previous) - set(recorded))
    swap(staging, target)
    return TreeStats(written, reused, removed)


def _write(path: str, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)


def swap(staging: Path, target: Path) -> None:
    """Replace `target` with `staging`: two renames, the old tree removed afterwards."""
    retired = target.parent / f"{target.name}.retired-{os.getpid()}"
    if target.exists():
        os.rename(target, retired)
    os.rename(staging, target)
    shutil.rmtree(retired, ignore_errors=True)


def _sweep(target: Path) -> None:
    """Remove staging folders of runs that died; restore a tree retired but not replaced."""
    for leftover in target.parent.glob(f"{target.name}.staging-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for retired in sorted(target.parent.glob(f"{target.name}.retired-*")):
        if not target.exists():
            os.rename(retired, target)
        else:
            shutil.rmtree(retired, ignore_errors=True)


def _load_fingerprints(path: Path, target: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
        if target.stat().st_ino != data["inode"]:
            return {}
        files: dict[str, str] = data["files"]
        return files
    except (OSError, ValueError, KeyError, TypeError):
        return {}
