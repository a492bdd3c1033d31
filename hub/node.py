"""HTTP to one node, at the one address the user gave.

Every URL the node names (`next` links, snapshot and record URLs, redirects) is resolved
against that address: a URL under the node's own `base_url` or `sidecar_url` is re-rooted on
it, a path is joined to it, and anything on another origin (scheme, host, port) is an
error, so the key is never sent anywhere else. Every request is bounded: in size (a body
over the cap is refused before it is read), in time (a stalled body is a failure, not a
hang), in retries, and in how long and how often a 429 is waited out."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from yarl import URL

from .errors import SyncError, one_line
from .messages import Manifest
from .waits import backoff, retry_after

log = logging.getLogger("fednode.hub")

MiB = 2 ** 20
REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class Limits:
    """The bounds of one sync run (docs/hub-reference.md lists them)."""

    json_bytes: int = 64 * MiB  # a key description, list or feed page, record
    # A manifest: a hub republishes each member's in its own (docs/hub.md, Trust), so one
    # member cannot make the hub's large.
    manifest_bytes: int = 4 * MiB
    file_bytes: int = 512 * MiB  # a snapshot file or the public change list
    connect_timeout: float = 10.0  # to open a connection
    read_timeout: float = 60.0  # with no byte received: the node stalled
    request_timeout: float = 900.0  # one request from start to end
    attempts: int = 6  # tries of one request on network errors and 5xx answers
    backoff: float = 0.5  # the first pause between tries; it doubles up to 10 s
    rate_waits: int = 30  # 429 answers one request may wait out
    max_wait: float = 300.0  # the longest Retry-After honoured
    pages: int = 100_000  # pages of one list or of the changes feed in one run
    connections: int = 8  # requests in flight at once


def parse_address(text: str) -> URL:
    """The node's address as the user gave it: http(s), a host, maybe a path prefix."""
    example = "e.g. http://127.0.0.1:8000 or https://node.example.org"
    try:
        url = URL(text.strip())
    except (ValueError, TypeError):
        url = URL()
    if url.scheme not in ("http", "https") or not url.host:
        raise SyncError(f"the node address must start with http:// or https:// ({example}); "
                        f"got {one_line(repr(text), 80)}")
    if url.user or url.password:
        raise SyncError("give the node address without a user name or password; pass a key "
                        "with --key or FEDNODE_KEY")
    if url.query_string or url.fragment:
        raise SyncError(f"give the node address without ?query or #fragment ({example})")
    return url.with_path(url.path.rstrip("/"))


def exposed_key(url: URL, key: str | None) -> str | None:
    """A warning when a key would travel unencrypted beyond this machine (http:// to a host
    that is not loopback); None otherwise."""
    host = (url.host or "").lower().strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost" or host.endswith(".localhost")
    if key is None or url.scheme != "http" or loopback:
        return None
    return (f"Warning: the key goes to {url.host} over plain http://, readable and reusable "
            f"by anyone on the way; give the node's https:// address")


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme, (url.host or "").lower(), url.port)


