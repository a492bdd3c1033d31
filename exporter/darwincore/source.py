"""Read a Darwin Core checklist: an archive (a zip, or a folder with meta.xml, read with
python-dwca-reader) or a folder of CSV files named for their rows (taxon.csv, and any of
distribution.csv, description.csv, speciesprofile.csv, vernacularname.csv, and the other
GBIF extensions) joined on taxonID. Every problem is collected, as `file:line: term:
message`; nothing is written. A row with a problem (no taxonID, a duplicate, a control
character, an extension row of no taxon) is left out (`LeftOut`), a core row with its
extension rows. A column fednode has no field for, a standard term or not,
and an extension it keeps nothing of, are named in the checklist's notes (one line a file)
and left out: they never stop an import. A checklist that cannot be read is refused with
its problems and those notes (`ChecklistRefused`): a column left out as no term is often
why a term is missing. An archive is unpacked within bounds (`unpack`); a folder of CSV files
is bounded as an archive is (no links, UNPACKED_MAX bytes of tables), and read a row at a
time, each of at most ROW_MAX characters."""

from __future__ import annotations

import csv
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dwca.exceptions import InvalidArchive
from dwca.read import DwCAReader

from exporter.darwincore.eml import Provenance, read_eml
from exporter.darwincore.encoding import codec_for
from exporter.darwincore.terms import (
    BY_ROW_TYPE,
    CORE_TERMS,
    EXTENSIONS,
    IGNORED,
    LINKS,
    TAXON_ID,
    TAXON_ROW,
    Extension,
    other_extensions,
    row_types,
    short,
    standard_terms,
)
from exporter.darwincore.unpack import contained, folder_bounded, table_name, unpacked
from exporter.project.tables import table_rows
from exporter.shared.errors import ContentError, Problem, control_character, control_problem

ROW_MAX = 1024 * 1024  # characters of one row of a CSV folder's table


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
class _Found:
    tables: list[_Table]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Table:
    file: str
    extension: Extension | None  # None: the core
    header: list[str]  # short terms
    rows: Iterator[Row]
    header_line: int = 1


def read_checklist(source: Path) -> Checklist:
    """The taxa of the checklist at `source`, with their extension rows; raise ContentError
    listing every problem."""
    shown = str(source)
    if not source.exists():
        raise ContentError([Problem(shown, 0, "", "not found")])
    if source.is_dir() and not (source / "meta.xml").exists():
        return _check(shown, _csv_tables(source))
    with tempfile.TemporaryDirectory(prefix="fednode-dwca-") as scratch:
        try:
            folder = source if source.is_dir() else unpacked(source, Path(scratch), shown)
            contained(folder, source)
            if folder != source:  # unpacked here, not the user's own folder
                # The reader parses every file of dataset/ even when told to skip the
                # metadata (a 100 kB zip of them takes 2.3 GB): fednode reads none of it.
                shutil.rmtree(folder / "dataset", ignore_errors=True)
            with DwCAReader(str(folder), skip_metadata=True) as archive:
                found = _archive_tables(archive, source, folder)
                provenance, note = read_eml(folder, archive.descriptor.metadata_filename
                                            if archive.descriptor else None)
                checklist = _check(shown, found)
                checklist.provenance = provenance
                checklist.notes += [f"{shown}!{note}"] if note else []
                return checklist
        except (InvalidArchive, zipfile.BadZipFile, tarfile.TarError, OSError, ValueError,
                KeyError) as exc:
            raise ContentError([Problem(shown, 0, "", f"not a readable Darwin Core Archive: "
                                                      f"{exc}")]) from None
        except ContentError:
            raise
        except Exception as exc:  # the reader's own parse errors (meta.xml, a ragged row)
            raise ContentError([Problem(shown, 0, "", f"not a readable Darwin Core Archive: "
                                                      f"{type(exc).__name__}: {exc}")]) from None


