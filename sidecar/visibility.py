"""Who is asking, and what of a snapshot they may read: the visibility rule, once.

A record is visible to a caller when its access is public or a group the caller holds, in
a collection the caller may read. The rule is written here as SQL (`rule`, for DuckDB) and
in Python (`visible`), side by side; tests/test_visibility.py holds them together, and the
exporter's public change list uses the Python spelling (`feed.visible_events`).

Service functions never hold a snapshot: they get a `View`, the snapshot as one caller
may read it. Every read a view offers (a collection's list, a record by id, the search and
library indexes, a PDF, the changes feed) is already limited to the caller's groups and
collections, so no service function can forget the rule."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

import duckdb

from exporter.contract.bundle import DOWNLOADS, LIBRARY
from exporter.contract.wire import COLLECTIONS, NO_COLLECTION, PUBLIC

from .changes import Feed
from .errors import InsufficientScope, NotFound
from .keys import KeyRecord
from .records import Listing, Records
from .store import Snapshot, Store

P = ParamSpec("P")
T = TypeVar("T")


class Caller:
    """Who is asking: anonymous, or a key with its groups and collection limits. What it may
    read is worked out once, when the request is admitted, not at each question asked of it."""

    __slots__ = ("key", "access", "groups", "collections")
    key: KeyRecord | None
    access: str  # the X-Node-Access value: `open` or `key:<key id>`
    groups: tuple[str, ...]  # the access values it reads: public, and its key's groups
    collections: tuple[str, ...]  # the collections it may read

    def __init__(self, key: KeyRecord | None = None) -> None:
        self.key = key
        self.access = f"key:{key.id}" if key else "open"
        self.groups = (PUBLIC, *key.groups) if key else (PUBLIC,)
        self.collections = tuple(key.collections) if key and key.collections else COLLECTIONS

    def __repr__(self) -> str:
        return f"Caller({self.access})"


# The caller's lists are written into the SQL as literals (quoted): DuckDB binds a list
# parameter at several times the cost of the whole rest of a record read.
def rule(groups: Sequence[str], collections: Sequence[str], access: str = "access",
         collection: str = "collection") -> str:
    """The rule, as SQL over the named columns."""
    return (f"(list_contains({_literal(groups)}, {access}) "
            f"AND list_contains({_literal(collections)}, {collection}))")


def visible(groups: Sequence[str], collections: Sequence[str], access: str,
            collection: str) -> bool:
    """The rule, in Python, for one record."""
    return access in groups and collection in collections


def _literal(values: Sequence[str]) -> str:
    return "[" + ", ".join("'" + value.replace("'", "''") + "'" for value in values) + "]"


def events_visible(groups: Sequence[str], collections: Sequence[str]) -> tuple[str, str]:
    """SQL: the caller sees the record just after the event; it saw it just before."""
    after = f"(op <> 'delete' AND {rule(groups, collections)})"
    before = f"(prev_live AND {rule(groups, collections, 'prev_access', 'prev_collection')})"
    return after, before


class View:
    """The snapshot a request is answered from, as its caller may read it."""

    __slots__ = ("caller", "_snapshot", "_store")

    def __init__(self, store: Store, snapshot: Snapshot, caller: Caller) -> None:
        self.caller = caller
        self._snapshot = snapshot
        self._store = store

    @classmethod
    async def of(cls, store: Store, caller: Caller) -> View:
        """The store's current snapshot, for this caller."""
        return cls(store, await store.current(), caller)

    @property
    def groups(self) -> tuple[str, ...]:
        return self.caller.groups

    @property
    def collections(self) -> tuple[str, ...]:
        return self.caller.collections

    @property
    def base_url(self) -> str:
        return self._snapshot.base_url

    @property
    def origins(self) -> list[str]:
        """The web origins whose pages may call the tool interface."""
        return self._snapshot.meta.origins

    @property
    def records(self) -> Records:
        """The snapshot's records, to read the rows this view found (`listing`, `row`)."""
        return self._snapshot.records

    def collection(self, name: str) -> str:
        """A collection this caller may read: one that does not exist is 404; one outside
        the key's limits 403."""
        if name not in COLLECTIONS:
            raise NotFound(NO_COLLECTION)  # the CDN's words too: the name is not echoed
        if name not in self.collections:
            raise InsufficientScope(f"this key may read {', '.join(self.collections)}, "
                                    f"not {name}")
        return name

    def every_collection(self, what: str) -> None:
        """For what covers every collection: a key limited to some is refused."""
        if len(self.collections) < len(COLLECTIONS):
            raise InsufficientScope(f"{what} covers every collection and this key may read "
                                    f"only {', '.join(self.collections)}; use /api/changes")

    def listing(self, collection: str, updated_since: str | None = None) -> Listing:
        """The rows of a collection this caller sees, in list order."""
        records = self.records
        name = self.collection(collection)
        if updated_since is None:
            return records.listed(name, self.groups)
        return records.listed_since(name, self.groups, updated_since)

    def public_listing(self, collection: str) -> Listing:
        """The public rows of a collection this caller may read (what every caller gets)."""
        return self.records.listed(self.collection(collection), [PUBLIC])

    def row(self, collection: str, record_id: str) -> int | None:
        """The row of a record this caller sees, or None: the same steps for an id that
        never existed and one the caller may not see (an unknown id is checked as the
        first record is, and refused; `&`, not `and`: both checks run)."""
        records = self.records
        name = self.collection(collection)
        row = records.row(record_id.lower())
        at = 0 if row is None else row
        seen = bool(records.collection) and (records.collection[at] == name) & \
            visible(self.groups, self.collections, records.access[at], records.collection[at])
        return row if row is not None and seen else None

    def document(self, name: str) -> bytes:
        """One of the node's open documents, as exported (the same for every caller)."""
        snapshot = self._snapshot
        return {"manifest": snapshot.manifest, "schema": snapshot.schema,
                "openapi": snapshot.openapi, "index": snapshot.index,
                "changes": snapshot.public_changes}[name]

    def page(self, relative: str) -> bytes | None:
        """A page for people (pages hold public records only)."""
        return self._snapshot.page(relative)

    def download(self, file: str) -> bytes | None:
        """A download of public records (the same for every caller)."""
        try:
            return (self._snapshot.path / DOWNLOADS / file).read_bytes()
        except FileNotFoundError:
            return None

    async def library_pdf(self, record_id: str) -> bytes | None:
        """The PDF of a library document this caller sees, from the folder of its access
        group (`library.private`), or None."""
        row = self.row(self.collection("resources"), record_id)
        if row is None:
            return None
        path = self._snapshot.path / LIBRARY / self.records.access[row] / f"{record_id}.pdf"
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def run(self, fn: Callable[Concatenate[Snapshot, Sequence[str], P], T],
                  *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(snapshot, groups, ...)` on a worker thread, with this caller's groups: the
        indexes of search and the library are read through them."""
        groups = self.groups
        return await self._store.query(lambda snapshot, _: fn(snapshot, groups, *args,
                                                               **kwargs), on=self._snapshot)

    async def feed(self, make: Callable[[Sequence[str], Sequence[str]], str]) -> Feed:
        """The changes feed of this caller's kind (its groups and collections): the rows
        of the query `make(groups, collections)`, made once per snapshot and kind."""
        kind = (tuple(sorted(set(self.groups))), tuple(self.collections))

        def run(snapshot: Snapshot, db: duckdb.DuckDBPyConnection) -> Feed:
            return Feed(db.execute(make(*kind)).to_arrow_table())

        snapshot = self._snapshot
        return await snapshot.feeds.of(kind, lambda: self._store.query(run, on=snapshot))

