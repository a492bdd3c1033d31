"""Turn validated records and ledger entries into the bytes the node publishes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from exporter import __version__
from exporter.contract.endpoints import access_lists, capabilities, manifest_endpoints
from exporter.contract.signing import Identity, signed_manifest
from exporter.contract.wire import (
    API_VERSION,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    PUBLIC,
    SCOPES,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    TOOL_LIMIT_DEFAULT,
    document_url,
    encode,
    record_url,
)
from exporter.pipeline.ledger import Entry
from exporter.pipeline.previous import Renderings
from exporter.project.config import NodeConfig
from exporter.project.content import LIBRARY, SourceRecord
from exporter.project.schemas import Collection

LIBRARY_PATH = f"content/{LIBRARY}/"


# Bump when the shape of rendered records changes, so cached renderings are not reused.
RENDER_VERSION = "1"


@dataclass(slots=True)  # not frozen: a frozen class is slow to make, and there are many
class Rendered:
    """One record as the node serves it (never changed once made)."""

    collection: str
    id: str
    access: str
    title: str
    created_at: str
    updated_at: str
    content_hash: str
    fresh: bytes | None  # the served bytes if rendered now; None if taken from `source`
    key: str  # changes exactly when the served bytes may change
    row: int = -1  # the row of the previous rendering in `source`, if taken from there
    source: Renderings | None = None

    @property
    def public(self) -> bool:
        return self.access == PUBLIC

    def served(self) -> bytes:
        """The served bytes (`json_of` gets many at once)."""
        if self.fresh is not None:
            return self.fresh
        assert self.source is not None
        return self.source.bytes_of([self.row])[0]


def json_of(items: list[Rendered]) -> list[bytes]:
    """The served bytes of records of one export, in the order given."""
    return list(map(bytes, served_views(items)))


def served_views(items: list[Rendered]) -> list[bytes | memoryview]:
    """`json_of`, but those taken from the previous export as views of its map, not copied
    (bytes joined at once: a snapshot chunk, 20 MB at 10,000 records)."""
    reused = [r for r in items if r.fresh is None]
    if not reused:
        return [r.served() for r in items]
    source = reused[0].source
    assert source is not None
    taken = iter(source.views_of([r.row for r in reused]))
    return [r.fresh if r.fresh is not None else next(taken) for r in items]


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join((RENDER_VERSION, *parts)).encode()).hexdigest()[:32]


@cache
def _field_order(collection: Collection) -> tuple[str, ...]:
    specific = [name for name in collection.content_fields
                if name not in ("id", "access", "title", "tags", "body")]
    # then a hub's provenance of the record, where it has one (`schemas.PROVENANCE`)
    return (*specific, "tags", "body", *collection.provenance_fields)


def render_record(record: SourceRecord, entry: Entry, collection: Collection,
                  node: NodeConfig, previous: Renderings) -> Rendered:
    """A record's served form. Its bytes are taken from the previous export when nothing
    they depend on has changed. Its times are the ledger's (`entry`), or its source's where
    it is republished with them (`schemas.SOURCE_TIMES`: in its fields, so in its hash)."""
    # Everything the bytes depend on, spelled out (cheaper than hashing it per record).
    in_library = record.path.startswith(LIBRARY_PATH)
    key = "|".join((RENDER_VERSION, record.hash, entry.created_at, entry.updated_at,
                    node.base_url, collection.name,
                    f"library {node.sidecar_url}" if in_library else ""))
    row = previous.find(record.id, key)
    if row is not None:
        created, updated = previous.times(row)
        return Rendered(collection.name, record.id, record.access, previous.titles[row],
                        created, updated, record.hash, None, key, row, previous)
    fields = record.fields
    title = str(fields.get(collection.title_field, ""))
    created = fields.get("created_at", entry.created_at)
    updated = fields.get("updated_at", entry.updated_at)
    out: dict[str, Any] = {
        "id": record.id,
        "collection": collection.name,
        "title": title,
        "access": record.access,
        "created_at": created,
        "updated_at": updated,
        "url": record_url(node.base_url, collection.name, record.id),
        "content_hash": record.hash,
    }
    for name in _field_order(collection):
        if name in fields:
            out[name] = fields[name]
    if in_library:  # a restricted PDF is served by the sidecar only
        root = node.base_url if record.access == PUBLIC else node.sidecar_url
        out["document_url"] = document_url(root, record.id)
    return Rendered(collection.name, record.id, record.access, title, created, updated,
                    record.hash, encode(out), key)


def manifest(node: NodeConfig, collections: dict[str, Collection], counts: dict[str, int],
             updated_at: str | None, sync: dict[str, Any], downloads: dict[str, Any],
             identity: Identity) -> bytes:
    """The manifest, signed with the node's key (`signing.signed_manifest`)."""
    base = node.base_url
    open_names, keyed_names = access_lists()
    return encode(signed_manifest({
        "fednode": {"api_version": API_VERSION, "software": f"fednode {__version__}"},
        "node": {
            "id": node.id, "name": node.name, "description": node.description,
            "publisher": node.publisher, "contact": node.contact, "licence": node.licence,
            "language": node.language, "base_url": base, "sidecar_url": node.sidecar_url,
            "updated_at": updated_at,
        },
        **({"network": node.network} if node.network is not None else {}),
        "collections": [
            {
                "name": c.name, "title": c.title, "description": c.description,
                "tool": c.tool, "public_count": counts.get(c.name, 0),
                "list_url": f"{base}/api/{c.name}",
                "record_url_template": f"{base}/api/{c.name}/{{id}}",
                "schema_url": f"{base}/api/schema#/collections/{c.name}",
            }
            for c in collections.values()
        ],
        "capabilities": capabilities(),
        "endpoints": manifest_endpoints(base, node.sidecar_url),
        "sync": sync,
        "downloads": downloads,
        "authentication": {
            "schemes": [
                {"type": "http", "scheme": "bearer", "header": "Authorization",
                 "format": "Bearer <API_KEY>"},
                {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            ],
            "open": open_names,
            "keyed": keyed_names,
            "scopes": list(SCOPES),
            "restricted_records": "Records restricted to an access group are returned only "
                                  "to keys granted that group, and are otherwise absent.",
            "request_key": node.key_request,
        },
        "limits": {
            "list_limit_default": LIST_LIMIT_DEFAULT, "list_limit_max": LIST_LIMIT_MAX,
            "search_limit_default": SEARCH_LIMIT_DEFAULT, "search_limit_max": SEARCH_LIMIT_MAX,
            "tool_limit_default": TOOL_LIMIT_DEFAULT,
        },
    }, identity.key, identity.rotations))


def schema_document(collections: dict[str, Collection]) -> bytes:
    return encode({
        "api_version": API_VERSION,
        "collections": {name: c.schema for name, c in collections.items()},
    })
