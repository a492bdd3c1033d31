"""Thin HTTP adapters over the service layer: read the request as the endpoint table
describes it, call one service function, shape the response. `handle` calls the row's
handler with the request's `Call`; a handler exists for every row and for nothing else.
Pages for people show public records only, and are answered for an anonymous caller
whatever key a request carries."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from aiohttp import web

from exporter.contract.endpoints import ENDPOINTS, HTML, JSON, NDJSON, Endpoint
from exporter.contract.inputs import InputError, from_json
from exporter.contract.page_urls import TAXA_HREF, file_of
from exporter.contract.wire import encode

from . import mcp, service
from . import search_page as searching
from .errors import APIError, NotFound
from .params import integer_segment, parse_body, parse_query, read_json_body
from .routing import Route
from .state import CALLER, RATE
from .store import Store
from .taxon_page import TaxonPage
from .visibility import Caller, View

ANONYMOUS = Caller()  # who pages are answered for


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def open_response(request: web.Request, body: bytes, content_type: str = JSON,
                  tag: str | None = None) -> web.Response:
    """An answer every caller allowed here gets alike: cacheable, with an ETag (`tag`, else
    one hashed from the bytes); 304 when the client has it already. (A keyed request's
    answer is made private by the header hook.)"""
    tag = tag or etag(body)
    headers = {"ETag": tag, "Cache-Control": "public, max-age=60"}
    have = request.headers.get("If-None-Match", "")
    if tag in have or have.strip() == "*":  # "*": any version of it (RFC 9110, 13.1.2)
        return web.Response(status=304, headers=headers)
    charset = None if content_type in ("application/pdf", "application/zip") else "utf-8"
    return web.Response(body=body, content_type=content_type, charset=charset, headers=headers)


def json_response(data: object) -> web.Response:
    return web.Response(body=encode(data), content_type=JSON, charset="utf-8")


class Call(NamedTuple):
    """What a handler is asked: the endpoint's row, the path's segments, and the query,
    parsed and checked as the row describes; and the snapshot it answers from, as the
    caller may read it."""
    endpoint: Endpoint
    segments: dict[str, str]
    query: dict[str, Any]
    view: View


Adapter = Callable[[web.Request, Call], Awaitable[web.StreamResponse]]


async def index(request: web.Request, call: Call) -> web.Response:
    body = await service.document(call.view, "index")
    return open_response(request, body, "text/html")


async def page(request: web.Request, call: Call) -> web.Response:
    """A page for people (or the sitemap, robots.txt), as exported: the same for every
    caller, since pages show public records only."""
    body = await service.page(call.view, call.endpoint.name, call.segments)
    return open_response(request, body, call.endpoint.returns)


async def search_page(request: web.Request, call: Call) -> web.Response:
    """The search page: as exported, without words to search for; with them, the page with
    their results (sidecar/search_page.py). A query it cannot take, or a search that fails,
    is said in the page's results section, with the error's status."""
    exported = call.view.page(file_of(call.endpoint.path))
    if exported is None:
        raise NotFound("no such page; the home page / links to every page")
    page = searching.SearchPage(exported, call.endpoint.path)
    try:
        query = parse_query(call.endpoint, request.query)
        if query["q"] is None:
            return open_response(request, exported, HTML)
        body = await searching.answer(call.view, page, query["q"], query["collections"])
    except APIError as error:
        body = searching.refused(page, request.query.get("q", ""),
                                 request.query.get("collections", ""), error.message)
        return web.Response(status=error.status, body=body, content_type=HTML,
                            charset="utf-8")
    return open_response(request, body, HTML)


async def taxon_page(request: web.Request, call: Call) -> web.Response:
    """A taxon's page on a hub (sidecar/taxon_page.py): the public records naming it, by
    member, in the exported taxa page; a name no public record names, the page saying so,
    with 404. A node, which exports no taxa page, has none."""
    exported = call.view.page(file_of(TAXA_HREF))
    if exported is None:
        raise NotFound("no such page; the home page / links to every page")
    page = TaxonPage(exported)
    try:
        name = from_json(call.endpoint.segments, call.segments)["name"]
        body = page.answer(await service.taxon(call.view, name))
    except (InputError, NotFound):
        return web.Response(status=404, body=page.missing(call.segments.get("name", "")),
                            content_type=HTML, charset="utf-8")
    return open_response(request, body, HTML)


async def manifest(request: web.Request, call: Call) -> web.Response:
    return open_response(request, await service.document(call.view, "manifest"))


async def schema(request: web.Request, call: Call) -> web.Response:
    return open_response(request, await service.document(call.view, "schema"))


async def openapi(request: web.Request, call: Call) -> web.Response:
    return open_response(request, await service.document(call.view, "openapi"))


async def list_records(request: web.Request, call: Call) -> web.Response:
    query = call.query
    page = await service.list_records(call.view, call.segments["collection"],
                                      limit=query["limit"], offset=query["offset"],
                                      updated_since=query["updated_since"])
    return open_response(request, page.body, tag=page.tag)


async def read_record(request: web.Request, call: Call) -> web.Response:
    record = await service.read_record(call.view, call.segments["collection"],
                                       call.segments["id"])
    return open_response(request, record.body, tag=record.tag)


async def changes(request: web.Request, call: Call) -> web.Response:
    query = call.query
    cursor = None if query["cursor"] is None else service.Position.decode(query["cursor"])
    return web.Response(body=await service.changes(
        call.view, since=query["since"], limit=query["limit"], cursor=cursor),
        content_type=JSON, charset="utf-8")


async def sync_changes(request: web.Request, call: Call) -> web.Response:
    return open_response(request, await service.public_changes(call.view), NDJSON)


async def sync_snapshot(request: web.Request, call: Call) -> web.Response:
    offset = integer_segment(call.segments["offset"])
    if offset is None:
        raise NotFound("no such snapshot file; /api/manifest lists them under sync.snapshots")
    body = await service.snapshot_file(call.view, call.segments["collection"], offset)
    return open_response(request, body, NDJSON)


async def search(request: web.Request, call: Call) -> web.Response:
    query = call.query
    return json_response(await service.search(
        call.view, text=query["q"], collections=query["collections"], limit=query["limit"],
        mode=query["mode"], nodes=query["nodes"]))


async def taxon(request: web.Request, call: Call) -> web.Response:
    """A taxon's records by node. A name its field refuses (blank, too long) names nothing:
    the same 404 as a name no record names, as a malformed id is for a record."""
    try:
        name = from_json(call.endpoint.segments, call.segments)["name"]
    except InputError:
        raise NotFound(service.NO_TAXON) from None
    return json_response(await service.taxon(call.view, name))


async def tool_interface(request: web.Request, call: Call) -> web.Response:
    return await mcp.handle(request, call.view)


async def ask(request: web.Request, call: Call) -> web.Response:
    body = parse_body(call.endpoint, await read_json_body(request))
    return json_response(await service.ask(call.view, question=body["question"],
                                           limit=body["limit"]))


async def library_file(request: web.Request, call: Call) -> web.Response:
    body = await service.library_file(call.view, call.segments["file"])
    return open_response(request, body, "application/pdf")


async def dwca(request: web.Request, call: Call) -> web.Response:
    return open_response(request, await service.dwca(call.view), "application/zip")


async def download(request: web.Request, call: Call) -> web.Response:
    collection = call.segments["collection"]
    body = await service.download(call.view, collection, f"{collection}.csv")
    return open_response(request, body, "text/csv")


async def key(request: web.Request, call: Call) -> web.Response:
    decision = request.get(RATE)  # this request was counted (unless the key has no limit)
    return json_response(service.key_info(call.view, decision.remaining if decision else 0))


async def not_offered(request: web.Request, call: Call) -> web.Response:
    """An endpoint of the seed that this node does not offer yet: keys, scopes, parameters
    and the body are checked as for the real thing, then 404 says so."""
    if call.endpoint.body == "json":
        await read_json_body(request)
    raise NotFound(f"this node does not offer {call.endpoint.summary.lower()} yet; "
                   f"/api/manifest lists its capabilities")


# The pages for people with a handler of their own; every other page is served as exported.
PAGES: dict[str, Adapter] = {"index": index, "search_page": search_page,
                             "taxon_page": taxon_page}
HANDLERS: dict[str, Adapter] = {
    "manifest": manifest, "schema": schema, "key": key, "changes": changes,
    "sync_changes": sync_changes, "sync_snapshot": sync_snapshot, "list": list_records,
    "record": read_record, "search": search, "taxon": taxon, "mcp": tool_interface,
    "ask": ask, "library_file": library_file, "openapi": openapi, "dwca": dwca,
    "download": download,
    **{e.name: PAGES.get(e.name, page) for e in ENDPOINTS if e.page},
}


async def handle(request: web.Request, route: Route, store: Store) -> web.StreamResponse:
    """Answer a request the router matched to `route` from `store`: its row's handler (or
    `not_offered`), with the query parsed as the row describes. A page that takes a query
    (a form's) reads it in its handler, which says what is wrong with it on the page rather
    than in the API's JSON error."""
    endpoint = route.endpoint
    adapter = HANDLERS[endpoint.name] if endpoint.offered else not_offered
    form = endpoint.page and bool(endpoint.params)
    query = {} if form else parse_query(endpoint, request.query)
    view = await View.of(store, ANONYMOUS if endpoint.page else request[CALLER])
    return await adapter(request, Call(endpoint, route.segments, query, view))
