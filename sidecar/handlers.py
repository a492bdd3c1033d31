"""Handlers for the open read endpoints: manifest, schema, lists and records."""

from __future__ import annotations

from aiohttp import web

from exporter.wire import COLLECTIONS, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, list_page

from . import params
from .errors import NotFound
from .state import STORE
from .store import etag, visible_groups

JSON = "application/json"


def open_response(request: web.Request, body: bytes, content_type: str = JSON) -> web.Response:
    """An open answer: cacheable, with an ETag; 304 when the client has it already."""
    tag = etag(body)
    headers = {"ETag": tag, "Cache-Control": "public, max-age=60"}
    if tag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=headers)


def _collection(request: web.Request) -> str:
    name = request.match_info["collection"]
    if name not in COLLECTIONS:
        raise NotFound(f"no collection {name!r}; the collections are {', '.join(COLLECTIONS)}")
    return name


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


async def list_records(request: web.Request) -> web.Response:
    collection = _collection(request)
    query = request.query
    params.check_known(query, ("limit", "offset", "updated_since"))
    limit = params.integer(query, "limit", default=LIST_LIMIT_DEFAULT, low=1, high=LIST_LIMIT_MAX)
    offset = params.integer(query, "offset", default=0, low=0)
    since = params.timestamp(query, "updated_since")
    store = request.app[STORE]
    snapshot = await store.current()
    page = await store.run(snapshot.page, collection, visible_groups(()), limit, offset, since)
    body = list_page(snapshot.base_url, collection, page.items, total=page.total, limit=limit,
                     offset=offset, updated_since=since)
    return open_response(request, body)


async def read_record(request: web.Request) -> web.Response:
    collection = _collection(request)
    params.check_known(request.query, ())
    record_id = request.match_info["id"]
    store = request.app[STORE]
    snapshot = await store.current()
    body = await store.run(snapshot.record, collection, record_id.lower(), visible_groups(()))
    if body is None:
        # Identical for an id that never existed and one the caller may not see.
        raise NotFound(f"no record {record_id!r} in {collection}")
    return open_response(request, body)


async def preflight(request: web.Request) -> web.Response:
    return web.Response(status=204, headers={
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": "Authorization, X-API-Key, Content-Type, "
                                        "MCP-Protocol-Version, Mcp-Session-Id, Mcp-Method, "
                                        "Mcp-Name, If-None-Match",
        "Access-Control-Max-Age": "86400",
    })


def add_routes(app: web.Application) -> None:
    app.router.add_route("OPTIONS", "/{tail:.*}", preflight)
    app.router.add_get("/", index, allow_head=True)
    app.router.add_get("/api/manifest", manifest)
    app.router.add_get("/api/schema", schema)
    app.router.add_get("/api/{collection}", list_records)
    app.router.add_get("/api/{collection}/{id}", read_record)
