"""Collections and their fields, defined once as JSON Schema (draft 2020-12).

The same documents validate content and are served at /api/schema."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from functools import cache, cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any

from exporter.contract.wire import COLLECTIONS, is_time

# fastjsonschema is imported when a record is first validated, and jsonschema only when a
# record is found invalid (to say why): importing jsonschema takes 0.2-0.3 s, which every
# export that read any file would pay.
if TYPE_CHECKING:
    import jsonschema

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


def _is_date(value: object) -> bool:
    """RFC 3339 full-date, a real day of the calendar (as jsonschema checks it); a format
    says nothing of values that are not text."""
    if not isinstance(value, str):
        return True
    if not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_time(value: object) -> bool:
    """A time as a node serves one (`wire.is_time`); a format says nothing of values that
    are not text."""
    return not isinstance(value, str) or is_time(value)


def _unchecked(value: object) -> bool:
    return True


# The formats the content schemas use, each checked by these functions in both validators
# (the compiled one and jsonschema's, which explains errors), so they agree, and the same on
# every install: jsonschema's own checker checks some formats only where an optional package
# is installed (`uri` with rfc3987, `date-time` with rfc3339-validator), which would make what
# is valid depend on the machine. `uri` is not checked as a format: the one field using it
# (`resources.link`) has a pattern that asks for http(s). `date-time` is a time as nodes
# serve it (`SOURCE_TIMES`). A content schema using a format not named here is refused when
# its validator is made (`Collection.formats`).
FORMATS: dict[str, Callable[[object], bool]] = {"date": _is_date, "date-time": _is_time,
                                                "uri": _unchecked}

# A record's provenance: where a hub found it (docs/hub-reference.md, "Serving the network"). Served
# fields (readOnly) that content may nevertheless set: a hub's records are the content of the
# node it exports (`hub/republish.py`), each written with the member node it comes from. A
# node's own records do not have them (`fednode check` takes them from content all the same:
# a node may republish a record from elsewhere).
PROVENANCE = ("source_node", "source_node_name", "source_url", "license")
# A republished record's times: served fields that a record naming its source (`source_node`)
# may carry from it, in place of the ledger's (a hub's record keeps its member's times; the
# export serves them, `exporter.site.served`). Any other record's times are the ledger's.
SOURCE_TIMES = ("created_at", "updated_at")


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
        """The reference validator, which says why a record is invalid."""
        import jsonschema

        checker = jsonschema.FormatChecker(formats=())
        for name in self.formats:
            checker.checks(name)(FORMATS[name])
        return jsonschema.Draft202012Validator(self.content_schema, format_checker=checker)

    @cached_property
    def fast(self) -> Callable[[dict[str, Any]], Any]:
        """The same document, compiled, when first needed (an export that reads no file of
        a collection never compiles it). Our schemas use only keywords that draft 7 shares
        with 2020-12, and formats are checked by the same functions (`FORMATS`), so both
        agree."""
        import fastjsonschema

        compiled = dict(self.content_schema,
                        **{"$schema": "http://json-schema.org/draft-07/schema#"})
        formats = {name: FORMATS[name] for name in self.formats}
        return fastjsonschema.compile(compiled, formats=formats)  # type: ignore[no-any-return]

    @cached_property
    def formats(self) -> frozenset[str]:
        """The formats the content schema uses; each must be one of `FORMATS`."""
        used: set[str] = set()
        pending: deque[Any] = deque([self.content_schema])
        while pending:
            node = pending.pop()
            if isinstance(node, dict):
                if isinstance(node.get("format"), str):
                    used.add(node["format"])
                pending.extend(node.values())
            elif isinstance(node, list):
                pending.extend(node)
        unknown = used - set(FORMATS)
        if unknown:
            raise RuntimeError(f"the {self.name} schema uses formats no validator checks: "
                               f"{sorted(unknown)}; add them to exporter.project.schemas.FORMATS")
        return frozenset(used)

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

    def set_by_content(self, name: str, fields: dict[str, Any]) -> bool:
        """Whether a record of these fields may set this field in content: any but those the
        node serves, and a republished record's times (`SOURCE_TIMES`) where it names its
        source."""
        return name not in self._served or (name in SOURCE_TIMES and "source_node" in fields)

    @cached_property
    def _served(self) -> frozenset[str]:
        """The readOnly fields content may not set (asked of every field of every record):
        all but the provenance."""
        return frozenset(name for name, spec in self.schema["properties"].items()
                         if spec and spec.get("readOnly") and name not in PROVENANCE)

    @cached_property
    def provenance_fields(self) -> tuple[str, ...]:
        """The provenance fields that are not content fields, in schema order: served after
        the record's own fields when a record has them (`PROVENANCE`)."""
        return tuple(name for name, spec in self.schema["properties"].items()
                     if name in PROVENANCE and spec.get("readOnly"))

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
    text = resources.files("exporter.project").joinpath(
        f"schemas/{name}.schema.json").read_text("utf-8")
    schema = json.loads(text)
    meta = schema["x-fednode"]
    # Validation is against the content form: served (readOnly) fields are not allowed there,
    # but for a record's provenance and its source's times (`Collection.set_by_content`).
    content_schema = _matching_ecma(schema)
    content_schema["properties"] = {
        key: value for key, value in content_schema["properties"].items()
        if not value.get("readOnly") or key in (*PROVENANCE, *SOURCE_TIMES)
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
