"""Keep a hub's index of one node exactly in sync with what the hub may see.

The index is a DuckDB file holding each record's bytes as the node served them. The first
run loads everything visible: the public snapshot files without a key, the list pages
with one. Later runs apply only what changed: the public change list without a key, the
keyed changes feed with one. Every step is a transaction that also records how far the
sync got, so an interrupted run resumes where it stopped and never double-counts."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import duckdb

from exporter.contract.errors import FednodeError
from exporter.contract.wire import encode

EPOCH = "1970-01-01T00:00:00Z"
SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    collection TEXT NOT NULL, id TEXT NOT NULL, content_hash TEXT, updated_at TEXT,
    json BLOB NOT NULL, PRIMARY KEY (collection, id));
CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT);
"""


class SyncError(FednodeError):
    """The sync could not go on; the message says why. The index keeps its last state."""


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    total: int = 0

    def summary(self) -> str:
        return (f"added {self.added}, updated {self.updated}, removed {self.removed}; "
                f"{self.total} records in the index")


class Index:
    """The hub's DuckDB file."""

    def __init__(self, path: Path) -> None:
        self.db = duckdb.connect(str(path))
        self.db.execute(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def get_state(self, name: str) -> str | None:
        row = self.db.execute("SELECT value FROM state WHERE name = ?", [name]).fetchone()
        return row[0] if row else None

    def set_state(self, name: str, value: str | None) -> None:
        self.db.execute("DELETE FROM state WHERE name = ?", [name])
        if value is not None:
            self.db.execute("INSERT INTO state VALUES (?, ?)", [name, value])

    def version_of(self, collection: str, record_id: str) -> tuple[str, str] | None:
        """The held copy's (content_hash, updated_at): equal pairs mean equal bytes (the
        hash alone does not: a record restricted and made public again keeps its hash)."""
        row = self.db.execute("SELECT content_hash, updated_at FROM records "
                              "WHERE collection = ? AND id = ?", [collection, record_id]
                              ).fetchone()
        return (row[0], row[1]) if row else None

    def upsert(self, body: bytes, report: SyncReport) -> None:
        record = json.loads(body)
        known = self.version_of(record["collection"], record["id"])
        if known == (record["content_hash"], record["updated_at"]):
            return
        self.db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?)",
                        [record["collection"], record["id"], record["content_hash"],
                         record["updated_at"], body])
        if known is None:
            report.added += 1
        else:
            report.updated += 1

    def remove(self, collection: str, record_id: str, report: SyncReport) -> None:
        if self.version_of(collection, record_id) is not None:
            self.db.execute("DELETE FROM records WHERE collection = ? AND id = ?",
                            [collection, record_id])
            report.removed += 1

    def replace_all(self, bodies: list[bytes], report: SyncReport) -> None:
        """Make the index exactly this set of records (inside the caller's transaction)."""
        seen: set[tuple[str, str]] = set()
        for body in bodies:
            record = json.loads(body)
            seen.add((record["collection"], record["id"]))
            self.upsert(body, report)
        for collection, record_id in self.db.execute(
                "SELECT collection, id FROM records").fetchall():
            if (collection, record_id) not in seen:
                self.remove(collection, record_id, report)

    def count(self) -> int:
        row = self.db.execute("SELECT count(*) FROM records").fetchone()
        return int(row[0]) if row else 0


