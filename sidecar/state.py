"""What a running sidecar holds, and typed keys for request state."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from exporter.contract.addresses import Network

from .auth import Verifier
from .limits import Decision, Limiter
from .service import Caller
from .store import Store


class Running:
    """The sidecar's state: the keys' verifier and the open rate from the start; the
    bundle's store and the rate limiter once the application has started."""

    store: Store
    limiter: Limiter

    def __init__(self, verifier: Verifier, anonymous_rate: int,
                 trusted: tuple[Network, ...] = ()) -> None:
        self.verifier = verifier
        self.anonymous_rate = anonymous_rate  # requests a minute per address without a key
        self.trusted = trusted  # proxies whose X-Forwarded-For is believed


RUNNING = web.AppKey("running", Running)
# Request state: who is calling (set once the key, if any, is verified) and the rate-limit
# decision taken for the request, when there is one.
CALLER = web.RequestKey("caller", Caller)
RATE = web.RequestKey("rate", Decision)
# Counts more requests against the caller's rate limit (a JSON-RPC batch's other messages):
# raises the 429 once over it.
Count = Callable[[int], Awaitable[None]]
COUNT: web.RequestKey[Count] = web.RequestKey("count")
