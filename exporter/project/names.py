"""Scientific names of species: telling a Latin name from a common one, and finding a
scientificName used by more than one species record.

A title has the form of a scientific name when it is a capitalised genus and a lowercase
epithet (optionally a hybrid sign, an infraspecific part and an authorship), and its words
end as Latin names do: "Impatiens glandulifera Royle", "Platanus × hispanica",
"Fallopia japonica (Houtt.) Ronse Decr.". "Giant hogweed" has the shape but not the endings
(English genus-like words end in t, d, k, y...; English epithet-like words in weed, wort,
rose...), so it is a common name. The rule is a guess: `fednode new` says which field it
filled, so a wrong guess is seen and moved at once."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from exporter.project.content import SourceFile, SourceRecord, discover, read
from exporter.project.schemas import collections
from exporter.shared.errors import Problem

SPECIES = "species"
FIELD = "scientificName"

_NAME = re.compile(
    r"(?P<genus>[A-Z][a-z]+)"
    r"\s+(?:(?:×|x)\s*)?(?P<epithet>[a-z]+(?:-[a-z]+)?)"
    r"(?:\s+(?P<rank>subsp\.|ssp\.|var\.|subvar\.|f\.|forma)?\s*(?P<infra>[a-z]+(?:-[a-z]+)?))?"
    r"(?:\s+(?P<author>[(A-Z\u00c0-\u00de].*))?", re.ASCII)
# Last letters of Latin genus names (Acer, Carex, Heracleum, Senecio, Impatiens, ...).
_GENUS_END = re.compile(r"[aeimnorsux]$")
# Endings of Latin epithets: glandulifera, japonica, robur, repens, helix, arvense, ...
_EPITHET_END = re.compile(
    r"(?:a|ae|i|us|um|is|es|ens|ans|ex|ix|yx|or|ur|ense|ale|ile|are|ere|enne|tre|cre|oides)$")
# Letter groups of English words that Latin epithets do not have (knotweed, oak, ash, ...).
_ENGLISH = re.compile(r"w|k|ee|oo|ck|sh|gh")


@dataclass(frozen=True)
class LatinName:
    name: str  # genus, epithet and any infraspecific part: dwc:scientificName
    authorship: str  # dwc:scientificNameAuthorship, or ""


def latin_name(title: str) -> LatinName | None:
    """The scientific name in a title, or None when the title reads as a common name."""
    text = " ".join(title.split())
    found = _NAME.fullmatch(text)
    if found is None or not _GENUS_END.search(found["genus"]):
        return None
    words = [found["epithet"]] + ([found["infra"]] if found["infra"] and not found["rank"] else [])
    if not all(_EPITHET_END.search(w) and not _ENGLISH.search(w) for w in words):
        return None
    author = found["author"] or ""
    name = text[:found.start("author")].strip() if author else text
    return LatinName(name, author)


def duplicates(records: Iterable[SourceRecord]) -> list[Problem]:
    """A warning on every species record whose scientificName another one uses too
    (compared without regard to case or spacing): the first of them names the second, every
    other one names the first."""
    users: dict[str, list[SourceRecord]] = {}
    for record in records:
        value = record.fields.get(FIELD)
        if record.collection == SPECIES and isinstance(value, str) and value.strip():
            users.setdefault(_key(value), []).append(record)
    warnings = []
    for group in users.values():
        for index, record in enumerate(group if len(group) > 1 else []):
            other = group[1] if index == 0 else group[0]
            warnings.append(Problem(record.path, record.line_of(FIELD), FIELD,
                                    f"warning: also used by {other.path}:{other.line_of(FIELD)}"))
    return sorted(warnings)


def suspects(records: Iterable[SourceRecord], sort_keys: dict[str, tuple[str, ...]]
             ) -> set[str] | None:
    """The files of the species records whose scientificName may be another's, told from
    the records' sort keys (an export's, from its cache: the name casefolded) without
    reading a file: only these can `duplicates` name. None if species are not listed by
    their scientificName (then every file is a suspect)."""
    if collections()[SPECIES].order != (FIELD,):
        return None
    paths: dict[str, list[str]] = {}
    for record in records:
        if record.collection == SPECIES:
            key = _suspect_key(sort_keys[record.id][0])
            if key:
                paths.setdefault(key, []).append(record.path)
    return {path for group in paths.values() if len(group) > 1 for path in group}


def _suspect_key(folded: str) -> str:
    """Of a casefolded name: equal for any two names `duplicates` calls the same."""
    return " ".join(folded.split())


def species_records(content: Path, paths: set[str] | None = None) -> list[SourceRecord]:
    """Every species record that can be read (of the files `paths` only, if given), valid
    or not, in file order."""
    return _read_species(discover(content, collections())[0], paths)


def _read_species(files: list[SourceFile], paths: set[str] | None) -> list[SourceRecord]:
    collection = collections()[SPECIES]
    records: list[SourceRecord] = []
    for source in files:
        if source.collection == SPECIES and (paths is None or source.rel in paths):
            records.extend(read(source, collection, validated=False)[0])
    return records


def users_of(name: str, content: Path, cache: Path | None = None) -> list[SourceRecord]:
    """The species records whose scientificName is `name`. Given the export's cache folder,
    only the files it does not have, or whose cached sort keys (the names casefolded) may
    be `name`, are read."""
    files, _ = discover(content, collections())
    paths = None
    if cache is not None and collections()[SPECIES].order == (FIELD,):
        from exporter.pipeline.cache import (
            Cache,  # the export's; `fednode new` without one reads every file
        )

        remembered = Cache.load(cache)
        key = _suspect_key(name.casefold())
        paths = set()
        for source in files:
            if source.collection == SPECIES:
                keys = remembered.sort_keys(source)
                if keys is None or any(_suspect_key(sort[0]) == key for sort in keys):
                    paths.add(source.rel)
    return [record for record in _read_species(files, paths)
            if isinstance(record.fields.get(FIELD), str)
            and _key(record.fields[FIELD]) == _key(name)]


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()
