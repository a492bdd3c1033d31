"""The OpenAPI 3.1 description of the node's API, made from the endpoint table and the
collection schemas: every endpoint, its parameters, body, answers and errors, and the two
ways to send a key. Published as /api/openapi.json."""

from __future__ import annotations

import copy
from typing import Any

from exporter import __version__
from exporter.contract.endpoints import ENDPOINTS, Endpoint, Param
from exporter.contract.wire import (
    API_VERSION,
    ASK_LIMIT_DEFAULT,
    ASK_LIMIT_MAX,
    COLLECTIONS,
    QUESTION_MAX,
    SEARCH_QUERY_MAX,
    TIME_PATTERN,
    UUID_PATTERN,
)
from exporter.project.config import NodeConfig
from exporter.project.schemas import Collection

ERRORS = {
    400: ("invalid_parameter", "A parameter or the body is not as this document describes"),
    401: ("api_key_required / invalid_api_key", "A key is needed here, or the key sent is "
                                                "not valid"),
    403: ("insufficient_scope", "The key lacks the scope, or the collection, this needs"),
    404: ("not_found", "No such record, collection, file or path (a restricted record the "
                       "caller may not see is answered exactly so)"),
    405: ("method_not_allowed", "Another method is expected here"),
    413: ("payload_too_large", "The body is over 1 MiB"),
    415: ("unsupported_media_type", "The body must be JSON"),
    429: ("rate_limited", "Over the per-minute rate; retry after Retry-After seconds"),
}
_ERROR = {"$ref": "#/components/schemas/Error"}
# Text that is not blank, as Python's str.split() sees blanks (which \s alone does not say).
NOT_BLANK = "[^\\s\u001c-\u001f\u0085]"


def document(node: NodeConfig, collections: dict[str, Collection]) -> dict[str, Any]:
    servers = [{"url": node.base_url, "description": "the node (static files, a CDN)"}]
    if node.sidecar_url != node.base_url:
        servers.append({"url": node.sidecar_url, "description": "the node's sidecar: keyed "
                                                                "and dynamic requests"})
    return {
        "openapi": "3.1.0",
        "info": {"title": f"{node.name}: fednode API", "version": API_VERSION,
                 "description": f"{node.description}\n\nServed by fednode {__version__}. "
                                f"Keys: {node.key_request}",
                 "contact": {"name": node.publisher, "email": node.contact}
                 if "@" in node.contact else {"name": node.publisher},
                 "license": {"name": node.licence}},
        "servers": servers,
        "paths": _paths(),
        "components": {"schemas": _schemas(collections),
                       "securitySchemes": {
                           "bearer": {"type": "http", "scheme": "bearer",
                                      "bearerFormat": "JWT"},
                           "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}},
    }


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    return paths


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    keyed: list[dict[str, list[str]]] = [{"bearer": []}, {"apiKey": []}]
    operation: dict[str, Any] = {
        "operationId": endpoint.name,
        "summary": endpoint.summary,
        "security": keyed if endpoint.access == "keyed" else [{}, *keyed],
        # `query`, a synonym of search's `q`, is left out: one of the two is required, which
        # OpenAPI cannot say of parameters (docs/api.md describes it).
        "parameters": [*_path_parameters(endpoint),
                       *(_parameter(param) for param in endpoint.params
                         if not (endpoint.name == "search" and param.name == "query"))],
        "responses": {"200": {"description": "OK", "content": {
            endpoint.returns: {"schema": _result(endpoint)}}}},
    }
    if endpoint.scope:
        operation["description"] = f"A key sent here needs the `{endpoint.scope}` scope."
    body = _body(endpoint)
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": body}}}
    codes = [400, 404, 429]
    if endpoint.access == "keyed" or endpoint.scope:
        codes[1:1] = [401, 403]
    else:
        codes[1:1] = [401]
    if endpoint.body == "json":
        codes += [405, 413, 415]
    if endpoint.name == "mcp":
        codes = [code for code in codes if code != 404]
    for code in sorted(codes):
        name, description = ERRORS[code]
        operation["responses"][str(code)] = {
            "description": f"{description} (`{name}`)",
            "content": {"application/json": {"schema": _ERROR}}}
    if endpoint.name == "mcp":
        operation["responses"]["202"] = {"description": "A notification, taken"}
        for status in ("400", "404"):
            operation["responses"][status] = {
                "description": "A JSON-RPC error (or, for the seed's form, the node's error)",
                "content": {"application/json": {"schema": {"type": "object"}}}}
    return operation


def _path_parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    found = []
    for name in ("collection", "shard", "id", "offset", "file", "page"):
        if "{" + name + "}" not in endpoint.path:
            continue
        schema: dict[str, Any] = {"type": "string"}
        if name == "collection":
            schema = {"type": "string", "enum": list(COLLECTIONS)}
        elif name == "id":
            schema = {"type": "string", "pattern": f"^{UUID_PATTERN}$"}
        elif name == "shard":
            schema = {"type": "string", "pattern": "^[0-9a-f]{2}$"}
        elif name in ("offset", "page"):
            schema = {"type": "string", "pattern": "^[0-9]+$"}
        elif name == "file":
            schema = {"type": "string", "pattern": f"^{UUID_PATTERN}\\.pdf$"}
        found.append({"name": name, "in": "path", "required": True, "schema": schema})
    return found


def _parameter(param: Param) -> dict[str, Any]:
    schema: dict[str, Any]
    if param.kind == "integer":
        schema = {"type": "integer", "minimum": param.low, "maximum": param.high}
        if param.default is not None:
            schema["default"] = param.default
    elif param.kind == "timestamp":
        schema = {"type": "string", "format": "date-time"}
    elif param.name in ("q", "query"):
        schema = {"type": "string", "minLength": 1, "maxLength": SEARCH_QUERY_MAX,
                  "pattern": NOT_BLANK}
    elif param.name == "mode":
        schema = {"type": "string", "enum": ["hybrid", "keyword", "semantic"]}
    elif param.kind == "cursor":
        schema = {"type": "string", "pattern": f"^{TIME_PATTERN}\\|({'|'.join(COLLECTIONS)})"
                                               f"\\|{UUID_PATTERN}$"}
    elif param.name == "collections":
        schema = {"type": "string", "pattern": f"^({'|'.join(COLLECTIONS)})"
                                               f"(,({'|'.join(COLLECTIONS)}))*$"}
    else:
        schema = {"type": "string"}
    return {"name": param.name, "in": "query", "required": param.required or param.name == "q",
            "description": param.description, "schema": schema}


def _body(endpoint: Endpoint) -> dict[str, Any] | None:
    if endpoint.name == "ask":
        return {"type": "object", "additionalProperties": False, "required": ["question"],
                "properties": {
                    "question": {"type": "string", "minLength": 1, "maxLength": QUESTION_MAX,
                                 "pattern": NOT_BLANK},
                    "limit": {"type": "integer", "minimum": 1, "maximum": ASK_LIMIT_MAX,
                              "default": ASK_LIMIT_DEFAULT}}}
    if endpoint.name == "mcp":
        return {"type": "object", "required": ["method"], "properties": {
            "jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer"]},
            "method": {"type": "string"}, "params": {"type": "object"}},
            "description": "A JSON-RPC 2.0 message of the Model Context Protocol, or the "
                           "seed's form without jsonrpc (see docs/mcp.md)"}
    return None


