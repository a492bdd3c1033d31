"""What `fednode export --watch` keeps in memory from one export to the next, so that the
export after a small edit does not read back what the one before wrote: the cache, the
ledger, what each build holds (its `outputs.marshal`) and the rendered records' ids, keys
and titles (the records table's columns that `Renderings` reads).

Each is used only while the file it stands for is as that export left it: the same inode,
size and time of change (`Stamp`). Anything else (an export by another command meanwhile,
a ledger restored from version control) is read from disk again, as a first export reads
it. An export takes what is kept before it starts (`take`) and keeps only what it ends
with: an export that fails leaves nothing kept, and the next one starts cold."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cache import Cache
    from .ledger import Ledger

Stamp = tuple[int, int, int]  # inode, size, mtime_ns
Outputs = dict[str, dict[str, str]]  # tree -> path -> fingerprint (`writer.Release`)
Columns = tuple[list[str], list[str], list[str]]  # ids, render keys, titles


def stamp(path: Path) -> Stamp | None:
    """What identifies a file's present state; None if there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


@dataclass
class Warm:
    cache: Cache | None = None
    ledger: tuple[Stamp, Ledger] | None = None
    builds: dict[Path, tuple[Stamp, Outputs]] = field(default_factory=dict)  # by outputs file
    records: tuple[Path, Stamp, Columns] | None = None  # the records table, by its path

    def take(self) -> Warm:
        """Everything kept, now the caller's: this object keeps nothing until `keep`."""
        taken = Warm(self.cache, self.ledger, self.builds, self.records)
        self.cache, self.ledger, self.builds, self.records = None, None, {}, None
        return taken

    def keep(self, other: Warm) -> None:
        self.cache, self.ledger, self.builds, self.records = (
            other.cache, other.ledger, other.builds, other.records)

    def ledger_at(self, path: Path) -> Ledger | None:
        """The ledger kept, if its file is as that export left it."""
        if self.ledger is not None and self.ledger[0] == stamp(path):
            return self.ledger[1]
        return None

    def keep_ledger(self, ledger: Ledger) -> None:
        found = stamp(ledger.path)
        self.ledger = (found, ledger) if found is not None else None

    def outputs_at(self, path: Path) -> Outputs | None:
        kept = self.builds.get(path)
        return kept[1] if kept is not None and kept[0] == stamp(path) else None

    def keep_outputs(self, path: Path, outputs: Outputs) -> None:
        found = stamp(path)
        if found is not None:
            self.builds[path] = (found, outputs)

    def columns_at(self, path: Path) -> Columns | None:
        if self.records is not None and self.records[:2] == (path, stamp(path)):
            return self.records[2]
        return None

    def keep_columns(self, path: Path, columns: Columns) -> None:
        found = stamp(path)
        self.records = (path, found, columns) if found is not None else None
