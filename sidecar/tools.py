"""The seven tools of the seed (4.3), and the node's own `ask_library` and `get_taxon`, as
thin adapters over the service layer: a tool call with a key reads exactly what the same
key reads over REST, through the same functions, and its arguments are the fields of the
REST endpoint's row, read by the same checks.

`TOOLS` describes each tool as MCP lists it (name, description, inputSchema derived from
the endpoint table, outputSchema, annotations); `call` runs one. A failure the agent can
fix (an unknown id, a collection outside the key's limits, an argument of the wrong type
or out of range) comes back as a result with `isError: true` and a message saying what to
do next."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from exporter.contract.answer import ANSWER
from exporter.contract.endpoints import BY_NAME
from exporter.contract.inputs import Field, InputError, from_json, object_schema
from exporter.contract.wire import (
    LIST_LIMIT_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    TOOL_LIMIT_DEFAULT,
)

from . import service
from .errors import APIError, NotFound
from .visibility import View

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
             "openWorldHint": False}


class ToolError(Exception):
    """A failure the agent can act on: reported as a result with `isError`."""


def argument(endpoint: str, field: str, *, name: str | None = None,
             required: bool | None = None, default: int | None = None) -> Field:
    """A tool's argument: a field of the endpoint that answers the same read over REST, as
    that row describes it, under the tool's own name, requirement and default."""
    found = next(f for f in BY_NAME[endpoint].fields if f.name == field)
    return dataclasses.replace(
        found, name=name or found.name, where="body",
        required=found.required if required is None else required,
        default=found.default if default is None else default)


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    arguments: tuple[Field, ...]  # read and checked as the endpoint table describes them
    said: dict[str, str]  # each argument's description, for an agent
    output_schema: dict[str, Any]
    run: Callable[[View, dict[str, Any]], Awaitable[Any]]
    scope: str | None = None  # the scope the same read over REST needs

    def listing(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": object_schema(self.arguments, self.said),
                "outputSchema": self.output_schema,
                "annotations": {"title": self.title, **READ_ONLY}}


_RECORDS_OUT = {
    "type": "object",
    "properties": {
        "collection": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object"},
                  "description": "records, each as GET /api/{collection}/{id} returns it"},
        "total": {"type": "integer", "description": "records of the collection this key "
                                                   "may read"},
        "limit": {"type": "integer"}, "offset": {"type": "integer"},
        # (a branch a type, not a list of types: clients that map tool schemas onto a
        # single-type dialect refuse `"type": ["string", "null"]`)
        "next": {"anyOf": [{"type": "string"}, {"type": "null"}],
                 "description": "the REST URL of the next page, or null on the last"},
    },
    "required": ["collection", "items", "total"],
}


def _getter(collection: str, noun: str) -> Tool:
    async def run(view: View, arguments: dict[str, Any]) -> Any:
        record_id = arguments["id"]
        if record_id is not None:
            try:
                found = await service.read_record(view, collection, record_id)
            except NotFound:
                raise ToolError(f"no {collection} record with id {record_id}; call "
                                f"{_tool_of(collection)} without id to list records, or "
                                f"`search` to find one") from None
            record = json.loads(found.body)
            return {"collection": collection, "items": [record], "total": 1, "limit": 1,
                    "offset": 0, "next": None}
        return json.loads((await service.list_records(
            view, collection, limit=arguments["limit"], offset=0, updated_since=None)).body)

    return Tool(
        name=_tool_of(collection), title=f"Get {noun}",
        description=(
            f"Fetch {noun} records of this node. With `id` (a record UUID, as found in search "
            f"results or an earlier call), returns that one record; without it, returns the "
            f"first `limit` records (default {TOOL_LIMIT_DEFAULT}, at most {LIST_LIMIT_MAX}) in "
            f"the collection's list order, with `total` and the REST URL of the next page. "
            f"Use the `search` tool to find records by words or meaning."),
        arguments=(argument("record", "id", required=False),
                   argument("list", "limit", default=TOOL_LIMIT_DEFAULT)),
        said={"id": "a record UUID", "limit": "records to return"},
        output_schema=_RECORDS_OUT, run=run, scope="read")


def _tool_of(collection: str) -> str:
    return f"get_{collection}"


async def _node_info(view: View, arguments: dict[str, Any]) -> Any:
    return json.loads(await service.document(view, "manifest"))


async def _search(view: View, arguments: dict[str, Any]) -> Any:
    return await service.search(view, text=arguments["query"],
                                collections=arguments["collections"],
                                limit=arguments["limit"], mode="hybrid",
                                nodes=arguments["nodes"])


_SEARCH_ITEM = {"type": "object", "properties": {
    "collection": {"type": "string"}, "id": {"type": "string"}, "title": {"type": "string"},
    "snippet": {"type": "string", "description": "HTML: escaped text, matched words in <mark>"},
    "score": {"type": "number"}, "url": {"type": "string"}},
    "required": ["collection", "id", "title", "snippet", "score", "url"]}

async def _ask_library(view: View, arguments: dict[str, Any]) -> Any:
    return await service.ask(view, question=arguments["question"], limit=arguments["limit"])


ASK_LIBRARY = Tool(
    name="ask_library", title="Ask the document library",
    description=(
        "Finds the passages of the node's PDF documents (manuals, protocols, handbooks) "
        "closest to a question, each with its document, page, a quote and a link to the page: "
        "read them and judge. Where one sentence clearly states the answer, `answer` quotes "
        "it (grounded: true, with its citation); otherwise `answer` is null and the passages "
        "still say where to look. No passages for a question the library has nothing near. "
        "The same as POST /api/library/ask, for the documents this key may read."),
    arguments=(argument("ask", "question"), argument("ask", "limit")),
    said={"question": "the question, in your own words",
          "limit": "passages to return, closest first"},
    output_schema=ANSWER,
    run=_ask_library, scope="library")