def _result(endpoint: Endpoint) -> dict[str, Any]:
    refs = {"manifest": "Manifest", "schema": "SchemaDocument", "key": "KeyInfo",
            "changes": "Changes", "search": "SearchResult", "mcp": "McpAnswer",
            "ask": "Answer", "list": "Page", "record": "Record"}
    if endpoint.name in refs:
        return {"$ref": f"#/components/schemas/{refs[endpoint.name]}"}
    return {"type": "string"}  # HTML, NDJSON, PDF


def _schemas(collections: dict[str, Collection]) -> dict[str, Any]:
    records = {}
    for name, collection in collections.items():
        schema = copy.deepcopy(collection.schema)
        schema.pop("$schema", None)
        schema.pop("$id", None)
        records[f"Record_{name}"] = schema
    record = {"oneOf": [{"$ref": f"#/components/schemas/Record_{name}"}
                        for name in collections]}
    return {
        **records,
        "Record": record,
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string"}, "message": {"type": "string"}}}}},
        "Page": {"type": "object",
                 "required": ["collection", "items", "total", "limit", "offset", "next"],
                 "properties": {
                     "collection": {"type": "string", "enum": list(COLLECTIONS)},
                     "items": {"type": "array", "items": {"$ref": "#/components/schemas/Record"}},
                     "total": {"type": "integer", "minimum": 0},
                     "limit": {"type": "integer"}, "offset": {"type": "integer"},
                     "updated_since": {"type": "string"},
                     "next": {"type": ["string", "null"]}}},
        "Manifest": {"type": "object", "required": ["node", "collections", "capabilities"]},
        "SchemaDocument": {"type": "object", "required": ["collections"]},
        "KeyInfo": {"type": "object", "required": ["id", "scopes"]},
        "Changes": {"type": "object", "required": ["items", "next", "until"], "properties": {
            "items": {"type": "array", "items": {"type": "object", "required": [
                "collection", "id", "op", "updated_at", "url"], "properties": {
                "op": {"enum": ["upsert", "delete"]},
                "updated_at": {"type": "string", "pattern": f"^{TIME_PATTERN}$"}}}},
            "next": {"type": ["string", "null"]}, "until": {"type": "string"}}},
        "SearchResult": {"type": "object", "required": ["query", "mode", "items", "counts"],
                         "properties": {"items": {"type": "array", "items": {
                             "type": "object", "required": [
                                 "collection", "id", "title", "snippet", "score", "url"]}},
                             "counts": {"type": "object", "additionalProperties": {
                                 "type": "integer"}}}},
        "Answer": {"type": "object", "required": ["question", "answer", "citations",
                                                  "grounded"], "properties": {
            "answer": {"type": ["string", "null"]}, "grounded": {"type": "boolean"},
            "citations": {"type": "array", "items": {"type": "object", "required": [
                "n", "document_id", "title", "page", "page_label", "quote", "url"]}}}},
        "McpAnswer": {"type": "object", "description": "A JSON-RPC response, or {result} "
                                                       "for the seed's form"},
    }
