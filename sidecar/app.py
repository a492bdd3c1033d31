"""Application wiring: `create_app(config) -> web.Application`, and `NodeRunner` to serve it.

The application holds the sidecar's state and lifecycle (the bundle's store, keys, rate
limiter). `NodeRunner` hands every request parsed on its connections straight to the error
boundary, `dispatch` (a plain AppRunner reaches it through one catch-all route): the one
place that turns exceptions into the contract's error bodies, and that stamps the headers
every response carries. It finds the endpoint with the endpoint table's router (`routing`),
admits the request (`admit`: CORS preflights answered at once; else who is calling, their
per-minute rate, the endpoint's key and scope policy from the table) and then calls the
endpoint's handler. Requests too malformed to be parsed are answered by
`ContractRequestHandler`, in the same form."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import http_exceptions, web, web_protocol, web_server
from yarl import URL

from exporter.contract.addresses import networks
from exporter.contract.endpoints import ENDPOINTS, Endpoint
from exporter.contract.wire import BODY_LIMIT, error_body

from . import access_log, handlers, service
from .access_log import AccessLogger, printable
from .auth import Verifier, check_policy, extract_token
from .errors import (
    APIError,
    InvalidApiKey,
    InvalidParameter,
    MethodNotAllowed,
    for_status,
)
from .limits import Limiter, MemoryLimiter, RedisLimiter, rate_limited
from .params import CONTINUE, expectation
from .proxies import FORWARDED_FOR, client_address
from .routing import Route, Router
from .state import CALLER, COUNT, RATE, RUNNING, Running
from .store import Store
from .visibility import Caller

log = logging.getLogger("fednode.sidecar")

ROUTER = Router(ENDPOINTS)
KEY_HEADERS = "Authorization, X-API-Key"
EXPOSED = ("X-Node-Access, ETag, Retry-After, RateLimit-Limit, RateLimit-Remaining, "
           "RateLimit-Reset")


@dataclass(frozen=True)
class SidecarConfig:
    bundle: Path
    private: Path  # holds keys.json and, unless FEDNODE_SECRET is set, the signing secret
    anonymous_rate: int = 600  # requests a minute per client address without a key; 0: off
    # proxies whose X-Forwarded-For gives the client address (`sidecar.proxies`)
    trusted_proxies: tuple[str, ...] = ()
    query_timeout: float = 10.0
    threads: int = 4
    reload_interval: float = 1.0  # seconds between checks for a newer bundle
    clock: Callable[[], float] = time.time  # the time keys expire by
    redis: str | None = None  # rate-limit windows in this Redis (else in the process)


def error_response(error: APIError) -> web.Response:
    response = web.Response(body=error_body(error.code, error.message), status=error.status,
                            content_type="application/json", charset="utf-8")
    response.headers.update(error.headers)
    return response


async def dispatch(running: Running, request: web.Request) -> web.StreamResponse:
    """Every request: the one place that turns exceptions into what clients see; every
    answer leaves it with the contract's headers. The endpoint table's router (`routing`)
    picks the endpoint; the caller is admitted before anything is answered, a path without
    an endpoint included. (`NodeRunner` calls it for every request, with no aiohttp router or
    middleware around it; a plain AppRunner, through the application's one route. No handler
    streams, so the headers are stamped here.)"""
    response: web.StreamResponse | None
    try:
        found = ROUTER.resolve(request.method, request.rel_url.path_safe)
        response = await admit(running, request,
                               found.endpoint if isinstance(found, Route) else None)
        if response is None:
            if isinstance(found, Route):
                if expectation(request) not in ("", CONTINUE):  # met where a body is read
                    raise InvalidParameter("the only Expect this node meets is 100-continue; "
                                           "send the request without that header")
                response = await handlers.handle(request, found, running.store)
            elif ROUTER.slashed(request.method, request.rel_url.path_safe) is not None:
                response = slash_added(request.rel_url)
            else:
                raise found  # 404 or 405, once the caller is admitted
    except APIError as error:
        response = error_response(error)
    except ConnectionError:  # the client went away: nothing to answer (ContractRequestHandler)
        raise
    except web.HTTPException as exc:
        response = error_response(for_status(exc.status, exc.reason))
    except Exception:
        log.exception("unhandled error on %s %s", request.method, printable(request.raw_path))
        response = error_response(APIError("the node failed to answer; the error is logged, "
                                           "try again later"))
    contract_headers(response, request.get(CALLER))
    decision = request.get(RATE)
    if decision is not None:
        response.headers.update(decision.headers())
    return response


def slash_added(url: URL) -> web.Response:
    """A page's address asked without its final slash: sent to the page, its query kept."""
    query = url.raw_query_string
    return web.Response(status=301, headers={
        "Location": url.raw_path + "/" + (f"?{query}" if query else ""),
        "Cache-Control": "public, max-age=3600"})


