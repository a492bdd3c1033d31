"""A checklist's synonyms: the rows whose `taxonomicStatus` names a synonym (`synonym`,
`heterotypicSynonym`, `homotypicSynonym`, `proParteSynonym`, `misapplied`, in any case or
spacing) or whose `acceptedNameUsageID` names another row. Each is attached to its accepted
taxon, found by `acceptedNameUsageID` (a taxonID of the checklist), else by
`acceptedNameUsage` (a name of the checklist, as written or without its authorship),
following a synonym of a synonym to the accepted one. It is kept as a name on that taxon's
record (`synonyms`), not as a record of its own; its extension rows are not kept.

A synonym whose accepted taxon has no row, but whose `acceptedNameUsage` names it, belongs
to a record of that accepted name (`AcceptedName`): the synonyms naming one accepted name
are its names, and their extension rows are its own (the checklist lists the plant under
the name its source used). A synonym that names no accepted taxon is left out, with its
problem."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.darwincore.checklist import LeftOut, Row, Taxon
from exporter.darwincore.terms import TAXON_ID
from exporter.darwincore.values import vocabulary_value
from exporter.shared.errors import Problem
from exporter.shared.names import SplitName, split_names

# Statuses that name no synonym (accepted, doubtful, or a value of no vocabulary, such as
# the `SPECIES` some GRIIS checklists write there) are accepted taxa.
_SYNONYM = re.compile(r"synonym|misapplied|misapplication|basionym")
NAME_MAX = 500  # characters of a synonym as written (the schema's maxLength)
# A synonym row's terms that describe its own name: not those of its accepted name's record.
_NAME_TERMS = frozenset({"taxonID", "scientificName", "scientificNameAuthorship",
                         "scientificNameID", "genus", "taxonRank", "taxonomicStatus"})


@dataclass
class AcceptedName:
    """An accepted taxon the checklist has no row for, named by its synonyms'
    `acceptedNameUsage`: a record of its own, made of those synonym rows. Its taxonID is
    the accepted name without authorship, so its record id is stable across imports."""

    name: SplitName  # acceptedNameUsage, split (the first that gives an authorship)
    dataset: str  # the rows' datasetID, "" where they give none
    members: list[int] = field(default_factory=list)  # its synonym rows, in order
    names: dict[str, int] = field(default_factory=dict)  # each synonym as written: its row
    canonical: dict[str, str] = field(default_factory=dict)  # as written: without authorship

    @property
    def taxon_id(self) -> str:
        return self.name.name

    def synonyms(self, members: list[int]) -> list[str]:
        """The synonyms the rows `members` list, each once, in the checklist's order."""
        kept = set(members)
        return [name for name, index in self.names.items() if index in kept]

    def taxon(self, taxa: list[Taxon], members: list[int], dropped: set[int]) -> Taxon:
        """The record's taxon: the first member's terms but those of its own name, the
        accepted name's (accepted, its rank and genus as the parser reads them), and every
        member's extension rows, each once, but those `dropped` (by `id`)."""
        first = taxa[members[0]].row
        terms = {t: v for t, v in first.terms.items() if t not in _NAME_TERMS}
        terms.update(taxonID=self.taxon_id, scientificName=self.name.verbatim,
                     taxonomicStatus="accepted")
        rank = vocabulary_value("taxonRank", self.name.rank) if self.name.rank else ""
        if rank:
            terms["taxonRank"] = rank
        words = self.name.name.split()
        if "genus" in first.terms and len(words) > 1 and words[0][:1].isupper():
            terms["genus"] = words[0]
        extensions: dict[str, list[Row]] = {}
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for index in members:
            for kind, rows in taxa[index].extensions.items():
                for row in rows:
                    same = (kind, tuple(sorted((t, v) for t, v in row.terms.items()
                                               if t != TAXON_ID)))
                    if id(row) not in dropped and same not in seen:
                        seen.add(same)
                        extensions.setdefault(kind, []).append(row)
        return Taxon(Row(first.file, first.line, terms, self.taxon_id), self.taxon_id,
                     extensions)


@dataclass
class Synonymy:
    """Which taxa are records, and the synonyms attached to each."""

    accepted: list[int] = field(default_factory=list)  # indexes of the taxa kept as records
    names: dict[int, list[str]] = field(default_factory=dict)  # as written, by accepted
    canonical: dict[int, list[str]] = field(default_factory=dict)  # without authorship
    named: list[AcceptedName] = field(default_factory=list)  # accepted taxa without a row
    left: list[LeftOut] = field(default_factory=list)
    attached: int = 0  # synonym rows attached to their accepted taxa' rows
    unkept: int = 0  # their extension rows

    def listed(self, taxa: list[Taxon]) -> list[tuple[str, Row, str, str]]:
        """Each synonym kept: its accepted name as written, the row that lists it (the
        accepted taxon's, or the synonym's own where the accepted taxon has no row), the
        synonym as written and without its authorship."""
        found = [(taxa[index].row.terms.get("scientificName", ""), taxa[index].row, written,
                  name)
                 for index, names in self.names.items()
                 for written, name in zip(names, self.canonical[index], strict=True)]
        found += [(accepted.name.verbatim, taxa[row].row, written, accepted.canonical[written])
                  for accepted in self.named for written, row in accepted.names.items()]
        return found


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
    named: dict[tuple[str, str], AcceptedName] = {}
    for index, taxon in enumerate(taxa):
        if index not in synonyms:
            found.accepted.append(index)
            continue
        target = pointers.accepted(index, synonyms)
        written = _written(taxon)
        if target is None or len(written) > NAME_MAX:
            found.left.append(_orphan(taxon, written, target, index in pointers.circles))
            continue
        if isinstance(target, SplitName):  # an accepted taxon without a row
            dataset = taxon.row.terms.get("datasetID", "")
            accepted = named.setdefault((dataset, _key(target.name)),
                                        AcceptedName(target, dataset))
            if target.authorship and not accepted.name.authorship:
                accepted.name = target
            accepted.members.append(index)
            if _key(written) != _key(target.verbatim):  # not the accepted name itself
                accepted.names.setdefault(written, index)
                accepted.canonical.setdefault(written, names[index].name)
            continue
        if written not in found.names.setdefault(target, []):
            found.names[target].append(written)
            found.canonical.setdefault(target, []).append(names[index].name)
        found.attached += 1
        found.unkept += sum(len(rows) for rows in taxon.extensions.values())
    found.named = list(named.values())
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
        self.given = dict(zip(asked, given, strict=True))
        self.circles: set[int] = set()  # synonyms whose accepted taxa lead back to them

    def accepted(self, index: int, synonyms: set[int]) -> int | SplitName | None:
        """The accepted taxon of the synonym at `index`, following synonyms of synonyms:
        its row; or, where it has none (the last synonym's acceptedNameUsage names no row,
        or its own), the name that acceptedNameUsage gives (unless that name is a taxonID
        of the checklist, which would give two records one id); None when no accepted
        taxon is named, or synonyms name each other in a circle."""
        start, seen = index, {index}
        while index in synonyms:
            index_ = self._named(index)
            if index_ is None or index_ == index:
                given = self.given.get(index)
                return given if given and given.name not in self.by_id else None
            if index_ in seen:
                self.circles.add(start)
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
        return found if found is not None else self.by_text.get(_key(self.given[index].name))


def _orphan(taxon: Taxon, written: str, target: int | SplitName | None, circle: bool
            ) -> LeftOut:
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
                          f"{written!r} is a synonym of {terms[term]!r}, a synonym that "
                          f"leads back to it: synonyms naming each other in a circle name "
                          f"no accepted taxon" if circle else
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
