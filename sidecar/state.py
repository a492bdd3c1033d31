"""Typed keys for application and request state."""

from __future__ import annotations

from aiohttp import web

from .auth import Decision, Principal, SlidingWindowLimiter, Verifier
from .store import Store

STORE = web.AppKey("store", Store)
VERIFIER = web.AppKey("verifier", Verifier)
LIMITER = web.AppKey("limiter", SlidingWindowLimiter)
ANONYMOUS_RATE = web.AppKey("anonymous_rate", int)
# Request state: the X-Node-Access value ("open" or "key:<id>"), the caller's Principal and
# the rate-limit decision taken for the request, when there are any.
ACCESS = web.RequestKey("access", str)
PRINCIPAL = web.RequestKey("principal", Principal)
RATE = web.RequestKey("rate", Decision)