PREFLIGHT = {
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, X-API-Key, Content-Type, "
                                    "MCP-Protocol-Version, Mcp-Session-Id, Mcp-Method, "
                                    "Mcp-Name, If-None-Match",
    "Access-Control-Max-Age": "86400",
}


async def admit(running: Running, request: web.Request, endpoint: Endpoint | None
                ) -> web.Response | None:
    """Before the handler runs: identify the caller, count the request against its
    per-minute rate, and check the policy the endpoint table gives `endpoint` (None: the
    path has none). A request without a key, or with a bad one, counts against the client
    address. Every CORS preflight (OPTIONS), whatever the path, gets the same answer,
    uncounted: that answer is returned; an admitted request gets None."""
    if request.method == "OPTIONS":
        return web.Response(status=204, headers=PREFLIGHT)
    try:
        token = extract_token(request)
        key = None
        if token is not None:
            key = running.verifier.verify(token, (await running.store.current()).meta.node_id)
    except InvalidApiKey:  # guessing keys is rate-limited
        await _count(running, request, _address_bucket(running, request),
                     running.anonymous_rate)
        raise
    caller = request[CALLER] = Caller(key)
    bucket, limit = (caller.access, key.rate) if key is not None else \
        (_address_bucket(running, request), running.anonymous_rate)
    await _count(running, request, bucket, limit)

    async def count_more(more: int) -> None:
        for _ in range(more):
            await _count(running, request, bucket, limit)
    request[COUNT] = count_more
    if endpoint is not None:
        check_policy(endpoint, key)
    return None


def _address_bucket(running: Running, request: web.Request) -> str:
    """The bucket of a request without a (good) key: its client's address."""
    forwarded = request.headers.getall(FORWARDED_FOR, []) if running.trusted else []
    return "addr:" + client_address(request.remote, forwarded, running.trusted)


async def _count(running: Running, request: web.Request, bucket: str, limit: int) -> None:
    """One request against `bucket`'s per-minute limit (0: no limit); 429 when over it."""
    if not limit:
        return
    decision = request[RATE] = await running.limiter.hit(bucket, limit)
    if not decision.allowed:
        raise rate_limited(decision)


def contract_headers(response: web.StreamResponse, caller: Caller | None) -> None:
    """The headers every response carries: who it was served under, CORS, caching."""
    out = response.headers
    out["X-Node-Access"] = caller.access if caller else "open"
    out.setdefault("Vary", KEY_HEADERS)
    if caller is not None and caller.key is not None:
        out["Cache-Control"] = "private, max-age=0"
    out["Access-Control-Allow-Origin"] = "*"
    out["Access-Control-Expose-Headers"] = EXPOSED


# Seconds a connection may wait for its next whole request: longer than the idle time of
# the proxies put in front of a server (nginx and AWS load balancers keep an idle upstream
# connection 60 s; closing first, the sidecar would make them fail requests they reuse it
# for), far shorter than aiohttp's hour.
KEEPALIVE = 75.0


