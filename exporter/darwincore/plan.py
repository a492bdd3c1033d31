"""The plan of a Darwin Core import: the records it adds and updates, the taxa that left the
checklist, what it reports (overlaps, twins, notes, the rows left out) and its summary
line. `importer.plan_import` makes it; `importer.apply_import` writes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.darwincore.checklist import LeftOut
from exporter.project.content import SourceRecord
from exporter.shared.errors import Problem


@dataclass
class Planned:
    taxon_id: str
    id: str
    path: Path
    fields: dict[str, Any]
    body: str


@dataclass
class ImportPlan:
    dataset: str
    added: list[Planned] = field(default_factory=list)
    updated: list[Planned] = field(default_factory=list)
    unchanged: int = 0
    left: list[SourceRecord] = field(default_factory=list)  # taxa no longer in the source
    overlaps: list[str] = field(default_factory=list)  # taxa not imported: name taken
    twins: list[str] = field(default_factory=list)  # own records under a synonym's name
    notes: list[str] = field(default_factory=list)  # names kept whole, same names
    left_out: list[LeftOut] = field(default_factory=list)  # rows with problems
    rows: int = 0  # rows the checklist holds, the core's and the extensions'
    synonyms: int = 0  # synonym rows attached to their accepted taxa

    @property
    def rows_left_out(self) -> int:
        return sum(left.rows for left in self.left_out)

    def problems(self, *, strict: bool = False) -> list[Problem]:
        """The problems of the rows left out, each saying so (`LeftOut.said`)."""
        return sorted(p for left in self.left_out for p in left.said(strict=strict))

    def summary(self, *, dry_run: bool, prune: bool) -> str:
        verb = "would be" if dry_run else "were"
        gone = (f"{len(self.left)} left the checklist and {verb} deleted" if prune else
                f"{len(self.left)} left the checklist (kept; --prune deletes them)")
        twins = f"; {len(self.twins)} own records under a synonym" if self.twins else ""
        return (f"{'dry run: ' if dry_run else ''}dwc import of {self.dataset}: "
                f"{len(self.added)} added, {len(self.updated)} updated, {self.unchanged} "
                f"unchanged; {gone}; {len(self.overlaps)} not imported (name already "
                f"used){twins}; {self.synonyms} synonyms attached; left out "
                f"{self.rows_left_out:,} of {self.rows:,} rows")
