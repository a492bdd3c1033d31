"""Keep a hub's index of one node exactly in sync with what the hub may see.

One run: check the address, open the hub file (if it exists), read the node's manifest
(and, with a key, what the key may do), bind the file to that node and caller, then load
everything (first run) or apply what changed, and check the result against the node's
counts. Nothing is written before the node has answered as a fednode, and a file this run
created is removed again if its first run does not complete."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from yarl import URL

from exporter.contract.wire import format_time

from . import keyed, public
from .errors import SyncError, one_line
from .index import Index, discard
from .messages import Manifest
from .node import Limits, connect, parse_address
from .report import SyncReport

__all__ = ["Limits", "SyncError", "SyncReport", "sync"]
log = logging.getLogger("fednode.hub")


async def sync(base_url: str, into: Path, key: str | None = None, *,
               limits: Limits | None = None,
               sleep: Callable[[float], Any] = asyncio.sleep,
               trust: Callable[[Manifest], None] | None = None) -> SyncReport:
    """Bring the index at `into` up to date with the node at `base_url`. The hub file, and
    every file DuckDB makes beside it, is its owner's alone (0600): with a key that holds
    groups it holds restricted records. `trust` is called with every manifest read, before
    anything of it is used, and raises SyncError for one it refuses."""
    address = parse_address(base_url)
    existed = into.exists()
    umask = os.umask(0o077)
    try:
        return await _sync(address, into, key, existed, limits, sleep, trust)
    finally:
        os.umask(umask)


async def _sync(address: URL, into: Path, key: str | None, existed: bool,
                limits: Limits | None, sleep: Callable[[float], Any],
                trust: Callable[[Manifest], None] | None) -> SyncReport:
    completed = False
    # DuckDB spills beside the file, into <file>.tmp: a first run that fails removes it
    # with the file, unless the name was taken before (the user's own folder, say).
    spill_existed = os.path.lexists(into.with_name(into.name + ".tmp"))
    index = Index.open(into) if existed else None
    try:
        async with connect(address, key, limits or Limits(), sleep) as node:
            node.trust = trust
            log.info("reading %s/api/manifest", node.base)
            manifest = await public.read_manifest(node)
            info = await keyed.read_key(node) if key else None
            if index is None:
                index = Index.open(into)
            index.claim(manifest.node_id, manifest.name, info.caller if info else "open",
                        node.base)
            report = SyncReport()
            if info is None:
                await public.follow(node, index, manifest, report)
            else:
                await keyed.follow(node, index, manifest.node_id, info, report)
            index.set_state({"synced_at": format_time(datetime.now(UTC))})
            report.total = index.total()
            report.manifest = node.manifest.body if node.manifest else b""
            completed = True
            return report
    except duckdb.Error as exc:  # the file, not the node: a full disk, a damaged file
        raise SyncError(f"{into}: {one_line(str(exc), 160)}; the index keeps its last "
                        f"complete state") from None
    finally:
        if index is not None:
            index.close()
            if not existed and not completed:  # a first run that failed leaves no file
                discard(into, spill=not spill_existed)
