"""`fednode verify URL`: check what a node or hub published against the keys that signed it.

- A node (its base URL): its manifest's signature, the signed manifests of a hub's members
  as the hub republishes them (`network.members[].manifest`), and every sync file against
  the SHA-256 its signed manifest gives.
- A record (`.../api/{collection}/{id}`): the record is the one in the sync files its
  server's signed manifest lists; on a hub, its content is that of the record its member
  signed (found in the member's sync files, through the member's manifest as the hub
  republishes it, or as the member serves it now when it changed since), and so on back to
  the node that wrote it, through every hub on the way.

Every request is bounded as a hub's are (hub/node.py); each failure is a SyncError of one
line saying what did not check."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from yarl import URL

from exporter.contract.signing import follow

from .errors import SyncError, one_line
from .messages import Manifest, decode_json, parse_manifest
from .node import Limits, connect, parse_address

_RECORD = re.compile(r"(?P<root>.*)/api/(?P<collection>[a-z]+)/(?P<id>[0-9a-f-]{36})(\.json)?")
HOPS = 8  # hubs followed back from a record to the node that wrote it
# What a hub sets on a member's record (its own id, address and times of serving, and where
# it came from): every other field is the member's, and must be as the member signed it.
SERVED_BY_HUB = frozenset({"id", "url", "content_hash", "document_url", "link", "license",
                           "source_node", "source_node_name", "source_url"})
LIMITS = Limits(attempts=2, read_timeout=30.0, request_timeout=120.0)


@dataclass(frozen=True)
class Node:
    """A node's manifest, checked: who signed it, and its parsed body."""

    base: str  # the address it was read from (or its own base URL, for a republished one)
    manifest: Manifest
    data: dict[str, Any]

    @property
    def said(self) -> str:
        assert self.manifest.signed is not None
        return (f"{self.manifest.name} ({self.manifest.node_id}), key "
                f"{self.manifest.signed.key.fingerprint}")


async def verify(url: str, fingerprint: str | None = None) -> list[str]:
    """What was checked, a line each; SyncError at the first thing that does not check."""
    try:
        return await _verify(url, fingerprint)
    except ValueError as exc:  # an address yarl cannot take, from a manifest or a record
        raise SyncError(f"an address on the way is not one a client can follow "
                        f"({one_line(str(exc), 120)}): it cannot be checked") from None


async def _verify(url: str, fingerprint: str | None) -> list[str]:
    address = parse_address(url)
    found = _RECORD.fullmatch(address.path.rstrip("/"))
    if found is None:
        root = str(address).rstrip("/").removesuffix("/api/manifest")
        return await _verify_node(root, fingerprint)
    root = str(address.with_path(found["root"] or "/")).rstrip("/")
    return await _verify_record(str(address), root, found["collection"], found["id"],
                                fingerprint)


async def _get(url: str, cap: int = 64 * 2**20) -> bytes:
    target = URL(url)
    base = str(target.with_path("/").with_query(None)).rstrip("/")
    async with connect(parse_address(base), None, LIMITS) as node:
        body = await node.get(URL(base + target.raw_path_qs, encoded=True), cap=cap)
    assert body is not None
    return body


async def read_node(root: str) -> Node:
    """The signed manifest at `root`/api/manifest."""
    where = f"{root}/api/manifest"
    body = await _get(where)
    return _node(root, body, where)


def _node(base: str, body: bytes, where: str) -> Node:
    manifest = parse_manifest(body, where)
    if manifest.signed is None:
        raise SyncError(f"{where}: the manifest is not signed: nothing of it can be checked")
    return Node(base, manifest, decode_json(body, where, "the manifest"))


async def _verify_node(root: str, fingerprint: str | None) -> list[str]:
    node = await read_node(root)
    _expect(node, fingerprint)
    lines = [f"{root}: manifest signed by {node.said}"]
    for entry, member in _members(node):
        lines.append(f"  member {one_line(str(entry.get('name')), 40)}: {member.said}: its "
                     f"manifest as the hub last synced it checks")
    files = records = 0
    for url, digest, count in _sync_files(node.manifest):
        body = await _get(_on(node, url), 512 * 2**20)
        if hashlib.sha256(body).hexdigest() != digest:
            raise SyncError(f"{url}: its SHA-256 is not the one the signed manifest gives "
                            f"(the node changed since, or the file was altered): verify again")
        files, records = files + 1, records + count
    lines.append(f"  {files} sync files ({records} records) match the digests its signed "
                 f"manifest gives")
    return [*lines, "ok"]


def _expect(node: Node, fingerprint: str | None) -> None:
    assert node.manifest.signed is not None
    if fingerprint is not None and node.manifest.signed.key.fingerprint != fingerprint:
        raise SyncError(f"{node.base}: signed by {node.manifest.signed.key.fingerprint}, not "
                        f"by {fingerprint}")


def _members(node: Node) -> Iterator[tuple[dict[str, Any], Node]]:
    """Each member whose signed manifest the hub republishes, checked."""
    network = node.data.get("network")
    members = network.get("members") if isinstance(network, dict) else None
    for entry in members if isinstance(members, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("manifest"), str):
            yield entry, _member(node, entry)


