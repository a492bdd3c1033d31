"""Every endpoint of the node, once: method, path, access, scope, parameters, body, result.

This table is plain data. The sidecar's routes and its key/scope policy, the manifest's
`capabilities`, `endpoints` and `authentication` sections, and the tests' list of
endpoints are all computed from it (a test fails if a route exists that it does not
describe, or the reverse). Adding an endpoint is a row here, a service function and a
handler of a few lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .wire import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
)

# 9 223 372 036 854 775 807 is the largest 64-bit integer; offsets and such stay below it.
INTEGER_MAX = 2**63 - 1


@dataclass(frozen=True)
class Param:
    name: str
    kind: Literal["integer", "timestamp", "cursor", "string"]
    description: str
    required: bool = False
    default: int | None = None
    low: int = 0
    high: int = INTEGER_MAX
    exclusive: bool = False  # a timestamp that excludes its own instant (rounds down)


@dataclass(frozen=True)
class Endpoint:
    name: str  # the route's name, the manifest's key
    method: Literal["GET", "POST"]
    path: str  # aiohttp's path syntax: {name} is a path segment
    access: Literal["open", "keyed"]  # keyed: a key is required
    scope: str | None  # the scope a key needs here; None: any valid key, or none at all
    returns: str  # the content type of a success
    summary: str
    params: tuple[Param, ...] = ()
    body: Literal["none", "json"] = "none"
    capability: str | None = None  # what the manifest claims when the endpoint is offered
    offered: bool = True  # False: keys and scopes are checked, then 404 says "not yet"
    public: bool = False  # static: the CDN may serve it from site_out/
    page: bool = False  # for people (HTML, sitemaps): not listed in the manifest
    static: str | None = None  # the file under site_out/ that answers it, if not at `path`


JSON = "application/json"
NDJSON = "application/x-ndjson"
HTML = "text/html"
XML = "application/xml"
TEXT = "text/plain"

_LIMIT = Param("limit", "integer", "page size", default=LIST_LIMIT_DEFAULT, low=1,
               high=LIST_LIMIT_MAX)
_OFFSET = Param("offset", "integer", "records skipped", default=0)

# Fixed paths come before the paths with a {collection} segment: aiohttp matches in order.
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("index", "GET", "/", "open", None, HTML, "The node's home page for people",
             public=True, page=True),
    Endpoint("sitemap", "GET", "/sitemap.xml", "open", None, XML,
             "Every page for people, for crawlers (or the index of the sitemaps/ files)",
             public=True, page=True),
    Endpoint("sitemap_part", "GET", "/sitemaps/{page}.xml", "open", None, XML,
             "A part of the sitemap, when the node has more than 50,000 pages", public=True,
             page=True),
    Endpoint("robots", "GET", "/robots.txt", "open", None, TEXT, "Rules for crawlers",
             public=True, page=True),
    Endpoint("stylesheet", "GET", "/site.css", "open", None, "text/css",
             "The stylesheet of the pages for people", public=True, page=True),
    Endpoint("manifest", "GET", "/api/manifest", "open", None, JSON,
             "Node identity, collections, capabilities, authentication",
             capability="manifest", public=True, static="/api/manifest.json"),
    Endpoint("schema", "GET", "/api/schema", "open", None, JSON,
             "JSON Schema of every collection", capability="schema", public=True,
             static="/api/schema.json"),
    Endpoint("openapi", "GET", "/api/openapi.json", "open", None, JSON,
             "OpenAPI 3.1 description of this API", capability="openapi", public=True),
    Endpoint("key", "GET", "/api/keys/me", "keyed", None, JSON,
             "What the calling key holds", capability="keys"),
    Endpoint("changes", "GET", "/api/changes", "keyed", "changes", JSON,
             "What changed since a moment, as this key sees it", capability="changes",
             params=(Param("since", "timestamp", "events after this moment (exclusive); "
                                                 "pass the last `until`", required=True,
                           exclusive=True),
                     Param("limit", "integer", "items a page", default=CHANGES_LIMIT_DEFAULT,
                           low=1, high=CHANGES_LIMIT_MAX),
                     Param("cursor", "cursor", "from the `next` link"))),
    Endpoint("sync_changes", "GET", "/api/sync/changes.ndjson", "open", "read", NDJSON,
             "The public change list", capability="sync", public=True),
    Endpoint("sync_snapshot", "GET", "/api/sync/{collection}/{offset}.ndjson", "open", "read",
             NDJSON, "A chunk of the public snapshot of a collection", capability="sync",
             public=True),
    Endpoint("search", "GET", "/api/search", "open", "search", JSON,
             "Keyword and semantic search across every collection", capability="search",
             params=(Param("q", "string", "what to search for"),
                     Param("query", "string", "the same as q"),
                     Param("collections", "string", "comma-separated collections; all when "
                                                    "left out"),
                     Param("limit", "integer", "results", default=SEARCH_LIMIT_DEFAULT, low=1,
                           high=SEARCH_LIMIT_MAX),
                     Param("mode", "string", "keyword, semantic or hybrid (the default)"))),
    Endpoint("mcp", "POST", "/api/mcp", "keyed", "mcp", JSON, "Tool interface for AI agents",
             body="json", capability="mcp"),
    Endpoint("ask", "POST", "/api/library/ask", "keyed", "library", JSON,
             "Grounded answers from the document library, citing pages", body="json",
             capability="library"),
    Endpoint("library_file", "GET", "/library/{file}", "open", "read", "application/pdf",
             "A PDF of the document library", capability="library", public=True),
    Endpoint("dwca", "GET", "/download/species-dwca.zip", "open", "read", "application/zip",
             "Darwin Core Archive of the public species, for GBIF (DWC_ARCHIVE)",
             capability="downloads", public=True),
    Endpoint("download", "GET", "/download/{collection}.csv", "open", "read", "text/csv",
             "A collection's public records as one CSV table", capability="downloads",
             public=True),
    Endpoint("list", "GET", "/api/{collection}", "open", "read", JSON,
             "A page of a collection's records", capability="lists",
             params=(_LIMIT, _OFFSET, Param("updated_since", "timestamp",
                                            "records updated at or after this moment")),
             public=True, static="/api/{collection}/index.json"),
    Endpoint("record", "GET", "/api/{collection}/{id}", "open", "read", JSON,
             "One record", capability="records", public=True,
             static="/api/{collection}/{shard}/{id}.json"),
    # Pages for people (exporter/site/pages.py): none of them starts with /api/ or /library/.
    Endpoint("collection_page", "GET", "/{collection}/", "open", None, HTML,
             "The first page of a collection's public records, for people", public=True,
             page=True),
    Endpoint("collection_page_n", "GET", "/{collection}/{page}.html", "open", None, HTML,
             "A further page of a collection's public records, for people", public=True,
             page=True),
    Endpoint("record_page", "GET", "/{collection}/{shard}/{id}.html", "open", None, HTML,
             "One public record, for people (shard: the first byte of the SHA-256 of the id, "
             "in hex)",
             public=True, page=True),
)
BY_NAME: dict[str, Endpoint] = {e.name: e for e in ENDPOINTS}


def capabilities() -> list[str]:
    """What this build of fednode serves: the manifest claims nothing more."""
    return list(dict.fromkeys(e.capability for e in ENDPOINTS if e.offered and e.capability))


def manifest_endpoints(base_url: str, sidecar_url: str) -> dict[str, dict[str, Any]]:
    """The manifest's `endpoints`: every offered endpoint but the home page, with the URL
    to call it at (keyed endpoints live at the sidecar)."""
    described: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        if not e.offered or e.page:
            continue
        entry: dict[str, Any] = {"method": e.method, "path": e.path, "access": e.access}
        if e.scope:
            entry["scope"] = e.scope  # a key used here needs it
        if e.params:
            entry["parameters"] = [p.name for p in e.params]
        root = sidecar_url if e.access == "keyed" else base_url
        entry["url"] = root + e.path
        described[e.name] = entry
    return described


def access_lists() -> tuple[list[str], list[str]]:
    """The names of the offered open and keyed endpoints, for the manifest."""
    offered = [e for e in ENDPOINTS if e.offered and not e.page]
    return ([e.name for e in offered if e.access == "open"],
            [e.name for e in offered if e.access == "keyed"])
