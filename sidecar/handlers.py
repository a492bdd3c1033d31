"""Thin HTTP adapters over the service layer: read the request as the endpoint table
describes it, call one service function, shape the response. Routes are made from the
table (`add_routes`); a handler exists for every row and for nothing else."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from exporter.contract.endpoints import BY_NAME, ENDPOINTS, JSON, NDJSON, Endpoint
from exporter.contract.wire import encode

from . import service
from .errors import NotFound
from .params import integer_segment, parse_query, read_json_body
from .state import CALLER, LIMITER, STORE

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def open_response(request: web.Request, body: bytes, content_type: str = JSON) -> web.Response:
    """An answer every caller allowed here gets alike: cacheable, with an ETag; 304 when the
    client has it already. (A keyed request's answer is made private by the header hook.)"""
    tag = etag(body)
    headers = {"ETag": tag, "Cache-Control": "public, max-age=60"}
    if tag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=headers)


def json_response(data: object) -> web.Response:
    return web.Response(body=encode(data), content_type=JSON, charset="utf-8")


def _query(request: web.Request, name: str) -> dict[str, Any]:
    return parse_query(BY_NAME[name], request.query)


async def index(request: web.Request) -> web.Response:
    _query(request, "index")
    return open_response(request, (await request.app[STORE].current()).index, "text/html")


async def manifest(request: web.Request) -> web.Response:
    _query(request, "manifest")
    return open_response(request, (await request.app[STORE].current()).manifest)


async def schema(request: web.Request) -> web.Response:
    _query(request, "schema")
    return open_response(request, (await request.app[STORE].current()).schema)


async def list_records(request: web.Request) -> web.Response:
    q = _query(request, "list")
    body = await service.list_records(
        request.app[STORE], request[CALLER], request.match_info["collection"],
        limit=q["limit"], offset=q["offset"], updated_since=q["updated_since"])
    return open_response(request, body)


async def read_record(request: web.Request) -> web.Response:
    _query(request, "record")
    body = await service.read_record(request.app[STORE], request[CALLER],
                                     request.match_info["collection"], request.match_info["id"])
    return open_response(request, body)


async def changes(request: web.Request) -> web.Response:
    q = _query(request, "changes")
    cursor = service.Position.decode(q["cursor"]) if q["cursor"] is not None else None
    return json_response(await service.changes(
        request.app[STORE], request[CALLER], since=q["since"], limit=q["limit"], cursor=cursor))


async def sync_changes(request: web.Request) -> web.Response:
    _query(request, "sync_changes")
    body = await service.public_changes(request.app[STORE], request[CALLER])
    return open_response(request, body, NDJSON)


async def sync_snapshot(request: web.Request) -> web.Response:
    _query(request, "sync_snapshot")
    offset = integer_segment("offset", request.match_info["offset"])
    if offset is None:
        raise NotFound("no such snapshot file; /api/manifest lists them under "
                               "sync.snapshots")
    body = await service.snapshot_file(request.app[STORE], request[CALLER],
                                       request.match_info["collection"], offset)
    return open_response(request, body, NDJSON)


async def key(request: web.Request) -> web.Response:
    _query(request, "key")
    caller: service.Caller = request[CALLER]
    assert caller.key is not None  # the table makes this endpoint keyed
    remaining = request.app[LIMITER].remaining(caller.access, caller.key.rate)
    return json_response(service.key_info(caller, remaining))


def not_offered(endpoint: Endpoint) -> Handler:
    """An endpoint of the seed that this node does not offer yet: keys, scopes and the body
    are checked as for the real thing, then 404 says so (the manifest lists capabilities)."""

    async def handler(request: web.Request) -> web.Response:
        if endpoint.body == "json":
            await read_json_body(request)
        raise NotFound(f"this node does not offer {endpoint.summary.lower()} yet; "
                               f"/api/manifest lists its capabilities")

    return handler


HANDLERS: dict[str, Handler] = {
    "index": index, "manifest": manifest, "schema": schema, "key": key, "changes": changes,
    "sync_changes": sync_changes, "sync_snapshot": sync_snapshot, "list": list_records,
    "record": read_record,
}


def add_routes(app: web.Application) -> None:
    """One route a row of the endpoint table, in its order, named as the row."""
    for endpoint in ENDPOINTS:
        handler = HANDLERS[endpoint.name] if endpoint.offered else not_offered(endpoint)
        if endpoint.method == "GET":  # HEAD too, as the CDN answers it
            app.router.add_get(endpoint.path, handler, name=endpoint.name, allow_head=True)
        else:
            app.router.add_route(endpoint.method, endpoint.path, handler, name=endpoint.name)