def _member(hub: Node, entry: dict[str, Any]) -> Node:
    name = one_line(str(entry.get("name")), 40)
    where = f"{hub.base}/api/manifest: network: member {name}"
    member = _node("", entry["manifest"].encode("utf-8"), where)
    assert member.manifest.signed is not None
    if member.manifest.signed.key.fingerprint != entry.get("key_fingerprint") or \
            member.manifest.node_id != entry.get("node_id"):
        raise SyncError(f"{where}: its manifest is signed by {member.said}, not the node and "
                        f"key the hub names for it")
    return Node(member.manifest.roots[0].rstrip("/"), member.manifest, member.data)


def _sync_files(manifest: Manifest) -> Iterator[tuple[str, str, int]]:
    for snap in manifest.snapshots:
        yield snap.url, snap.sha256, snap.records
    yield manifest.changes_url, manifest.changes_sha256, 0


def _on(node: Node, link: str) -> str:
    """A link of a node's manifest, which must lie under one of its own roots."""
    for root in node.manifest.roots:
        root = root.rstrip("/")
        if root and link.startswith(root + "/"):
            return (node.base or root) + link[len(root):]
    raise SyncError(f"{node.base}: the manifest links {one_line(link, 80)}, outside its own "
                    f"base URL")


async def _verify_record(url: str, root: str, collection: str, record_id: str,
                         fingerprint: str | None) -> list[str]:
    record = decode_json(await _get(url), url, "the record")
    if not isinstance(record, dict):
        raise SyncError(f"{url}: not a record")
    server = await read_node(root)
    _expect(server, fingerprint)
    await _signed_copy(server, collection, record_id, record)
    lines = [f"{url}", f"  served by {server.said}: the record is in the sync files its "
                       f"signed manifest lists"]
    for _ in range(HOPS):
        source = record.get("source_node")
        if not isinstance(source, str):
            lines.append(f"  written by {server.said}")
            return [*lines, "ok"]
        member = _the_member(server, source)
        original_id = _original_id(member, record)
        original = await _original(member, collection, original_id)
        _same_content(record, original, url)
        lines.append(f"  its content is that of {original_id} as {member.said} signed it")
        server, record = member, original
    raise SyncError(f"{url}: more than {HOPS} hubs lead back from it; not followed further")


def _the_member(hub: Node, node_id: str) -> Node:
    for entry, member in _members(hub):
        if entry.get("node_id") == node_id:
            return member
    raise SyncError(f"{hub.base}: the record names the node {one_line(node_id, 80)}, whose "
                    f"signed manifest the hub does not republish: it cannot be checked")


def _original_id(member: Node, record: dict[str, Any]) -> str:
    source_url = record.get("source_url")
    if not isinstance(source_url, str):
        raise SyncError("the record names no source_url: its original cannot be found")
    try:
        link = _on(member, source_url)
    except SyncError:
        raise SyncError(f"its source_url {one_line(source_url, 80)} lies outside its node's "
                        f"base URL") from None
    found = _RECORD.fullmatch(URL(link).path)
    if found is None:
        raise SyncError(f"its source_url {one_line(source_url, 80)} is not a record's URL")
    return found["id"]


async def _original(member: Node, collection: str, record_id: str) -> dict[str, Any]:
    """The member's record as its signed sync files hold it: through the manifest the hub
    republished, else the one the member serves now (signed by the same key, or one it
    rotated to)."""
    try:
        return await _signed_copy(member, collection, record_id, None)
    except SyncError:
        pass
    now = await read_node(member.base)
    assert now.manifest.signed is not None and member.manifest.signed is not None
    if now.manifest.node_id != member.manifest.node_id or follow(
            member.manifest.node_id, member.manifest.signed.key.fingerprint,
            now.manifest.signed.key, now.manifest.signed.rotations) is None:
        raise SyncError(f"{member.base}: the node now serves a manifest signed by "
                        f"{now.said}, not by the key the hub checked")
    return await _signed_copy(now, collection, record_id, None)


async def _signed_copy(node: Node, collection: str, record_id: str,
                       expected: dict[str, Any] | None) -> dict[str, Any]:
    """The record in the node's sync files (each checked against its signed digest); it
    must equal `expected`, when given."""
    for snap in node.manifest.snapshots:
        if snap.collection != collection:
            continue
        url = _on(node, snap.url)
        body = await _get(url, 512 * 2**20)
        if hashlib.sha256(body).hexdigest() != snap.sha256:
            raise SyncError(f"{url}: its SHA-256 is not the one {node.said} signed")
        for line in body.splitlines():
            if record_id.encode() not in line:
                continue
            item = decode_json(line, url, "a record line")
            if isinstance(item, dict) and item.get("id") == record_id:
                if expected is not None and item != expected:
                    raise SyncError(f"{record_id}: the record served differs from the one in "
                                    f"the sync files {node.said} signed")
                return item
    raise SyncError(f"{record_id}: not in the sync files {node.said} signed (changed or "
                    f"removed since): verify again later")


def _same_content(record: dict[str, Any], original: dict[str, Any], url: str) -> None:
    """Every field a hub does not set itself is the member's, unchanged."""
    for name in sorted((set(record) | set(original)) - SERVED_BY_HUB):
        if record.get(name) != original.get(name):
            raise SyncError(f"{url}: {name}: the hub's copy differs from the record its "
                            f"member signed")

