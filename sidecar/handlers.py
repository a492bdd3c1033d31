"""Handlers for the open read endpoints: manifest, schema, lists and records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from exporter.contract.wire import (
    COLLECTIONS,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    encode,
    list_page,
    record_url,
)

from . import params
from .auth import Principal, check_collection, policy
from .errors import InvalidParameter, NotFound
from .state import LIMITER, PRINCIPAL, STORE
from .store import etag, visible_groups

JSON = "application/json"
NDJSON = "application/x-ndjson"


def open_response(request: web.Request, body: bytes, content_type: str = JSON) -> web.Response:
    """An open answer: cacheable, with an ETag; 304 when the client has it already."""
    tag = etag(body)
    headers = {"ETag": tag, "Cache-Control": "public, max-age=60"}
    if tag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=headers)


def _collection(request: web.Request) -> tuple[str, list[str]]:
    """The collection named in the path and the access groups this caller sees in it."""
    name = request.match_info["collection"]
    if name not in COLLECTIONS:
        raise NotFound(f"no collection {name!r}; the collections are {', '.join(COLLECTIONS)}")
    principal: Principal | None = request.get(PRINCIPAL)
    check_collection(principal, name)
    return name, visible_groups(principal.groups if principal else ())


async def manifest(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    snapshot = await request.app[STORE].current()
    return open_response(request, snapshot.manifest)


async def schema(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    snapshot = await request.app[STORE].current()
    return open_response(request, snapshot.schema)


async def index(request: web.Request) -> web.Response:
    snapshot = await request.app[STORE].current()
    return open_response(request, snapshot.index, "text/html")


@policy("read", key_required=False)
async def list_records(request: web.Request) -> web.Response:
    collection, groups = _collection(request)
    query = request.query
    params.check_known(query, ("limit", "offset", "updated_since"))
    limit = params.integer(query, "limit", default=LIST_LIMIT_DEFAULT, low=1, high=LIST_LIMIT_MAX)
    offset = params.integer(query, "offset", default=0, low=0)
    since = params.timestamp(query, "updated_since")
    store = request.app[STORE]
    snapshot = await store.current()
    page = await store.run(snapshot.page, collection, groups, limit, offset, since)
    body = list_page(snapshot.base_url, collection, page.items, total=page.total, limit=limit,
                     offset=offset, updated_since=since)
    return open_response(request, body)


@policy("read", key_required=False)
async def read_record(request: web.Request) -> web.Response:
    collection, groups = _collection(request)
    params.check_known(request.query, ())
    record_id = request.match_info["id"]
    store = request.app[STORE]
    snapshot = await store.current()
    body = await store.run(snapshot.record, collection, record_id.lower(), groups)
    if body is None:
        # Identical for an id that never existed and one the caller may not see.
        raise NotFound(f"no record with that id in {collection}; list the collection at "
                       f"/api/{collection} to find ids")
    return open_response(request, body)


CHANGES_LIMIT_DEFAULT, CHANGES_LIMIT_MAX = 200, 1000


@policy("changes", key_required=True)
async def changes(request: web.Request) -> web.Response:
    """What changed since a moment, as this key sees it: upserts and deletes, by cursor."""
    query = request.query
    params.check_known(query, ("since", "limit", "cursor"))
    since = params.timestamp(query, "since")
    if since is None:
        raise InvalidParameter("since is required: the RFC 3339 time of your last sync (the "
                               "`until` it returned), or 1970-01-01T00:00:00Z for everything")
    limit = params.integer(query, "limit", default=CHANGES_LIMIT_DEFAULT, low=1,
                           high=CHANGES_LIMIT_MAX)
    cursor = params.integer(query, "cursor", default=0, low=0)
    principal: Principal = request[PRINCIPAL]
    store = request.app[STORE]
    snapshot = await store.current()
    rows = await store.run(snapshot.changes, since, visible_groups(principal.groups),
                           principal.key.collections or COLLECTIONS, cursor, limit)
    more, rows = len(rows) > limit, rows[:limit]
    base = snapshot.base_url
    next_url = None
    if more:
        limit_part = f"&limit={limit}" if limit != CHANGES_LIMIT_DEFAULT else ""
        next_url = (f"{base}/api/changes?since={quote(since, safe=':')}{limit_part}"
                    f"&cursor={rows[-1].seq}")
    body = {
        "items": [{"collection": row.collection, "id": row.id, "op": row.op,
                   "updated_at": row.at, "url": record_url(base, row.collection, row.id),
                   "content_hash": row.hash if row.op == "upsert" else None}
                  for row in rows],
        "next": next_url,
        "until": max(snapshot.until or since, since),
    }
    return web.Response(body=encode(body), content_type=JSON, charset="utf-8")


async def sync_changes(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    store = request.app[STORE]
    snapshot = await store.current()
    body = snapshot.public_changes
    return open_response(request, body, NDJSON)


async def sync_snapshot(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    name = request.match_info["collection"]
    offset = request.match_info["offset"]
    store = request.app[STORE]
    snapshot = await store.current()
    body = None
    if name in COLLECTIONS and offset.isdigit():
        body = await store.run(snapshot.snapshot_chunk, name, int(offset))
    if body is None:
        raise NotFound("no such snapshot file; /api/manifest lists them under sync.snapshots")
    return open_response(request, body, NDJSON)


@policy(None, key_required=True)
async def key_me(request: web.Request) -> web.Response:
    """What the calling key holds: grants, rate, remaining budget, expiry."""
    params.check_known(request.query, ())
    principal: Principal = request[PRINCIPAL]
    key = principal.key
    body = {**key.describe(),
            "remaining": request.app[LIMITER].remaining(principal.access, key.rate)}
    del body["revoked_at"]
    return web.Response(body=encode(body), content_type=JSON, charset="utf-8")


def not_offered(scope: str, what: str, *, key_required: bool = True
                ) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An endpoint of the seed that this node does not offer yet: keys and scopes are
    checked as for the real thing, then 404 says so (the manifest lists capabilities)."""

    @policy(scope, key_required=key_required)
    async def handler(request: web.Request) -> web.Response:
        raise NotFound(f"this node does not offer {what} yet; /api/manifest lists its "
                       f"capabilities")

    return handler


def preflight() -> web.Response:
    """The answer to every CORS preflight (OPTIONS), whatever the path."""
    return web.Response(status=204, headers={
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": "Authorization, X-API-Key, Content-Type, "
                                        "MCP-Protocol-Version, Mcp-Session-Id, Mcp-Method, "
                                        "Mcp-Name, If-None-Match",
        "Access-Control-Max-Age": "86400",
    })


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", index, allow_head=True)
    app.router.add_get("/api/manifest", manifest)
    app.router.add_get("/api/keys/me", key_me)
    app.router.add_get("/api/changes", changes)
    app.router.add_get("/api/sync/changes.ndjson", sync_changes)
    app.router.add_get("/api/sync/{collection}/{offset}.ndjson", sync_snapshot)
    app.router.add_get("/api/search", not_offered("search", "search", key_required=False))
    app.router.add_post("/api/mcp", not_offered("mcp", "the tool interface"))
    app.router.add_post("/api/library/ask", not_offered("library", "the document library"))
    app.router.add_get("/api/schema", schema)
    app.router.add_get("/api/{collection}", list_records)
    app.router.add_get("/api/{collection}/{id}", read_record)
