"""The OpenAPI 3.1 description of the node's API, made from the endpoint table and the
collection schemas: every endpoint, its parameters, body, answers and errors, and the two
ways to send a key. Published as /api/openapi.json."""

from __future__ import annotations

import copy
from typing import Any

from exporter import __version__
from exporter.contract.answer import ANSWER
from exporter.contract.endpoints import ENDPOINTS, Endpoint
from exporter.contract.inputs import Field, json_schema, object_schema
from exporter.contract.wire import API_VERSION, COLLECTIONS, TIME_PATTERN
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
        # A synonym (search's `query` for `q`) is left out: one of the two is required,
        # which OpenAPI cannot say of parameters (docs/api.md describes it).
        "parameters": [*(_segment(field) for field in endpoint.segments),
                       *(_parameter(field) for field in endpoint.params
                         if field.synonym_of is None)],
        "responses": {"200": {"description": "OK", "content": {
            endpoint.returns: {"schema": _result(endpoint)}}}},
    }
    if endpoint.scope:
        operation["description"] = f"A key sent here needs the `{endpoint.scope}` scope."
    body = _body(endpoint)
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": body}}}
    operation["responses"].update(_errors(endpoint))
    return operation


def _errors(endpoint: Endpoint) -> dict[str, Any]:
    """The error answers: the node's JSON error, or the protocol's for a JSON-RPC body."""
    codes = [400, 404, 429]
    codes[1:1] = [401, 403] if endpoint.access == "keyed" or endpoint.scope else [401]
    if endpoint.body == "json":
        codes += [405, 413, 415]
    if endpoint.jsonrpc:
        codes = [code for code in codes if code != 404]
    answers: dict[str, Any] = {}
    for code in sorted(codes):
        name, description = ERRORS[code]
        answers[str(code)] = {"description": f"{description} (`{name}`)",
                              "content": {"application/json": {"schema": _ERROR}}}
    if endpoint.page:  # a page says what is wrong with its query in the page
        answers["400"]["content"] = {"text/html": {"schema": {"type": "string"}}}
    if endpoint.name == "taxon_page":  # and a taxon's page, that no record names the taxon
        answers["404"]["content"] = {"text/html": {"schema": {"type": "string"}}}
    if endpoint.jsonrpc:
        answers["202"] = {"description": "A notification, taken"}
        for status in ("400", "404"):
            answers[status] = {
                "description": "A JSON-RPC error (or, for the seed's form, the node's error)",
                "content": {"application/json": {"schema": {"type": "object"}}}}
    return answers


def _segment(field: Field) -> dict[str, Any]:
    return {"name": field.name, "in": "path", "required": True,
            "schema": json_schema(field, "query")}


def _parameter(field: Field) -> dict[str, Any]:
    return {"name": field.name, "in": "query", "required": field.required,
            "description": field.description, "schema": json_schema(field, "query")}


# The body of the tool interface: a message of its protocol, checked by the protocol layer.
JSONRPC_MESSAGE = {
    "type": "object", "required": ["method"], "properties": {
        "jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer"]},
        "method": {"type": "string"}, "params": {"type": "object"}},
    "description": "A JSON-RPC 2.0 message of the Model Context Protocol, or the seed's "
                   "form without jsonrpc (see docs/mcp.md)"}


def _body(endpoint: Endpoint) -> dict[str, Any] | None:
    if endpoint.jsonrpc:
        return JSONRPC_MESSAGE
    if endpoint.body_fields:
        return object_schema(endpoint.body_fields)
    return None


def _result(endpoint: Endpoint) -> dict[str, Any]:
    if endpoint.result is not None:
        return {"$ref": f"#/components/schemas/{endpoint.result}"}
    return {"type": "string"}  # HTML, NDJSON, PDF


# GET /api/taxa/{name}: each holder's records of one taxon, side by side (docs/api.md).
TAXON: dict[str, Any] = {
    "type": "object", "required": ["name", "canonical", "holders", "counts"],
    "properties": {
        "name": {"type": "string"}, "canonical": {"type": "string"},
        "holders": {"type": "array", "items": {
            "type": "object",
            "required": ["node", "species", "treatments", "resources", "germination"],
            "properties": {
                "node": {"type": "object", "required": ["id", "name"]},
                "license": {"type": ["string", "null"]},
                **{name: {"type": "array", "items": {
                    "$ref": f"#/components/schemas/Record_{name}"}}
                   for name in ("species", "treatments", "resources", "germination")}}}},
        "counts": {"type": "object",
                   "additionalProperties": {"type": "integer", "minimum": 0}}}}


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
        "Manifest": {
            "type": "object", "required": ["node", "collections", "capabilities", "signature"],
            "properties": {"signature": {
                "type": "object", "required": ["algorithm", "key_fingerprint", "value"],
                "description": "Ed25519 signature, by the key in node.public_key, of the "
                               "manifest without this member in the JSON Canonicalization "
                               "Scheme (RFC 8785); docs/hub.md, Trust",
                "properties": {"algorithm": {"const": "Ed25519"},
                               "key_fingerprint": {"type": "string"},
                               "value": {"type": "string"}}}}},
        "Taxon": TAXON,
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
        "Answer": ANSWER,
        "McpAnswer": {"type": "object", "description": "A JSON-RPC response, or {result} "
                                                       "for the seed's form"},
    }
