"""What tells one version of a file from another without reading it."""

from __future__ import annotations

import os
from pathlib import Path


def version_of(info: os.stat_result) -> tuple[int, int, int, int]:
    """A file's version, from its `stat`: its time, size, change time and inode. The time
    and size alone can be kept by an edit (`cp -p`, `tar`, `touch -r` restore the time; a
    same-size edit within a coarse clock tick), and a file whose access changed would then be
    taken as unchanged: published still. Content files, the library's PDFs, `--watch`'s
    polling and the builds' records of their outputs (`writer`) all tell versions by this."""
    return info.st_mtime_ns, info.st_size, info.st_ctime_ns, info.st_ino


def version_at(path: Path) -> tuple[int, int, int, int] | None:
    """The version of the file at `path` (`version_of`), None if there is none."""
    try:
        return version_of(os.stat(path))
    except OSError:
        return None
