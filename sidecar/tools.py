"""The seven tools of the seed (4.3), as thin adapters over the service layer: a tool call
with a key reads exactly what the same key reads over REST, through the same functions.

`TOOLS` describes each tool as MCP lists it (name, description, inputSchema,
outputSchema, annotations); `call` runs one. A failure the agent can fix (an unknown id, a
collection outside the key's limits, an argument of the wrong type or out of range) comes
back as a result with `isError: true` and a message saying what to do next."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from exporter.contract.wire import (
    COLLECTIONS,
    LIST_LIMIT_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX,
    TOOL_LIMIT_DEFAULT,
    UUID_PATTERN,
    shown,
)

from . import service
from .errors import APIError, NotFound
from .store import Store

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
             "openWorldHint": False}


class ToolError(Exception):
    """A failure the agent can act on: reported as a result with `isError`."""


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    run: Callable[[Store, service.Caller, dict[str, Any]], Awaitable[Any]]
    scope: str | None = None  # the scope the same read over REST needs
    def listing(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.input_schema, "outputSchema": self.output_schema,
                "annotations": {"title": self.title, **READ_ONLY}}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


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
    async def run(store: Store, caller: service.Caller, arguments: dict[str, Any]) -> Any:
        _check(arguments, {"id": str, "limit": int})
        limit = _limit(arguments, TOOL_LIMIT_DEFAULT, LIST_LIMIT_MAX)
        record_id = arguments.get("id")
        if record_id is not None:
            if not _is_uuid(record_id):
                raise ToolError(f"id must be a record UUID such as "
                                f"'c80b1c40-8745-4e4e-9194-7448008fe1a7', got {record_id[:60]!r}; "
                                f"call {_tool_of(collection)} without id to list records")
            try:
                found = await service.read_record(store, caller, collection, record_id)
            except NotFound:
                raise ToolError(f"no {collection} record with id {record_id}; call "
                                f"{_tool_of(collection)} without id to list records, or "
                                f"`search` to find one") from None
            record = json.loads(found.body)
            return {"collection": collection, "items": [record], "total": 1, "limit": 1,
                    "offset": 0, "next": None}
        return json.loads((await service.list_records(store, caller, collection, limit=limit,
                                                      offset=0, updated_since=None)).body)

    return Tool(
        name=_tool_of(collection), title=f"Get {noun}",
        description=(
            f"Fetch {noun} records of this node. With `id` (a record UUID, as found in search "
            f"results or an earlier call), returns that one record; without it, returns the "
            f"first `limit` records (default {TOOL_LIMIT_DEFAULT}, at most {LIST_LIMIT_MAX}) in "
            f"the collection's list order, with `total` and the REST URL of the next page. "
            f"Use the `search` tool to find records by words or meaning."),
        input_schema=_object({
            "id": {"type": "string", "format": "uuid", "description": "a record UUID"},
            "limit": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX,
                      "default": TOOL_LIMIT_DEFAULT, "description": "records to return"},
        }, []),
        output_schema=_RECORDS_OUT, run=run, scope="read")


def _tool_of(collection: str) -> str:
    return f"get_{collection}"


async def _node_info(store: Store, caller: service.Caller, arguments: dict[str, Any]) -> Any:
    _check(arguments, {})
    return json.loads(await service.document(store, "manifest"))


async def _search(store: Store, caller: service.Caller, arguments: dict[str, Any]) -> Any:
    _check(arguments, {"query": str, "collections": list, "limit": int})
    query = arguments.get("query")
    if query is None or not query.split():
        raise ToolError("query is required and may not be empty: the words to search for, "
                        "e.g. {\"query\": \"japanese knotweed control\"}")
    if len(query) > SEARCH_QUERY_MAX:
        raise ToolError(f"query is too long; shorten it to at most {SEARCH_QUERY_MAX} "
                        f"characters")
    collections = arguments.get("collections")
    if collections is not None:
        if not all(isinstance(name, str) and name in COLLECTIONS for name in collections):
            wrong = next(name for name in collections if name not in COLLECTIONS)
            raise ToolError(f"collections must be a list of collection names from "
                            f"{', '.join(COLLECTIONS)}; got {shown(wrong)}")
        collections = ",".join(collections) if collections else None
    limit = _limit(arguments, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX)
    return await service.search(store, caller, text=query, collections=collections,
                                limit=limit, mode="hybrid")


_SEARCH_ITEM = {"type": "object", "properties": {
    "collection": {"type": "string"}, "id": {"type": "string"}, "title": {"type": "string"},
    "snippet": {"type": "string", "description": "HTML: escaped text, matched words in <mark>"},
    "score": {"type": "number"}, "url": {"type": "string"}},
    "required": ["collection", "id", "title", "snippet", "score", "url"]}

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool(name="node_info", title="Node information",
         description=(
             "Returns this node's manifest: who runs it, its collections (with the tool that "
             "reads each and its count of public records), its capabilities, endpoints, "
             "authentication and limits. Call it first to learn what the node holds."),
         input_schema=_object({}, []),
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
         input_schema=_object({
             "query": {"type": "string", "minLength": 1, "maxLength": SEARCH_QUERY_MAX,
                       "description": "words, names or a question"},
             "collections": {"type": "array", "items": {"type": "string", "enum":
                                                        list(COLLECTIONS)},
                             "description": "search only these; all when left out"},
             "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX,
                       "default": SEARCH_LIMIT_DEFAULT, "description": "results to return"},
         }, ["query"]),
         output_schema={"type": "object", "required": ["query", "items", "counts"],
                        "properties": {"query": {"type": "string"},
                                       "mode": {"type": "string"},
                                       "collections": {"type": "array",
                                                       "items": {"type": "string"}},
                                       "items": {"type": "array", "items": _SEARCH_ITEM},
                                       "counts": {"type": "object"}}},
         run=_search, scope="search"),
    _getter("species", "species"),
    _getter("treatments", "treatment (control method)"),
    _getter("resources", "resource (pages, documents, links, datasets, events)"),
    _getter("germination", "germination result"),
    _getter("team", "team member"),
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


async def call(store: Store, caller: service.Caller, name: str,
               arguments: dict[str, Any]) -> Outcome:
    """Run one tool for this caller (the tool is known: the protocol layer checked)."""
    scope = TOOLS[name].scope
    if scope and caller.key is not None and scope not in caller.key.scopes:
        return Outcome(None, f"insufficient_scope: {name} reads what GET needs the {scope!r} "
                             f"scope for, and this key lacks it; ask the node's operator for "
                             f"a key with the scopes mcp and {scope}", True)
    try:
        found = await TOOLS[name].run(store, caller, arguments)
    except ToolError as exc:
        return Outcome(None, str(exc), True)
    except APIError as exc:
        if exc.status >= 500 and exc.status != 503:
            raise
        return Outcome(None, f"{exc.code}: {exc}", True)
    return Outcome(found, json.dumps(found, ensure_ascii=False, separators=(",", ":")), False)


def _check(arguments: dict[str, Any], kinds: dict[str, type]) -> None:
    for name, value in arguments.items():
        if name not in kinds:
            expected = ", ".join(kinds) or "none"
            raise ToolError(f"unknown argument {name[:40]!r}; this tool takes: {expected}")
        kind = kinds[name]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ToolError(f"{name} must be a whole number, got {shown(value)}")
        if kind is not int and not isinstance(value, kind):
            raise ToolError(f"{name} must be {'text' if kind is str else 'a list'}, got "
                            f"{shown(value)}")


def _limit(arguments: dict[str, Any], default: int, high: int) -> int:
    limit = arguments.get("limit", default)
    if not 1 <= limit <= high:
        raise ToolError(f"limit must be from 1 to {high}, got {shown(limit)}")
    return int(limit)


def _is_uuid(value: str) -> bool:
    return re.fullmatch(UUID_PATTERN, value.lower()) is not None
