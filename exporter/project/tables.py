"""Parse a CSV table of records: a header naming content fields, then one record a row,
each cell turned into the type its field's schema asks for."""

from __future__ import annotations

import csv
import difflib
import io
import re
import sys
from collections.abc import Iterator
from typing import Any, Protocol

from exporter.project.records import SourceFile, SourceRecord
from exporter.project.schemas import Collection
from exporter.project.validation import OUT_OF_RANGE, WHOLE, WHOLE_MAX, WHOLE_MIN
from exporter.shared.errors import Problem


class Rows(Protocol):
    """What `table_rows` reads: a csv reader, or one that wraps it."""

    @property
    def line_num(self) -> int: ...

    def __next__(self) -> list[str]: ...


def table_rows(reader: Rows, rel: str, width: int, problems: list[Problem]
               ) -> Iterator[tuple[int, list[str]]]:
    """The rows after a CSV table's header, each with the line it starts on; blank rows are
    skipped, and a row of another width or broken CSV is a problem (broken CSV ends the
    table: the lines after it cannot be trusted)."""
    line = reader.line_num
    while True:
        start = line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(Problem(rel, reader.line_num, "", f"not valid CSV: {exc}"))
            return
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != width:
            problems.append(Problem(rel, start, "", f"{len(row)} cells where the header has "
                                                    f"{width}"))
            continue
        yield start, row


# A cell may be as long as a Markdown body may (the csv module's own limit, 128 KiB, made a
# long one "not valid CSV"); the file's size bounds it.
csv.field_size_limit(sys.maxsize)


def parse_csv(text: str, source: SourceFile, collection: Collection
              ) -> tuple[list[SourceRecord], list[Problem]]:
    """The records of a CSV table (its text, line ends made "\\n"), one a row, and the
    problems of its header, rows and cells."""
    # strict: a quote left open is an error, not the rest of the file read as one cell
    # (which would drop every record after it from the node)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[SourceRecord] = []
    problems: list[Problem] = []
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        return [], [Problem(source.rel, 1, "", "empty table: the first line names the columns")]
    except csv.Error as exc:
        return [], [Problem(source.rel, 1, "", f"not valid CSV: {exc}")]
    wrong = _header_problems(header, source.rel, collection)
    if wrong:  # rows under a header we cannot read are not read at all
        return [], wrong
    for start, row in table_rows(reader, source.rel, len(header), problems):
        fields: dict[str, Any] = {}
        for name, cell in zip(header, row, strict=True):
            # `access` is taken exactly as written, as in front matter: ` public` or
            # `PUBLIC` is refused, never read as public. An empty cell means public.
            cell = cell if name == "access" else cell.strip()
            if cell == "":
                continue
            value, error = _coerce(cell, collection.property(name))
            if error:
                problems.append(Problem(source.rel, start, name, error))
            else:
                fields[name] = value
        if "body" in fields:
            fields["body"] = str(fields["body"]).rstrip() + "\n"
        records.append(SourceRecord.parsed(collection.name, source.rel, start, fields,
                                           dict.fromkeys(header, start)))
    return records, problems


def _header_problems(header: list[str], rel: str, collection: Collection) -> list[Problem]:
    """A CSV header names each content field of the collection at most once."""
    problems = []
    allowed = collection.content_fields
    seen: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        shown = name if name.isprintable() else ascii(name)
        if name == "":
            problems.append(Problem(rel, 1, "", f"column {number} has no name: name it after "
                                                f"a field or remove the column"))
        elif name in seen:
            problems.append(Problem(rel, 1, shown, f"named twice (columns {seen[name]} and "
                                                   f"{number}): keep one of them"))
        elif collection.served_by_node(name):
            problems.append(Problem(rel, 1, shown, "set by the node, not by content: remove "
                                                   "the column"))
        elif name not in allowed:
            guess = difflib.get_close_matches(name.lower(), allowed, n=1, cutoff=0.6) or \
                difflib.get_close_matches(name, allowed, n=1)
            hint = f"did you mean {guess[0]}? " if guess else ""
            problems.append(Problem(rel, 1, shown, f"unknown column; {hint}rename it to one "
                                                   f"of the fields of {collection.name} "
                                                   f"or remove it"))
        seen.setdefault(name, number)
    return problems


_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


def _coerce(cell: str, spec: dict[str, Any] | None) -> tuple[Any, str]:
    """Turn a CSV cell into the type its schema asks for. Numbers are ASCII digits only:
    `+5`, `1_0`, `٣` or `nan` are refused, not guessed at."""
    kind = (spec or {}).get("type")
    if kind == "integer":
        if not WHOLE.fullmatch(cell):
            return None, f"expected a whole number, found {cell!r}"
        # the length first: Python turns at most 4,300 digits into a number
        if len(cell) > 20 or not WHOLE_MIN <= int(cell) <= WHOLE_MAX:
            return None, f"{_shortened(cell)} is {OUT_OF_RANGE}"
        return int(cell), ""
    if kind == "number":
        if _NUMBER.fullmatch(cell):
            return float(cell), ""
        return None, f"expected a number, found {cell!r}"
    if kind == "boolean":
        lowered = cell.lower()
        if lowered in ("true", "yes", "1"):
            return True, ""
        if lowered in ("false", "no", "0"):
            return False, ""
        return None, f"expected true or false, found {cell!r}"
    if kind == "array":
        return [part.strip() for part in cell.split(";") if part.strip()], ""
    return cell, ""


def _shortened(text: str) -> str:
    """A cell's text for a message, its middle left out if it is long."""
    return repr(text if len(text) <= 24 else f"{text[:10]}...{text[-10:]}")
