"""The endpoint table as the sidecar's router: which endpoint a request's method and path ask
for, and the values of the path's `{name}` segments.

It matches as aiohttp's router matches routes added from the table in its order (a GET
route answering HEAD too; beside a POST endpoint, every other method answered with 405):
paths are grouped by what comes before their first `{…}` segment, the longest such prefix
of the request's path is tried first, and within a group the table's order decides.
tests/sidecar/test_routing.py holds the two together on generated paths. The sidecar's runner
(`NodeRunner`) hands every request to the error boundary, which calls `resolve`: a request
is matched once, with no aiohttp router or middleware around its handler. A page's address
without its final slash is sent to the page (`slashed`), as a static server sends a folder's
name to its index."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from exporter.contract.endpoints import Endpoint
from exporter.contract.inputs import InputError, from_json
from exporter.contract.wire import NO_ENDPOINT

from .errors import APIError, MethodNotAllowed, NotFound

_SEGMENT = re.compile(r"\{([_a-zA-Z][_a-zA-Z0-9]*)\}")
_ANY_SEGMENT = r"[^{}/]+"  # aiohttp's: one path segment, not empty
GET_METHODS = frozenset({"GET", "HEAD"})


class Route(NamedTuple):
    endpoint: Endpoint
    segments: dict[str, str]  # the path's `{name}` segments, percent-decoded


class _Entry(NamedTuple):
    endpoint: Endpoint
    pattern: re.Pattern[str] | None  # None: a fixed path, compared as a string
    methods: frozenset[str]


def _compile(path: str) -> re.Pattern[str] | None:
    if "{" not in path:
        return None
    pattern, last = "", 0
    for match in _SEGMENT.finditer(path):
        pattern += re.escape(path[last:match.start()]) + f"(?P<{match.group(1)}>{_ANY_SEGMENT})"
        last = match.end()
    return re.compile(pattern + re.escape(path[last:]))


def _group(path: str) -> str:
    """The prefix a path is filed under: up to its last `/` before the first `{…}`."""
    if "{" in path:
        path = path.partition("{")[0].rpartition("/")[0]
    return path.rstrip("/") or "/"


def _decoded(value: str) -> str:
    """A segment of the path as aiohttp gives it (the path arrives decoded but for `%2F` and
    `%25`, which would change where segments end)."""
    if "%" not in value:
        return value
    return value.replace("%2F", "/").replace("%25", "%")


class Router:
    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self._groups: dict[str, list[_Entry]] = {}
        for endpoint in endpoints:
            methods = GET_METHODS if endpoint.method == "GET" else frozenset({endpoint.method})
            self._groups.setdefault(_group(endpoint.path), []).append(
                _Entry(endpoint, _compile(endpoint.path), methods))

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint it routes to."""
        return [entry.endpoint for entries in self._groups.values() for entry in entries]

    def resolve(self, method: str, path: str) -> Route | APIError:
        """The endpoint and segments of `path` (decoded but for %2F and %25, as
        `request.rel_url.path_safe` gives it); else the error to answer with: 405 naming
        the methods allowed on the path, or 404. Returned, not raised: the caller is
        admitted (its key checked, its request counted) before any answer."""
        allowed: set[str] = set()
        part = path
        while part:
            for entry in self._groups.get(part, ()):
                if entry.pattern is None:
                    if entry.endpoint.path != path:
                        continue
                    segments: dict[str, str] = {}
                else:
                    match = entry.pattern.fullmatch(path)
                    if match is None:
                        continue
                    segments = {name: _decoded(value)
                                for name, value in match.groupdict().items()}
                if method in entry.methods:
                    return Route(entry.endpoint, segments)
                if entry.endpoint.method != "GET":  # its path answers nothing else
                    return _not_allowed(method, entry.methods)
                allowed |= entry.methods
            if part == "/":
                break
            part = part.rpartition("/")[0] or "/"
        if allowed:
            return _not_allowed(method, allowed)
        return NotFound(NO_ENDPOINT)

    def slashed(self, method: str, path: str) -> str | None:
        """Where a GET of a page's address without its final slash (`/search`, `/species`)
        is sent: the page's address (`/search/`), if that is a page whose segments name one
        (`/plants` is no collection, and stays a 404); else None."""
        if method not in GET_METHODS or path.endswith("/"):
            return None
        found = self.resolve(method, path + "/")
        if not isinstance(found, Route) or not found.endpoint.page:
            return None
        try:
            from_json(found.endpoint.segments, found.segments)
        except InputError:
            return None
        return path + "/"


def _not_allowed(method: str, allowed: Iterable[str]) -> MethodNotAllowed:
    names = ", ".join(sorted(allowed))
    return MethodNotAllowed(f"{method} is not allowed on this path; use {names}",
                            headers={"Allow": names})