class Node:
    """GET requests to one node, with its key if any, within `limits`."""

    def __init__(self, session: aiohttp.ClientSession, address: URL, key: str | None,
                 limits: Limits, sleep: Callable[[float], Any]) -> None:
        self.session = session
        self.address = address
        self.base = str(address)
        self.key = key
        self.limits = limits
        self.sleep = sleep
        self.roots: tuple[str, ...] = ()  # the node's own base_url and sidecar_url
        # Called with every manifest read before anything of it is used: raises SyncError
        # for one the caller does not trust (a hub's pinned key and node id).
        self.trust: Callable[[Manifest], None] | None = None
        self.manifest: Manifest | None = None  # the last one read and trusted

    def url(self, path: str) -> URL:
        """The URL of a path (with its query) on the node's address."""
        return URL(self.base + path, encoded=True)

    def relative(self, url: URL) -> str:
        """The inverse of url(): the path and query of a resolved URL, for the index."""
        text = str(url)
        assert text.startswith(self.base)
        return text[len(self.base):]

    def resolve(self, link: str, where: str) -> URL:
        """The URL to fetch for a link the node gave; SyncError if it leaves the address."""
        if not isinstance(link, str) or not link.isprintable() or len(link) > 4096:
            raise SyncError(f"{where}: not a usable link: {one_line(repr(link), 80)}")
        for root in self.roots:
            if root and (link == root or link.startswith(root + "/")):
                return self._checked(self.url(link[len(root):]), link, where)
        if link.startswith("/") and not link.startswith("//"):
            return self._checked(self.url(link), link, where)
        try:
            url = URL(link, encoded=True)
        except (ValueError, TypeError):
            raise SyncError(f"{where}: not a usable link: {one_line(repr(link), 80)}") from None
        return self._checked(url, link, where)

    def _checked(self, url: URL, link: str, where: str) -> URL:
        """The link's URL written on the address as given (`relative` reads it back), if it
        is on that address; else SyncError. The same origin may be written otherwise (a host
        in capitals, a user name): it is fetched as the address writes it, or refused."""
        inside = (url.is_absolute() and _origin(url) == _origin(self.address)
                  and url.user is None and url.password is None
                  and (url.path + "/").startswith(self.address.path.rstrip("/") + "/"))
        if not inside:
            raise SyncError(
                f"{where} links to {one_line(link, 120)}, outside {self.base}; fednode sync "
                f"only follows links on the address you gave (a key never leaves it): if "
                f"the node moved, sync from its new address")
        prefix = self.address.raw_path.rstrip("/")
        rebuilt = self.url(url.raw_path_qs[len(prefix):]) \
            if url.raw_path_qs.startswith(prefix) else None
        if rebuilt is None or (rebuilt.path, rebuilt.query_string) != (url.path,
                                                                      url.query_string):
            raise SyncError(f"{where}: not a usable link: {one_line(repr(link), 80)} (its "
                            f"path is written in a way fednode sync does not follow)")
        return rebuilt

    async def get(self, url: URL, *, cap: int, missing_ok: bool = False) -> bytes | None:
        """The body of a 200 answer (None for a 404 when `missing_ok`), retrying network
        errors and 5xx, waiting out 429s, following redirects on the same origin."""
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        limits = self.limits
        failures = waits = hops = 0
        # One request, its tries and pauses included (not the waits a 429 asks for), ends
        # within request_timeout: a node that stalls each try does not get six of them.
        clock = asyncio.get_running_loop().time
        deadline = clock() + limits.request_timeout
        while True:
            remaining = deadline - clock()
            timeout = aiohttp.ClientTimeout(total=max(remaining, 0.001),
                                            connect=limits.connect_timeout,
                                            sock_read=limits.read_timeout)
            try:
                async with self.session.get(url, headers=headers, allow_redirects=False,
                                            timeout=timeout) as response:
                    status = response.status
                    if status == 200:
                        return await self._read(response, url, cap)
                    message = _message(await self._read(response, url, 64 * 1024,
                                                        truncate=True))
                    location = response.headers.get("Location")
                    if status in REDIRECTS and location:
                        hops += 1
                        if hops > 5:
                            raise SyncError(f"{url}: more than 5 redirects; check the address")
                        try:
                            target = str(url.join(URL(location, encoded=True)))
                        except (ValueError, TypeError):
                            raise SyncError(f"{url}: {status} to a location that is not a "
                                            f"URL: {one_line(repr(location), 80)}") from None
                        url = self.resolve(target, f"{url} (redirect)")
                        continue
                    if status == 404 and missing_ok:
                        return None
                    if status == 429:
                        waits += 1
                        waited = clock()
                        await self._wait_out(url, response.headers.get("Retry-After"), waits)
                        deadline += clock() - waited
                        continue
                    if status < 500 and status != 408:
                        raise SyncError(f"{url}: {status} {message}")
                    failure = f"{status} {message}"
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                failure = _describe(exc, limits)
            failures += 1
            pause = backoff(failures, limits.backoff)
            if failures >= limits.attempts or clock() + pause >= deadline:
                within = "" if failures >= limits.attempts else \
                    f" within {limits.request_timeout:.0f} s"
                raise SyncError(f"{url}: {failure} (tried {failures} times{within}); check "
                                f"that the node runs at that address, or try again later")
            log.info("%s: %s; retry %d of %d in %.1f s", url, failure, failures,
                     limits.attempts - 1, pause)
            await self.sleep(pause)

    async def _wait_out(self, url: URL, header: str | None, waits: int) -> None:
        limits = self.limits
        if waits > limits.rate_waits:
            raise SyncError(f"{url}: still rate limited (429) after {limits.rate_waits} waits; "
                            f"try again later or ask the node for a higher rate")
        wait = retry_after(header, datetime.now(UTC))
        if wait is None:
            wait = backoff(waits, 1.0)
        if wait > limits.max_wait:
            raise SyncError(f"{url}: rate limited (429); the node asks to wait "
                            f"{one_line(header or '', 40)}, more than {limits.max_wait:.0f} s: "
                            f"run the sync again later")
        log.info("waiting %.0f s: %s answered 429 (rate limited)", wait, url)
        await self.sleep(wait)

    async def _read(self, response: aiohttp.ClientResponse, url: URL, cap: int,
                    truncate: bool = False) -> bytes:
        declared = response.content_length
        if declared is not None and declared > cap and not truncate:
            raise SyncError(f"{url}: the node announces a body of {_size(declared)}, over the "
                            f"hub's limit of {_size(cap)} for it (docs/hub-reference.md, Limits)")
        data = bytearray()
        async for chunk in response.content.iter_chunked(1 << 16):
            data += chunk
            if len(data) > cap:
                if truncate:
                    return bytes(data[:cap])
                raise SyncError(f"{url}: the body is over the hub's limit of {_size(cap)} for "
                                f"it (docs/hub-reference.md, Limits)")
        return bytes(data)


def _message(body: bytes) -> str:
    """The node's error message, or the start of the body."""
    try:
        return one_line(str(json.loads(body)["error"]["message"]))
    except (ValueError, KeyError, TypeError):
        return one_line(body[:200].decode("utf-8", "replace")) or "(no message)"


def _describe(exc: BaseException, limits: Limits) -> str:
    if isinstance(exc, TimeoutError):
        return (f"no answer (nothing received for {limits.read_timeout:.0f} s, or the request "
                f"took over {limits.request_timeout:.0f} s)")
    return one_line(str(exc) or type(exc).__name__)


def _size(count: int) -> str:
    return f"{count / MiB:.0f} MiB" if count >= MiB else f"{count} bytes"


@asynccontextmanager
async def connect(address: URL, key: str | None, limits: Limits,
                  sleep: Callable[[float], Any] = asyncio.sleep) -> AsyncIterator[Node]:
    timeout = aiohttp.ClientTimeout(total=limits.request_timeout,
                                    connect=limits.connect_timeout,
                                    sock_read=limits.read_timeout)
    connector = aiohttp.TCPConnector(limit=limits.connections)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector,
                                     trust_env=False) as session:
        yield Node(session, address, key, limits, sleep)


def record_path(collection: str, record_id: str) -> str:
    return f"/api/{collection}/{record_id}"


def roots_of(links: Sequence[str | None]) -> tuple[str, ...]:
    return tuple(link.rstrip("/") for link in links if link)
