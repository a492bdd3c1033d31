"""A checklist's synonyms: the rows whose `taxonomicStatus` names a synonym (`synonym`,
`heterotypicSynonym`, `homotypicSynonym`, `proParteSynonym`, `misapplied`, in any case or
spacing) or whose `acceptedNameUsageID` names another row. Each is attached to its accepted
taxon, found by `acceptedNameUsageID` (a taxonID of the checklist), else by
`acceptedNameUsage` (a name of the checklist, as written or without its authorship),
following a synonym of a synonym to the accepted one. It is kept as a name on that taxon's
record (`synonyms`), not as a record of its own; its extension rows are not kept. A synonym
whose accepted taxon is not in the checklist is left out, with its problem."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.darwincore.source import LeftOut, Taxon
from exporter.darwincore.terms import TAXON_ID
from exporter.shared.errors import Problem
from exporter.shared.names import SplitName, split_names

# Statuses that name no synonym (accepted, doubtful, or a value of no vocabulary, such as
# the `SPECIES` some GRIIS checklists write there) are accepted taxa.
_SYNONYM = re.compile(r"synonym|misapplied|misapplication|basionym")
NAME_MAX = 500  # characters of a synonym as written (the schema's maxLength)


@dataclass
class Synonymy:
    """Which taxa are records, and the synonyms attached to each."""

    accepted: list[int] = field(default_factory=list)  # indexes of the taxa kept as records
    names: dict[int, list[str]] = field(default_factory=dict)  # as written, by accepted
    canonical: dict[int, list[str]] = field(default_factory=dict)  # without authorship
    left: list[LeftOut] = field(default_factory=list)
    attached: int = 0  # synonym rows attached to their accepted taxa
    unkept: int = 0  # their extension rows


def is_synonym(taxon: Taxon) -> bool:
    """Whether the row is a synonym: by its status, or an acceptedNameUsageID naming
    another row."""
    terms = taxon.row.terms
    status = re.sub(r"[^a-z]", "", terms.get("taxonomicStatus", "").casefold())
    if _SYNONYM.search(status):
        return True
    pointer = terms.get("acceptedNameUsageID", "")
    return bool(pointer) and pointer not in (taxon.taxon_id, taxon.row.key)


def attach(taxa: list[Taxon], names: list[SplitName]) -> Synonymy:
    """Attach every synonym among `taxa` (whose names `names` are, split) to its accepted
    taxon."""
    found = Synonymy()
    synonyms = {index for index, taxon in enumerate(taxa) if is_synonym(taxon)}
    if not synonyms:
        found.accepted = list(range(len(taxa)))
        return found
    pointers = _Pointers(taxa, names, synonyms)
    for index, taxon in enumerate(taxa):
        if index not in synonyms:
            found.accepted.append(index)
            continue
        target = pointers.accepted(index, synonyms)
        written = _written(taxon)
        if target is None or len(written) > NAME_MAX:
            found.left.append(_orphan(taxon, written, target))
            continue
        if written not in found.names.setdefault(target, []):
            found.names[target].append(written)
            found.canonical.setdefault(target, []).append(names[index].name)
        found.attached += 1
        found.unkept += sum(len(rows) for rows in taxon.extensions.values())
    return found


class _Pointers:
    """The taxa by what a synonym may name its accepted taxon with."""

    def __init__(self, taxa: list[Taxon], names: list[SplitName], synonyms: set[int]
                 ) -> None:
        self.taxa = taxa
        self.by_id: dict[str, int] = {}
        self.by_text: dict[str, int] = {}
        # accepted taxa first: a name that is also a synonym's names the accepted taxon
        for index in sorted(range(len(taxa)), key=lambda i: i in synonyms):
            taxon, split = taxa[index], names[index]
            for key in (taxon.taxon_id, taxon.row.key):
                self.by_id.setdefault(key, index)
            for text in (_written(taxon), split.verbatim, split.name):
                self.by_text.setdefault(_key(text), index)
        asked = sorted(i for i in synonyms if taxa[i].row.terms.get("acceptedNameUsage"))
        given = split_names([taxa[i].row.terms["acceptedNameUsage"] for i in asked])
        self.given = {index: split.name for index, split in zip(asked, given, strict=True)}

    def accepted(self, index: int, synonyms: set[int]) -> int | None:
        """The accepted taxon of the synonym at `index`, following synonyms of synonyms;
        None when the checklist has none."""
        seen = {index}
        while index in synonyms:
            index_ = self._named(index)
            if index_ is None or index_ in seen:
                return None
            seen.add(index_)
            index = index_
        return index

    def _named(self, index: int) -> int | None:
        terms = self.taxa[index].row.terms
        pointer = terms.get("acceptedNameUsageID", "")
        if pointer in self.by_id:
            return self.by_id[pointer]
        text = terms.get("acceptedNameUsage", "")
        if not text:
            return None
        found = self.by_text.get(_key(text))
        return found if found is not None else self.by_text.get(_key(self.given[index]))


def _orphan(taxon: Taxon, written: str, target: int | None) -> LeftOut:
    terms = taxon.row.terms
    row = taxon.row
    following = sum(len(rows) for rows in taxon.extensions.values())
    if target is not None:
        problem = Problem(row.file, row.line, "scientificName",
                          f"a synonym of {len(written):,} characters, more than the "
                          f"{NAME_MAX} a synonym is kept with")
    elif terms.get("acceptedNameUsageID") or terms.get("acceptedNameUsage"):
        term = "acceptedNameUsageID" if terms.get("acceptedNameUsageID") else \
            "acceptedNameUsage"
        problem = Problem(row.file, row.line, term,
                          f"{written!r} is a synonym of {terms[term]!r}, which is not a "
                          f"taxon of this checklist")
    else:
        problem = Problem(row.file, row.line, "taxonomicStatus",
                          f"{written!r} is a synonym ({terms.get('taxonomicStatus', '')}) "
                          f"that names no accepted taxon (acceptedNameUsageID or "
                          f"acceptedNameUsage)")
    return LeftOut(row, "taxon", [problem], following, terms.get(TAXON_ID, row.key))


def _written(taxon: Taxon) -> str:
    """The synonym's name with its authorship, as the checklist writes it."""
    name = " ".join(taxon.row.terms.get("scientificName", "").split())
    authorship = " ".join(taxon.row.terms.get("scientificNameAuthorship", "").split())
    return f"{name} {authorship}" if authorship and authorship not in name else name


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()
