"""How people read the fields and controlled values of every collection: one table,
`schemas/labels.json`, kept beside the schemas it names (its `about` says what it holds).

Pages, lists and search snippets take their labels from here: `field_label("nativeRange")`
is "Native range", `value_label("degreeOfEstablishment", "widespreadInvasive")` is
"Widespread invasive". A field or value the table lacks (a hub member's newer term, a
pathway written another way) is still shown readably (`readable`); a test holds the table
to every field and controlled value of the schemas."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Labels:
    fields: dict[str, str]  # field -> label
    data: frozenset[str]  # the fields shown in a page's Data section
    values: dict[str, dict[str, str]]  # field -> value -> label
    keys: dict[str, dict[str, str]]  # field -> `_key(value)` -> label


def _key(value: str) -> str:
    return "".join(character for character in value.casefold() if character.isalnum())


@cache
def labels() -> Labels:
    """The table, read once."""
    text = resources.files("exporter.project").joinpath("schemas/labels.json").read_text(
        "utf-8")
    table = json.loads(text)
    values: dict[str, dict[str, str]] = table["values"]
    return Labels(fields=table["fields"], data=frozenset(table["data"]), values=values,
                  keys={field: {_key(value): label for value, label in named.items()}
                        for field, named in values.items()})


def readable(name: str) -> str:
    """A name the table does not know, as words: `seed_contaminant`, `seedContaminant` ->
    `Seed contaminant`."""
    words = _CAMEL.sub(" ", re.sub(r"[_\s]+", " ", name)).strip()
    words = " ".join(word if word.isupper() else word.lower() for word in words.split())
    return words[:1].upper() + words[1:]


def field_label(name: str) -> str:
    """A field's label: `degreeOfEstablishment` -> `Degree of establishment`."""
    return labels().fields.get(name) or readable(name)


def value_label(field: str, value: str) -> str:
    """A value of `field` as people say it: `widespreadInvasive` -> `Widespread invasive`.
    A value written with its vocabulary's prefix (`escape:horticulture`,
    `cbd_2014_pathway:escape_horticulture`) is read by its last part; a value the table
    does not name is `readable`, and a field without controlled values keeps its values."""
    table = labels()
    named = table.values.get(field)
    if named is None:
        return value
    found = named.get(value)
    if found is not None:
        return found
    keys = table.keys[field]
    last = value.rsplit(":", 1)[-1]
    for candidate in (value, last, last.rsplit("_", 1)[-1]):
        found = keys.get(_key(candidate))
        if found is not None:
            return found
    return readable(last)


def is_data(field: str) -> bool:
    """Whether a page shows `field` in its collapsed Data section (identifiers, technical
    terms) rather than among the record's facts."""
    return field in labels().data
