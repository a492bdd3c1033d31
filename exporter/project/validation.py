"""Validate a record against its collection's schema, and say what is wrong in the words a
publisher needs: the field, its line, and what to write instead."""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

from exporter.project.records import SourceRecord
from exporter.project.schemas import Collection
from exporter.project.tomltext import toml_string
from exporter.shared.errors import CONTROL, Problem, control_character, control_problem

WHOLE = re.compile(r"-?[0-9]+", re.ASCII)  # a whole number as written: ASCII digits
# Whole numbers are 64-bit, as TOML's are (and the hub's BIGINT): a larger one is an error
# of its file, not a number some reader silently loses.
WHOLE_MIN, WHOLE_MAX = -2**63, 2**63 - 1
OUT_OF_RANGE = f"out of range: a whole number here runs from {WHOLE_MIN} to {WHOLE_MAX}"


def _too_large(value: Any) -> bool:
    """Whether a value holds a whole number beyond 64 bits (in a list or table too)."""
    if type(value) is int:
        return not WHOLE_MIN <= value <= WHOLE_MAX
    if isinstance(value, list):
        return any(_too_large(item) for item in value)
    if isinstance(value, dict):
        return any(_too_large(item) for item in value.values())
    return False


def validate(record: SourceRecord, collection: Collection, *, controls: bool = True
             ) -> list[Problem]:
    """Schema problems of one record, each naming its line and field (`controls=False`:
    its fields are known to hold no control character)."""
    problems = []
    for name in record.fields:
        if not collection.set_by_content(name, record.fields):
            problems.append(Problem(record.path, record.line_of(name), name,
                                    "set by the node, not by content: remove it"))
    fields = {k: v for k, v in record.fields.items()
              if collection.set_by_content(k, record.fields)}
    for error in collection.errors(fields):
        problems.extend(_describe(error, record, collection))
    for name in _numeric(collection):
        if name in fields and _too_large(fields[name]):
            problems.append(Problem(record.path, record.line_of(name), name, OUT_OF_RANGE))
    for name, value in fields.items() if controls else ():
        found = _control_in(value)
        if found is not None:
            line = record.line_of(name)
            if name == "body" and type(value) is str:  # the line it is on, below the fence
                line += value[:CONTROL.search(value).start()].count("\n")  # type: ignore[union-attr]
            problems.append(Problem(record.path, line, name, control_problem(found)))
    for name in _integers(collection):
        # JSON Schema takes 10.0 (and 1e300) for an integer; a reader of the record would
        # not: 1e300 would be NULL in a hub's BIGINT column
        if isinstance(fields.get(name), float):
            problems.append(Problem(record.path, record.line_of(name), name,
                                    f"expected a whole number, found {fields[name]!r}: write "
                                    f"it without a decimal point or exponent (10, not 10.0)"))
    return list(dict.fromkeys(problems))  # each once (a validator may say one thing twice)


def _control_in(value: Any) -> str | None:
    """The first control character in a field's text (in a list or table too), if any."""
    if type(value) is str:
        return control_character(value)
    if isinstance(value, list):
        return next(filter(None, map(_control_in, value)), None)
    if isinstance(value, dict):
        return next(filter(None, map(_control_in, (*value, *value.values()))), None)
    return None


@functools.cache
def _integers(collection: Collection) -> tuple[str, ...]:
    """The fields whose schema asks for a whole number."""
    return tuple(name for name in collection.content_fields
                 if (collection.property(name) or {}).get("type") == "integer")


@functools.cache
def _numeric(collection: Collection) -> tuple[str, ...]:
    """The fields whose schema may let a whole number through: a number or untyped (an
    enum). Anywhere else the schema's type refuses one, so only these are walked for
    numbers beyond 64 bits, not every field of every record."""
    found = []
    for name in collection.content_fields:
        spec = json.dumps(collection.property(name) or {})
        if '"integer"' in spec or '"number"' in spec or '"type"' not in spec:
            found.append(name)
    return tuple(found)


