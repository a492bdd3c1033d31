"""A record's fields as search reads and shows them: the text people read on its page.

Search indexes a record's text and shows a piece of it as the result's snippet, so that
text is what the record's page says: its Markdown body as plain text (no `**`, `#` or link
targets), or, for an imported species with no text of its own, the sentence its page opens
with; each controlled value by its label ("Widespread invasive", not
`widespreadInvasive`). Identifiers and codes (taxon ids, dataset DOIs, licence URLs,
language codes), which a page keeps in its Data section and nobody searches for as words,
are left out; a technical field written in words (a dataset's name, a citation) is kept."""

from __future__ import annotations

from typing import Any

from exporter.project.labels import is_data, labels, value_label
from exporter.project.names import SPECIES
from exporter.site.sentence import species_sentence
from exporter.site.values import plain_text

PROSE_WORDS = 4  # the fewest words of a field's value that a snippet shows
# A name as its source wrote it: the record's names (`x-fednode.search.names`) hold it.
_NAME_AS_PUBLISHED = "verbatimScientificName"


def _words(value: Any) -> bool:
    """Whether a technical field's value is words rather than an identifier or a code."""
    return isinstance(value, str) and len(value.split()) > 1 and "://" not in value.split()[0]


def _labelled(field: str, value: Any) -> Any:
    """A value with each controlled value in it (a list's, a nested record's) as its label."""
    if isinstance(value, list):
        return [_labelled(field, item) for item in value]
    if isinstance(value, dict):
        return {key: _labelled(key, item) for key, item in value.items()}
    if isinstance(value, str) and field in labels().values:
        return value_label(field, value)
    return value


def is_shown(field: str, value: Any) -> bool:
    """Whether a field's value (as `searched_fields` gives it) is text a snippet may show:
    the body, or a fact written as prose (a few words, not a code, a name or a label)."""
    return field == "body" or (not is_data(field) and isinstance(value, str)
                               and len(value.split()) >= PROSE_WORDS)


def searched_fields(collection: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The record's fields as search reads them (see the module's docstring)."""
    out = {name: _labelled(name, value) for name, value in fields.items()
           if name != _NAME_AS_PUBLISHED and (not is_data(name) or _words(value))}
    body = plain_text(str(fields.get("body") or ""))
    if not body and collection == SPECIES:
        body = species_sentence(fields)
    out["body"] = body
    return out
