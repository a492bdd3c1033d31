"""What an export's output is: a file of one of a build's trees (`OutputFile`), its path,
its fingerprint and how to render its bytes (`Data`: bytes, pieces written one after the
other, or a file written ahead)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from exporter.contract.builds import BUILDS


class Placed(NamedTuple):
    """An output's bytes written already, into a file of their own in the builds folder
    (`placed`), with their tree's mode: the writer moves the file into the tree rather than
    write the bytes again (200 MB for the records table at 100,000 records). One the writer
    does not take goes with the next sweep of the builds folder."""

    path: str


def placed(private: Path, name: str) -> str:
    """Where an output is written ahead (`Placed`): beside the builds, never in one."""
    return str(private / BUILDS / f"placed-{os.getpid()}-{name}")


class Pieces(NamedTuple):
    """An output's bytes as the pieces they are made of, written one after the other
    without being joined first (a collection's CSV download: 78 MB at 100,000 records, from
    hundreds of parts the export cache keeps)."""

    pieces: tuple[bytes | memoryview, ...]


Data = bytes | memoryview | Placed | Pieces


class OutputFile(NamedTuple):
    """One file of a tree. (A named tuple: an export at 100,000 records makes 200,000 of
    them, however few it writes.)"""

    path: str  # relative, forward slashes
    fingerprint: str  # equal fingerprints promise equal bytes
    render: Callable[[], Data]


def constant(path: str, data: Data, fingerprint: str) -> OutputFile:
    """An output whose bytes are already known."""
    return OutputFile(path, fingerprint, lambda: data)