def _describe(error: Any, record: SourceRecord, collection: Collection) -> Iterator[Problem]:
    """The problems one schema error (jsonschema's) stands for, each at its field's line and
    said as the publisher would fix it: required fields by name, an unknown field with the
    name it may have meant, an empty or ill-formed value with the form it should have."""
    if error.validator == "required":
        for name in error.validator_value:
            if name not in error.instance:
                yield Problem(record.path, record.line, name, "required" if name != "id"
                              else f"required: {_how_to_make_an_id(collection.name)}")
        return
    if error.validator == "additionalProperties":
        allowed = list(collection.schema["properties"])
        for name in error.instance:
            if name not in error.schema.get("properties", {}):
                guess = difflib.get_close_matches(name, allowed, n=1)
                hint = f"; did you mean {guess[0]}?" if guess else ""
                yield Problem(record.path, record.line_of(name), name, f"unknown field{hint}")
        return
    name = str(error.absolute_path[0]) if error.absolute_path else ""
    where = ".".join(str(part) for part in error.absolute_path)
    spec = collection.property(name) or {}
    message = error.message
    if error.instance == "" or error.instance == []:
        if where != name:
            message = "empty: fill it in or remove it from the list"
        elif name == "id":
            message = f"empty: fill it in with {_how_to_make_an_id(collection.name)}"
        elif name in collection.schema["required"]:
            message = "empty: fill it in"
        else:
            message = "empty: fill it in or remove the line"
    elif error.validator == "type" and where == name:
        message = _expected_form(name, spec, error.instance, record.path.endswith(".csv"))
    elif error.validator == "type" and error.validator_value == "string":
        message = f"expected text in quotes: {toml_string(_scalar_text(error.instance))}"
    elif error.validator == "enum":
        message = f"{error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    elif error.validator == "format":
        message = f"{error.instance!r} is not a valid {error.validator_value}"
    elif error.validator == "pattern" and name == "id":
        message = (f"{error.instance!r} is not a lowercase UUID; use "
                   f"{_how_to_make_an_id(collection.name)}")
    elif error.validator == "pattern" and name == "access":
        message = (f"{error.instance!r} is neither public nor a group name: write public, or "
                   f"a group in lowercase letters, digits, - and _ (e.g. partners)")
    elif error.validator == "pattern":
        form = spec.get("x-fednode-form")
        hint = f"expected {form}" if form else spec.get("description") or "see /api/schema"
        message = f"{error.instance!r} does not have the expected form: {hint}"
    yield Problem(record.path, record.line_of(name), where or name, message)


def _how_to_make_an_id(collection: str) -> str:
    """How a publisher makes a record's id: a file's is written by `fednode new`, a CSV row's
    by `fednode new --csv` (which adds the row), or any UUID version 4 made by hand."""
    return (f"a fresh UUID: python3 -c 'import uuid; print(uuid.uuid4())' prints one, "
            f"`fednode new {collection} --csv` adds a CSV row with one, and "
            f"`fednode new {collection} \"TITLE\"` a file with one")


def _expected_form(name: str, spec: dict[str, Any], value: Any, in_csv: bool) -> str:
    """What a value of the wrong type should look like, written the way the file needs it."""
    kind = spec.get("type")
    items = value if isinstance(value, list) else [value]
    if kind == "array":
        if in_csv:
            return "expected a list: separate the items with ;"
        parts = [part.strip() for item in items for part in re.split(r"[,;]", str(item))]
        example = [part for part in parts if part] or ["..."]
        return f"expected a list: {name} = [{', '.join(toml_string(p) for p in example)}]"
    if kind == "string":
        shown = _scalar_text(items[0]) if len(items) == 1 else "..."
        return f"expected text in quotes: {name} = {toml_string(shown)}"
    if kind == "integer":
        digits = str(value).strip() if isinstance(value, str) else ""
        shown = digits if WHOLE.fullmatch(digits) else "100"
        return f"expected a whole number without quotes: {name} = {shown}"
    if kind == "boolean":
        shown = "false" if str(value).strip().lower() in ("false", "no", "0") else "true"
        return f"expected true or false without quotes: {name} = {shown}"
    return f"expected {kind}, found {type(value).__name__}"


def _scalar_text(value: Any) -> str:
    """A TOML value as the text it would be in quotes ("..." for tables and lists)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "..." if isinstance(value, (dict, list)) else str(value)
