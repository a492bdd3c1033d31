"""The builds an export may write into: which one is current, which are free (no sidecar
pins them, `contract.builds`), and what each records of its outputs."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import time
from pathlib import Path

from exporter.contract.builds import BUILDS, CURRENT, NAMES, hold_exclusive
from exporter.shared.fileversion import version_at

# Python's marshal, not JSON: a large node's build records hundreds of thousands of paths,
# which marshal reads and writes several times faster. Written and read by this fednode
# only; one it cannot read is not trusted (rebuilt).
OUTPUTS = "outputs.marshal"
LEGACY_OUTPUTS = "outputs.json"  # what earlier versions of fednode wrote: read, never written
WAIT_FOR_READERS = 5.0  # seconds a delta export waits for sidecars to leave its build


def free_build(private: Path, live: str | None) -> tuple[str, int] | None:
    """A build name other than `live` whose readers' lock is had exclusively, with its
    descriptor: the build before last first (the newest record of its outputs), then the
    other builds there are, then a new one; None where sidecars read every one."""
    builds = private / BUILDS

    def newest(name: str) -> tuple[bool, int, bool]:
        record = record_version(builds / name)
        return record is None, -(record[0] if record else 0), not (builds / name).exists()

    for name in sorted((n for n in NAMES if n != live), key=newest):
        lock = hold_exclusive(private, name)
        if lock is not None:
            return name, lock
    return None


def wait_exclusive(private: Path, name: str) -> int | None:
    """Build `name`'s readers' lock held exclusively, once the sidecars that read it have
    moved on (they do within a second or so of a switch), or None after
    `WAIT_FOR_READERS` seconds."""
    deadline = time.monotonic() + WAIT_FOR_READERS
    while True:
        lock = hold_exclusive(private, name)
        if lock is not None or time.monotonic() > deadline:
            return lock
        time.sleep(0.02)


def current_build(private: Path) -> str | None:
    """The name of the build the switch points at, None where there is none (or the link
    points anywhere but at a build)."""
    try:
        target = os.readlink(private / CURRENT)
    except OSError:
        return None
    name = target.rpartition("/")[2]
    return name if target == f"{BUILDS}/{name}" and name in NAMES else None


def record_version(folder: Path) -> tuple[int, ...] | None:
    """The version of a build's record of its outputs, None if it has none."""
    return version_at(folder / OUTPUTS)


def read_outputs(folder: Path) -> dict[str, dict[str, str]] | None:
    """A build's record of its outputs (tree -> path -> fingerprint), None where it has
    none or one that cannot be read or trusted (the build is then rebuilt from scratch)."""
    try:
        data = marshal.loads((folder / OUTPUTS).read_bytes())
        if isinstance(data, dict):  # each tree's outputs marshalled apart (`Release._recorded`)
            data = {tree: marshal.loads(v) if isinstance(v, bytes) else v
                    for tree, v in data.items()}
    except FileNotFoundError:
        try:
            data = json.loads((folder / LEGACY_OUTPUTS).read_bytes())
        except (OSError, ValueError):
            return None
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(data, dict) or not all(
            isinstance(v, dict) and all(isinstance(k, str) and isinstance(f, str)
                                        for k, f in v.items()) for v in data.values()):
        return None
    return data


def remove_tree(path: Path) -> None:
    """Remove a build, a leftover of one or a link, whatever it is, if it is there."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
