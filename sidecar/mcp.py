"""POST /api/mcp: the Model Context Protocol's Streamable HTTP transport, stateless, plain
JSON (no SSE, no session ids ever), in the protocol revisions clients speak, plus the
seed's own form. It only reads messages and shapes answers: the tools are `tools`.

Three forms of request, told apart by the body:

- the seed's form, `{"method": "tools/list" | "tools/call", "params": {...}}` without
  `jsonrpc`: answered `{"result": {...}}`; a mistake is the node's usual JSON error;
- JSON-RPC 2.0, revision 2026-07-28 (stateless): the request carries
  `params._meta["io.modelcontextprotocol/protocolVersion"]`, and its headers
  `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`) `Mcp-Name` must agree with
  the body; `server/discover` says what the node speaks;
- JSON-RPC 2.0, revision 2025-11-25 and earlier: `initialize` negotiates a version; every
  other request may carry `MCP-Protocol-Version` (2025-03-26 when it does not).

Keys, scopes and rate limits are checked before this module runs (the endpoint table makes
/api/mcp keyed, scope `mcp`); every tool runs as the calling key."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from exporter import __version__
from exporter.contract.wire import LongNumber, decode, encode

from . import tools
from .access_log import printable
from .errors import APIError, InvalidParameter, NotFound
from .params import read_body
from .state import COUNT
from .visibility import View

log = logging.getLogger("fednode.sidecar")
MODERN = ("2026-07-28",)
HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
HANDSHAKE_DEFAULT = "2025-03-26"  # a request without MCP-Protocol-Version, per the spec
BATCHING = ("2025-03-26", "2024-11-05")  # the revisions with JSON-RPC batches
BATCH_MAX = 100  # messages in one batch
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "fednode", "title": "fednode node", "version": __version__}
CAPABILITIES = {"tools": {"listChanged": False}}
INSTRUCTIONS = ("Read-only tools over one node of a federated network of conservation "
                "records. Call node_info first; use search to find records, then the "
                "collection's get_ tool with an id to read one in full.")

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, HEADER_MISMATCH, UNSUPPORTED_VERSION = -32603, -32020, -32022
STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
          UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404, INTERNAL_ERROR: 500}
_ENCODED = re.compile(r"=\?base64\?([A-Za-z0-9+/=]*)\?=")
MODERN_HEADERS = ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(frozen=True)
class Message:
    method: str
    params: dict[str, Any]
    id: str | int | None  # None: a notification (JSON-RPC) or the seed's form
    seed: bool  # the seed's form: no `jsonrpc`


async def handle(request: web.Request, view: View) -> web.Response:
    """Answer one POST to /api/mcp."""
    given = request.headers.getall("Origin", [])
    if len(given) > 1:  # a browser sends one; which copy a proxy or a check reads varies
        raise OriginNotAllowed(f"the Origin header is given {len(given)} times; send it once")
    origin = given[0] if given else None
    if origin is not None and origin.lower() not in view.origins:
        raise OriginNotAllowed(f"this node's tool interface does not accept calls from the "
                               f"web page at {origin[:80]!r}; the node's operator can allow it "
                               f"in content/node.toml (mcp_origins)")
    raw = await read_body(request)
    try:
        body = decode(raw)
    except (ValueError, RecursionError) as exc:
        return _error(None, RpcError(PARSE_ERROR, f"Parse error: the body is not JSON "
                                                  f"({str(exc)[:120]})"))
    if isinstance(body, dict) and "jsonrpc" not in body:
        if any(name in request.headers for name in MODERN_HEADERS):
            # A gateway may route or authorise by these headers: a body they were not
            # checked against (the seed's form is never) would pass it by.
            return _error(None, RpcError(HEADER_MISMATCH, "Header mismatch: Mcp-Method, "
                                                          "Mcp-Name and MCP-Protocol-Version "
                                                          "go with a JSON-RPC 2.0 body; send "
                                                          "one, or the seed's form without "
                                                          "them"))
        return await _seed(body, view)
    if isinstance(body, list):
        return await _batch(request, body, view)
    status, answer = await _answer(request, body, view)
    if answer is None:
        return web.Response(status=202)  # a notification: nothing to answer
    return _json(status, answer)


async def _answer(request: web.Request, body: Any, view: View, *,
                  batched: bool = False) -> tuple[int, dict[str, Any] | None]:
    """One JSON-RPC message: the HTTP status it alone would be answered with, and its
    response (None for a notification)."""
    message_id = body.get("id") if isinstance(body, dict) else None
    if not isinstance(message_id, (str, int)) or isinstance(message_id, (bool, LongNumber)):
        message_id = None
    try:
        message = _message(body)
        if batched and (message.method == "initialize" or _is_modern(request, message)):
            raise RpcError(INVALID_REQUEST, "Invalid Request: initialize, and requests of "
                                            "revision 2026-07-28, are sent alone, never in a "
                                            "batch")
        if message.id is None:  # a notification: nothing to answer, once it passes the
            # checks a request of its revision passes
            version = _header(request, "MCP-Protocol-Version")
            if _is_modern(request, message):
                _check_modern(request, message)
            elif version is not None and version not in HANDSHAKE:
                raise RpcError(INVALID_REQUEST, _unsupported(version))
            return 202, None
        result = await _dispatch(request, message, view)
    except RpcError as exc:
        return STATUS.get(exc.code, 200), _error_body(message_id, exc)
    except APIError as exc:
        if exc.status < 500:
            raise
        # The node failed: a JSON-RPC error with the request's id, so that an agent's
        # client reads the message instead of a bare HTTP failure.
        return 500, _error_body(message_id, RpcError(INTERNAL_ERROR, f"Internal error: "
                                                                     f"{exc.code}: {exc}"))
    except Exception:
        log.exception("unhandled error in %s", printable(str(message.method)[:60]))
        return 500, _error_body(message_id, RpcError(INTERNAL_ERROR, "Internal error: the node "
                                                                     "failed to answer; the "
                                                                     "error is logged, try "
                                                                     "again later"))
    return 200, {"jsonrpc": "2.0", "id": message.id, "result": result}


async def _batch(request: web.Request, body: list[Any], view: View) -> web.Response:
    """A JSON-RPC batch, in revision 2025-03-26 (and 2024-11-05), which require them; the
    later revisions have none. Each message counts toward the key's rate limit as a request
    of its own, and is answered in order; a batch of notifications alone gets 202."""
    try:
        version = _header(request, "MCP-Protocol-Version") or HANDSHAKE_DEFAULT
        if version not in BATCHING:
            raise RpcError(INVALID_REQUEST, f"Invalid Request: batches belong to revisions "
                                            f"{' and '.join(BATCHING)}, not {version[:40]!r}; "
                                            f"send one request object")
        if not body or len(body) > BATCH_MAX:
            raise RpcError(INVALID_REQUEST, f"Invalid Request: a batch holds 1 to "
                                            f"{BATCH_MAX} messages, not {len(body)}")
    except RpcError as exc:
        return _error(None, exc)
    count = request.get(COUNT)
    if count is None:  # never so behind the boundary; were it, no batch goes uncounted
        return _error(None, RpcError(INVALID_REQUEST, "Invalid Request: batches are not "
                                                      "accepted here"))
    await count(len(body) - 1)  # 429 (the node's usual error) once over the limit
    answers = [answer for _, answer in [await _answer(request, item, view,
                                                      batched=True) for item in body]
               if answer is not None]
    if not answers:
        return web.Response(status=202)
    return web.Response(body=encode(answers), content_type="application/json",
                        charset="utf-8")


def _json(status: int, answer: dict[str, Any]) -> web.Response:
    return web.Response(status=status, body=encode(answer), content_type="application/json",
                        charset="utf-8")


class OriginNotAllowed(APIError):
    status, code = 403, "origin_not_allowed"


def _message(body: Any) -> Message:
    if not isinstance(body, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: send a JSON-RPC request object (or, "
                                        "in revision 2025-03-26, a batch of them)")
    if body.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"")
    method = body.get("method")
    if not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "Invalid Request: method must be a string")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
    if "id" in body:
        message_id = body["id"]
        if not isinstance(message_id, (str, int)) or isinstance(message_id, (bool, LongNumber)):
            raise RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or a number")
        return Message(method, params, message_id, False)
    return Message(method, params, None, False)


async def _dispatch(request: web.Request, message: Message, view: View) -> dict[str, Any]:
    header = _header(request, "MCP-Protocol-Version")
    modern = _is_modern(request, message)
    if modern:
        _check_modern(request, message)
        result = await _method(message, view, modern=True)
        result["resultType"] = "complete"
        if message.method in ("tools/list", "server/discover"):
            result.update(ttlMs=0, cacheScope="private")
        return result
    version = header or HANDSHAKE_DEFAULT
    if version not in HANDSHAKE:  # (initialize too, when it sends the header)
        raise RpcError(INVALID_REQUEST, _unsupported(version))
    return await _method(message, view, modern=False)


def _unsupported(version: str) -> str:
    return (f"Bad Request: unsupported MCP-Protocol-Version {version[:40]!r}; this node speaks "
            f"{', '.join((*MODERN, *HANDSHAKE))}")


def _is_modern(request: web.Request, message: Message) -> bool:
    """Whether the message is of revision 2026-07-28 (by its method, header or _meta)."""
    meta = message.params.get("_meta")
    return message.method == "server/discover" or \
        _header(request, "MCP-Protocol-Version") in MODERN or \
        (isinstance(meta, dict) and VERSION_KEY in meta)


def _check_modern(request: web.Request, message: Message) -> None:
    """The 2026-07-28 checks, in the order the protocol gives them."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict) or VERSION_KEY not in meta or \
            not isinstance(meta.get(CAPABILITIES_KEY), dict):
        raise RpcError(INVALID_PARAMS, f"Invalid params: params._meta must hold "
                                       f"{VERSION_KEY!r} and {CAPABILITIES_KEY!r} (an object)")
    requested = meta[VERSION_KEY]
    if _header(request, "MCP-Protocol-Version") != requested:
        raise RpcError(HEADER_MISMATCH, "Header mismatch: the MCP-Protocol-Version header "
                                        "must be present and equal params._meta's "
                                        "protocolVersion")
    if _header(request, "Mcp-Method") != message.method:
        raise RpcError(HEADER_MISMATCH, "Header mismatch: the Mcp-Method header must be "
                                        "present and equal the body's method")
    if message.method == "tools/call" and \
            _decoded(_header(request, "Mcp-Name")) != message.params.get("name"):
        raise RpcError(HEADER_MISMATCH, "Header mismatch: the Mcp-Name header must be "
                                        "present and equal params.name")
    if not isinstance(requested, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: the protocol version must be a string")
    if requested not in MODERN:
        raise RpcError(UNSUPPORTED_VERSION, "Unsupported protocol version",
                       {"supported": list(MODERN), "requested": requested})


def _header(request: web.Request, name: str) -> str | None:
    """A header given once; a header given twice is a mismatch, whatever its copies say: a
    proxy may keep the last copy (or join them) where this would read the first, and route
    by another tool than the one run."""
    values = request.headers.getall(name, [])
    if len(values) > 1:
        raise RpcError(HEADER_MISMATCH, f"Header mismatch: the {name} header is given "
                                        f"{len(values)} times; give it once")
    return values[0] if values else None


def _decoded(value: str | None) -> str | None:
    """A header value, `=?base64?...?=` (UTF-8) decoded; None if absent or malformed."""
    if value is None:
        return None
    found = _ENCODED.fullmatch(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


async def _method(message: Message, view: View, *,
                  modern: bool) -> dict[str, Any]:
    params = message.params
    if message.method == "initialize" and not modern:
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE else HANDSHAKE[0]
        return {"protocolVersion": version, "capabilities": CAPABILITIES,
                "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}
    if message.method == "server/discover" and modern:
        return {"supportedVersions": list(MODERN), "capabilities": CAPABILITIES,
                "instructions": INSTRUCTIONS, "_meta": {SERVER_INFO_KEY: SERVER_INFO}}
    if message.method == "ping":
        return {}
    if message.method == "tools/list":
        return {"tools": [tool.listing() for tool in tools.TOOLS.values()]}
    if message.method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str) or name not in tools.TOOLS:
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown tool "
                                           f"{str(name)[:60]!r}; tools/list names them: "
                                           f"{', '.join(tools.TOOLS)}")
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        return (await tools.call(view, name, arguments)).result()
    answered = "server/discover, ping" if modern else "initialize, ping"
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {message.method[:60]!r}; in this "
                                     f"protocol revision the node answers {answered}, "
                                     f"tools/list and tools/call")


