"""What an endpoint takes, described once, and read from every transport the same way.

An endpoint's row in the table (`endpoints.py`) lists its `Field`s: query parameters,
body fields and path segments. From a field come
- its JSON Schema (`json_schema`), which the OpenAPI document and the MCP tools' input
  schemas print;
- its checks: `from_query` reads a query string (REST), `from_json` a JSON object (the
  library's body, an MCP tool's arguments). Both check a value by its field, so the same
  mistake is refused with the same words wherever it is sent, and a value one accepts the
  other accepts too (tests/exporter/contract/test_inputs.py holds REST and MCP together).

A refusal is an `InputError` whose message names the field and says how to fix the value;
each side turns it into its own answer (400 `invalid_parameter`, or a tool result with
`isError`). Values come back normalised: whole numbers as int, text with its runs of
blanks made one space, a list of collections as a tuple in the node's order, a list of
tokens (node ids) as a tuple in the order given, each once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol
from urllib.parse import quote

from .wire import AFTER_EVERY_TIME, format_time, parse_time, shown

# 9 223 372 036 854 775 807 is the largest 64-bit integer; offsets and such stay below it.
INTEGER_MAX = 2**63 - 1
# Text that is not blank, as Python's str.split() sees blanks (which \s alone does not say).
NOT_BLANK = "[^\\s\u001c-\u001f\u0085]"
LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)

Kind = Literal["integer", "text", "timestamp", "pattern", "choice", "collections", "tokens"]
Where = Literal["query", "body", "path"]

# ASCII digits only: no `+`, spaces, `_`, or digits of other scripts, which int() takes.
_INTEGER = re.compile(r"-?[0-9]{1,40}")
_LONG_INTEGER = re.compile(r"-?[0-9]+")


class Query(Protocol):
    """A query string's parameters, where a name may come more than once (a multidict)."""

    def __iter__(self) -> Iterator[str]: ...
    def get(self, name: str) -> str | None: ...
    def getall(self, name: str) -> list[str]: ...


class InputError(ValueError):
    """A value that is not as its field describes; the message says how to fix it."""


@dataclass(frozen=True)
class Field:
    """One input of an endpoint: its name, kind, bounds, and where it is sent."""

    name: str
    kind: Kind
    description: str = ""
    required: bool = False
    default: int | str | None = None
    low: int = 0  # integer: the smallest value taken
    high: int = INTEGER_MAX  # integer: the largest; tokens: the most tokens taken
    longest: int = 0  # text: the most characters taken
    choices: tuple[str, ...] = ()  # choice, collections: the values taken
    pattern: str = ""  # pattern, tokens: a regular expression the whole value (each token)
    # matches
    mismatch: str = ""  # pattern: what a value that does not match is told; tokens: what
    # each token is
    any_case: bool = False  # pattern: upper-case letters are taken as lower-case (UUIDs)
    exclusive: bool = False  # timestamp: the bound excludes its own instant (rounds down)
    example: str = ""  # a value, shown in the message for a missing one
    synonym_of: str | None = None  # another name for that field (search's `query` for `q`)
    where: Where = "query"


# Reading -----------------------------------------------------------------------------------

def from_query(fields: Sequence[Field], query: Query) -> dict[str, Any]:
    """The query fields of a request (a multidict: a name may come twice), read and
    checked; unknown or repeated names refused. Every field has a value in the result: its
    default when it was not sent."""
    names = [field.name for field in fields]
    for name in query:
        if name not in names:
            raise InputError(f"unknown parameter {name!r}; this endpoint takes: "
                             f"{', '.join(names) if names else 'none'}")
        if len(query.getall(name)) > 1:
            raise InputError(f"parameter {name!r} is given more than once; give it once")
    values: dict[str, Any] = {}
    for field in fields:
        raw = query.get(field.name)
        if raw is not None:
            values[field.name] = _read_text(field, raw)
        elif field.required and not _synonym_given(fields, field, query):
            raise _missing(field, "query")
        else:
            values[field.name] = field.default
    return _merge_synonyms(fields, values)


