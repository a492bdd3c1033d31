"""Per-minute rate limits: exactly `limit` requests in any 60-second window, per bucket (a
key, or a client address).

Two limiters keep the same windows. `MemoryLimiter` keeps them in the process: the default,
needing nothing, right for one worker. `RedisLimiter` keeps them in Redis, one sorted set a
bucket, changed by one Lua script run atomically on the server, by the server's clock: exact
across worker processes and across hosts behind a load balancer. When Redis cannot be
reached a counted request is refused with 503 `unavailable` (fail closed): a limit that
cannot be counted is not granted."""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

from .errors import RateLimited, Unavailable

log = logging.getLogger("fednode.sidecar")
WINDOW = 60.0  # seconds: rates are per minute


class Decision(NamedTuple):  # a tuple: made on every request, at a third of a dataclass's cost
    allowed: bool
    limit: int
    remaining: int
    reset: int  # seconds until a request is freed
    retry_after: int

    def headers(self) -> dict[str, str]:
        return {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining),
                "RateLimit-Reset": str(self.reset)}


def rate_limited(decision: Decision) -> RateLimited:
    return RateLimited(f"over the limit of {decision.limit} requests a minute; retry after "
                       f"{decision.retry_after} s",
                       headers={"Retry-After": str(decision.retry_after)})


class Limiter(Protocol):
    async def hit(self, bucket: str, limit: int) -> Decision:
        """Count one request against `bucket` if it is under `limit`; say what was decided."""

    async def close(self) -> None: ...


def _decision(allowed: bool, limit: int, count: int, oldest: float, now: float) -> Decision:
    """From the window after the request: `count` requests in it; `oldest`, the time of the
    oldest (allowed), or of the one whose leaving the window lets one more in (refused)."""
    if not allowed:
        wait = max(1, math.ceil(oldest + WINDOW - now))
        return Decision(False, limit, 0, wait, wait)
    return Decision(True, limit, limit - count, math.ceil(oldest + WINDOW - now), 0)


class MemoryLimiter:
    """The windows in this process. Decisions are taken on the event loop without awaiting,
    so concurrent requests are counted exactly; other processes do not see them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}

    async def hit(self, bucket: str, limit: int) -> Decision:
        now = self._clock()
        hits = self._hits.get(bucket)
        if hits is None:
            hits = self._hits[bucket] = deque()
        while hits and hits[0] <= now - WINDOW:
            hits.popleft()
        allowed = len(hits) < limit
        if allowed:
            hits.append(now)
        if len(self._hits) > 50_000:
            self._prune(now)
        # refused: when enough requests leave the window that one more fits (not when the
        # oldest leaves: a key whose rate was lowered is over its limit by more than one)
        return _decision(allowed, limit, len(hits),
                         hits[0] if allowed else hits[len(hits) - limit], now)

    def _prune(self, now: float) -> None:
        for bucket in [b for b, h in self._hits.items() if not h or h[-1] <= now - WINDOW]:
            del self._hits[bucket]

    async def close(self) -> None:
        pass


# KEYS[1]: the bucket's sorted set (members: requests, scores: their times in microseconds).
# ARGV: window (µs), limit, a member name unique to this request. Returns allowed (0/1), the
# count in the window after the request, the time of its oldest request (refused: of the one
# whose leaving lets one more in) and the server's time.
_WINDOW_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  count = count + 1
  allowed = 1
end
local index = 0
if allowed == 0 then index = count - tonumber(ARGV[2]) end  -- the one whose leaving frees one
local oldest = redis.call('ZRANGE', KEYS[1], index, index, 'WITHSCORES')
return {allowed, count, oldest[2] or tostring(now), tostring(now)}
"""


class RedisLimiter:
    """The windows in Redis, shared by every process that uses the same server and node."""

    def __init__(self, url: str, node_id: str, *, timeout: float = 0.5) -> None:
        import redis.asyncio as redis  # only a node configured for Redis needs the client

        self._errors = (redis.RedisError, OSError)
        self.where = where_of(url)
        self._client = redis.Redis.from_url(url, socket_timeout=timeout,
                                            socket_connect_timeout=timeout)
        self._script = self._client.register_script(_WINDOW_SCRIPT)
        self._prefix = f"fednode:{node_id}:rate:"
        self._unique = f"{os.getpid()}-{os.urandom(4).hex()}-"
        self._sequence = 0

    async def hit(self, bucket: str, limit: int) -> Decision:
        self._sequence += 1
        try:
            allowed, count, oldest, now = await self._script(
                keys=[self._prefix + bucket],
                args=[int(WINDOW * 1_000_000), limit, f"{self._unique}{self._sequence}"])
        except self._errors as exc:
            log.warning("rate limiter: Redis at %s failed: %s", self.where, exc)
            raise Unavailable("this node cannot count requests right now (its rate limiter, "
                              "Redis, does not answer); try again shortly, and tell the "
                              "node's operator if it lasts") from None
        return _decision(bool(allowed), limit, int(count), float(oldest) / 1e6,
                         float(now) / 1e6)

    async def ping(self) -> None:
        """Raise Unavailable unless Redis answers (checked at start)."""
        try:
            await self._client.ping()  # type: ignore[misc]
        except self._errors as exc:
            raise Unavailable(f"Redis at {self.where} does not answer ({exc}); start it, or "
                              f"check --redis / [sidecar] redis in content/node.toml") from None

    async def close(self) -> None:
        await self._client.aclose()


def where_of(url: str) -> str:
    """The URL without its credentials, for messages and logs."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" \
           f"{parts.path}"