def _error(message_id: str | int | None, error: RpcError) -> web.Response:
    return _json(STATUS.get(error.code, 200), _error_body(message_id, error))


def _error_body(message_id: str | int | None, error: RpcError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": message_id, "error": body}


async def _seed(body: dict[str, Any], view: View) -> web.Response:
    """The seed's form: `{"method", "params"}` in, `{"result"}` out; a mistake is the node's
    usual JSON error (400 `invalid_parameter`, or 404 `not_found` for another method)."""
    method, params = body.get("method"), body.get("params", {})
    if method not in ("tools/list", "tools/call"):
        if isinstance(method, str):
            raise NotFound(f"no method {method[:60]!r}; the methods are tools/list and "
                           f"tools/call (or speak JSON-RPC 2.0 for the full protocol)")
        raise InvalidParameter("the body needs \"method\": \"tools/list\" or \"tools/call\"")
    if not isinstance(params, dict):
        raise InvalidParameter("params must be an object, e.g. {\"name\": \"search\", "
                               "\"arguments\": {\"query\": \"knotweed\"}}")
    try:
        result = await _method(Message(method, params, None, True), view,
                               modern=False)
    except RpcError as exc:
        raise InvalidParameter(exc.message) from None
    return web.Response(body=encode({"result": result}), content_type="application/json",
                        charset="utf-8")
