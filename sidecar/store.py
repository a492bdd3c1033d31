"""The bundle, loaded into DuckDB, and the queries the handlers need.

DuckDB is kept off the event loop: queries run in a small thread pool, each thread with
its own cursor, under a time limit. A new export is picked up without a restart: the
bundle's meta.json is checked at most once a second and a fresh snapshot swapped in."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import duckdb

from exporter.contract import bundle
from exporter.contract.feed import SNAPSHOT_CHUNK, snapshot_chunk
from exporter.contract.wire import PUBLIC

from .errors import APIError

log = logging.getLogger("fednode.sidecar")
T = TypeVar("T")


class BundleMissing(Exception):
    """No usable bundle at the configured path."""


@dataclass(frozen=True)
class Page:
    items: list[bytes]
    total: int


class Snapshot:
    """One bundle, loaded. Immutable once built; replaced whole on reload."""

    def __init__(self, path: Path) -> None:
        meta_path = path / bundle.META
        try:
            self.meta = bundle.Meta.from_json(meta_path.read_bytes())
            self.stamp = meta_path.stat().st_mtime_ns
            self.manifest = (path / bundle.MANIFEST).read_bytes()
            self.schema = (path / bundle.SCHEMA).read_bytes()
            self.index = (path / bundle.INDEX).read_bytes()
            self.public_changes = (path / bundle.CHANGES).read_bytes()
        except (OSError, bundle.BundleError) as exc:
            raise BundleMissing(f"no usable bundle at {path}: {exc}") from None
        self.base_url: str = self.meta.base_url
        self.build: str = self.meta.build
        self._db = duckdb.connect(":memory:")
        records = str(path / bundle.RECORDS)
        self._db.execute(f"CREATE TABLE records AS SELECT * FROM read_parquet('{_quote(records)}')"
                         " ORDER BY collection, position")
        self._db.execute("CREATE INDEX records_id ON records (id)")
        events = str(path / bundle.EVENTS)
        self._db.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{_quote(events)}')"
                         " ORDER BY seq")
        last = self._db.execute('SELECT max("at") FROM events').fetchone()
        self.until: str | None = last[0] if last else None
        self._local = threading.local()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self._db.cursor()
        return cursor

    def record(self, collection: str, record_id: str, groups: Sequence[str]) -> bytes | None:
        row = self.cursor().execute(
            "SELECT json FROM records WHERE id = ? AND collection = ? AND list_contains(?, access)",
            [record_id, collection, list(groups)]).fetchone()
        return bytes(row[0]) if row else None

    def page(self, collection: str, groups: Sequence[str], limit: int, offset: int,
             updated_since: str | None) -> Page:
        where = "collection = ? AND list_contains(?, access)"
        params: list[Any] = [collection, list(groups)]
        if updated_since is not None:
            where += " AND updated_at >= ?"
            params.append(updated_since)
        cursor = self.cursor()
        total_row = cursor.execute(f"SELECT count(*) FROM records WHERE {where}", params).fetchone()
        rows = cursor.execute(
            f"SELECT json FROM records WHERE {where} ORDER BY position LIMIT ? OFFSET ?",
            [*params, limit, offset]).fetchall()
        return Page([bytes(row[0]) for row in rows], int(total_row[0]) if total_row else 0)

    def changes(self, since: str, groups: Sequence[str], collections: Sequence[str],
                cursor: int, limit: int) -> list[Change]:
        """What changed for this caller since `since` (inclusive), after `cursor`, compacted
        to each record's latest event: `upsert` if the caller sees it now, `delete` if it
        may have seen it since `since` and does not now. A record the caller could never
        see is never mentioned. At most limit + 1 rows, in ledger order."""
        rows = self.cursor().execute(CHANGES_SQL, {
            "since": since, "groups": list(groups), "collections": list(collections),
            "cursor": cursor, "limit": limit + 1}).fetchall()
        return [Change(*row) for row in rows]

    def snapshot_chunk(self, collection: str, offset: int) -> bytes | None:
        if offset % SNAPSHOT_CHUNK:
            return None  # chunks start at multiples of SNAPSHOT_CHUNK only
        rows = self.cursor().execute(
            "SELECT json FROM records WHERE collection = ? AND access = 'public' "
            "ORDER BY position LIMIT ? OFFSET ?",
            [collection, SNAPSHOT_CHUNK, offset]).fetchall()
        if not rows:
            return None
        return snapshot_chunk([bytes(row[0]) for row in rows])


class Change(NamedTuple):
    seq: int
    collection: str
    id: str
    op: str
    at: str
    hash: str


# Each (collection, id)'s latest event since `since`, kept when the caller sees the record
# now, or may have seen it: visible before `since`, or at any event since (times are whole
# seconds, so a hub that synced "at" `since` may have seen any state of that second).
CHANGES_SQL = """
WITH scoped AS (
    SELECT * FROM events WHERE list_contains($collections, collection)
), latest AS (
    SELECT collection, id, max(seq) AS seq FROM scoped WHERE "at" >= $since
    GROUP BY collection, id
), prior AS (
    SELECT collection, id, arg_max(op, seq) AS op, arg_max(access, seq) AS access
    FROM scoped WHERE "at" < $since GROUP BY collection, id
), seen AS (
    SELECT DISTINCT collection, id FROM scoped
    WHERE "at" >= $since AND op <> 'delete' AND list_contains($groups, access)
)
SELECT e.seq, e.collection, e.id,
       CASE WHEN e.op <> 'delete' AND list_contains($groups, e.access)
            THEN 'upsert' ELSE 'delete' END AS op,
       e."at", e.hash