def create_app(config: SidecarConfig) -> web.Application:
    app = web.Application(
        client_max_size=BODY_LIMIT,
        handler_args={"access_log_class": AccessLogger, "access_log": access_log.logger,
                      # A body is read as it was sent (`params.read_body` refuses any
                      # Content-Encoding): aiohttp would inflate a gzip body of 2 MB into
                      # 2 GiB on the event loop, stalling every caller.
                      "auto_decompress": False,
                      # A connection that sends no whole request for this long is closed:
                      # one that sends nothing, or headers a byte at a time, held a socket
                      # for an hour (aiohttp's default), and a few hundred ran out of them.
                      "keepalive_timeout": KEEPALIVE})
    running = app[RUNNING] = Running(Verifier(config.private, clock=config.clock),
                                     config.anonymous_rate, networks(config.trusted_proxies))

    async def store_ctx(app: web.Application) -> AsyncIterator[None]:
        store = Store(config.bundle, query_timeout=config.query_timeout, threads=config.threads,
                      reload_interval=config.reload_interval, prepare=service.prepare)
        running.store = store
        limiter: Limiter = MemoryLimiter()
        if config.redis:
            limiter = RedisLimiter(config.redis, store.snapshot.meta.node_id)
            try:
                await limiter.ping()
            except APIError:
                await limiter.close()
                store.close()
                raise
        running.limiter = limiter
        running.verifier.attach(asyncio.get_running_loop())
        following = asyncio.ensure_future(store.follow())
        yield
        following.cancel()
        await limiter.close()
        store.close()
        running.verifier.close()

    app.cleanup_ctx.append(store_ctx)
    # NodeRunner hands every request to `dispatch` itself. Served by a plain AppRunner
    # (`web.run_app`, gunicorn's aiohttp worker), requests reach the same boundary through
    # this one route, every path (line breaks included: an escaped one decodes to one), with
    # `Expect` left to `dispatch`.
    app.router.add_route("*", r"/{path:[\s\S]*}", functools.partial(dispatch, running),
                         expect_handler=_expect_nothing)
    # NodeRunner runs none of aiohttp's application layers: refuse what it would skip.
    app.on_startup.append(_only_the_boundary)
    return app


async def _expect_nothing(request: web.Request) -> None:
    """aiohttp's step for `Expect` on a route: none (`dispatch` checks it once the caller is
    admitted, and `params.read_body` meets it when the body is read)."""


async def _only_the_boundary(app: web.Application) -> None:
    """At start: nothing is added to the application that NodeRunner would skip."""
    routes = [route for route in app.router.routes() if route.resource is not None]
    if app.middlewares or len(app.on_response_prepare) or len(routes) != 1:
        raise RuntimeError("the sidecar's application takes no middleware, response hook or "
                           "route of its own: NodeRunner sends every request to dispatch")


class ContractRequestHandler(web_protocol.RequestHandler):
    """Answers requests that aiohttp's parser refuses (over-long lines or headers, unknown
    or lower-case methods, broken framing) with the contract's JSON error and headers,
    instead of a plain-text 400."""

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # as aiohttp does: never a second response
            raise ConnectionError("a response was partly sent; closing the connection")
        if isinstance(exc, ConnectionError) and (self.transport is None
                                                 or self.transport.is_closing()):
            raise ConnectionError("the client closed the connection")  # nothing to log
        if status >= 500:
            self.log_exception("error handling a request", exc_info=exc)
            error = APIError("the node failed to answer; the error is logged, try again later")
        elif isinstance(exc, http_exceptions.BadHttpMethod):
            error = MethodNotAllowed("unknown method; use GET, POST or OPTIONS (in capitals)",
                                     headers={"Allow": "GET, POST, OPTIONS"})
        elif isinstance(exc, http_exceptions.LineTooLong):
            error = for_status(400, "the request line or a header is too long (8190 bytes at "
                                    "most); send a shorter URL or header")
        else:
            error = for_status(400, "the request is not valid HTTP/1.1; check the request "
                                    "line, headers and body framing")
        response = error_response(error)
        contract_headers(response, None)
        response.force_close()
        return response


class _ContractServer(web_server.Server):
    # Checked against aiohttp 3.14: Server.__call__ builds one RequestHandler a connection
    # from `_loop` and `_kwargs`; this builds ours from the same.
    def __call__(self) -> web_protocol.RequestHandler:
        return ContractRequestHandler(self, loop=self._loop, **self._kwargs)


class NodeRunner(web.AppRunner):
    """Runs the sidecar's application: every request goes to `dispatch`, with no aiohttp
    router or middleware around it (through them, a keyed record read took about a sixth
    more server time), and even unparseable requests are answered by the contract."""

    async def _make_server(self) -> web_server.Server:
        server = await super()._make_server()  # starts the application: loads the bundle
        server.__class__ = _ContractServer
        # Each request is a web.Request (the application's request factory, which applies
        # its body limit), with no match info.
        server.request_handler = functools.partial(  # type: ignore[assignment]
            dispatch, self.app[RUNNING])
        return server
