"""Following a node without a key: the public snapshot files for a full load, then the
public change list, whose items are numbered by `seq` (events visible without a key).

The index remembers the position it reached (`seq` and the time of that event). A node
whose position went back, or whose history before it changed (restored from a backup,
ledger rewritten), is reloaded in full, and the run says so."""

from __future__ import annotations

import hashlib
import logging

from .apply import FullLoad, apply_items
from .errors import SyncError
from .index import Index
from .messages import Item, Manifest, changes_after, parse_manifest, parse_snapshot
from .node import Node, roots_of
from .report import SyncReport

log = logging.getLogger("fednode.hub")
BATCH = 200  # changes applied (and the position committed) per transaction
ROUNDS = 3  # passes over a node that changes while it is read, before giving up


async def read_manifest(node: Node, node_id: str | None = None) -> Manifest:
    url = node.url("/api/manifest")
    body = await node.get(url, cap=node.limits.manifest_bytes)
    assert body is not None
    manifest = parse_manifest(body, str(url))
    if node_id is not None and manifest.node_id != node_id:
        raise SyncError(f"{url}: the node's id changed from {node_id} to {manifest.node_id} "
                        f"during the sync; check the address")
    if node.trust is not None:
        node.trust(manifest)
    node.roots = roots_of(manifest.roots)
    node.manifest = manifest
    return manifest


async def follow(node: Node, index: Index, manifest: Manifest, report: SyncReport) -> None:
    """Bring the index to the node's public state; check it against the node's counts."""
    forced: str | None = None
    for _ in range(ROUNDS):
        position = index.state("position")
        reason = forced or (went_back(manifest, int(position), index.state("position_at"))
                            if position is not None else None)
        if position is not None and reason is None:
            manifest, reason = await apply_change_list(node, index, manifest, report)
        if position is None or reason is not None:
            if reason is not None:
                report.notes.append(f"{reason}: reloaded everything")
                log.info("%s: reloading everything", reason)
            manifest = await load_all(node, index, manifest, report)
        if manifest.counts is None or index.counts() == {
                c: n for c, n in manifest.counts.items() if n}:
            return
        fresh = await read_manifest(node, manifest.node_id)
        if (fresh.seq, fresh.changes_sha256) == (manifest.seq, manifest.changes_sha256):
            if forced is not None:  # reloaded from an unchanged node, and still not equal
                raise SyncError(
                    f"{node.base}/api/manifest: the node's record counts "
                    f"({_counted(manifest.counts)}) disagree with its snapshot files "
                    f"({_counted(index.counts())}), and it is not changing: the node's sync "
                    f"files disagree; tell its publisher")
            forced = "the index disagreed with the node's record counts"
        manifest = fresh
    raise SyncError("the node kept changing while it was read; run the sync again later")


def _counted(counts: dict[str, int] | None) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted((counts or {}).items()) if n) \
        or "none"


def went_back(manifest: Manifest, position: int, at: str | None) -> str | None:
    """Why the node's public history no longer continues the one the index followed."""
    if manifest.seq < position:
        return (f"the node's sync position went back from {position} to {manifest.seq} "
                f"(restored from a backup?)")
    if manifest.seq == position and manifest.updated_at != at:
        return f"the node's history changed (position {position} is now dated " \
               f"{manifest.updated_at}, was {at})"
    return None


def rewritten(followed: Item | None, at: str | None) -> str | None:
    """Why the last change at or before the index's position shows a rewritten history:
    it is dated after the position's time (times never decrease along `seq`)."""
    if followed is not None and at is not None and followed.updated_at > at:
        return (f"the node's history changed (change {followed.seq} is dated "
                f"{followed.updated_at}, after {at}, the time of the index's position)")
    return None


async def load_all(node: Node, index: Index, manifest: Manifest,
                   report: SyncReport) -> Manifest:
    """Every public record from the snapshot files, each checked against its SHA-256 in
    the manifest, swapped in at once; read again if the node changed meanwhile."""
    for _ in range(ROUNDS):
        expected = sum(s.records for s in manifest.snapshots)
        with FullLoad(index, manifest.node_id, report, expected) as load:
            for snap in manifest.snapshots:
                url = node.resolve(snap.url, f"{node.base}/api/manifest: sync.snapshots")
                body = await node.get(url, cap=node.limits.file_bytes)
                assert body is not None
                if hashlib.sha256(body).hexdigest() != snap.sha256:
                    fresh = await read_manifest(node, manifest.node_id)
                    if fresh.snapshots == manifest.snapshots:  # not changing: wrong
                        raise SyncError(
                            f"{url}: its SHA-256 is not the {snap.sha256[:16]}… the manifest "
                            f"gives, and the manifest is unchanged: the node's sync files "
                            f"disagree; tell its publisher")
                    break
                count = load.add(parse_snapshot(body, str(url), snap.collection),
                                 snap.collection, milestone=True)
                if count != snap.records:
                    raise SyncError(f"{url}: {count} records where the manifest "
                                    f"announces {snap.records}")
            else:
                load.finish({"position": str(manifest.seq), "position_at": manifest.updated_at,
                             "changes_sha256": manifest.changes_sha256})
                return manifest
        log.info("the node changed while its snapshot files were read; reading them again")
        manifest = await read_manifest(node, manifest.node_id)
    raise SyncError("the node's snapshot files kept changing while they were read; run the "
                    "sync again later")


async def apply_change_list(node: Node, index: Index, manifest: Manifest, report: SyncReport
                            ) -> tuple[Manifest, str | None]:
    """Apply the change list's items after the index's position, a batch at a time.
    Returns the manifest it followed and, if the history was rewritten, why."""
    position = int(index.state("position") or 0)
    at = index.state("position_at")
    if (index.state("changes_sha256") == manifest.changes_sha256
            and position == manifest.seq):
        return manifest, None
    for _ in range(ROUNDS):
        url = node.resolve(manifest.changes_url, f"{node.base}/api/manifest: sync.changes")
        body = await node.get(url, cap=node.limits.file_bytes)
        assert body is not None
        if hashlib.sha256(body).hexdigest() == manifest.changes_sha256:
            break
        manifest = await read_manifest(node, manifest.node_id)  # it changed meanwhile
    else:
        raise SyncError("the node's change list kept changing while it was read; run the "
                        "sync again later")
    pending, followed = changes_after(body, str(url), position)
    reason = went_back(manifest, position, at) or rewritten(followed, at)
    if reason is not None:
        return manifest, reason
    if pending and pending[-1].seq > manifest.seq:
        raise SyncError(f"{url}: item {pending[-1].seq} is beyond the manifest's sync.seq "
                        f"({manifest.seq}); the node's sync files disagree")
    for start in range(0, len(pending), BATCH):
        batch = pending[start:start + BATCH]
        await apply_items(node, index, manifest.node_id, batch,
                          {"position": str(batch[-1].seq), "position_at": batch[-1].updated_at},
                          report, str(url))
        log.info("applying changes: %d of %d", start + len(batch), len(pending))
    index.set_state({"position": str(manifest.seq), "position_at": manifest.updated_at,
                     "changes_sha256": manifest.changes_sha256})
    return manifest, None
