"""Application wiring: `create_app(config) -> web.Application`."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from exporter.contract.wire import error_body

from . import handlers
from .auth import (
    Policy,
    Principal,
    SlidingWindowLimiter,
    Verifier,
    check_policy,
    extract_token,
    rate_limited,
)
from .errors import APIError, MethodNotAllowed, NotFound
from .state import ACCESS, ANONYMOUS_RATE, LIMITER, PRINCIPAL, RATE, STORE, VERIFIER
from .store import Store

log = logging.getLogger("fednode.sidecar")
access_log = logging.getLogger("fednode.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
KEY_HEADERS = "Authorization, X-API-Key"


@dataclass(frozen=True)
class SidecarConfig:
    bundle: Path
    private: Path  # holds keys.json and, unless FEDNODE_SECRET is set, the signing secret
    anonymous_rate: int = 600  # requests a minute per client address without a key; 0: off
    query_timeout: float = 10.0
    threads: int = 4
    reload_interval: float = 1.0  # seconds between checks for a newer bundle


def _error_response(error: APIError) -> web.Response:
    response = web.Response(body=error_body(error.code, error.message), status=error.status,
                            content_type="application/json", charset="utf-8")
    response.headers.update(error.headers)
    return response


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The one place that turns exceptions into what clients see. Every response, errors
    and preflights included, carries X-Node-Access; keyed ones are private and carry the
    key's rate-limit state."""
    started = time.perf_counter()
    response: web.StreamResponse
    try:
        if request.method == "OPTIONS":
            response = handlers.preflight()
        else:
            response = await handler(request)
    except APIError as error:
        response = _error_response(error)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        response = _error_response(MethodNotAllowed(
            f"{request.method} is not allowed on {request.path}; use {allowed}",
            headers={"Allow": allowed}))
    except web.HTTPNotFound:
        response = _error_response(NotFound(
            f"no endpoint at {request.path}; see /api/manifest for the endpoints"))
    except web.HTTPException as exc:
        response = _error_response(APIError(exc.reason))
        response.set_status(exc.status)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        response = _error_response(APIError(
            "the node failed to answer; the error is logged, try again later"))
    response.headers["X-Node-Access"] = request.get(ACCESS, "open")
    response.headers.setdefault("Vary", KEY_HEADERS)
    decision = request.get(RATE)
    if decision is not None:
        response.headers.update(decision.headers())
    if PRINCIPAL in request:
        response.headers["Cache-Control"] = "private, max-age=0"
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Access-Control-Expose-Headers"] = (
        "X-Node-Access, ETag, Retry-After, RateLimit-Limit, RateLimit-Remaining, "
        "RateLimit-Reset")
    access_log.info('%s %s %s %s %.1fms', request.method, request.path, response.status,
                    request.get(ACCESS, "open"), (time.perf_counter() - started) * 1000)
    return response


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Identify the caller, count the request against its per-minute rate, and check the
    endpoint's policy before the handler runs."""
    principal = None
    token = extract_token(request)
    if token is not None:
        node_id = (await request.app[STORE].current()).meta.node_id
        principal = Principal(request.app[VERIFIER].verify(token, node_id))
        request[ACCESS] = principal.access
        request[PRINCIPAL] = principal
        decision = request.app[LIMITER].hit(principal.access, principal.key.rate)
    elif request.app[ANONYMOUS_RATE]:
        decision = request.app[LIMITER].hit(f"addr:{request.remote}",
                                            request.app[ANONYMOUS_RATE])
    else:
        decision = None
    if decision is not None:
        request[RATE] = decision
        if not decision.allowed:
            raise rate_limited(decision)
    found: Policy | None = getattr(request.match_info.handler, "__fednode_policy__", None)
    check_policy(found, principal)
    return await handler(request)


def create_app(config: SidecarConfig) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, auth_middleware],
                          client_max_size=64 * 1024)
    app[VERIFIER] = Verifier(config.private)
    app[LIMITER] = SlidingWindowLimiter()
    app[ANONYMOUS_RATE] = config.anonymous_rate

    async def store_ctx(app: web.Application) -> AsyncIterator[None]:
        store = Store(config.bundle, query_timeout=config.query_timeout, threads=config.threads,
                      reload_interval=config.reload_interval)
        app[STORE] = store
        yield
        store.close()

    app.cleanup_ctx.append(store_ctx)
    handlers.add_routes(app)
    return app
