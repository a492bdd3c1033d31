"""Every endpoint of the node, once: method, path, access, scope, inputs, result.

This table is plain data. The sidecar's routes and its key/scope policy, its checks of
query strings and bodies (`inputs.from_query`, `inputs.from_json`), the MCP tools' input
schemas, the OpenAPI document, the manifest's `capabilities`, `endpoints` and
`authentication` sections, and the tests' list of endpoints are all computed from it (a
test fails if a route exists that it does not describe, or the reverse). Adding an
endpoint is a row here, a service function and a handler of a few lines
(docs/architecture.md shows one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .inputs import Field
from .wire import (
    ASK_LIMIT_DEFAULT,
    ASK_LIMIT_MAX,
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    COLLECTIONS,
    LIBRARY_CONTRACT,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    QUESTION_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX,
    TIME_PATTERN,
    UUID_PATTERN,
)


@dataclass(frozen=True)
class Endpoint:
    name: str  # the route's name, the manifest's key
    method: Literal["GET", "POST"]
    path: str  # aiohttp's path syntax: {name} is a path segment
    access: Literal["open", "keyed"]  # keyed: a key is required
    scope: str | None  # the scope a key needs here; None: any valid key, or none at all
    returns: str  # the content type of a success
    summary: str
    fields: tuple[Field, ...] = ()  # what it takes: path segments, query, body
    body: Literal["none", "json"] = "none"
    jsonrpc: bool = False  # the body is a JSON-RPC message, answered in that protocol
    result: str | None = None  # the OpenAPI component a success is, if JSON
    capability: str | None = None  # what the manifest claims when the endpoint is offered
    offered: bool = True  # False: keys and scopes are checked, then 404 says "not yet"
    public: bool = False  # static: the CDN may serve it from site_out/
    page: bool = False  # for people (HTML, sitemaps): not listed in the manifest
    static: str | None = None  # the file under site_out/ that answers it, if not at `path`
    version: str | None = None  # the version of what it answers, where that can change

    @property
    def params(self) -> tuple[Field, ...]:
        """The query parameters."""
        return tuple(field for field in self.fields if field.where == "query")

    @property
    def body_fields(self) -> tuple[Field, ...]:
        return tuple(field for field in self.fields if field.where == "body")

    @property
    def segments(self) -> tuple[Field, ...]:
        """The path's segments, in the path's order."""
        return tuple(field for field in self.fields if field.where == "path")


JSON = "application/json"
NDJSON = "application/x-ndjson"
HTML = "text/html"
XML = "application/xml"
TEXT = "text/plain"

_LIMIT = Field("limit", "integer", "page size", default=LIST_LIMIT_DEFAULT, low=1,
               high=LIST_LIMIT_MAX)
_OFFSET = Field("offset", "integer", "records skipped", default=0)
# Path segments. A segment that is not of its form names nothing: the answer is 404.
_COLLECTION = Field("collection", "choice", choices=COLLECTIONS, where="path")
RECORD_ID = Field("id", "pattern", "a record UUID such as "
                  "'c80b1c40-8745-4e4e-9194-7448008fe1a7'", pattern=UUID_PATTERN,
                  any_case=True, where="path")
_SHARD = Field("shard", "pattern", pattern="[0-9a-f]{2}", where="path")
_OFFSET_SEGMENT = Field("offset", "pattern", pattern="[0-9]+", where="path")
_PAGE = Field("page", "pattern", pattern="[0-9]+", where="path")
_FILE = Field("file", "pattern", pattern=f"{UUID_PATTERN}\\.pdf", where="path")
SEARCH_MODES = ("hybrid", "keyword", "semantic")
# The nodes whose records a search reads: a record's node is the member node it comes from on
# a hub (its `source_node`), the node itself for a node's own record (docs/hub.md).
NODE_ID_PATTERN = "[A-Za-z0-9._:-]{1,200}"  # as a node's id is written (node.toml)
NODES = Field("nodes", "tokens", "comma-separated ids of the nodes whose records to search "
                                 "(on a hub, its members: the manifest's network.members; on a "
                                 "node, its own id); all when left out",
              pattern=NODE_ID_PATTERN, high=100,
              mismatch="a node id (letters, digits and . _ : - only, at most 200)",
              example="7d0f5c7e-3b9a-4f4e-9d61-2a8c5e0b1f43")

# A scientific name as typed, authorship and hybrid sign allowed (species' verbatim names are
# at most 500 characters): the taxon whose records `/api/taxa/{name}` gathers.
TAXON_NAME = Field("name", "text", "a scientific name, with or without its authorship, in "
                                   "any case, e.g. 'Fallopia japonica (Houtt.) Ronse Decr.'",
                   required=True, longest=500, where="path", example="Fallopia japonica")

# Fixed paths come before the paths with a {collection} segment: aiohttp matches in order.
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("index", "GET", "/", "open", None, HTML, "The node's home page for people",
             public=True, page=True),
    Endpoint("sitemap", "GET", "/sitemap.xml", "open", None, XML,
             "Every page for people, for crawlers (or the index of the sitemaps/ files)",
             public=True, page=True),
    Endpoint("sitemap_part", "GET", "/sitemaps/{page}.xml", "open", None, XML,
             "A part of the sitemap, when the node has more than 50,000 pages", fields=(_PAGE,),
             public=True, page=True),
    Endpoint("robots", "GET", "/robots.txt", "open", None, TEXT, "Rules for crawlers",
             public=True, page=True),
    Endpoint("stylesheet", "GET", "/site.css", "open", None, "text/css",
             "The stylesheet of the pages for people", public=True, page=True),
    # Without `q`, the exported page; with it, the page with the results of an anonymous
    # search, which only the sidecar can answer (the CDN sends it there, as it sends a list
    # with a query). The page's script fetches /api/search where no sidecar answers it.
    Endpoint("search_page", "GET", "/search/", "open", None, HTML,
             "The search page for people: a form, and the public records it finds",
             fields=(Field("q", "text", "what to search for", longest=SEARCH_QUERY_MAX,
                           example="knotweed"),
                     Field("collections", "choice", "one collection to search; all when empty",
                           choices=("", *COLLECTIONS), default="")),
             public=True, page=True, static="/search/index.html"),
    Endpoint("manifest", "GET", "/api/manifest", "open", None, JSON,
             "Node identity, collections, capabilities, authentication", result="Manifest",
             capability="manifest", public=True, static="/api/manifest.json"),
    Endpoint("schema", "GET", "/api/schema", "open", None, JSON,
             "JSON Schema of every collection", result="SchemaDocument", capability="schema",
             public=True, static="/api/schema.json"),
    Endpoint("openapi", "GET", "/api/openapi.json", "open", None, JSON,
             "OpenAPI 3.1 description of this API", capability="openapi", public=True),
    Endpoint("key", "GET", "/api/keys/me", "keyed", None, JSON,
             "What the calling key holds", result="KeyInfo", capability="keys"),
    Endpoint("changes", "GET", "/api/changes", "keyed", "changes", JSON,
             "What changed since a moment, as this key sees it", capability="changes",
             result="Changes",
             fields=(Field("since", "timestamp", "events after this moment (exclusive); "
                                                 "pass the last `until`", required=True,
                           exclusive=True),
                     Field("limit", "integer", "items a page", default=CHANGES_LIMIT_DEFAULT,
                           low=1, high=CHANGES_LIMIT_MAX),
                     Field("cursor", "pattern", "from the `next` link",
                           pattern=f"{TIME_PATTERN}\\|({'|'.join(COLLECTIONS)})\\|{UUID_PATTERN}",
                           mismatch="cursor is not one this node gave; follow the `next` link "
                                    "as it is, or start again from `since`"))),
    Endpoint("sync_changes", "GET", "/api/sync/changes.ndjson", "open", "read", NDJSON,
             "The public change list", capability="sync", public=True),
    Endpoint("sync_snapshot", "GET", "/api/sync/{collection}/{offset}.ndjson", "open", "read",
             NDJSON, "A chunk of the public snapshot of a collection", capability="sync",
             fields=(_COLLECTION, _OFFSET_SEGMENT), public=True),
    Endpoint("search", "GET", "/api/search", "open", "search", JSON,
             "Keyword and semantic search across every collection", capability="search",
             result="SearchResult",
             fields=(Field("q", "text", "what to search for", required=True,
                           longest=SEARCH_QUERY_MAX, example="knotweed"),
                     Field("query", "text", "the same as q", longest=SEARCH_QUERY_MAX,
                           synonym_of="q"),
                     Field("collections", "collections", "comma-separated collections; all "
                                                         "when left out", choices=COLLECTIONS),
                     Field("limit", "integer", "results", default=SEARCH_LIMIT_DEFAULT, low=1,
                           high=SEARCH_LIMIT_MAX),
                     Field("mode", "choice", "keyword, semantic or hybrid (the default)",
                           choices=SEARCH_MODES, default="hybrid"),
                     NODES)),
    Endpoint("mcp", "POST", "/api/mcp", "keyed", "mcp", JSON, "Tool interface for AI agents",
             body="json", jsonrpc=True, result="McpAnswer", capability="mcp"),
    Endpoint("ask", "POST", "/api/library/ask", "keyed", "library", JSON,
             "Grounded answers from the document library, citing pages", body="json",
             fields=(Field("question", "text", "the question to answer, as text",
                           required=True, longest=QUESTION_MAX, where="body",
                           example="When should knotweed be injected?"),
                     Field("limit", "integer", "passages to return, closest first",
                           default=ASK_LIMIT_DEFAULT, low=1, high=ASK_LIMIT_MAX,
                           where="body")),
             result="Answer", capability="library", version=LIBRARY_CONTRACT),
    # The library's page (exporter/site/library_page.py), on a node with public documents;
    # its form asks /api/library/ask from the reader's browser, with the reader's key.
    Endpoint("library_page", "GET", "/library/", "open", None, HTML,
             "The library's public documents, and a form to ask it, for people",
             public=True, page=True, static="/library/index.html"),
    Endpoint("library_file", "GET", "/library/{file}", "open", "read", "application/pdf",
             "A PDF of the document library", capability="library", fields=(_FILE,),
             public=True),
    Endpoint("dwca", "GET", "/download/species-dwca.zip", "open", "read", "application/zip",
             "Darwin Core Archive of the public species, for GBIF (DWC_ARCHIVE)",
             capability="downloads", public=True),
    Endpoint("download", "GET", "/download/{collection}.csv", "open", "read", "text/csv",
             "A collection's public records as one CSV table", capability="downloads",
             fields=(_COLLECTION,), public=True),
    Endpoint("taxon", "GET", "/api/taxa/{name}", "open", "read", JSON,
             "Who holds what about one taxon: each node's species records of that name, "
             "and the treatments, resources and germination results that name it, side by "
             "side", capability="taxa", result="Taxon", fields=(TAXON_NAME,)),
    Endpoint("list", "GET", "/api/{collection}", "open", "read", JSON,
             "A page of a collection's records", capability="lists", result="Page",
             fields=(_COLLECTION, _LIMIT, _OFFSET,
                     Field("updated_since", "timestamp",
                           "records updated at or after this moment")),
             public=True, static="/api/{collection}/index.json"),
    Endpoint("record", "GET", "/api/{collection}/{id}", "open", "read", JSON,
             "One record", capability="records", result="Record",
             fields=(_COLLECTION, RECORD_ID), public=True,
             static="/api/{collection}/{shard}/{id}.json"),
    # Pages for people (exporter/site/pages.py): none of them starts with /api/, nor with
    # /library/ but the library's page.
    Endpoint("collection_page", "GET", "/{collection}/", "open", None, HTML,
             "The first page of a collection's public records, for people",
             fields=(_COLLECTION,), public=True, page=True),
    Endpoint("collection_page_n", "GET", "/{collection}/{page}.html", "open", None, HTML,
             "A further page of a collection's public records, for people",
             fields=(_COLLECTION, _PAGE), public=True, page=True),
    Endpoint("record_page", "GET", "/{collection}/{shard}/{id}.html", "open", None, HTML,
             "One public record, for people (shard: the first byte of the SHA-256 of the id, "
             "in hex)",
             fields=(_COLLECTION, _SHARD, RECORD_ID), public=True, page=True),
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
        if e.version:
            entry["version"] = e.version  # what its answers hold (docs/api.md)
        root = sidecar_url if e.access == "keyed" else base_url
        entry["url"] = root + e.path
        described[e.name] = entry
    return described


def access_lists() -> tuple[list[str], list[str]]:
    """The names of the offered open and keyed endpoints, for the manifest."""
    offered = [e for e in ENDPOINTS if e.offered and not e.page]
    return ([e.name for e in offered if e.access == "open"],
            [e.name for e in offered if e.access == "keyed"])
