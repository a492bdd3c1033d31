"""A Darwin Core checklist as read: its rows (`Row`), joined on taxonID into taxa (`Taxon`)
with their extension rows, and the checks that join them. A row with a problem (no
taxonID, a duplicate, a control character, an extension row of no taxon) is left out
(`LeftOut`), a core row with its extension rows. A column fednode has no field for, a
standard term or not, is named in the checklist's notes (one line a file) and left out:
it never stops an import. A checklist that cannot be read is refused with its problems
and those notes (`ChecklistRefused`): a column left out as no term is often why a term
is missing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from exporter.darwincore.eml import Provenance
from exporter.darwincore.terms import (
    CORE_TERMS,
    IGNORED,
    LINKS,
    TAXON_ID,
    Extension,
    standard_terms,
)
from exporter.shared.errors import ContentError, Problem, control_character, control_problem


@dataclass
class Row:
    file: str  # as shown in problems
    line: int
    terms: dict[str, str]  # short term -> value; empty cells left out
    key: str = ""  # what joins it: the core's id (an archive's) or taxonID


@dataclass
class Taxon:
    row: Row
    taxon_id: str
    extensions: dict[str, list[Row]] = field(default_factory=dict)  # kind -> rows


@dataclass
class LeftOut:
    """A row left out for its problems; a core row takes the rows of its extensions with
    it (`following`)."""

    row: Row
    kind: str  # "taxon" (the core) or the extension's kind
    problems: list[Problem]
    following: int = 0  # extension rows left out with a core row
    taxon_id: str = ""  # a core row's taxonID, where it has one

    @property
    def rows(self) -> int:
        return 1 + self.following

    def said(self, *, strict: bool = False) -> list[Problem]:
        """Its problems, each saying what was left out (under --strict, which refuses the
        checklist instead, just the problem)."""
        if strict:
            return list(self.problems)
        if self.kind != "taxon":
            outcome = "this row is left out"
        elif self.following:
            outcome = (f"this taxon is left out, with its {self.following} extension "
                       f"row{'s' if self.following != 1 else ''}")
        else:
            outcome = "this taxon is left out"
        return [Problem(p.path, p.line, p.field, f"{p.message}; {outcome}")
                for p in self.problems]


@dataclass
class Checklist:
    source: str
    taxa: list[Taxon]
    notes: list[str] = field(default_factory=list)  # what was left out, one line a file
    provenance: Provenance | None = None  # from the archive's EML
    left_out: list[LeftOut] = field(default_factory=list)  # rows with problems
    rows: int = 0  # rows read, the core's and the extensions'


class ChecklistRefused(ContentError):
    """A checklist not imported: its problems, and the notes of what was read before they
    were found (what the checklist left out, where it came from), for the user to read
    beside them: they often explain them (a column `taxonId`, left out as no term, is why
    every row's taxonID is missing)."""

    def __init__(self, problems: list[Problem], notes: list[str]) -> None:
        super().__init__(problems)
        self.notes = list(notes)


@dataclass
class Found:
    """The tables a source holds, and the problems and notes of reading them."""

    tables: list[Table]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Table:
    """One table of a source, the core (no extension) or an extension's; its rows are read
    as they are iterated."""

    file: str
    extension: Extension | None  # None: the core
    header: list[str]  # short terms
    rows: Iterator[Row]
    header_line: int = 1


def _header(table: Table, problems: list[Problem], notes: list[str]) -> set[str]:
    """The columns of `table` to leave out: every column fednode keeps no field of, named
    in one note for the file (standard terms apart from those that are no term at all);
    a kept term named twice is a problem."""
    known = {**CORE_TERMS, **IGNORED, **LINKS} if table.extension is None else {
        **table.extension.terms, TAXON_ID: ""}
    standard = standard_terms()
    unkept: list[str] = []
    foreign: list[str] = []
    for number, name in enumerate(table.header):
        if name not in known:
            if name not in unkept and name not in foreign:
                (unkept if name in standard else foreign).append(name)
        elif name in table.header[:number]:
            problems.append(Problem(table.file, table.header_line, name,
                                    "named twice: one column a term"))
    if unkept or foreign:
        parts = [f"{', '.join(unkept)} (standard terms the species schema has no field for)"
                 if unkept else "",
                 f"{', '.join(repr(n) for n in foreign)} (not Darwin Core or Dublin Core "
                 f"terms: check the spelling)" if foreign else ""]
        notes.append(f"{table.file}:{table.header_line}: left out the column"
                     f"{'s' if len(unkept) + len(foreign) > 1 else ''} "
                     f"{'; '.join(p for p in parts if p)}")
    return {name for name in table.header if name not in known or name in IGNORED}


def check_tables(source: str, found: Found) -> Checklist:
    """The checklist's taxa with their extension rows. A row with a problem is left out
    (a core row with the rows of its extensions); a problem of the checklist itself (a
    table that cannot be read, a term named twice) refuses it, as does a core none of whose
    rows can be read."""
    problems = found.problems
    joined = _Joined()
    for table in sorted(found.tables, key=lambda t: t.extension is not None):  # core first
        ignored = _header(table, problems, found.notes)
        for row in table.rows:
            joined.rows += 1
            for name in ignored:
                row.terms.pop(name, None)
            if table.extension is None:
                joined.core(row)
            else:
                joined.extension(row, table.extension)
    if not joined.ordered and not problems:  # (with --prune, every taxon would be deleted)
        problems.extend(p for gone in joined.left for p in gone.problems)
        if not problems:
            problems.append(Problem(source, 0, "", "the checklist holds no taxa: its core "
                                                   "table has no rows (or meta.xml skips "
                                                   "them all)"))
    if problems:
        raise ChecklistRefused(problems, found.notes)
    return Checklist(source, joined.ordered, found.notes, left_out=joined.left,
                     rows=joined.rows)


@dataclass
class _Joined:
    """The rows of a checklist joined into taxa as they are read, and those left out."""

    taxa: dict[str, Taxon] = field(default_factory=dict)  # by the key rows join on
    identities: dict[str, int] = field(default_factory=dict)  # taxonID -> its line
    ordered: list[Taxon] = field(default_factory=list)
    left: list[LeftOut] = field(default_factory=list)
    gone: dict[str, LeftOut] = field(default_factory=dict)  # core rows left out, by key
    rows: int = 0

    def core(self, row: Row) -> None:
        faults = _faults(row) or _core_faults(row, self.taxa, self.identities)
        if faults:
            left = LeftOut(row, "taxon", faults, taxon_id=row.terms.get(TAXON_ID, row.key))
            self.left.append(left)
            if row.key and row.key not in self.taxa:
                self.gone.setdefault(row.key, left)
            return
        self.identities[row.terms.setdefault(TAXON_ID, row.key)] = row.line
        taxon = Taxon(row, row.terms[TAXON_ID])
        self.taxa[row.key] = taxon
        self.ordered.append(taxon)

    def extension(self, row: Row, extension: Extension) -> None:
        faults = _faults(row)
        owner = self.taxa.get(row.key)
        if not faults and owner is None:
            gone = self.gone.get(row.key)
            if gone is not None:  # its taxon is left out: it goes with it
                gone.following += 1
                return
            faults = [Problem(row.file, row.line, TAXON_ID,
                              f"{row.key!r} is not a taxonID of the core: this row belongs "
                              f"to no taxon")]
        if faults or owner is None:
            self.left.append(LeftOut(row, extension.kind, faults))
            return
        owner.extensions.setdefault(extension.kind, []).append(row)


def _faults(row: Row) -> list[Problem]:
    """Whether the row has a printable key and no control character in a kept term: the
    problems that leave it out."""
    if not row.key:
        return [Problem(row.file, row.line, TAXON_ID, "missing: every row needs one")]
    if not row.key.isprintable():  # a line break would make two ids one
        return [Problem(row.file, row.line, TAXON_ID,
                        f"{row.key[:60]!r} holds a control character")]
    # A term's text holding one would be imported, then refused by every export.
    return [Problem(row.file, row.line, name, control_problem(character))
            for name, value in row.terms.items() if (character := control_character(value))]


def _core_faults(row: Row, taxa: dict[str, Taxon], identities: dict[str, int]
                 ) -> list[Problem]:
    """Why a core row cannot be a taxon: it repeats another, or has no name."""
    if row.key in taxa:
        return [Problem(row.file, row.line, TAXON_ID,
                        f"duplicate: also at line {taxa[row.key].row.line}")]
    # An archive's rows are joined by its core id, but a taxon is known by its taxonID term
    # (its record's id is made from it): that must be one a row too, and printable, or two
    # taxa become one record id and no export can run.
    identity = row.terms.get(TAXON_ID, row.key)
    if not identity.isprintable():
        return [Problem(row.file, row.line, TAXON_ID,
                        f"{identity[:60]!r} holds a control character")]
    if identity in identities:
        return [Problem(row.file, row.line, TAXON_ID,
                        f"duplicate: {identity[:60]!r} also at line {identities[identity]}")]
    if "scientificName" not in row.terms:
        return [Problem(row.file, row.line, "scientificName",
                        "missing: every taxon needs one")]
    return []
