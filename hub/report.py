"""What one sync run did, as the CLI prints it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    total: int = 0
    notes: list[str] = field(default_factory=list)  # what the operator should know
    manifest: bytes = b""  # the node's manifest the run followed, as the node sent it

    def count(self, added: int, updated: int, removed: int) -> None:
        self.added += added
        self.updated += updated
        self.removed += removed

    def summary(self) -> str:
        counts = (f"added {self.added}, updated {self.updated}, removed {self.removed}; "
                  f"{self.total} records in the index")
        return "; ".join([*self.notes, counts])