def from_json(fields: Sequence[Field], given: Mapping[str, Any],
              noun: Literal["field", "argument"] = "field") -> dict[str, Any]:
    """The fields of a JSON object (a body, a tool's arguments), read and checked; unknown
    names refused. Every field has a value in the result: its default when not sent."""
    names = [field.name for field in fields]
    for name in given:
        if name not in names:
            where = "body" if noun == "field" else "tool"
            raise InputError(f"unknown {noun} {name[:40]!r}; this {where} takes: "
                             f"{', '.join(names) if names else 'none'}")
    values: dict[str, Any] = {}
    for field in fields:
        if field.name in given:
            values[field.name] = _read_json(field, given[field.name])
        elif field.required:
            raise _missing(field, "json")
        else:
            values[field.name] = field.default
    return values


def _synonym_given(fields: Sequence[Field], field: Field, query: Query) -> bool:
    return any(other.synonym_of == field.name and query.get(other.name) is not None
               for other in fields)


def _merge_synonyms(fields: Sequence[Field], values: dict[str, Any]) -> dict[str, Any]:
    """A synonym's value goes to the field it names; both given must agree."""
    for field in fields:
        if field.synonym_of is None:
            continue
        value, named = values.pop(field.name), field.synonym_of
        if value is None:
            continue
        if values[named] is not None and values[named] != value:
            raise InputError(f"give {named} or {field.name} (the same thing), not both")
        values[named] = value
    return values


def _missing(field: Field, form: Literal["query", "json"]) -> InputError:
    example = ""
    if field.example:
        example = (f", e.g. ?{field.name}={quote(field.example)}" if form == "query"
                   else f", e.g. {json.dumps({field.name: field.example})}")
    return InputError(f"{field.name} is required: {field.description}{example}")


def _read_text(field: Field, raw: str) -> Any:
    """A value as a query string or a path gives it: text, whatever the field's kind."""
    if field.kind == "integer":
        return _integer_text(field, raw)
    if field.kind == "timestamp":
        return _timestamp(field, raw)
    if field.kind == "collections":
        return _collections(field, raw.split(","))
    if field.kind == "tokens":
        return _tokens(field, raw.split(","))
    return _checked_text(field, raw)


def _read_json(field: Field, value: Any) -> Any:
    """A value as JSON gives it: typed."""
    if field.kind == "integer":
        return _integer_json(field, value)
    if field.kind == "collections":
        if not isinstance(value, list):
            raise InputError(f"{field.name} must be a list of collection names, got "
                             f"{shown(value)}; for example [\"species\", \"treatments\"]")
        return _collections(field, value) if value else None
    if field.kind == "tokens":
        if not isinstance(value, list):
            raise InputError(f"{field.name} must be a list, got {shown(value)}; for example "
                             f"[{json.dumps(field.example)}]")
        return _tokens(field, value) if value else None
    if not isinstance(value, str):
        raise InputError(f"{field.name} must be text, got {shown(value)}")
    if field.kind == "timestamp":
        return _timestamp(field, value)
    return _checked_text(field, value)


def _checked_text(field: Field, value: str) -> str:
    """Text, a choice among words, or a value of a pattern."""
    if field.kind == "choice":
        if value not in field.choices:
            raise InputError(f"{field.name} must be one of {', '.join(field.choices)}, got "
                             f"{shown(value)}")
        return value
    if field.kind == "pattern":
        if re.fullmatch(field.pattern, value.lower() if field.any_case else value) is None:
            raise InputError(field.mismatch or f"{field.name} must be {field.description}, "
                                               f"got {shown(value)}")
        return value
    if field.longest and len(value) > field.longest:
        raise InputError(f"{field.name} is {len(value)} characters long; shorten it to at "
                         f"most {field.longest}")
    words = value.split()
    if not words:
        raise InputError(f"{field.name} may not be empty: {field.description}")
    return " ".join(words)


def _collections(field: Field, names: list[Any]) -> tuple[str, ...]:
    for name in names:
        if not isinstance(name, str) or name not in field.choices:
            raise InputError(f"{field.name}: no collection {shown(name)}; choose from "
                             f"{', '.join(field.choices)}")
    return tuple(name for name in field.choices if name in names)


def _tokens(field: Field, tokens: list[Any]) -> tuple[str, ...]:
    """Tokens of the field's pattern (node ids), each once, in the order given."""
    for token in tokens:
        if not isinstance(token, str) or re.fullmatch(field.pattern, token) is None:
            raise InputError(f"{field.name}: {shown(token)} is not {field.mismatch}")
    unique = tuple(dict.fromkeys(tokens))
    if len(unique) > field.high:
        raise InputError(f"{field.name}: {len(unique)} given; give at most {field.high}")
    return unique


