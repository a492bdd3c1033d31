"""The sidecar's router (`sidecar.routing`) routes as aiohttp's own router does when every row
of the endpoint table is added to it as a route, in the table's order: the same endpoint
and segments, and the same 404 or 405 (with the same methods allowed), for generated methods
and paths, escapes, line breaks and odd Unicode included."""

from __future__ import annotations

import asyncio
import re
from typing import Any, NamedTuple
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError
from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from exporter.contract.endpoints import BY_NAME, ENDPOINTS
from sidecar.app import ROUTER
from sidecar.errors import MethodNotAllowed, NotFound
from sidecar.routing import Route

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


async def _nothing(request: web.Request) -> web.Response:
    return web.Response()


def aiohttp_routes() -> web.Application:
    """The table as aiohttp routes (the sidecar's routes before it routed them itself)."""
    app = web.Application()
    for endpoint in ENDPOINTS:
        if endpoint.method == "GET":
            app.router.add_get(endpoint.path, _nothing, name=endpoint.name, allow_head=True)
        else:
            app.router.add_route(endpoint.method, endpoint.path, _nothing, name=endpoint.name)
            # every other method on this path: 405 naming this one
            app.router.add_route("*", endpoint.path, _nothing, name=f"only:{endpoint.name}")
    return app


APP = aiohttp_routes()
LOOP = asyncio.new_event_loop()


class Asked(NamedTuple):
    """What a router reads of a request: its method, and its target as aiohttp's HTTP
    parser makes it (`URL.build(path=…, encoded=True)`)."""
    method: str
    rel_url: URL


def aiohttp_answer(method: str, target: str) -> tuple[object, ...]:
    request: Any = Asked(method, URL.build(path=target, encoded=True))
    match = LOOP.run_until_complete(APP.router.resolve(request))
    if isinstance(match, MatchInfoError):
        exception = match.http_exception
        if isinstance(exception, web.HTTPMethodNotAllowed):
            return 405, ", ".join(sorted(exception.allowed_methods))
        return (exception.status,)
    name = match.route.name or ""
    if name.startswith("only:"):
        return 405, BY_NAME[name.removeprefix("only:")].method
    return name, dict(match)


def our_answer(method: str, target: str) -> tuple[object, ...]:
    found = ROUTER.resolve(method, URL.build(path=target, encoded=True).path_safe)
    if isinstance(found, Route):
        return found.endpoint.name, found.segments
    if isinstance(found, MethodNotAllowed):
        return 405, found.headers["Allow"]
    assert isinstance(found, NotFound)
    return (404,)


# What a path's segments are made of: plain words, the table's own words, escapes that
# decode to a slash, a percent sign, a line break or a letter, and odd Unicode.
ATOMS = st.sampled_from(["species", "api", "sync", "library", "download", "sitemaps", "keys",
                         "me", "ask", "mcp", "manifest", "0", "7.ndjson", "1.html", "x.xml",
                         "x.csv", "species-dwca.zip", "changes.ndjson", "ab", "3f", ".", "..",
                         "%2F", "%25", "%0A", "%41", "%E2%80%AE", "é", "\u202e", "{id}", ""])


@st.composite
def targets(draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # a path of the table, its segments filled in
        template = draw(st.sampled_from([e.path for e in ENDPOINTS]))
        return re.sub(r"\{\w+\}", lambda _: "".join(draw(st.lists(ATOMS, min_size=1,
                                                                  max_size=3))), template)
    segments = draw(st.lists(st.lists(ATOMS, max_size=3).map("".join), max_size=5))
    return "/" + "/".join(segments) + ("/" if draw(st.booleans()) else "")


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(method=st.sampled_from(METHODS), target=targets())
def test_the_router_routes_as_aiohttp_does(method: str, target: str) -> None:
    target = quote(target, safe="/%{}.-_~")  # as a client sends it: non-ASCII escaped
    assert our_answer(method, target) == aiohttp_answer(method, target), (method, target)


def test_every_row_is_reached_with_its_segments() -> None:
    for endpoint in ENDPOINTS:
        names = re.findall(r"\{(\w+)\}", endpoint.path)
        target = re.sub(r"\{(\w+)\}", lambda m: f"v-{m.group(1)}", endpoint.path)
        found = our_answer(endpoint.method, target)
        assert found == (endpoint.name, {name: f"v-{name}" for name in names})
        assert found == aiohttp_answer(endpoint.method, target)
