"""Collections and their fields, defined once as JSON Schema (draft 2020-12).

The same documents validate content and are served at /api/schema."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any

from .contract.wire import COLLECTIONS

# jsonschema and fastjsonschema are imported when a record is first validated: an export whose
# records all come from the cache, and the commands that validate nothing, start a tenth of a
# second sooner without them.
if TYPE_CHECKING:
    import jsonschema


def _validator_class() -> type[jsonschema.Draft202012Validator]:
    import jsonschema

    return jsonschema.Draft202012Validator


@dataclass(frozen=True, eq=False)
class Collection:
    name: str
    title: str
    description: str
    tool: str
    title_field: str
    order: tuple[str, ...]  # the fields lists are sorted by (`sort_key`)
    schema: dict[str, Any]
    content_schema: dict[str, Any] = field(repr=False, compare=False)  # what content may set

    def errors(self, fields: dict[str, Any]) -> list[jsonschema.ValidationError]:
        """Every schema error of a record's content fields. A compiled validator answers
        for valid records; the reference validator explains the others."""
        try:
            self.fast(fields)
            return []
        except Exception as exc:  # the compiled validator's error (imported only if needed)
            import fastjsonschema

            if not isinstance(exc, fastjsonschema.JsonSchemaValueException):
                raise
            # Should the two ever disagree, the record is refused: fast's reason stands.
            return list(self.validator.iter_errors(fields)) or [_from_fast(exc)]

    @cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        validator = _validator_class()
        return validator(self.content_schema, format_checker=validator.FORMAT_CHECKER)

    @cached_property
    def fast(self) -> Callable[[dict[str, Any]], Any]:
        """The same document, compiled, when first needed (an export that reads no file of
        a collection never compiles it). Our schemas use only keywords that draft 7 shares
        with 2020-12, and formats are checked by jsonschema's own checker, so both agree."""
        import fastjsonschema

        checker = _validator_class().FORMAT_CHECKER
        compiled = dict(self.content_schema,
                        **{"$schema": "http://json-schema.org/draft-07/schema#"})
        formats = {name: (lambda value, name=name: checker.conforms(value, name))
                   for name in ("date", "date-time", "uri", "uuid")}
        return fastjsonschema.compile(compiled, formats=formats)  # type: ignore[no-any-return]

    @cached_property
    def content_fields(self) -> tuple[str, ...]:
        """Fields a content file may set, in schema order (the node sets the readOnly ones).
        Asked for every record read and every page made: made once."""
        return tuple(name for name, spec in self.schema["properties"].items()
                     if not spec.get("readOnly"))

    def sort_key(self, fields: dict[str, Any]) -> tuple[str, ...]:
        """Where a record goes in lists: the values of the schema's `x-fednode.order`
        fields, casefolded, a missing one as empty text (so first). Lists break ties by id."""
        return tuple(str(fields.get(name, "")).casefold() for name in self.order)

    def served_by_node(self, name: str) -> bool:
        return name in self._served

    @cached_property
    def _served(self) -> frozenset[str]:
        """The readOnly fields (asked of every field of every record)."""
        return frozenset(name for name, spec in self.schema["properties"].items()
                         if spec and spec.get("readOnly"))

    @cached_property
    def search_names(self) -> tuple[str, ...]:
        """The fields search treats as the record's names (`x-fednode.search.names`)."""
        return tuple(self.schema["x-fednode"].get("search", {}).get("names", ()))

    @cached_property
    def search_text(self) -> tuple[str, ...]:
        """The fields search reads as text: every content field but the id, access, names,
        title and formatted ones (links, dates), the body first (snippets come from the
        first passage that matches best)."""
        skip = {"id", "access", "body", self.title_field, *self.search_names}
        fields = [name for name in self.content_fields
                  if name not in skip and "format" not in self.schema["properties"][name]]
        return ("body", *fields)

    def property(self, name: str) -> dict[str, Any] | None:
        props: dict[str, Any] = self.schema["properties"]
        return props.get(name)


def ecma_pattern(pattern: str) -> str:
    """A schema `pattern` rewritten so that Python's `re.search` reads it as JSON Schema does
    (ECMA-262): `$` is the end of the text only, never before a final newline, and `\\d`,
    `\\w` are ASCII only. The served schema keeps the original."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return "(?a)" + "".join(out)


def _matching_ecma(node: Any) -> Any:
    """A copy of a schema with every `pattern` keyword rewritten by `ecma_pattern`."""
    if isinstance(node, dict):
        return {key: ecma_pattern(value) if key == "pattern" and isinstance(value, str)
                else _matching_ecma(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_matching_ecma(item) for item in node]
    return node


def _from_fast(exc: Any) -> jsonschema.ValidationError:
    """A `fastjsonschema.JsonSchemaValueException` as jsonschema's error."""
    import jsonschema

    definition = exc.definition if isinstance(exc.definition, dict) else {}
    return jsonschema.ValidationError(
        exc.message, validator=exc.rule or "", path=deque((exc.path or [])[1:]),
        instance=exc.value, schema=definition,
        validator_value=definition.get(exc.rule or "") if exc.rule else None)


def _load(name: str) -> Collection:
    text = resources.files("exporter").joinpath(f"schemas/{name}.schema.json").read_text("utf-8")
    schema = json.loads(text)
    meta = schema["x-fednode"]
    # Validation is against the content form: served (readOnly) fields are not allowed there.
    content_schema = _matching_ecma(schema)
    content_schema["properties"] = {
        key: value for key, value in content_schema["properties"].items()
        if not value.get("readOnly")
    }
    return Collection(
        name=name, title=schema["title"], description=schema["description"], tool=meta["tool"],
        title_field=meta["titleField"], order=tuple(meta["order"]), schema=schema,
        content_schema=content_schema,
    )


@cache
def collections() -> dict[str, Collection]:
    """Every collection, in the node's fixed order."""
    return {name: _load(name) for name in COLLECTIONS}
