"""Request input, read as the endpoint table describes it: every bad value is a 400
`invalid_parameter` (or 413, 415 for bodies) with a message saying how to fix it."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import HttpVersion11, web
from multidict import MultiMapping

from exporter.contract.endpoints import INTEGER_MAX, Endpoint, Param
from exporter.contract.wire import (
    AFTER_EVERY_TIME,
    ASK_LIMIT_DEFAULT,
    ASK_LIMIT_MAX,
    BODY_LIMIT,
    QUESTION_MAX,
    decode,
    format_time,
    parse_time,
    shown,
)

from .errors import InvalidParameter, PayloadTooLarge, UnsupportedMediaType

BODY_SECONDS = 30.0  # for a whole request body (1 MiB at most) to arrive
CONTINUE = "100-continue"  # the one expectation met (HTTP/1.1): before a body is read
# ASCII digits only: no `+`, spaces, `_`, or digits of other scripts, which int() takes.
_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")  # as the static files are named: no leading 0
_INTEGER = re.compile(r"-?[0-9]{1,40}")
_LONG_INTEGER = re.compile(r"-?[0-9]+")


def parse_query(endpoint: Endpoint, query: MultiMapping[str]) -> dict[str, Any]:
    """The endpoint's parameters, typed and checked; unknown or repeated ones refused."""
    allowed = [p.name for p in endpoint.params]
    for name in query:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise InvalidParameter(f"unknown parameter {name!r}; this endpoint takes: {expected}")
        if len(query.getall(name)) > 1:
            raise InvalidParameter(f"parameter {name!r} is given more than once; give it once")
    values: dict[str, Any] = {}
    for param in endpoint.params:
        raw = query.get(param.name)
        if raw is None:
            if param.required:
                raise InvalidParameter(f"{param.name} is required: {param.description}")
            values[param.name] = param.default
        elif param.kind == "integer":
            values[param.name] = integer(param, raw)
        elif param.kind == "timestamp":
            values[param.name] = timestamp(param, raw)
        else:
            values[param.name] = raw
    return values


def integer(param: Param, raw: str) -> int:
    span = (f"at least {param.low}" if param.high == INTEGER_MAX
            else f"from {param.low} to {param.high}")
    if _INTEGER.fullmatch(raw) is None:
        if _LONG_INTEGER.fullmatch(raw):  # too long to be in range: said by its length, not read
            raise InvalidParameter(f"{param.name} must be {span}, got a whole number of "
                                   f"{len(raw.lstrip('-'))} digits")
        raise InvalidParameter(f"{param.name} must be a whole number, got {shown(raw)}; write "
                               f"it with the digits 0-9 only")
    value = int(raw)
    if not param.low <= value <= param.high:
        raise InvalidParameter(f"{param.name} must be {span}, got {shown(value)}")
    return value


LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def integer_segment(raw: str) -> int | None:
    """A whole number in a path segment, or None (the path then names nothing)."""
    return int(raw) if _DIGITS.fullmatch(raw) and int(raw) <= INTEGER_MAX else None


def timestamp(param: Param, raw: str) -> str:
    """An RFC 3339 time, normalised to the ledger's whole-second UTC form. A fraction of a
    second rounds up for an inclusive bound and down for an exclusive one, so comparing
    with whole-second times stays exact."""
    try:
        moment = parse_time(raw)
        if moment.microsecond:
            moment = moment.replace(microsecond=0)
            if not param.exclusive:
                if moment == LAST_SECOND:
                    return AFTER_EVERY_TIME  # rounded up past 9999: after every record
                moment += timedelta(seconds=1)
    except (ValueError, OverflowError) as exc:
        reason = str(exc) if isinstance(exc, ValueError) else "the time is out of range"
        raise InvalidParameter(f"{param.name}: {reason}, got {raw[:60]!r}") from None
    return format_time(moment)


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


def ask_body(body: dict[str, Any]) -> tuple[str, int]:
    """The library question and its limit, from the body of POST /api/library/ask."""
    for name in body:
        if name not in ("question", "limit"):
            raise InvalidParameter(f"unknown field {name[:40]!r}; send {{\"question\": "
                                   f"\"...\", \"limit\": {ASK_LIMIT_DEFAULT}}}")
    question = body.get("question")
    if not isinstance(question, str) or not question.split():
        raise InvalidParameter("question is required: the question to answer, as text, e.g. "
                               "{\"question\": \"When should knotweed be injected?\"}")
    if len(question) > QUESTION_MAX:
        raise InvalidParameter(f"question is {len(question)} characters long; shorten it to at "
                               f"most {QUESTION_MAX}")
    limit = body.get("limit", ASK_LIMIT_DEFAULT)
    if isinstance(limit, float) and limit.is_integer() and abs(limit) <= ASK_LIMIT_MAX:
        limit = int(limit)  # 3.0 is the number 3, as JSON Schema's integer says
    if isinstance(limit, bool) or not isinstance(limit, int) or \
            not 1 <= limit <= ASK_LIMIT_MAX:
        raise InvalidParameter(f"limit must be a whole number from 1 to {ASK_LIMIT_MAX}, got "
                               f"{shown(limit)}")
    return " ".join(question.split()), limit
