"""A node whose content a test edits, exports and syncs hubs from, and what a caller reads
from a node or a hub holds."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from builders import Node, http_get, issue_key

from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.sync import sync


def node_view(base: str, key: str | None) -> dict[tuple[str, str], bytes]:
    """What the caller reads from the node: every record of every list, as served."""
    async def read() -> dict[tuple[str, str], bytes]:
        import aiohttp

        from exporter.contract.wire import COLLECTIONS, encode
        headers = {"X-API-Key": key} if key else {}
        seen: dict[tuple[str, str], bytes] = {}
        async with aiohttp.ClientSession() as session:
            for collection in COLLECTIONS:
                async with session.get(f"{base}/api/{collection}?limit=200",
                                       headers=headers) as response:
                    assert response.status == 200
                    page = await response.json()
                assert page["next"] is None
                for item in page["items"]:
                    seen[(collection, item["id"])] = encode(item)
        return seen
    return asyncio.run(read())


def hub_view(path: Path) -> dict[tuple[str, str], bytes]:
    with duckdb.connect(str(path)) as db:
        return {(c, i): j.encode() for c, i, j in
                db.execute("SELECT collection, id, json FROM records").fetchall()}


class World:
    """A node whose content the test edits, exports and syncs three hubs from."""

    def __init__(self, root: Path) -> None:
        self.node = Node(root / "node")
        self.root = self.node.root
        self.now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
        self.records: dict[str, tuple[str, dict[str, Any]]] = {}  # slug -> (collection, fields)
        self.hubs = {name: root / f"{name}.duckdb" for name in ("open", "partner", "ungranted")}
        self.export(0)
        self.partner_key, _ = issue_key(self.root, "partner", groups=["partners"])
        self.ungranted_key, _ = issue_key(self.root, "ungranted")
        self.until: dict[str, str] = {}
        self.since_poll = True

    def export(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        ledger = self.root / "ledger.jsonl"
        before = ledger.read_bytes() if ledger.exists() else b""
        build(Project(self.root), now=self.now)
        if (ledger.read_bytes() if ledger.exists() else b"") != before:
            self.since_poll = True  # new events since the last poll

    def poll(self, base: str) -> None:
        """Follow the keyed feed from the last `until`, as a hub does: no item twice within
        a poll, and nothing at all when no event happened since the last poll."""
        for key in (self.partner_key, self.ungranted_key):
            since = self.until.get(key, "1970-01-01T00:00:00Z")
            url: str | None = f"{base}/api/changes?since={since}&limit=2"
            seen: list[tuple[str, str]] = []
            while url:
                page = json.loads(http_get(url, {"X-API-Key": key})[2])
                seen += [(item["collection"], item["id"]) for item in page["items"]]
                url = page["next"] and page["next"].replace("https://node.example.org", base)
            assert len(seen) == len(set(seen)), "an item repeated within a poll"
            if key in self.until and not self.since_poll:
                assert seen == [], "an idle poll returned items"
            self.until[key] = page["until"]
        self.since_poll = False

    def write(self, slug: str) -> None:
        collection, fields = self.records[slug]
        self.node.write(collection, slug, fields, f"Notes on {slug}.")

    def sync_and_compare(self, base: str) -> None:
        self.poll(base)
        for name, key in (("open", None), ("partner", self.partner_key),
                          ("ungranted", self.ungranted_key)):
            asyncio.run(sync(base, self.hubs[name], key))
            assert hub_view(self.hubs[name]) == node_view(base, key), name
