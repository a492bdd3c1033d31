"""Events and what each caller may learn of them: the ledger's event type, and the NDJSON
files that hubs without a key sync from (public snapshots and the public change list).

An event is *visible* to a caller when the record was visible to it just before the event
or is just after it (live, in a group it holds, in a collection it may read). Everything a
caller is told about changes — the public change list, the keyed changes feed, `until`,
cursors, the manifest's `node.updated_at` and `sync.seq` — is computed from the events
visible to that caller only, so an edit of a restricted record changes no byte that a
caller without its group can read.

- Snapshot chunks: every public record of a collection in list order, `SNAPSHOT_CHUNK`
  records a file, so an edit rewrites one chunk.
- The change list: for every record that was ever public, its latest visible event as an
  anonymous caller sees it — `upsert` if it is public now, `delete` if it was public once
  and is not now (deleted, or moved into an access group). `seq` numbers the events visible
  to anonymous callers (1, 2, 3, ...), so its gaps say nothing of restricted records; a hub
  that remembers the highest `seq` it applied takes the lines after it."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .wire import PUBLIC, encode, record_url

SNAPSHOT_CHUNK = 10_000
CHANGES_PATH = "api/sync/changes.ndjson"
OPS = ("create", "update", "access", "delete")
# What `encode` escapes in a string (ensure_ascii=False): quotes, backslashes, control chars.
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


class Event(NamedTuple):
    """One ledger event: the ledger's line, the bundle's row, the feed's raw material. (A
    named tuple: a ledger of 100,000 events makes that many at each export, three times
    faster than a frozen dataclass does.)"""

    seq: int  # the ledger's total order (never shown to clients)
    at: str  # RFC 3339, whole seconds; one value per export, increasing from export to export
    op: str  # create, update, access, delete
    collection: str
    id: str
    hash: str  # the record's content hash after the event
    access: str  # the record's access after the event

    def line(self) -> str:
        """The event as a line of ledger.jsonl: as `json.dumps` writes it (compact, UTF-8),
        formatted directly when no value needs escaping (the ledger checks their form)."""
        texts = (self.at, self.op, self.collection, self.id, self.hash, self.access)
        if type(self.seq) is int and all(type(text) is str for text in texts) \
                and not _ESCAPED.search("".join(texts)):
            return (f'{{"seq":{self.seq},"at":"{self.at}","op":"{self.op}",'
                    f'"collection":"{self.collection}","id":"{self.id}","hash":"{self.hash}",'
                    f'"access":"{self.access}"}}\n')
        return json.dumps({"seq": self.seq, "at": self.at, "op": self.op,
                           "collection": self.collection, "id": self.id, "hash": self.hash,
                           "access": self.access},
                          separators=(",", ":"), ensure_ascii=False) + "\n"

    def live_for(self, groups: Collection[str], collections: Collection[str] | None) -> bool:
        """Whether a caller holding `groups` sees the record just after this event."""
        return (self.op != "delete" and self.access in groups
                and (collections is None or self.collection in collections))


EVENT_FIELDS: tuple[str, ...] = Event._fields


class Seen(NamedTuple):
    """An event as one caller may learn of it: its number among the events visible to that
    caller, and whether the caller sees the record after it."""

    number: int
    event: Event
    visible: bool


def visible_events(events: Iterable[Event], groups: Collection[str],
                   collections: Collection[str] | None = None) -> Iterator[Seen]:
    """The events a caller may learn of, in ledger order, numbered 1, 2, 3, ..."""
    before: dict[str, bool] = {}  # record id -> whether the caller saw it after its last event
    number = 0
    for event in events:
        was = before.get(event.id, False)
        now = before[event.id] = event.live_for(groups, collections)
        if was or now:
            number += 1
            yield Seen(number, event, now)


@dataclass(frozen=True)
class PublicChanges:
    """The public change list and what the manifest says of it."""

    body: bytes
    seq: int  # how many events anonymous callers may learn of
    updated_at: str | None  # the time of the last of them


def public_changes(events: Iterable[Event], base_url: str) -> PublicChanges:
    last: dict[tuple[str, str], Seen] = {}  # (collection, id) -> its last visible event
    seen = None
    for seen in visible_events(events, (PUBLIC,)):
        key = (seen.event.collection, seen.event.id)
        last.pop(key, None)  # a dict keeps insertion order: the latest event goes last
        last[key] = seen
    seq, updated_at = (seen.number, seen.event.at) if seen else (0, None)
    return PublicChanges(_change_lines(list(last.values()), base_url), seq, updated_at)


def change_line(seen: Seen, base_url: str) -> bytes:
    """One line of the change list, as `public_changes` writes it."""
    return _change_lines([seen], base_url)


def _change_lines(latest: list[Seen], base_url: str) -> bytes:
    """The change list's lines, as `encode` writes them. Ledger values never need escaping
    (the ledger checks their form), so the lines are formatted directly; if anything would
    need escaping, every line goes through `encode` instead."""
    url = record_url(base_url, "{collection}", "{id}")
    plain = "".join((url, *(f"{s.event.collection}{s.event.id}{s.event.at}{s.event.hash}"
                            for s in latest)))
    if _ESCAPED.search(plain):
        return b"".join(encode(_change(s, base_url)) + b"\n" for s in latest)
    lines = []
    for s in latest:
        event = s.event
        hash_ = f'"{event.hash}"' if s.visible else "null"
        lines.append(
            f'{{"seq":{s.number},"collection":"{event.collection}","id":"{event.id}",'
            f'"op":"{"upsert" if s.visible else "delete"}","updated_at":"{event.at}",'
            f'"url":"{record_url(base_url, event.collection, event.id)}",'
            f'"content_hash":{hash_}}}\n')
    return "".join(lines).encode("utf-8")


def _change(seen: Seen, base_url: str) -> dict[str, object]:
    """One line of the change list."""
    event = seen.event
    return {
        "seq": seen.number, "collection": event.collection, "id": event.id,
        "op": "upsert" if seen.visible else "delete", "updated_at": event.at,
        "url": record_url(base_url, event.collection, event.id),
        "content_hash": event.hash if seen.visible else None,
    }


def snapshot_chunk(items: Sequence[bytes | memoryview]) -> bytes:
    """The items, each followed by a newline (joined once, not each copied first)."""
    return b"\n".join(items) + b"\n" if items else b""


def snapshot_path(collection: str, offset: int) -> str:
    return f"api/sync/{collection}/{offset}.ndjson"