def _span(field: Field) -> str:
    return (f"at least {field.low}" if field.high == INTEGER_MAX
            else f"from {field.low} to {field.high}")


def _integer_text(field: Field, raw: str) -> int:
    if _INTEGER.fullmatch(raw) is None:
        if _LONG_INTEGER.fullmatch(raw):  # too long to be in range: said by its length, not read
            raise InputError(f"{field.name} must be {_span(field)}, got a whole number of "
                             f"{len(raw.lstrip('-'))} digits")
        raise InputError(f"{field.name} must be a whole number, got {shown(raw)}; write it "
                         f"with the digits 0-9 only")
    return _in_range(field, int(raw))


def _integer_json(field: Field, value: Any) -> int:
    """A JSON number that is whole (3.0 is the number 3, as JSON Schema's integer says)."""
    if isinstance(value, float) and value.is_integer():
        if not field.low <= value <= field.high:
            raise InputError(f"{field.name} must be {_span(field)}, got {shown(value)}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{field.name} must be a whole number, got {shown(value)}")
    return _in_range(field, value)


def _in_range(field: Field, value: int) -> int:
    if not field.low <= value <= field.high:
        raise InputError(f"{field.name} must be {_span(field)}, got {shown(value)}")
    return int(value)


def _timestamp(field: Field, raw: str) -> str:
    """An RFC 3339 time, normalised to the ledger's whole-second UTC form. A fraction of a
    second rounds up for an inclusive bound and down for an exclusive one, so comparing
    with whole-second times stays exact."""
    try:
        moment = parse_time(raw)
        if moment.microsecond:
            moment = moment.replace(microsecond=0)
            if not field.exclusive:
                if moment == LAST_SECOND:
                    return AFTER_EVERY_TIME  # rounded up past 9999: after every record
                moment += timedelta(seconds=1)
    except (ValueError, OverflowError) as exc:
        reason = str(exc) if isinstance(exc, ValueError) else "the time is out of range"
        raise InputError(f"{field.name}: {reason}, got {raw[:60]!r}") from None
    return format_time(moment)


# Describing --------------------------------------------------------------------------------

def json_schema(field: Field, form: Literal["query", "json"] = "json") -> dict[str, Any]:
    """The JSON Schema of a field's value as it is sent: in a query string or a path (text,
    so a list of collections is one comma-separated string), or in JSON."""
    schema: dict[str, Any]
    if field.kind == "integer":
        schema = {"type": "integer", "minimum": field.low, "maximum": field.high}
        if field.default is not None:
            schema["default"] = field.default
    elif field.kind == "text":
        schema = {"type": "string", "minLength": 1, "maxLength": field.longest,
                  "pattern": NOT_BLANK}
    elif field.kind == "timestamp":
        schema = {"type": "string", "format": "date-time"}
    elif field.kind == "choice":
        schema = {"type": "string", "enum": list(field.choices)}
    elif field.kind == "pattern":
        schema = {"type": "string", "pattern": f"^{field.pattern}$"}
    elif field.kind == "tokens" and form == "json":
        schema = {"type": "array", "maxItems": field.high,
                  "items": {"type": "string", "pattern": f"^{field.pattern}$"}}
    elif field.kind == "tokens":
        schema = {"type": "string", "pattern": f"^{field.pattern}(,{field.pattern})*$"}
    elif form == "json":
        schema = {"type": "array", "items": {"type": "string", "enum": list(field.choices)}}
    else:
        one = f"({'|'.join(field.choices)})"
        schema = {"type": "string", "pattern": f"^{one}(,{one})*$"}
    return schema


def object_schema(fields: Sequence[Field], descriptions: Mapping[str, str] | None = None
                  ) -> dict[str, Any]:
    """The JSON Schema of an object of these fields (a body, a tool's arguments), with no
    other members; with `descriptions`, each field's own words for its readers."""
    properties = {}
    for field in fields:
        properties[field.name] = json_schema(field)
        if descriptions is not None:
            properties[field.name]["description"] = descriptions[field.name]
    return {"type": "object", "additionalProperties": False,
            "required": [field.name for field in fields if field.required],
            "properties": properties}

