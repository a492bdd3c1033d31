"""Typed keys for application and request state."""

from __future__ import annotations

from aiohttp import web

from .store import Store

STORE = web.AppKey("store", Store)
# Request key holding the X-Node-Access value: "open" or "key:<id>".
ACCESS = "fednode.access"
