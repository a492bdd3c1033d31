"""The values of controlled terms as checklists write them, read as the vocabularies'.

The species schema holds `taxonRank`, and a distribution's `establishmentMeans` and
`degreeOfEstablishment`, as the values of their vocabularies (`species`, `introduced`,
`casual`). Published checklists write them otherwise: GBIF's exports and the GRIIS
checklists in capitals (`SPECIES`, `VARIETY`), the GRIIS checklists with the vocabulary's
synonyms (`Alien`, `Cryptogenic|Uncertain`), floras with abbreviations (`subsp.`, `var.`).
Each such value is read as the vocabulary's value it names: case, spaces, underscores and
punctuation aside, or as a synonym (vocabulary.json's `values`), or as a list (`|`, Darwin
Core's separator, or `/`) whose values all name one. The import says what it read as what,
in one line a file and term. A value that names none, or several (`Native|Alien`), is left
as it is, and the schema refuses it as a problem of its row."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import cache

from exporter.darwincore.checklist import Row, Taxon
from exporter.darwincore.terms import value_synonyms
from exporter.project.names import SPECIES
from exporter.project.schemas import collections

# The terms read this way, by the table that holds them (None: the core).
CONTROLLED: dict[str | None, tuple[str, ...]] = {
    None: ("taxonRank",),
    "distribution": ("establishmentMeans", "degreeOfEstablishment"),
}


def _key(value: str) -> str:
    return "".join(character for character in value.casefold() if character.isalnum())


@cache
def _readings() -> dict[str, dict[str, str]]:
    """By term, the key of every way of writing a value that is read, and the value."""
    properties = collections()[SPECIES].schema["properties"]
    entry = properties["distributions"]["items"]["properties"]
    vocabularies = {"taxonRank": properties["taxonRank"]["enum"],
                    "establishmentMeans": entry["establishmentMeans"]["enum"],
                    "degreeOfEstablishment": entry["degreeOfEstablishment"]["enum"]}
    readings: dict[str, dict[str, str]] = {}
    for term, values in vocabularies.items():
        readings[term] = {_key(value): value for value in values}
        for written, value in value_synonyms().get(term, {}).items():
            if value in values:
                readings[term].setdefault(_key(written), value)
    return readings


def controlled(term: str, value: str) -> str:
    """`value` of `term` as its vocabulary writes it, or `value` itself when it names no
    one value of the vocabulary (or `term` has none)."""
    readings = _readings().get(term)
    if readings is None or value in readings.values():
        return value
    named = {readings.get(_key(part)) for part in re.split(r"[|/]", value)}
    if len(named) == 1 and None not in named:
        return named.pop() or value
    return value


def vocabulary_value(term: str, value: str) -> str:
    """`value` of `term` as its vocabulary's value, or "" when it names no one value."""
    reading = controlled(term, value)
    return reading if reading in _readings().get(term, {}).values() else ""


# GBIF's taxonomic status vocabulary, as `_key` writes its values.
STATUSES = frozenset({"accepted", "doubtful", "synonym", "heterotypicsynonym",
                      "homotypicsynonym", "propartesynonym", "misapplied"})


def read_swapped(taxa: Iterable[Taxon]) -> list[str]:
    """Swap back, in place, the taxonRank and taxonomicStatus of a core row that holds each
    in the other's column (`ACCEPTED` as its rank and `SPECIES` as its status, as some GRIIS
    archives' meta.xml maps them), and say so: one line a file."""
    swapped: Counter[str] = Counter()
    for taxon in taxa:
        terms = taxon.row.terms
        rank, status = terms.get("taxonRank", ""), terms.get("taxonomicStatus", "")
        if _key(rank) in STATUSES and _key(status) not in STATUSES \
                and controlled("taxonRank", status) in _readings()["taxonRank"].values():
            terms["taxonRank"], terms["taxonomicStatus"] = status, rank
            swapped[taxon.row.file] += 1
    return [f"{file}: taxonRank: read as taxonomicStatus, and taxonomicStatus as taxonRank, "
            f"in {count} row{'s' if count != 1 else ''} whose rank is a status (ACCEPTED, "
            f"SYNONYM) and whose status is a rank (SPECIES)"
            for file, count in swapped.items()]


def read_controlled(taxa: Iterable[Taxon]) -> list[str]:
    """Read the controlled values of the taxa's rows as their vocabularies' (in place), and
    say what was read as what: one line a file and term."""
    read: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
    for taxon in taxa:
        rows: list[tuple[str | None, Row]] = [(None, taxon.row)]
        rows += [(kind, row) for kind, kind_rows in taxon.extensions.items()
                 for row in kind_rows]
        for kind, row in rows:
            for term in CONTROLLED.get(kind, ()):
                value = row.terms.get(term)
                if value is None:
                    continue
                reading = controlled(term, value)
                if reading != value:
                    row.terms[term] = reading
                    read.setdefault((row.file, term), Counter())[(value, reading)] += 1
    return [f"{file}: {term}: read " + ", ".join(
        f"{value!r} as {reading!r} ({count} row{'s' if count != 1 else ''})"
        for (value, reading), count in counts.most_common())
        for (file, term), counts in read.items()]
