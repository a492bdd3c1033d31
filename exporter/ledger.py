"""The ledger: every create, update, access change and delete, in one total order.

It is a JSON-lines file beside the content that the publisher commits, so the same
committed content exports to the same bytes anywhere. Timestamps come from here, never
from hand edits: a record's `updated_at` moves only when its content or access changes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from .contract.feed import EVENT_FIELDS, OPS, Event
from .contract.wire import COLLECTIONS, format_time, parse_time
from .errors import ExportError


@dataclass(frozen=True)
class Entry:
    """What the ledger knows of one record now."""

    collection: str
    created_at: str
    updated_at: str
    hash: str
    access: str
    deleted: bool


@dataclass(frozen=True)
class Current:
    """A record as the content has it now, reduced to what the ledger compares."""

    collection: str
    id: str
    hash: str
    access: str


class Ledger:
    def __init__(self, path: Path, events: list[Event], valid_size: int) -> None:
        self.path = path
        self.events = events
        self._valid_size = valid_size
        self.entries: dict[str, Entry] = {}
        for event in events:
            self._apply(event)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """Read the ledger. A torn last line (an export killed while appending) is ignored
        and cut off at the next append; any other damage is an error naming the line."""
        if not path.exists():
            return cls(path, [], 0)
        raw = path.read_bytes()
        valid = raw.rfind(b"\n") + 1  # a last piece without a newline is torn
        lines = raw[:valid].split(b"\n")[:-1]
        try:  # the common case, in one pass of the JSON parser
            rows = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
            events = [Event(**row) for row in rows]
            if all(_sound(event, previous) for event, previous in
                   zip(events, [0, *(e.seq for e in events)], strict=False)):
                return cls(path, events, valid)
        except (ValueError, TypeError):
            pass
        events = []  # something is wrong: find the line and say which
        for number, line in enumerate(lines, start=1):
            if line.strip():
                events.append(_parse(line, path, number, events[-1].seq if events else 0))
        return cls(path, events, valid)

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else 0

    @property
    def last_at(self) -> str | None:
        return self.events[-1].at if self.events else None

    def reconcile(self, current: Iterable[Current], now: datetime) -> list[Event]:
        """The events that bring the ledger to the content as it is now (not yet applied)."""
        at = format_time(now)
        if self.last_at and at <= self.last_at:
            # Each export's events get a time of their own, after every earlier event, so
            # that `since` = the last time a caller saw is exact. `build` waits for the next
            # second rather than come here; a clock behind the ledger does.
            at = format_time(parse_time(self.last_at) + timedelta(seconds=1))
        rank = {name: index for index, name in enumerate(COLLECTIONS)}
        pending: list[tuple[str, str, str, str, str]] = []
        seen: set[str] = set()
        for record in current:
            seen.add(record.id)
            entry = self.entries.get(record.id)
            if entry is not None and not entry.deleted and entry.collection != record.collection:
                pending.append(("delete", entry.collection, record.id, entry.hash, entry.access))
                entry = None
            if entry is None or entry.deleted:
                op = "create"
            elif entry.hash == record.hash:
                continue
            else:
                op = "access" if entry.access != record.access else "update"
            pending.append((op, record.collection, record.id, record.hash, record.access))
        for record_id, entry in self.entries.items():
            if record_id not in seen and not entry.deleted:
                pending.append(("delete", entry.collection, record_id, entry.hash, entry.access))
        # Deletes first: a record moved to another collection leaves the old one before it
        # enters the new one, whatever the collections' order.
        pending.sort(key=lambda p: (p[0] != "delete", rank[p[1]], p[2]))
        seq = self.last_seq
        events = []
        for op, collection, record_id, digest, access in pending:
            seq += 1
            events.append(Event(seq, at, op, collection, record_id, digest, access))
        return events

    def append(self, events: list[Event]) -> None:
        """Apply the events and write them durably at the end of the file."""
        if not events:
            return
        with open(self.path, "ab") as handle:
            handle.truncate(self._valid_size)
            handle.write("".join(event.line() for event in events).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
            self._valid_size = handle.tell()
        for event in events:
            self.events.append(event)
            self._apply(event)

    def _apply(self, event: Event) -> None:
        previous = self.entries.get(event.id)
        created = (previous.created_at if previous and not previous.deleted
                   and event.op != "create" else event.at)
        self.entries[event.id] = Entry(event.collection, created, event.at, event.hash,
                                       event.access, event.op == "delete")


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")


def _sound(event: Event, previous_seq: int) -> bool:
    return (event.op in OPS and event.collection in COLLECTIONS and event.seq > previous_seq
            and isinstance(event.at, str) and _TIME.match(event.at) is not None)


def _parse(line: bytes, path: Path, number: int, previous_seq: int) -> Event:
    where = f"{path.name}:{number}"
    try:
        data = json.loads(line)
        event = Event(**{key: data[key] for key in EVENT_FIELDS})
    except (ValueError, KeyError, TypeError) as exc:
        raise ExportError(f"{where}: not a ledger event ({exc}); restore the file from version "
                          f"control") from None
    if event.op not in OPS or event.collection not in COLLECTIONS:
        raise ExportError(f"{where}: unknown op or collection in the ledger")
    if event.seq <= previous_seq:
        raise ExportError(f"{where}: sequence {event.seq} is not after {previous_seq}; the "
                          f"ledger was edited or merged badly, restore it from version control")
    if not _sound(event, previous_seq):
        raise ExportError(f"{where}: at: {event.at!r} is not a time like 2026-01-31T12:00:00Z")
    return event
