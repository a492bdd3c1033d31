"""What a caller may read: the service layer between HTTP (REST and MCP) and the store.

Every function takes a `View`: the snapshot as its caller may read it (`visibility`). The
visibility rule, "public, or a group this caller holds, within its collections", is
applied by the view's reads, so a function here cannot forget it; its inputs are already
checked as the endpoint table describes them (`exporter.contract.inputs`). REST handlers
and the MCP tools are thin adapters over these functions."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast
from urllib.parse import quote

from exporter.contract.bundle import DWCA_FILE
from exporter.contract.feed import SNAPSHOT_CHUNK, snapshot_chunk
from exporter.contract.page_urls import file_of, href_of
from exporter.contract.wire import (
    CHANGES_LIMIT_DEFAULT,
    COLLECTIONS,
    TIME_PATTERN,
    UUID_PATTERN,
    encode,
    list_envelope,
    record_url,
)

from . import library, taxa
from . import search as searching
from .changes import COLLECTION_WIDTH, Change, Feed
from .errors import APIError, InsufficientScope, InvalidParameter, NotFound
from .store import Snapshot
from .visibility import Caller, View, events_visible, rule, visible

__all__ = ["Caller", "View", "rule", "visible"]  # the rule's spellings, for tests


class Served(NamedTuple):
    """Bytes as served, and a strong validator of them (an ETag): equal tags, equal bytes.
    It is made from what the bytes are made of (each record's digest and the page's own
    values), so it is the same for every caller shown the same bytes."""

    body: bytes
    tag: str


async def list_records(view: View, collection: str, *, limit: int, offset: int,
                       updated_since: str | None) -> Served:
    """A page of the collection: a slice of the rows the caller sees."""
    records = view.records
    listing = view.listing(collection, updated_since)
    page = listing.rows[offset:offset + limit]
    head, tail = _envelope(view.groups, view.base_url, collection, len(page) > 0,
                           len(listing.rows), limit, offset, updated_since)
    made_of = hashlib.sha256(b"%d:%b%b" % (len(page), head, tail))
    made_of.update(records.digests(page))
    return Served(records.joined(listing, offset, offset + limit, head, tail),
                  _tag(made_of.digest()))


async def read_record(view: View, collection: str, record_id: str) -> Served:
    """One record: identical for an id that never existed and one the caller may not see."""
    row = view.row(collection, record_id)
    if row is None:
        raise NotFound(f"no record with that id in {collection}; list the collection at "
                       f"/api/{collection} to find ids")
    return Served(view.records.body(row), _tag(view.records.digest(row)))


ENVELOPES_KEPT = 1024  # list-page envelopes remembered for each kind of caller
_envelopes: dict[tuple[str, ...], Callable[..., tuple[bytes, bytes]]] = {}


def _envelope(groups: tuple[str, ...], base_url: str, collection: str, any_items: bool,
              total: int, limit: int, offset: int, updated_since: str | None
              ) -> tuple[bytes, bytes]:
    """`list_envelope`, remembered: callers ask for the same pages again and again, and
    making them (JSON, the next page's URL) was about a fifth of a list read's own work. Each
    kind of caller (the groups it reads) has a cache of its own: what one kind asks for is
    neither made faster nor pushed out for another, so no caller can time what callers of
    another kind (a partner's key, say) asked for, or how much. (Kinds are made by the keys
    the node issues, not by callers; past 256 of them, all are forgotten and begun again.)"""
    made = _envelopes.get(groups)
    if made is None:
        if len(_envelopes) >= 256:
            _envelopes.clear()
        made = _envelopes[groups] = functools.lru_cache(maxsize=ENVELOPES_KEPT)(_made_envelope)
    return made(base_url, collection, any_items, total, limit, offset, updated_since)


def _made_envelope(base_url: str, collection: str, any_items: bool, total: int, limit: int,
                   offset: int, updated_since: str | None) -> tuple[bytes, bytes]:
    return list_envelope(base_url, collection, any_items, total=total, limit=limit,
                         offset=offset, updated_since=updated_since)


def _tag(digest: bytes) -> str:
    """An ETag: 16 bytes of a SHA-256 in hex, quoted (the form `handlers.etag` gives)."""
    return f'"{digest[:16].hex()}"'


async def snapshot_file(view: View, collection: str, offset: int) -> bytes:
    """A chunk of a collection's public snapshot (public records only, whoever asks)."""
    rows = view.public_listing(collection).rows[offset:offset + SNAPSHOT_CHUNK]
    # chunks start at multiples of SNAPSHOT_CHUNK only
    if offset % SNAPSHOT_CHUNK or not len(rows):
        raise NotFound("no such snapshot file; /api/manifest lists them under sync.snapshots")
    return snapshot_chunk(view.records.bodies(rows))


async def document(view: View, name: Literal["manifest", "schema", "openapi", "index"]
                   ) -> bytes:
    """One of the node's open documents, as exported (the same for every caller)."""
    return view.document(name)


_PAGE_SEGMENTS = {"shard": re.compile(r"[0-9a-f]{2}"), "id": re.compile(UUID_PATTERN),
                  "page": re.compile(r"[1-9][0-9]{0,8}"), "collection": re.compile(r"[a-z]+")}


async def page(view: View, name: str, segments: dict[str, str]) -> bytes:
    """A page for people, as the export wrote it (pages hold public records only, so every
    caller gets the same bytes)."""
    for segment, value in segments.items():
        pattern = _PAGE_SEGMENTS.get(segment)
        if pattern is None or not pattern.fullmatch(value) or (
                segment == "collection" and value not in COLLECTIONS):
            raise NotFound("no such page; the home page / links to every page")
    data = view.page(file_of(href_of(name, segments)))
    if data is None:
        raise NotFound("no such page; the home page / links to every page")
    return data


async def public_changes(view: View) -> bytes:
    view.every_collection("the public change list")
    return view.document("changes")


# The changes feed: for each record, its latest event among the events this caller may
# learn of (the record was visible to it just before, or is just after); `upsert` if the
# caller sees the record after it, `delete` if not. Ordered by (at, collection, id), which a
# cursor names, so pages never skip or repeat and reveal nothing hidden. The feed since a
# time is a suffix of this list (see `changes`), computed once per snapshot and caller kind.
def changes_sql(groups: Sequence[str], collections: Sequence[str]) -> str:
    """The feed's query, for a caller of these lists: every record's latest event."""
    after, before = events_visible(groups, collections)
    return f"""
        WITH seen AS (
            SELECT seq, "at", collection, id, hash, {after} AS visible
            FROM events WHERE {after} OR {before}
        )
        SELECT collection, id, max("at") AS "at", arg_max(visible, seq) AS visible,
               arg_max(hash, seq) AS hash
        FROM seen GROUP BY collection, id
        ORDER BY "at", collection, id"""


_CURSOR = re.compile(f"({TIME_PATTERN})\\|([a-z]{{1,{COLLECTION_WIDTH}}})\\|({UUID_PATTERN})")


@dataclass(frozen=True)
class Position:
    """Where a page of the feed starts: after this item, written `at|collection|id`. Clients
    pass it back as the `next` link gives it."""

    at: str
    collection: str
    id: str

    def encode(self) -> str:
        return f"{self.at}|{self.collection}|{self.id}"

    @classmethod
    def decode(cls, token: str) -> Position:
        found = _CURSOR.fullmatch(token)
        if found is None or found.group(2) not in COLLECTIONS:
            raise InvalidParameter("cursor is not one this node gave; follow the `next` link "
                                   "as it is, or start again from `since`")
        return cls(*found.groups())


async def changes(view: View, *, since: str, limit: int, cursor: Position | None) -> bytes:
    """A page of the changes feed, as the JSON bytes served."""
    feed = await view.feed(changes_sql)
    base = view.base_url
    after = (cursor.at, cursor.collection, cursor.id) if cursor else None
    rows, until = feed.page(since, after, limit + 1)
    more, rows = len(rows) > limit, rows[:limit]
    next_url = None
    if more:
        last = rows[-1]
        limit_part = f"&limit={limit}" if limit != CHANGES_LIMIT_DEFAULT else ""
        next_url = (f"{base}/api/changes?since={quote(since, safe=':')}{limit_part}"
                    f"&cursor={quote(Position(last.at, last.collection, last.id).encode())}")
    # only events after `since` count: until > since
    return changes_body(base, rows, next_url, until or since)


def prepare(fresh: Snapshot, replaced: Snapshot) -> None:
    """Before a reloaded snapshot is swapped in (on a worker thread): the changes feed of
    each kind of caller that polled the snapshot it replaces, and the taxa if it had them,
    made ahead. The first poll after an export then makes nothing, so its time does not
    grow with the events it may not learn of (a making reads every event, restricted ones
    too)."""
    if taxa.made(replaced):
        taxa.taxa_of(fresh)
    db = fresh.cursor()
    for kind in replaced.feeds.kinds():
        groups, collections = cast(tuple[tuple[str, ...], tuple[str, ...]], kind)
        fresh.feeds.put(kind, Feed(db.execute(changes_sql(groups, collections))
                                   .to_arrow_table()))


def changes_page(base: str, rows: Sequence[Change], next_url: str | None, until: str
                 ) -> dict[str, Any]:
    """A page of the changes feed as data: what `changes_body` writes."""
    return {
        "items": [{"collection": row.collection, "id": row.id,
                   "op": "upsert" if row.visible else "delete", "updated_at": row.at,
                   "url": record_url(base, row.collection, row.id),
                   "content_hash": row.hash if row.visible else None}
                  for row in rows],
        "next": next_url,
        "until": until,
    }


# What JSON escapes in a string (with ensure_ascii=False, as `encode` writes).
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


def changes_body(base: str, rows: Sequence[Change], next_url: str | None, until: str
                 ) -> bytes:
    """`encode(changes_page(...))`, the same bytes, joined from the values themselves when
    none of them needs escaping (collections, ids, times, hashes and the node's URL never
    do: checked on the page at once); else by `encode`. (`encode` was a third of a changes
    request's time.)"""
    texts = [base, next_url or "", until]
    texts += [value or "" for row in rows for value in (row.collection, row.id, row.at,
                                                        row.hash)]
    if _ESCAPED.search("".join(texts)):
        return encode(changes_page(base, rows, next_url, until))
    items = ",".join(
        f'{{"collection":"{row.collection}","id":"{row.id}","op":'
        f'"{"upsert" if row.visible else "delete"}","updated_at":"{row.at}","url":'
        f'"{record_url(base, row.collection, row.id)}","content_hash":'
        f'{_string(row.hash if row.visible else None)}}}'
        for row in rows)
    return f'{{"items":[{items}],"next":{_string(next_url)},"until":"{until}"}}'.encode()


def _string(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


async def search(view: View, *, text: str, collections: tuple[str, ...] | None, limit: int,
                 mode: str, nodes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Search what this caller may read: the indexes of its groups, within its collections
    (a named collection outside the key's limits is 403, as on lists), and of the `nodes`
    given (a hub's members; a node's own id). `collections` comes as the endpoint's field
    reads it: each name once, in the node's order."""
    for name in collections or ():
        if name not in view.collections:
            raise InsufficientScope(f"this key may search {', '.join(view.collections)}, "
                                    f"not {name}")
    wanted = view.collections if collections is None else collections

    def run(snapshot: Snapshot, groups: Sequence[str]) -> dict[str, Any]:
        try:
            return searching.run(snapshot, groups, wanted, text, mode,  # type: ignore[arg-type]
                                 limit, nodes)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # tantivy's panics are BaseExceptions (pyo3)
            if isinstance(exc, Exception):
                raise
            raise APIError(f"the search engine failed on this query ({type(exc).__name__}); "
                           f"try other words, and tell the node's operator") from None

    return await view.run(run)


NO_TAXON = ("no record this node serves names that taxon; find names with /api/search?q=..., "
            "or list /api/species")


async def taxon(view: View, name: str) -> dict[str, Any]:
    """Who holds what about one taxon: the records naming it that this caller may read, by
    the node holding them (`taxa`). A name that only records the caller may not read name
    is answered as one that no record names: the same 404, in the same words."""
    found = await view.run(taxa.taxa_of)
    canonical = taxa.canonical(name)
    wanted = tuple(collection for collection in taxa.NAMING if collection in view.collections)
    readable = []
    for named in found.naming(canonical):
        row = view.row(named.collection, named.id) if named.collection in wanted else None
        if row is not None:
            readable.append((named, view.records.body(row)))
    if not readable:
        raise NotFound(NO_TAXON)
    return taxa.answer(found, name, canonical, wanted, readable)


async def ask(view: View, *, question: str, limit: int) -> dict[str, Any]:
    """A grounded answer from the library documents this caller may read (they are
    resources: a key must be allowed that collection)."""
    if "resources" not in view.collections:
        raise InsufficientScope(f"the library's documents are resources, and this key may "
                                f"read only {', '.join(view.collections)}")
    return await view.run(library.answer, question, limit)


async def download(view: View, collection: str, file: str) -> bytes:
    """A whole-collection download: public records only, the same for every caller."""
    if collection not in COLLECTIONS:
        raise NotFound(f"no collection {collection!r}; the manifest lists the downloads")
    view.collection(collection)
    body = view.download(file)
    if body is None:
        raise NotFound("no such download in this export; the manifest lists them")
    return body


async def dwca(view: View) -> bytes:
    return await download(view, "species", DWCA_FILE)


_PDF = re.compile(f"({UUID_PATTERN})\\.pdf")


async def library_file(view: View, name: str) -> bytes:
    """A library PDF, for a caller who may read its record (the same 404 otherwise)."""
    view.collection("resources")
    found = _PDF.fullmatch(name.lower())
    body = await view.library_pdf(found.group(1) if found else "")
    if body is None:
        raise NotFound("no such document in the library; GET /api/resources lists the "
                       "documents and their document_url")
    return body


def key_info(view: View, remaining: int) -> dict[str, Any]:
    """What the calling key holds: grants, rate, remaining budget, expiry."""
    key = view.caller.key
    assert key is not None  # the table makes this endpoint keyed
    body = {**key.describe(), "remaining": remaining}
    del body["revoked_at"]
    return body
