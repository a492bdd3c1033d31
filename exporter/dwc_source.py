"""Read a Darwin Core checklist: an archive (a zip, or a folder with meta.xml, read with
python-dwca-reader) or a folder of CSV files named for their rows (taxon.csv, and any of
distribution.csv, description.csv, speciesprofile.csv, vernacularname.csv) joined on
taxonID. Every problem is collected, as `file:line: term: message`; nothing is written."""

from __future__ import annotations

import csv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dwca.exceptions import InvalidArchive
from dwca.read import DwCAReader

from .content import table_rows
from .dwc_terms import (
    BY_ROW_TYPE,
    CORE_TERMS,
    EXTENSIONS,
    IGNORED,
    TAXON_ID,
    TAXON_ROW,
    Extension,
    short,
)
from .errors import ContentError, Problem


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
class Checklist:
    source: str
    taxa: list[Taxon]


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
    try:
        with DwCAReader(str(source)) as archive:
            return _check(shown, _archive_tables(archive, source))
    except (InvalidArchive, zipfile.BadZipFile, OSError, ValueError, KeyError) as exc:
        raise ContentError([Problem(shown, 0, "", f"not a readable Darwin Core Archive: "
                                                  f"{exc}")]) from None
    except ContentError:
        raise
    except Exception as exc:  # the reader's own parse errors (meta.xml, a ragged row)
        raise ContentError([Problem(shown, 0, "", f"not a readable Darwin Core Archive: "
                                                  f"{type(exc).__name__}: {exc}")]) from None


def _csv_tables(folder: Path) -> tuple[list[_Table], list[Problem]]:
    tables: list[_Table] = []
    problems: list[Problem] = []
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in (".csv", ".txt", ".tsv") or not path.is_file():
            continue
        kind = path.stem.lower()
        shown = str(path)
        if kind not in ("taxon", *EXTENSIONS):
            problems.append(Problem(shown, 0, "", f"unknown file: name the core taxon.csv and "
                                                  f"extensions {', '.join(EXTENSIONS)}"))
            continue
        table = _csv_table(path, EXTENSIONS.get(kind), problems)
        if table:
            tables.append(table)
    if not any(t.extension is None for t in tables):
        problems.append(Problem(str(folder), 0, "", "no taxon.csv: a checklist folder holds "
                                                    "its core as taxon.csv (or a meta.xml)"))
    return tables, problems


def _csv_table(path: Path, extension: Extension | None,
               problems: list[Problem]) -> _Table | None:
    shown = str(path)
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(shown, 0, "", f"cannot read as UTF-8 text: {exc}"))
        return None
    delimiter = "\t" if path.suffix.lower() == ".tsv" or "\t" in text.split("\n", 1)[0] \
        else ","
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter)
    try:
        header = [short(name.strip()) for name in next(reader)]
    except StopIteration:
        problems.append(Problem(shown, 1, "", "empty: the first line names the terms"))
        return None
    except csv.Error as exc:
        problems.append(Problem(shown, 1, "", f"not valid CSV: {exc}"))
        return None

    def rows() -> Iterator[Row]:
        for start, cells in table_rows(reader, shown, len(header), problems):
            terms = {name: cell.strip() for name, cell in zip(header, cells, strict=True)
                     if cell.strip()}
            yield Row(shown, start, terms, terms.get(TAXON_ID, ""))

    return _Table(shown, extension, header, rows())


def _archive_tables(archive: DwCAReader, source: Path) -> tuple[list[_Table], list[Problem]]:
    problems: list[Problem] = []
    tables: list[_Table] = []
    if archive.descriptor is None:
        problems.append(Problem(str(source), 0, "", "no meta.xml: an archive describes its "
                                                    "files in meta.xml"))
        return tables, problems
    files = [archive.core_file, *archive.extension_files]
    for data in files:
        descriptor = data.file_descriptor
        shown = f"{source}/{descriptor.file_location}" if source.is_dir() else \
            f"{source}!{descriptor.file_location}"
        if descriptor.represents_corefile:
            if descriptor.type != TAXON_ROW:
                problems.append(Problem(shown, 0, "", f"the core is {descriptor.type}: a "
                                                      f"checklist's core is {TAXON_ROW}"))
                continue
            extension = None
        else:
            extension = BY_ROW_TYPE.get(descriptor.type or "")
            if extension is None:
                problems.append(Problem(shown, 0, "", f"unknown extension {descriptor.type}: "
                                                      f"fednode reads "
                                                      f"{', '.join(BY_ROW_TYPE)}"))
                continue
        header = [short(f["term"]) for f in descriptor.fields]
        skip = descriptor.lines_to_ignore

        def rows(data: object = data, skip: int = skip, shown: str = shown,
                 core: bool = extension is None) -> Iterator[Row]:
            for row in data.iter_rows():  # type: ignore[attr-defined]
                terms = {short(term): value.strip() for term, value in row.data.items()
                         if isinstance(value, str) and value.strip()}
                key = (row.id if core else row.core_id) or terms.get(TAXON_ID) or ""
                yield Row(shown, row.position + skip + 1, terms, key.strip())

        tables.append(_Table(shown, extension, header, rows(), skip))
    return tables, problems


def _check(source: str, found: tuple[list[_Table], list[Problem]]) -> Checklist:
    tables, problems = found
    taxa: dict[str, Taxon] = {}
    ordered: list[Taxon] = []
    for table in sorted(tables, key=lambda t: t.extension is not None):  # the core first
        known = {**CORE_TERMS, **IGNORED} if table.extension is None else {
            **table.extension.terms, TAXON_ID: ""}
        for name in table.header:
            if name not in known:
                problems.append(Problem(table.file, table.header_line, name,
                                        f"unknown term: fednode reads "
                                        f"{', '.join(known)} here"))
        ignored = {name for name in table.header if name not in known or name in IGNORED}
        for row in table.rows:
            for name in ignored:
                row.terms.pop(name, None)
            taxon_id = row.key
            if not taxon_id:
                problems.append(Problem(row.file, row.line, TAXON_ID, "missing: every row "
                                                                      "needs one"))
                continue
            if table.extension is None:
                if taxon_id in taxa:
                    first = taxa[taxon_id].row
                    problems.append(Problem(row.file, row.line, TAXON_ID,
                                            f"duplicate: also at line {first.line}"))
                    continue
                if "scientificName" not in row.terms:
                    problems.append(Problem(row.file, row.line, "scientificName",
                                            "missing: every taxon needs one"))
                taxa[taxon_id] = Taxon(row, row.terms.setdefault(TAXON_ID, taxon_id))
                ordered.append(taxa[taxon_id])
                continue
            owner = taxa.get(taxon_id)
            if owner is None:
                problems.append(Problem(row.file, row.line, TAXON_ID,
                                        f"{taxon_id!r} is not a taxonID of the core: this "
                                        f"row belongs to no taxon"))
                continue
            owner.extensions.setdefault(table.extension.kind, []).append(row)
    if problems:
        raise ContentError(problems)
    return Checklist(source, ordered)