def _csv_tables(folder: Path) -> _Found:
    found = _Found([])
    others = other_extensions()
    read: list[tuple[Path, Extension | None]] = []
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in (".csv", ".txt", ".tsv") or not path.is_file():
            continue
        kind = path.stem.lower()
        shown = str(path)
        other = others.get(kind) or others.get(kind.rstrip("s")) or others.get(kind + "s")
        if other is not None:
            found.notes.append(f"{shown}: left out: the {other.title} extension; the species "
                               f"schema has no field for it")
            continue
        if kind not in ("taxon", *EXTENSIONS):
            found.problems.append(Problem(shown, 0, "", f"unknown file: name the core "
                                                        f"taxon.csv and extensions "
                                                        f"{', '.join([*EXTENSIONS, *others])}"))
            continue
        read.append((path, EXTENSIONS.get(kind)))
    folder_bounded(folder, [path for path, _ in read])
    for path, extension in read:
        table = _csv_table(path, extension, found.problems)
        if table:
            found.tables.append(table)
    if not any(t.extension is None for t in found.tables):
        found.problems.append(Problem(str(folder), 0, "", "no taxon.csv: a checklist folder "
                                                          "holds its core as taxon.csv (or a "
                                                          "meta.xml)"))
    return found


def _csv_table(path: Path, extension: Extension | None,
               problems: list[Problem]) -> _Table | None:
    shown = str(path)
    cells = _csv_cells(path, problems)
    header = next(cells, None)
    if header is None:
        return None
    names = [short(name.strip()) for name in header[1]]

    def rows() -> Iterator[Row]:
        for start, row in cells:
            terms = {name: cell.strip() for name, cell in zip(names, row, strict=True)
                     if cell.strip()}
            yield Row(shown, start, terms, terms.get(TAXON_ID, ""))

    return _Table(shown, extension, names, rows())


def _csv_cells(path: Path, problems: list[Problem]) -> Iterator[tuple[int, list[str]]]:
    """A CSV folder's table read as it goes: its header, then its rows (`table_rows`), each
    with the line it starts on. A problem (not UTF-8, not valid CSV, a row over ROW_MAX
    characters) is added to `problems`, and ends the table."""
    shown = str(path)
    try:
        with open(path, encoding="utf-8-sig", newline="", opener=_not_followed) as handle:
            first = handle.readline(ROW_MAX)
            handle.seek(0)
            tabs = path.suffix.lower() == ".tsv" or "\t" in first
            reader = _Bounded(handle, "\t" if tabs else ",")
            header = next(reader, None)
            if header is None:
                problems.append(Problem(shown, 1, "", "empty: the first line names the terms"))
                return
            yield 1, header
            yield from table_rows(reader, shown, len(header), problems)
    except OSError as exc:
        problems.append(Problem(shown, 0, "", f"cannot be read: {exc}"))
    except UnicodeDecodeError as exc:  # (of a block read ahead: no line to name)
        problems.append(Problem(shown, 0, "", f"cannot read as UTF-8 text ({exc.reason}): "
                                              f"save the table as UTF-8"))
    except csv.Error as exc:  # (in the header: table_rows reports those of rows)
        problems.append(Problem(shown, 1, "", f"not valid CSV: {exc}"))
    except _RowTooLong as exc:
        problems.append(Problem(shown, exc.line, "", f"a row of more than {ROW_MAX:,} "
                                                     f"characters starts here (a quote left "
                                                     f"open?): a checklist's row holds at "
                                                     f"most {ROW_MAX >> 20} MiB"))


