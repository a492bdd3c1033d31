"""The changes feed of one snapshot for one kind of caller (its groups and collections),
computed once and then paged by binary search.

For each record, the feed since a time S holds the latest event the caller may learn of, if
it is after S. The latest of all is after S exactly when any is, so the feed since any S is
a suffix of one list: every record's latest such event, ordered by (at, collection, id).
DuckDB computes that list once per snapshot and caller kind (`service.changes_sql`); a page
is then two binary searches and a slice."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import NamedTuple

import numpy as np
import pyarrow as pa

COLLECTION_WIDTH = 20  # a collection name's most characters (the cursor's pattern)


class Change(NamedTuple):
    collection: str
    id: str
    at: str
    visible: bool
    hash: str


def _key(at: str, collection: str, record_id: str) -> bytes:
    """(at, collection, id) as bytes that sort as the tuple does: times are fixed-width and
    the collection is padded with NULs, which sort before every letter."""
    return (at + collection.ljust(COLLECTION_WIDTH, "\0") + record_id).encode()


class Feed:
    """Every record's latest event for one kind of caller, in feed order."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table  # collection, id, at, visible, hash
        ats = table.column("at").to_pylist()
        self._at = np.asarray(ats, dtype="S20")
        self._keys = np.asarray([_key(at, collection, record_id) for at, collection, record_id
                                 in zip(ats, table.column("collection").to_pylist(),
                                        table.column("id").to_pylist(), strict=True)])

    def page(self, since: str, after: tuple[str, str, str] | None, limit: int
             ) -> tuple[list[Change], str | None]:
        """Up to `limit` changes after `since` and after the cursor's item; and the time of
        the last change after `since` (None when there is none)."""
        start = int(np.searchsorted(self._at, since.encode(), side="right"))
        if after is not None:
            start = max(start, int(np.searchsorted(self._keys, _key(*after), side="right")))
        page = self._table.slice(start, limit)
        columns = [page.column(name).to_pylist() for name in Change._fields]
        until = self._at[-1].decode() if len(self._at) and self._at[-1] > since.encode() \
            else None
        return [Change(*row) for row in zip(*columns, strict=True)], until


KINDS_MAX = 256  # kinds of caller whose feeds a snapshot keeps; past it, all begin again


class Feeds:
    """A snapshot's feeds, by caller kind (its groups and collections), each kept for the
    snapshot's life. No kind's feed is pushed out for another's: were they one cache
    shared by every kind, a key's poll would be slower once callers of other kinds (a
    partner's key, say) had polled, which any key could time. Kinds are made by the keys the
    node issues, not by callers; past KINDS_MAX of them, all are forgotten and begun again.
    A feed holds a row for each record the kind may learn of (about 200 bytes a record).

    A feed is made once however many callers ask for it at the same time: they wait for the
    one making (each making held the whole event table in DuckDB's working memory, so a
    burst of polls on a fresh snapshot multiplied the sidecar's memory by the burst)."""

    def __init__(self) -> None:
        self._feeds: dict[Hashable, Feed] = {}
        self._making: dict[Hashable, asyncio.Future[Feed]] = {}

    def get(self, kind: Hashable) -> Feed | None:
        return self._feeds.get(kind)

    def kinds(self) -> list[Hashable]:
        """The kinds whose feeds are kept."""
        return list(self._feeds)

    def put(self, kind: Hashable, feed: Feed) -> None:
        if kind not in self._feeds and len(self._feeds) >= KINDS_MAX:
            self._feeds.clear()
        self._feeds[kind] = feed

    async def of(self, kind: Hashable, make: Callable[[], Awaitable[Feed]]) -> Feed:
        """The feed of `kind`: kept, being made (then waited for), or made now by `make`.
        A caller that goes away stops waiting, not the making; a making that fails fails
        for each caller waiting, and the next one tries again."""
        feed = self.get(kind)
        if feed is not None:
            return feed
        making = self._making.get(kind)
        if making is None:
            making = self._making[kind] = asyncio.ensure_future(make())
            making.add_done_callback(lambda done: self._made(kind, done))
        return await asyncio.shield(making)

    def _made(self, kind: Hashable, done: asyncio.Future[Feed]) -> None:
        del self._making[kind]
        if not done.cancelled() and done.exception() is None:
            self.put(kind, done.result())
