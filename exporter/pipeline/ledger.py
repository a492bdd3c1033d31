"""The ledger: every create, update, access change and delete, in one total order.

It is a JSON-lines file beside the content that the publisher commits, so the same
committed content exports to the same bytes anywhere. Timestamps come from here, never
from hand edits: a record's `updated_at` moves only when its content or access changes.

An export's events become durable with the build that publishes them, never before: the
build carries them (`Ledger.pending`), the switch publishes them, and only then are they
appended to the file. An export killed before the switch leaves the file as the last
published build left it; one killed after it, before or while appending, has its events
appended by the next export (`catch_up`), from the published build's copy."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from exporter.contract.feed import EVENT_FIELDS, OPS, Event
from exporter.contract.wire import (
    COLLECTIONS,
    TIME_PATTERN,
    UUID_PATTERN,
    format_time,
    is_time,
    parse_time,
)
from exporter.shared.errors import ExportError
from exporter.shared.fileversion import version_at


class Entry(NamedTuple):
    """What the ledger knows of one record now."""

    collection: str
    created_at: str
    updated_at: str
    hash: str
    access: str
    deleted: bool


class Current(NamedTuple):
    """A record as the content has it now, reduced to what the ledger compares."""

    collection: str
    id: str
    hash: str
    access: str


class Ledger:
    def __init__(self, path: Path, events: list[Event], valid_size: int,
                 version: tuple[int, ...] | None = None) -> None:
        self.path = path
        self.events = events
        self._valid_size = valid_size
        self._version = version  # the file's, as read or last written
        self.entries: dict[str, Entry] = {}
        for event in events:
            self._apply(event)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """Read the ledger. A torn last line (an export killed while appending) is ignored
        and cut off at the next append; any other damage is an error naming the line."""
        version = version_at(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, [], 0)
        except IsADirectoryError:
            raise ExportError(f"{path.name}: is a folder, but the ledger is a file (JSON lines "
                              f"beside content/); move the folder away and restore "
                              f"{path.name} from version control") from None
        except OSError as exc:
            raise ExportError(f"{path.name}: cannot be read ({exc.strerror}); make it a "
                              f"readable file, or restore it from version control") from None
        valid = raw.rfind(b"\n") + 1  # a last piece without a newline is torn
        events = _written(raw[:valid])
        if events is not None:
            return cls(path, events, valid, version)
        lines = raw[:valid].split(b"\n")[:-1]
        try:  # lines not as `Event.line` writes them, in one pass of the JSON parser
            rows = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]",
                              parse_int=_whole)
            events = [Event(**row) for row in rows]
            if all(_sound(event, previous) for event, previous in
                   zip(events, [0, *(e.seq for e in events)], strict=False)):
                return cls(path, events, valid, version)
        except (ValueError, TypeError):
            pass
        events = []  # something is wrong: find the line and say which
        for number, line in enumerate(lines, start=1):
            if line.strip():
                events.append(_parse(line, path, number, events[-1].seq if events else 0))
        return cls(path, events, valid, version)

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else 0

    @property
    def last_at(self) -> str | None:
        return self.events[-1].at if self.events else None

    def reconcile(self, current: Iterable[Current], now: datetime, *,
                  whole: bool = True) -> list[Event]:
        """The events that bring the ledger to the content as it is now (not yet applied).
        `whole`: `current` is every record, and a record it lacks was deleted; otherwise it
        is some records only (an export of edited files, `delta`), and nothing is deleted."""
        at = format_time(now)
        if self.last_at and at <= self.last_at:
            # Each export's events get a time of their own, after every earlier event, so
            # that `since` = the last time a caller saw is exact. With the real clock `build`
            # never comes here (it waits for its second, and stops when the clock is behind
            # the ledger); a time given by the caller may.
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
        for record_id, entry in self.entries.items() if whole else ():
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
        self.write(events)
        self.apply(events)

    def apply(self, events: list[Event]) -> None:
        """Take the events into the entries, in memory only (`write` makes them durable)."""
        for event in events:
            self.events.append(event)
            self._apply(event)

    def write(self, events: list[Event]) -> None:
        """Write the events durably at the end of the file."""
        if not events:
            return
        self._append(event.line().encode("utf-8") for event in events)  # (not joined: 30 MB
        # at 100,000 events, at the end of an export, when its memory is at its highest)

    def _append(self, data: Iterable[bytes]) -> None:
        try:
            with open(self.path, "ab") as handle:
                handle.truncate(self._valid_size)
                handle.writelines(data)
                handle.flush()
                os.fsync(handle.fileno())
                self._valid_size = handle.tell()
        except OSError as exc:
            raise ExportError(f"{self.path.name}: cannot be written ({exc.strerror}); make it "
                              f"a writable file and export again") from None
        self._version = version_at(self.path)

    def writable(self) -> None:
        """Refuse now, before anything is published, a ledger file that could not be
        appended to once it is."""
        try:
            with open(self.path, "ab"):
                pass
        except OSError as exc:
            raise ExportError(f"{self.path.name}: cannot be written ({exc.strerror}); make it "
                              f"a writable file and export again") from None
        if self._version is None:
            self._version = version_at(self.path)  # (made empty just now)

    def pending(self, events: list[Event]) -> bytes:
        """What a build keeps of the events it publishes (`catch_up` reads it): the file as
        this export found it (its version and valid size), then the lines to append."""
        head = {"version": self._version, "size": self._valid_size}
        return (json.dumps(head).encode() + b"\n"
                + b"".join(event.line().encode("utf-8") for event in events))

    def _apply(self, event: Event) -> None:
        previous = self.entries.get(event.id)
        created = (previous.created_at if previous and not previous.deleted
                   and event.op != "create" else event.at)
        self.entries[event.id] = Entry(event.collection, created, event.at, event.hash,
                                       event.access, event.op == "delete")


def catch_up(path: Path, pending: bytes | None) -> bool:
    """Append to the ledger file the events the published build holds (`Ledger.pending`)
    that it lacks: those of an export killed after its switch, before its append ended.
    Where the file is no longer as that export found it, and not that plus part of its
    events, it was written since by something else (a `git checkout`), and is left alone.
    True where events were appended."""
    if not pending:
        return False
    head, _, lines = pending.partition(b"\n")
    try:
        found = json.loads(head)
        version, size = found["version"], found["size"]
        if not isinstance(size, int) or size < 0:
            return False
    except (ValueError, KeyError, TypeError):
        return False  # a build of an older fednode, or damaged: nothing is trusted
    if not lines:
        return False
    now = version_at(path)
    if now is not None and version is not None and list(now) == version:
        torn = False  # untouched since: nothing of the events reached it
    else:
        try:
            with open(path, "rb") as handle:
                handle.seek(size)
                tail = handle.read(len(lines) + 1)
        except OSError:
            return False
        # Part of the events and no more, after exactly the bytes it was found with.
        torn = now is not None and now[1] > size and lines.startswith(tail) and tail != lines
        if not torn:
            return False
    ledger = Ledger(path, [], size, None)
    ledger._append([lines])
    return True


_TIME = re.compile(TIME_PATTERN)
_ID = re.compile(UUID_PATTERN)
_ACCESS = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_HASH = re.compile(r"sha256:[0-9a-f]{64}")
SEQ_DIGITS = 18  # a seq is below 10**18: it fits in 64 bits, as readers of the feed keep it


# field -> (check, what the value must be)
_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "seq": (lambda v: type(v) is int and 0 <= v < 10**SEQ_DIGITS,
            f"a whole number of at most {SEQ_DIGITS} digits"),
    "at": (is_time, "a time like 2026-01-31T12:00:00Z"),
    "op": (lambda v: v in OPS, f"one of {', '.join(OPS)}"),
    "collection": (lambda v: v in COLLECTIONS, f"one of {', '.join(COLLECTIONS)}"),
    "id": (lambda v: isinstance(v, str) and _ID.fullmatch(v) is not None,
           "a lowercase UUID in quotes"),
    "hash": (lambda v: isinstance(v, str) and _HASH.fullmatch(v) is not None,
             "sha256: and 64 hex digits, in quotes"),
    "access": (lambda v: isinstance(v, str) and _ACCESS.fullmatch(v) is not None,
               "public or an access group name, in quotes"),
}
_RESTORE = "the ledger was edited or merged badly: restore it from version control"


# A line exactly as `Event.line` writes it, its values of the forms `_FIELDS` requires (and
# so free of JSON escapes): its groups are the values.
_LINE = re.compile(
    r'^\{"seq":(0|[1-9][0-9]{0,' + str(SEQ_DIGITS - 1) + r'}),"at":"(' + _TIME.pattern
    + r')","op":"(' + "|".join(OPS)
    + r')","collection":"(' + "|".join(COLLECTIONS) + r')","id":"(' + _ID.pattern
    + r')","hash":"(' + _HASH.pattern + r')","access":"(' + _ACCESS.pattern + r')"\}$',
    re.MULTILINE)


def _written(data: bytes) -> list[Event] | None:
    """The events of a ledger whose every line is as `Event.line` writes it, in increasing
    seq order; None if any line is not (the caller then parses it as JSON)."""
    text = data.decode("utf-8", errors="replace")
    found = _LINE.findall(text)  # a match is a whole line: one per line at most
    if len(found) != text.count("\n"):
        return None
    if not all(is_time(at) for at in {f[1] for f in found}):  # each second once
        return None
    events = [Event(int(f[0]), f[1], f[2], f[3], f[4], f[5], f[6]) for f in found]
    previous = 0
    for event in events:
        if event.seq <= previous:
            return None
        previous = event.seq
    return events


def _whole(digits: str) -> int:
    """A JSON integer of the ledger; one far too long for a seq is not turned into a number
    at all (Python refuses to past 4,300 digits, with advice for programmers)."""
    if len(digits) > 2 * SEQ_DIGITS:
        raise ValueError(f"a number of {len(digits)} digits")
    return int(digits)


def _sound(event: Event, previous_seq: int) -> bool:
    """Every field of the form `_FIELDS` requires, and the seq after the one before."""
    return (all(check(getattr(event, name)) for name, (check, _) in _FIELDS.items())
            and event.seq > previous_seq)


def _parse(line: bytes, path: Path, number: int, previous_seq: int) -> Event:
    where = f"{path.name}:{number}"
    try:
        data = json.loads(line, parse_int=_whole)
    except ValueError as exc:
        raise ExportError(f"{where}: not a ledger event ({exc}); {_RESTORE}") from None
    if not isinstance(data, dict):
        raise ExportError(f"{where}: not a ledger event (a JSON object); {_RESTORE}")
    for name, (check, expected) in _FIELDS.items():
        if name not in data:
            raise ExportError(f"{where}: {name}: missing; {_RESTORE}")
        if not check(data[name]):
            raise ExportError(f"{where}: {name}: {_show(data[name])} is not {expected}; "
                              f"{_RESTORE}")
    event = Event(**{name: data[name] for name in EVENT_FIELDS})
    if event.seq <= previous_seq:
        raise ExportError(f"{where}: seq: {event.seq} is not after {previous_seq}; {_RESTORE}")
    return event


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."
