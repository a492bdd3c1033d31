"""Request input, read as the endpoint table describes it (`exporter.contract.inputs`):
every bad value is a 400 `invalid_parameter` (or 413, 415 for bodies) with a message
saying how to fix it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import HttpVersion11, web
from multidict import MultiMapping

from exporter.contract.endpoints import Endpoint
from exporter.contract.inputs import INTEGER_MAX, InputError, from_json, from_query
from exporter.contract.wire import BODY_LIMIT, decode, shown

from .errors import InvalidParameter, PayloadTooLarge, UnsupportedMediaType

BODY_SECONDS = 30.0  # for a whole request body (1 MiB at most) to arrive
CONTINUE = "100-continue"  # the one expectation met (HTTP/1.1): before a body is read
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")  # as the static files are named: no leading 0


def parse_query(endpoint: Endpoint, query: MultiMapping[str]) -> dict[str, Any]:
    """The endpoint's query parameters, read and checked as its row describes."""
    try:
        return from_query(endpoint.params, query)
    except InputError as exc:
        raise InvalidParameter(str(exc)) from None


def parse_body(endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a JSON body, read and checked as the endpoint's row describes."""
    try:
        return from_json(endpoint.body_fields, body)
    except InputError as exc:
        raise InvalidParameter(str(exc)) from None


def integer_segment(raw: str) -> int | None:
    """A whole number in a path segment, or None (the path then names nothing)."""
    return int(raw) if _DIGITS.fullmatch(raw) and int(raw) <= INTEGER_MAX else None


def expectation(request: web.Request) -> str:
    """The request's `Expect`, in lower case; "" where it has none, or is HTTP/1.0 (which
    has no expectations to meet)."""
    if request.version < HttpVersion11:
        return ""
    return request.headers.get("Expect", "").lower()


async def read_body(request: web.Request) -> bytes:
    """A POST body's bytes: JSON by its Content-Type (415), at most BODY_LIMIT (413). A
    client that sent `Expect: 100-continue` is told to send it only now, when it will be
    read: a request refused before (its key, its path, its query, its type, its declared
    size) is answered without the body crossing the network."""
    if request.content_type != "application/json":
        raise UnsupportedMediaType(f"send the body as JSON with 'Content-Type: "
                                   f"application/json', not {request.content_type!r}")
    charset = request.charset
    if charset is not None and charset.lower() != "utf-8":
        # JSON is UTF-8 (RFC 8259): a body declared otherwise would be read as what it is not
        raise UnsupportedMediaType(f"the body is read as UTF-8, but its Content-Type says "
                                   f"charset={shown(charset)}; send it as UTF-8 (charset=utf-8, "
                                   f"or no charset)")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding != "identity":
        raise UnsupportedMediaType(f"this node reads a body as it is sent: send it without "
                                   f"Content-Encoding (not {shown(encoding)})")
    if request.content_length is not None and request.content_length > BODY_LIMIT:
        raise PayloadTooLarge(f"the body is {request.content_length} bytes; the limit is "
                              f"{BODY_LIMIT}")
    if expectation(request) == CONTINUE:
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer itself has not started
    try:
        raw = await asyncio.wait_for(request.read(), BODY_SECONDS)
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"the body is over the limit of {BODY_LIMIT} bytes") from None
    except TimeoutError:
        raise InvalidParameter(f"the body did not arrive within {BODY_SECONDS:.0f} s; send it "
                               f"whole, as its Content-Length or chunks say") from None
    except web.RequestPayloadError:
        raise InvalidParameter("the body's framing is broken (chunks or length); send it "
                               "whole, as its Content-Length or chunks say") from None
    if len(raw) > BODY_LIMIT:
        raise PayloadTooLarge(f"the body is over the limit of {BODY_LIMIT} bytes")
    return raw


async def read_json_body(request: web.Request) -> dict[str, Any]:
    """The JSON object a POST endpoint takes."""
    raw = await read_body(request)
    try:
        body = decode(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidParameter(f"the body is not valid JSON ({str(exc)[:120]}); send one JSON "
                               f"object") from None
    if not isinstance(body, dict):
        raise InvalidParameter(f"the body must be a JSON object, not {type(body).__name__}; "
                               f"for example {{\"method\": \"tools/list\"}}")
    return body
