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
from collections.abc import Collection, Iterable, Iterator
from dataclasses import astuple, dataclass, fields

from .wire import PUBLIC, encode, record_url

SNAPSHOT_CHUNK = 10_000
CHANGES_PATH = "api/sync/changes.ndjson"
OPS = ("create", "update", "access", "delete")


@dataclass(frozen=True, slots=True)
class Event:
    """One ledger event: the ledger's line, the bundle's row, the feed's raw material."""

    seq: int  # the ledger's total order (never shown to clients)
    at: str  # RFC 3339, whole seconds; one value per export, increasing from export to export
    op: str  # create, update, access, delete
    collection: str
    id: str
    hash: str  # the record's content hash after the event
    access: str  # the record's access after the event

    def line(self) -> str:
        """The event as a line of ledger.jsonl."""
        return json.dumps(dict(zip(EVENT_FIELDS, astuple(self), strict=True)),
                          separators=(",", ":"), ensure_ascii=False) + "\n"

    def live_for(self, groups: Collection[str], collections: Collection[str] | None) -> bool:
        """Whether a caller holding `groups` sees the record just after this event."""
        return (self.op != "delete" and self.access in groups
                and (collections is None or self.collection in collections))


EVENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Event))


@dataclass(frozen=True, slots=True)
class Seen:
    """An event as one caller may learn of it: its number among the events visible to that
    caller, and whether the caller sees the record after it."""

    number: int
    event: Event
    visible: bool


def visible_events(events: Iterable[Event], groups: Collection[str],
                   collections: Collection[str] | None = None) -> Iterator[Seen]:
    """The events a caller may learn of, in ledger order, numbered 1, 2, 3, ..."""
    before: dict[str, Event] = {}  # record id -> its last event
    number = 0
    for event in events:
        previous = before.get(event.id)
        was = previous is not None and previous.live_for(groups, collections)
        now = event.live_for(groups, collections)
        before[event.id] = event
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
    last: dict[tuple[str, str], Seen] = {}
    seq, updated_at = 0, None
    for seen in visible_events(events, (PUBLIC,)):
        last[(seen.event.collection, seen.event.id)] = seen
        seq, updated_at = seen.number, seen.event.at
    lines = []
    for seen in sorted(last.values(), key=lambda s: s.number):
        event = seen.event
        lines.append(encode({
            "seq": seen.number, "collection": event.collection, "id": event.id,
            "op": "upsert" if seen.visible else "delete", "updated_at": event.at,
            "url": record_url(base_url, event.collection, event.id),
            "content_hash": event.hash if seen.visible else None,
        }) + b"\n")
    return PublicChanges(b"".join(lines), seq, updated_at)


def snapshot_chunk(items: list[bytes]) -> bytes:
    return b"".join(item + b"\n" for item in items)


def snapshot_path(collection: str, offset: int) -> str:
    return f"api/sync/{collection}/{offset}.ndjson"
