"""Read a Darwin Core checklist: an archive (a zip, or a folder with meta.xml, read with
python-dwca-reader) or a folder of CSV files named for their rows (taxon.csv, and any of
distribution.csv, description.csv, speciesprofile.csv, vernacularname.csv, and the other
GBIF extensions), into tables of rows that `checklist.check_tables` joins on taxonID. Every
problem is collected, as `file:line: term: message`; nothing is written. An extension
fednode keeps nothing of is named in the checklist's notes and left out. An archive is
unpacked within bounds (`unpack`); a folder of CSV files is bounded as an archive is (no
links, UNPACKED_MAX bytes of tables), and read a row at a time, each of at most ROW_MAX
characters."""

from __future__ import annotations

import csv
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from dwca.exceptions import InvalidArchive
from dwca.read import DwCAReader

from exporter.darwincore.checklist import Checklist, Found, Row, Table, check_tables
from exporter.darwincore.eml import read_eml
from exporter.darwincore.encoding import codec_for
from exporter.darwincore.terms import (
    BY_ROW_TYPE,
    EXTENSIONS,
    TAXON_ID,
    TAXON_ROW,
    Extension,
    other_extensions,
    row_types,
    short,
)
from exporter.darwincore.unpack import contained, folder_bounded, table_name, unpacked
from exporter.project.tables import table_rows
from exporter.shared.errors import ContentError, Problem

ROW_MAX = 1024 * 1024  # characters of one row of a CSV folder's table


def read_checklist(source: Path) -> Checklist:
    """The taxa of the checklist at `source`, with their extension rows; raise ContentError
    listing every problem."""
    shown = str(source)
    if not source.exists():
        raise ContentError([Problem(shown, 0, "", "not found")])
    if source.is_dir() and not (source / "meta.xml").exists():
        return check_tables(shown, _csv_tables(source))
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
                checklist = check_tables(shown, found)
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


def _csv_tables(folder: Path) -> Found:
    found = Found([])
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
               problems: list[Problem]) -> Table | None:
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

    return Table(shown, extension, names, rows())


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


def _archive_tables(archive: DwCAReader, source: Path, folder: Path) -> Found:
    found = Found([])
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

        found.tables.append(Table(shown, extension, header, rows(), skip))
    return found
