"""A taxon's species fields: its core terms and extension rows mapped to a species record's
fields (`taxon_fields`), with the source row behind each; the category its distributions
tell; and each problem of the fields as a species record, in words, at that row."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from exporter.darwincore.checklist import Row, Taxon
from exporter.darwincore.terms import CORE_TERMS, EXTENSIONS, FLAGS
from exporter.project.schemas import Collection
from exporter.shared.errors import Problem

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def taxon_fields(taxon: Taxon, name: str, authorship: str, verbatim: str
                 ) -> tuple[dict[str, Any], dict[str, Row]]:
    """The species fields of one taxon, and the source row behind each field (for
    problems)."""
    terms = taxon.row.terms
    fields: dict[str, Any] = {}
    origins: dict[str, Row] = {}
    for term in CORE_TERMS:
        if term in terms:
            fields[term] = terms[term]
            origins[term] = taxon.row
    fields["scientificName"] = name or verbatim
    given = terms.get("scientificNameAuthorship")
    if given:
        fields["scientificNameAuthorship"] = given
    elif authorship:
        fields["scientificNameAuthorship"] = authorship
    if verbatim != fields["scientificName"]:
        fields["verbatimScientificName"] = verbatim
        origins["verbatimScientificName"] = taxon.row
    for kind, rows in taxon.extensions.items():
        extension = EXTENSIONS[kind]
        if extension.field is None:
            for row in rows:
                for flag in FLAGS:
                    if flag in row.terms:
                        fields[flag] = _flag(row.terms[flag])
                        origins[flag] = row
            continue
        entries: list[dict[str, Any]] = []
        index: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        for row in rows:
            entry: dict[str, Any] = {t: row.terms[t] for t in extension.terms if t in row.terms}
            if not entry:
                continue
            key = tuple((t, v) for t, v in entry.items() if t not in extension.lists)
            for term in extension.lists:
                value = entry.pop(term, None)
                entry[term] = [value] if value else []
            same = index.get(key)
            if same is not None and extension.lists:
                number = entries.index(same)
                for term in extension.lists:
                    for value in entry[term]:
                        if value not in same[term]:
                            origins[f"{extension.field}.{number}.{term}.{len(same[term])}"] \
                                = row
                            same[term].append(value)
                continue
            origins[f"{extension.field}.{len(entries)}"] = row
            index[key] = entry
            entries.append(entry)
        for entry in entries:
            for term in extension.lists:
                if not entry[term]:
                    del entry[term]
        if entries:
            fields[extension.field] = entries
    return fields, origins


def _flag(value: str) -> Any:
    lowered = value.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else value


def category_of(fields: dict[str, Any]) -> str:
    """The node's grouping, from the distributions: invasive where any region says so,
    else native or introduced when every region agrees; "" when nothing tells."""
    entries = fields.get("distributions", [])
    degrees = {e.get("degreeOfEstablishment") for e in entries}
    if degrees & {"invasive", "widespreadInvasive"}:
        return "invasive"
    means = {e.get("establishmentMeans") for e in entries}
    if means and means <= {"native", "nativeReintroduced"}:
        return "native"
    if means and means <= {"introduced", "introducedAssistedColonisation"}:
        return "introduced"
    return ""


def invalid(species: Collection, fields: dict[str, Any], taxon: Taxon,
             origins: dict[str, Row]) -> Iterable[tuple[Row, Problem]]:
    """Each problem of the fields as a species record, with the source row behind it."""
    # A copy: the compiled validator fills in defaults (access, taxonRank) where it runs.
    for error in species.errors(copy.deepcopy(fields)):
        path = [str(part) for part in error.absolute_path]
        if error.validator == "required":
            path += [next(str(n) for n in error.validator_value if n not in error.instance)]
        row = origins.get(".".join(path)) or origins.get(".".join(path[:2])) \
            or origins.get(path[0] if path else "") or taxon.row
        term = next((part for part in reversed(path) if not part.isdigit()), "")
        yield row, Problem(row.file, row.line, term, _reason(error, term))


def _reason(error: Any, term: str) -> str:
    """What is wrong with a value, in words (never the schema's pattern)."""
    value = error.instance
    shown = repr(value) if len(repr(value)) <= 80 else f"{repr(value)[:60]}...'"
    if error.validator == "enum":
        return f"{shown} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "type" and term in FLAGS:
        return f"{shown} is not true or false"
    if error.validator == "required":
        return "missing"
    if error.validator == "maxLength":
        return (f"{len(value):,} characters, more than the {error.validator_value:,} this "
                f"term is kept with")
    if error.validator == "minLength":
        return (f"{shown} is shorter than the {error.validator_value} characters this term "
                f"needs")
    if error.validator == "pattern":
        form = error.schema.get("x-fednode-form") or "another form"
        return f"{shown} is not {form}"
    return f"{shown} is not a valid value of {term}"