FROM latest JOIN scoped e USING (seq)
LEFT JOIN prior p ON p.collection = e.collection AND p.id = e.id
LEFT JOIN seen s ON s.collection = e.collection AND s.id = e.id
WHERE e.seq > $cursor
  AND (s.id IS NOT NULL
       OR (p.op IS NOT NULL AND p.op <> 'delete' AND list_contains($groups, p.access)))
ORDER BY e.seq
LIMIT $limit
"""


def _quote(text: str) -> str:
    return text.replace("'", "''")


class Store:
    """The live snapshot plus the thread pool that queries it."""

    def __init__(self, path: Path, *, query_timeout: float = 10.0, threads: int = 4,
                 reload_interval: float = 1.0) -> None:
        self.path = path
        self.reload_interval = reload_interval
        self.query_timeout = query_timeout
        self.snapshot = Snapshot(path)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="duckdb")
        self._checked = time.monotonic()
        self._reload_lock = asyncio.Lock()

    async def current(self) -> Snapshot:
        """The snapshot to answer with, reloading first if a newer export landed."""
        now = time.monotonic()
        if now - self._checked >= self.reload_interval:
            self._checked = now
            try:
                stamp = os.stat(self.path / bundle.META).st_mtime_ns
            except OSError:
                stamp = self.snapshot.stamp  # mid-swap: keep serving what we have
            if stamp != self.snapshot.stamp:
                async with self._reload_lock:
                    await self._reload()
        return self.snapshot

    async def _reload(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            fresh = await loop.run_in_executor(self._pool, Snapshot, self.path)
        except (BundleMissing, duckdb.Error) as exc:
            log.warning("bundle reload failed, still serving build %s: %s",
                        self.snapshot.build, exc)
            return
        if fresh.build != self.snapshot.build:
            log.info("bundle reloaded: build %s", fresh.build)
        self.snapshot = fresh

    async def run(self, query: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, query, *args)
        try:
            return await asyncio.wait_for(future, self.query_timeout)
        except TimeoutError:
            self.snapshot._db.interrupt()
            raise QueryTimeout("the query took too long; narrow it and try again") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class QueryTimeout(APIError):
    status, code = 503, "unavailable"


def visible_groups(granted: Sequence[str]) -> list[str]:
    return [PUBLIC, *granted]


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
