"""Typed keys for application and request state."""

from __future__ import annotations

from aiohttp import web

from .auth import Verifier
from .limits import Decision, Limiter
from .service import Caller
from .store import Store

STORE = web.AppKey("store", Store)
VERIFIER = web.AppKey("verifier", Verifier)
LIMITER = web.AppKey("limiter", Limiter)
ANONYMOUS_RATE = web.AppKey("anonymous_rate", int)
# Request state: who is calling (set once the key, if any, is verified) and the rate-limit
# decision taken for the request, when there is one.
CALLER = web.RequestKey("caller", Caller)
RATE = web.RequestKey("rate", Decision)
