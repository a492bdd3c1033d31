"""What hubs without a key sync from: public snapshots and the public change list.

Both are NDJSON (one JSON object a line) and both are built by these functions, in the
exporter for `site_out/api/sync/` and in the sidecar for the same URLs, so the bytes agree.

- Snapshot chunks: every public record of a collection in list order, `SNAPSHOT_CHUNK`
  records a file, so an edit rewrites one chunk.
- The change list: for every record that was ever public, its latest event as this
  anonymous caller sees it — `upsert` if it is public now, `delete` if it was public once
  and is not now (deleted, or moved into an access group). Records never public are absent.
  Items are in ledger order; a hub that remembers the highest `seq` it applied takes the
  items after it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .wire import PUBLIC, encode, record_url

SNAPSHOT_CHUNK = 10_000


class EventRow(NamedTuple):
    seq: int
    at: str
    op: str
    collection: str
    id: str
    access: str
    hash: str


def snapshot_chunk(items: list[bytes]) -> bytes:
    return b"".join(item + b"\n" for item in items)


def public_changes(events: Iterable[EventRow], base_url: str) -> bytes:
    last: dict[tuple[str, str], EventRow] = {}
    ever_public: set[tuple[str, str]] = set()
    for event in events:
        key = (event.collection, event.id)
        last[key] = event
        if event.op != "delete" and event.access == PUBLIC:
            ever_public.add(key)
    lines = []
    for event in sorted((last[key] for key in ever_public), key=lambda e: e.seq):
        visible = event.op != "delete" and event.access == PUBLIC
        lines.append(encode({
            "seq": event.seq, "collection": event.collection, "id": event.id,
            "op": "upsert" if visible else "delete", "updated_at": event.at,
            "url": record_url(base_url, event.collection, event.id),
            "content_hash": event.hash if visible else None,
        }) + b"\n")
    return b"".join(lines)


def snapshot_path(collection: str, offset: int) -> str:
    return f"api/sync/{collection}/{offset}.ndjson"


CHANGES_PATH = "api/sync/changes.ndjson"