async def _get_taxon(view: View, arguments: dict[str, Any]) -> Any:
    return await service.taxon(view, arguments["name"])


_RECORDS = {"type": "array", "items": {"type": "object"},
            "description": "records, each as GET /api/{collection}/{id} returns it"}
_HOLDER = {"type": "object", "required": ["node", "license"], "properties": {
    "node": {"type": "object", "required": ["id", "name"],
             "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
    "license": {"anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "the licence the node names for its records, or null"},
    "species": _RECORDS, "treatments": _RECORDS, "resources": _RECORDS,
    "germination": _RECORDS}}

GET_TAXON = Tool(
    name="get_taxon", title="Who holds a taxon",
    description=(
        "Answers who holds what about one taxon: given a scientific name (authorship, case "
        "and the hybrid sign as you like: 'Fallopia japonica', 'fallopia japonica (Houtt.) "
        "Ronse Decr.'), returns each node holding records of it (on a hub, each member) with "
        "its species records of that name and the treatments, resources and germination "
        "results that name it, each record whole and with its provenance, never merged "
        "with another node's. The same answer as GET /api/taxa/{name} for this key; a name "
        "no record this key may read names is not_found."),
    arguments=(argument("taxon", "name"),),
    said={"name": "a scientific name, e.g. 'Fallopia japonica'"},
    output_schema={"type": "object", "required": ["name", "canonical", "holders", "counts"],
                   "properties": {"name": {"type": "string"},
                                  "canonical": {"type": "string",
                                                "description": "the name without authorship, "
                                                               "as GBIF's parser writes it"},
                                  "holders": {"type": "array", "items": _HOLDER},
                                  "counts": {"type": "object",
                                             "description": "records by collection"}}},
    run=_get_taxon, scope="read")

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool(name="node_info", title="Node information",
         description=(
             "Returns this node's manifest: who runs it, its collections (with the tool that "
             "reads each and its count of public records), its capabilities, endpoints, "
             "authentication and limits. Call it first to learn what the node holds."),
         arguments=(), said={},
         output_schema={"type": "object", "required": ["node", "collections", "capabilities"],
                        "properties": {"node": {"type": "object"},
                                       "collections": {"type": "array"},
                                       "capabilities": {"type": "array"}}},
         run=_node_info),
    Tool(name="search", title="Search the node",
         description=(
             "Hybrid keyword and semantic search across the node's collections (species, "
             "resources, treatments, germination, team). Finds scientific and vernacular "
             "names (typos forgiven) and questions phrased in other words. Returns the best "
             f"`limit` matches (default {SEARCH_LIMIT_DEFAULT}, at most {SEARCH_LIMIT_MAX}), "
             "best first, each with collection, id, title, a snippet and its REST url, plus "
             "`counts` of matches per collection. Read a match in full with the collection's "
             "get_ tool and its id."),
         arguments=(argument("search", "q", name="query"),
                    argument("search", "collections"), argument("search", "limit"),
                    argument("search", "nodes")),
         said={"query": "words, names or a question",
               "collections": "search only these; all when left out",
               "limit": "results to return",
               "nodes": "search only the records of these nodes (on a hub, its members' "
                        "node ids: node_info's network.members); all when left out"},
         output_schema={"type": "object", "required": ["query", "items", "counts"],
                        "properties": {"query": {"type": "string"},
                                       "mode": {"type": "string"},
                                       "collections": {"type": "array",
                                                       "items": {"type": "string"}},
                                       "items": {"type": "array", "items": _SEARCH_ITEM},
                                       "counts": {"type": "object"},
                                       "node_counts": {
                                           "type": "object",
                                           "description": "on a hub: matches per member "
                                                          "node"}}},
         run=_search, scope="search"),
    _getter("species", "species"),
    _getter("treatments", "treatment (control method)"),
    _getter("resources", "resource (pages, documents, links, datasets, events)"),
    _getter("germination", "germination result"),
    _getter("team", "team member"),
    ASK_LIBRARY,
    GET_TAXON,
)}


@dataclass(frozen=True)
class Outcome:
    structured: Any
    text: str
    is_error: bool

    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.text}],
                                  "isError": self.is_error}
        if not self.is_error:
            result["structuredContent"] = self.structured
        return result


async def call(view: View, name: str, arguments: dict[str, Any]) -> Outcome:
    """Run one tool for this caller (the tool is known: the protocol layer checked)."""
    tool = TOOLS[name]
    key = view.caller.key
    if tool.scope and key is not None and tool.scope not in key.scopes:
        return Outcome(None, f"insufficient_scope: {name} reads what REST needs the "
                             f"{tool.scope!r} scope for, and this key lacks it; ask the node's "
                             f"operator for a key with the scopes mcp and {tool.scope}", True)
    try:
        found = await tool.run(view, from_json(tool.arguments, arguments, "argument"))
    except (ToolError, InputError) as exc:
        return Outcome(None, str(exc), True)
    except APIError as exc:
        if exc.status >= 500 and exc.status != 503:
            raise
        return Outcome(None, f"{exc.code}: {exc}", True)
    return Outcome(found, json.dumps(found, ensure_ascii=False, separators=(",", ":")), False)