class Node:
    """HTTP access to one node, with retries. URLs the node returns are re-rooted on the
    address the hub was given, so a hub can follow links whatever the node's base_url."""

    def __init__(self, session: aiohttp.ClientSession, base: str, key: str | None,
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.session = session
        self.base = base.rstrip("/")
        self.key = key
        self.roots: list[str] = []
        self.sleep = sleep

    def local(self, url: str) -> str:
        for root in self.roots:
            if url.startswith(root + "/"):
                return self.base + url[len(root):]
        return url

    async def get(self, path_or_url: str, *, missing_ok: bool = False) -> bytes | None:
        url = self.local(path_or_url) if "://" in path_or_url else self.base + path_or_url
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        for attempt in range(12):
            try:
                async with self.session.get(url, headers=headers) as response:
                    body = await response.read()
                    if response.status == 200:
                        return body
                    if response.status == 404 and missing_ok:
                        return None
                    if response.status == 429:
                        wait = float(response.headers.get("Retry-After", "1"))
                        await self.sleep(min(max(wait, 0.0), 120.0))
                        continue
                    if response.status < 500:
                        raise SyncError(f"{url}: {response.status} {_message(body)}")
            except aiohttp.ClientError as exc:
                if attempt >= 5:
                    raise SyncError(f"{url}: {exc}") from None
            await self.sleep(min(0.25 * 2 ** attempt, 10.0))
        raise SyncError(f"{url}: the node kept failing; try again later")

    async def json(self, path_or_url: str) -> Any:
        body = await self.get(path_or_url)
        assert body is not None
        return json.loads(body)


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace")


async def sync(base_url: str, into: Path, key: str | None = None,
               sleep: Callable[[float], Any] = asyncio.sleep) -> SyncReport:
    """Bring the index at `into` up to date with the node at `base_url`."""
    index = Index(into)
    report = SyncReport()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            node = Node(session, base_url, key, sleep)
            manifest = await node.json("/api/manifest")
            node.roots = [manifest["node"]["base_url"], manifest["node"]["sidecar_url"]]
            mode = "open"
            if key:
                me = await node.json("/api/keys/me")
                mode = f"key:{me['id']}"
            previous = index.get_state("mode")
            if previous not in (None, mode):
                raise SyncError(f"{into} was synced as {previous}, not {mode}; use another file")
            index.set_state("mode", mode)
            if key:
                await _keyed(node, index, manifest, me, report)
            else:
                await _open(node, index, manifest, report)
        report.total = index.count()
        return report
    finally:
        index.close()


async def _open(node: Node, index: Index, manifest: dict[str, Any], report: SyncReport) -> None:
    """Without a key: snapshot files first, the public change list afterwards."""
    position = index.get_state("position")
    sync_info = manifest["sync"]
    if position is None:
        for _ in range(3):
            bodies = await _snapshot(node, sync_info)
            if bodies is not None:
                break
            manifest = await node.json("/api/manifest")  # the node changed under us
            sync_info = manifest["sync"]
        else:
            raise SyncError("the node's snapshot kept changing while it was read; try again")
        index.db.begin()
        index.replace_all(bodies, report)
        index.set_state("position", str(sync_info["seq"]))
        index.set_state("changes_sha256", None)
        index.db.commit()
        position = str(sync_info["seq"])
    if index.get_state("changes_sha256") == sync_info["changes"]["sha256"]:
        return
    listing = await node.get(sync_info["changes"]["url"])
    assert listing is not None
    items = [json.loads(line) for line in listing.splitlines() if line.strip()]
    pending = [item for item in items if item["seq"] > int(position)]
    for start in range(0, len(pending), 100):
        batch = pending[start:start + 100]
        fetched = await _fetch(node, index, batch)
        index.db.begin()
        _apply(index, batch, fetched, report)
        index.set_state("position", str(batch[-1]["seq"]))
        index.db.commit()
    index.set_state("changes_sha256", hashlib.sha256(listing).hexdigest())


async def _snapshot(node: Node, sync_info: dict[str, Any]) -> list[bytes] | None:
    bodies: list[bytes] = []
    for chunk in sync_info["snapshots"]:
        data = await node.get(chunk["url"])
        assert data is not None
        if hashlib.sha256(data).hexdigest() != chunk["sha256"]:
            return None
        bodies += [line for line in data.split(b"\n") if line]
    return bodies


async def _keyed(node: Node, index: Index, manifest: dict[str, Any], me: dict[str, Any],
                 report: SyncReport) -> None:
    """With a key: every list page first, the keyed changes feed afterwards."""
    since = index.get_state("since")
    if since is None:
        start = manifest["node"]["updated_at"] or EPOCH
        bodies: list[bytes] = []
        for collection in me["collections"]:
            url: str | None = f"/api/{collection}?limit=200"
            while url:
                page = await node.json(url)
                bodies += [encode(item) for item in page["items"]]
                url = page["next"]
        index.db.begin()
        index.replace_all(bodies, report)
        index.set_state("since", start)
        index.set_state("cursor", None)
        index.db.commit()
        since = start
    while True:
        cursor = index.get_state("cursor")
        url = f"/api/changes?since={quote(since, safe=':')}&limit=200"
        if cursor:
            url += f"&cursor={cursor}"
        page = await node.json(url)
        items = page["items"]
        bodies_by_url = await _fetch(node, index, items)
        index.db.begin()
        _apply(index, items, bodies_by_url, report)
        if page["next"]:
            index.set_state("cursor", page["next"].rsplit("cursor=", 1)[1])
        else:
            index.set_state("since", page["until"])
            index.set_state("cursor", None)
        index.db.commit()
        if not page["next"]:
            return


async def _fetch(node: Node, index: Index, items: list[dict[str, Any]]
                 ) -> dict[str, bytes | None]:
    """The bodies of the upserts the index does not already hold."""
    wanted = [item["url"] for item in items if item["op"] == "upsert"
              and index.version_of(item["collection"], item["id"])
              != (item["content_hash"], item["updated_at"])]
    bodies = await asyncio.gather(*(node.get(url, missing_ok=True) for url in wanted))
    return dict(zip(wanted, bodies, strict=True))


def _apply(index: Index, items: list[dict[str, Any]], bodies: dict[str, bytes | None],
           report: SyncReport) -> None:
    for item in items:
        if item["op"] == "upsert" and item["url"] not in bodies:
            continue  # already held with this content
        body = bodies.get(item["url"]) if item["op"] == "upsert" else None
        if body is None:  # deleted, or no longer visible, or gone since the list was made
            index.remove(item["collection"], item["id"], report)
        else:
            index.upsert(body, report)