def _not_followed(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


class _RowTooLong(Exception):
    """A row of more than ROW_MAX characters, starting at `line`."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _Bounded:
    """A CSV folder's table, read by the csv module a line at a time, each row at most
    ROW_MAX characters: the reader holds a row whole in memory (a cell of 200 MB took 2 GB).
    Strict: a quote left open is an error, not the rows after it read as one cell (with
    --prune, the taxa in them would be deleted as gone from the checklist). Lines end at
    \\n or \\r only, as csv counts them (U+2028, U+0085 and form feeds are text of a cell)."""

    def __init__(self, handle: TextIO, delimiter: str) -> None:
        self._handle = handle
        self._held = 0  # characters of the row being read
        self._start = 1  # the line it starts on
        self._reader = csv.reader(self._lines(), delimiter=delimiter, strict=True)

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self) -> _Bounded:
        return self

    def __next__(self) -> list[str]:
        self._held = 0
        self._start = self._reader.line_num + 1
        return next(self._reader)

    def _lines(self) -> Iterator[str]:
        while line := self._handle.readline(ROW_MAX + 1 - self._held):
            self._held += len(line)
            if self._held > ROW_MAX:
                raise _RowTooLong(self._start)
            yield line


def _framed(path: Path, descriptor: object, shown: str, skip: int) -> None:
    """An archive table read as the reader reads it (python-dwca-reader's `files`: with its
    separator, quote, line ending and encoding, past the `skip` lines meta.xml ignores), but
    strictly: a quote left open (which the reader takes to the end of the table, so that
    every taxon after it would be lost, and deleted with --prune) or a row of another width than
    the table's first (whose cells the reader shifts into other terms) is an error naming
    the line the row starts on."""
    separator = getattr(descriptor, "fields_terminated_by", ",") or ","
    quote = getattr(descriptor, "fields_enclosed_by", "") or ""
    ending = getattr(descriptor, "lines_terminated_by", "\n") or "\n"
    encoding = codec_for(getattr(descriptor, "file_encoding", None)) or "utf-8"
    if len(separator) != 1 or len(quote) > 1:
        return  # the reader refuses those itself
    width = None

    def check(cells: list[str], line: int) -> None:
        nonlocal width
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            raise ContentError([Problem(shown, line, "", f"{len(cells)} cells where the "
                                                         f"table's first row has {width}; a "
                                                         f"row has one cell a column")])

    if not quote:  # as the reader: lines split at the declared ending, cells at the separator
        with open(path, encoding=encoding, newline=ending) as handle:
            for line, text in enumerate(handle, start=1):
                if line > skip:
                    check(text.rstrip(ending + "\r").split(separator), line)
        return
    with open(path, encoding=encoding, newline="") as handle:
        reader = csv.reader(handle, delimiter=separator, quotechar=quote, strict=True)
        starts = 1
        try:
            for number, cells in enumerate(reader, start=1):
                if number > skip and cells:  # (a blank line: no row)
                    check(cells, starts)
                starts = reader.line_num + 1
        except csv.Error as exc:
            raise ContentError([Problem(shown, starts, "", f"not valid CSV ({exc}): a quote "
                                                           f"left open in the row starting "
                                                           f"here?")]) from None


def _archive_tables(archive: DwCAReader, source: Path, folder: Path) -> _Found:
    found = _Found([])
    if archive.descriptor is None:
        found.problems.append(Problem(str(source), 0, "", "no meta.xml: an archive describes "
                                                          "its files in meta.xml"))
        return found
    for data in [archive.core_file, *archive.extension_files]:
        descriptor = data.file_descriptor
        shown = table_name(source, descriptor.file_location)
        if descriptor.represents_corefile:
            if descriptor.type != TAXON_ROW:
                found.problems.append(Problem(shown, 0, "", f"the core is {descriptor.type}: "
                                                            f"a checklist's core is "
                                                            f"{TAXON_ROW}"))
                continue
            extension = None
        else:
            extension = BY_ROW_TYPE.get(descriptor.type or "")
            if extension is None:
                known = row_types().get(descriptor.type or "")
                found.notes.append(f"{shown}: left out: the "
                                   f"{known.title if known else descriptor.type} extension; "
                                   f"the species schema has no field for it")
                continue
        header = [short(f["term"]) for f in descriptor.fields]
        skip = descriptor.lines_to_ignore
        _framed(folder / descriptor.file_location, descriptor, shown, skip)

        def rows(data: object = data, skip: int = skip, shown: str = shown,
                 core: bool = extension is None) -> Iterator[Row]:
            for row in data.iter_rows():  # type: ignore[attr-defined]
                terms = {short(term): value.strip() for term, value in row.data.items()
                         if isinstance(value, str) and value.strip()}
                key = (row.id if core else row.core_id) or terms.get(TAXON_ID) or ""
                yield Row(shown, row.position + skip + 1, terms, key.strip())

        found.tables.append(_Table(shown, extension, header, rows(), skip))
    return found


def _header(table: _Table, problems: list[Problem], notes: list[str]) -> set[str]:
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


def _check(source: str, found: _Found) -> Checklist:
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
