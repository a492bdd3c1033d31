"""What an export did, as its command says it: light to import, so that an export with
nothing to do (`inputs`) answers without loading the pipeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from exporter.contract.wire import COLLECTIONS

if TYPE_CHECKING:
    from exporter.pipeline.build import Made

# progress(phase, done, total) for the phases reading, ledger, rendering, writing site,
# indexing, encoding library and writing bundle, in this order: called with done = 0 when a
# phase starts, now and then while it runs, and with done = total when it ends.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TreeStats:
    """What bringing one tree of a build up to date did: files written, files kept or
    linked as they were, files removed."""

    written: int
    reused: int
    removed: int


@dataclass
class BuildReport:
    """What an export did, said by `summary` (and `warnings` after it)."""

    public: Counter[str] = field(default_factory=Counter)
    restricted: Counter[str] = field(default_factory=Counter)
    events: int = 0
    site: TreeStats | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # said after the summary
    made: Made | None = None  # what the export left, if asked to keep it (`build(keep=)`)
    unchanged: bool = False  # nothing the export reads changed: nothing was written

    def summary(self) -> str:
        """One line: the records exported, the files written and the ledger events."""
        counts = ", ".join(f"{name} {self.public[name] + self.restricted[name]}"
                           for name in COLLECTIONS)
        site = self.site or TreeStats(0, 0, 0)
        said = "nothing changed since the last export: " if self.unchanged else ""
        return (f"{said}exported {counts}; {sum(self.restricted.values())} restricted kept "
                f"private; {site.written} files written, {site.reused} unchanged, "
                f"{site.removed} removed; {self.events} ledger events; {self.seconds:.2f}s")
