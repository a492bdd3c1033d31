"""How a member's last sync went: `<name>.status.json` beside its copy, and the line the
operator reads.

The file is what a reader of the hub folder learns of a member without opening its copy:
whether the last attempt succeeded, when it was made, when the last success was (the copy
is as of then: stale while attempts fail), the last error, the records the copy holds, the
node's id, name and licence (None: the node's manifest names none). It is replaced whole at
each write, so a reader sees one run's status or the next's."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from exporter.shared.fileversion import version_at

from .errors import one_line

LINE_ERROR = 300  # characters of an error on a member's line


@dataclass
class Status:
    member: str
    url: str
    private: bool
    ok: bool | None = None  # the last attempt's result; None: never attempted
    stale: bool = False  # the last attempt failed: the copy is as of `last_success`
    last_attempt: str | None = None  # RFC 3339, UTC
    last_success: str | None = None
    last_error: str | None = None  # one line
    seconds: float | None = None  # how long the last attempt took
    records: int | None = None  # what the copy holds (None: no copy)
    # The last attempt that changed, or may have changed, the copy's records (a run that
    # applied changes, or one that failed partway): the copy is as of then. `changes`
    # counts those attempts (two may fall in one second).
    last_change: str | None = None
    changes: int = 0
    # Whether this status was written to its file (not itself written): a hub export after
    # a sync trusts the status files only when every one was.
    saved: bool = True
    added: int = 0  # the last successful run's changes
    updated: int = 0
    removed: int = 0
    notes: list[str] = field(default_factory=list)  # what that run said besides its counts
    node_id: str | None = None
    node_name: str | None = None
    licence: str | None = None  # the node's licence, as its manifest names it
    # The version of the copy in members/ (its file's and its DuckDB log's) at which it was
    # last found to hold open records only: a run that finds the same version does not
    # read every record again (`network.checked_open`).
    checked: str | None = None
    # Who the node is, as its last successful sync found it (hub/trust.py): the
    # fingerprint of the key its manifest was signed by, the hub.toml fingerprint in force
    # then (`key_anchor`: a key reached by rotation from it), and its base URL.
    key_fingerprint: str | None = None
    key_anchor: str | None = None
    base_url: str | None = None
    key_notes: list[str] = field(default_factory=list)  # a key pinned or rotated, that run

    def unlicensed(self) -> bool:
        """Whether the copy, as of its last success, is of a node that names no licence."""
        return (self.records is not None and self.licence is None
                and self.last_success is not None)

    def line(self) -> str:
        """One line: `name: ok: ...counts...` or `name: failed: error; stale since ...`."""
        if self.ok:
            counts = (f"added {self.added}, updated {self.updated}, removed {self.removed}; "
                      f"{self.records or 0} records")
            return f"{self.member}: ok: " + "; ".join([*self.notes, counts])
        error = one_line(self.last_error or "not synced", LINE_ERROR)
        if self.last_success is None:
            return f"{self.member}: failed: {error}; no copy yet"
        return (f"{self.member}: failed: {error}; stale since {self.last_success}, "
                f"{self.records or 0} records kept")


def read_status(path: Path, member: str, url: str, private: bool) -> Status:
    """The member's status file, or a fresh status where there is none (or it is not one:
    the file is the hub's own record, rewritten by the next sync)."""
    fresh = Status(member, url, private)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return fresh
    if not isinstance(data, dict):
        return fresh
    names = {f.name: f for f in fields(Status)}
    kept: dict[str, Any] = {}
    for name, value in data.items():
        if name in names and name not in ("member", "url", "private", "saved"):
            kept[name] = value
    try:
        status = Status(member, url, private, **kept)
    except TypeError:
        return fresh
    return status if _typed(status) else fresh


def _typed(status: Status) -> bool:
    texts = (status.last_attempt, status.last_success, status.last_error, status.node_id,
             status.node_name, status.licence, status.last_change, status.checked,
             status.key_fingerprint, status.key_anchor, status.base_url)
    counts = (status.added, status.updated, status.removed, status.changes)
    return (all(t is None or isinstance(t, str) for t in texts)
            and all(isinstance(n, int) for n in counts)
            and (status.records is None or isinstance(status.records, int))
            and all(isinstance(notes, list) and all(isinstance(n, str) for n in notes)
                    for notes in (status.notes, status.key_notes)))


def copy_version(copy: Path) -> str:
    """A copy's version, its file's and its DuckDB log's (`fileversion.version_at`), as the
    status file keeps it (`checked`): another once anything wrote to the copy."""
    log = copy.with_name(copy.name + ".wal")
    return json.dumps([version_at(copy), version_at(log)])


def write_status(path: Path, status: Status) -> None:
    """Replace the status file at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    data = asdict(status)
    del data["saved"]
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    os.replace(temporary, path)


def total_line(statuses: list[Status]) -> str:
    failed = sum(1 for status in statuses if not status.ok)
    records = sum(status.records or 0 for status in statuses)
    return (f"total: {len(statuses)} members, {len(statuses) - failed} ok, {failed} failed; "
            f"{records} records")
