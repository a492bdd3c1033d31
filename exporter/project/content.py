"""Load content files into source records, collecting every problem on the way.

A record is `content/<collection>/<slug>.md` (TOML front matter between `+++` lines, Markdown
body) or a row of a CSV table in a collection folder. Nothing here writes anything."""

from __future__ import annotations

import _csv
import csv
import difflib
import functools
import hashlib
import io
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, NamedTuple

import rtoml

from exporter.contract.wire import PUBLIC
from exporter.pipeline.forks import cores
from exporter.project.schemas import Collection, collections
from exporter.project.tomltext import toml_string
from exporter.shared.errors import (
    BIDI,
    CONTROL,
    ExportError,
    Problem,
    control_character,
    control_problem,
)
from exporter.shared.fileversion import version_of

FENCE = "+++"
# The version of the rules of reading and validating content: a change of them drops
# caches of records read under older rules (exporter.pipeline.cache), since they may now be invalid.
RULES = 3  # bumped when the rules change (3: control characters refused in any field)
# A top-level key (bare or quoted; of a dotted key, its first part) and a table's header.
_KEY_LINE = re.compile(r"""^\s*(?:([A-Za-z0-9_-]+)|"([^"\\]+)"|'([^']+)')\s*[=.]""")
_TABLE_LINE = re.compile(r"""^\s*\[\[?\s*(?:([A-Za-z0-9_-]+)|"([^"\\]+)"|'([^']+)')""")
_TOML_LINE = re.compile(r"line (\d+)")


@dataclass
class SourceRecord:
    """One record as the content has it. A record restored from the export cache carries
    only what identifies it (id, access, hash); its fields are read again from its file if
    they are ever needed."""

    collection: str
    path: str  # relative to the project root, with forward slashes
    line: int  # first line of the record (1 for a file, the row's line for CSV)
    id: str
    access: str
    field_lines: dict[str, int] = field(default_factory=dict)
    hash: str = ""
    _fields: dict[str, Any] | None = field(default=None, repr=False)
    # For a record restored from the cache: reads its fields (given the record) when needed.
    loader: Callable[[SourceRecord], dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def parsed(cls, collection: str, path: str, line: int, fields: dict[str, Any],
               field_lines: dict[str, int]) -> SourceRecord:
        return cls(collection, path, line, str(fields.get("id", "")),
                   str(fields.get("access", PUBLIC)), field_lines, _fields=fields)

    @property
    def fields(self) -> dict[str, Any]:
        if self._fields is None:
            if self.loader is None:
                raise RuntimeError(f"{self.path}: record fields were never loaded")
            self._fields = self.loader(self)
        return self._fields

    def seal(self) -> None:
        """Fix the hash of a valid record: sha256 of its fields in canonical JSON."""
        canonical = json.dumps(self.fields, sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        self.hash = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def line_of(self, name: str) -> int:
        return self.field_lines.get(name, self.line)


class SourceFile(NamedTuple):
    """A content file on disk, with what identifies its version cheaply."""

    collection: str
    path: str
    rel: str
    mtime_ns: int
    size: int
    changed_ns: int  # the inode's change time: set by the kernel, never by a tool
    inode: int

    @property
    def version(self) -> tuple[int, int, int, int]:
        """What tells this version of the file from another without reading it
        (`version_of`)."""
        return self.mtime_ns, self.size, self.changed_ns, self.inode


def is_read(name: str) -> bool:
    """Whether the export reads a file or folder of this name in content/: not one kept out
    ("." or "_" first: hidden, or set aside by the publisher), and not an editor's backup or
    autosave ("name~", "#name#"), which would otherwise stop every export while it is there."""
    return not (name.startswith((".", "_")) or name.endswith("~")
                or (len(name) > 1 and name.startswith("#") and name.endswith("#")))


# content/library/: the document library. Each PDF has its record beside it, a resources
# record of kind "document" named like it (`guide.pdf` and `guide.md`).
LIBRARY = "library"


def discover(content: Path, known: dict[str, Collection]
             ) -> tuple[list[SourceFile], list[Problem]]:
    """Every record file under content/, in a stable order, and problems of layout.
    Symbolic links are followed (a collection folder may be a link to another checkout);
    one that loops or points nowhere is a problem, as is a folder inside a collection."""
    files: list[SourceFile] = []
    problems: list[Problem] = []
    if not content.is_dir():
        what = ("a symbolic link that cannot be followed: point it at the content folder"
                if content.is_symlink() else "missing: the content folder does not exist")
        return files, [Problem("content", 0, "", what)]
    for entry in sorted(os.scandir(content), key=lambda e: e.name):
        if not is_read(entry.name):
            continue
        kind = _kind(entry)
        if kind == "broken":
            problems.append(_broken(f"content/{entry.name}"))
        if kind != "folder":
            continue
        collection = "resources" if entry.name == LIBRARY else entry.name
        if collection not in known:
            guess = difflib.get_close_matches(entry.name, [*known, LIBRARY], n=1)
            hint = f"; did you mean {guess[0]}?" if guess else ""
            problems.append(Problem(f"content/{entry.name}", 0, "",
                                    f"unknown collection (expected one of "
                                    f"{', '.join(known)}){hint}"))
            continue
        names = set(os.listdir(entry.path)) if entry.name == LIBRARY else set()
        for item in sorted(os.scandir(entry.path), key=lambda e: e.name):
            if not is_read(item.name):
                continue
            rel = f"content/{entry.name}/{item.name}"
            if names and item.name.endswith((".pdf", ".md")):
                stem, _, suffix = item.name.rpartition(".")
                other = f"{stem}.{'md' if suffix == 'pdf' else 'pdf'}"
                if other not in names:
                    needed = "record" if suffix == "pdf" else "PDF"
                    problems.append(Problem(rel, 0, "", f"a library {suffix.upper()} needs its "
                                                        f"{needed} beside it: {other}"))
                    continue
                if suffix == "pdf":
                    continue  # read with its record
            elif entry.name == LIBRARY and item.name.endswith(".csv"):
                problems.append(Problem(rel, 0, "", "the library holds PDFs, each with its "
                                                    "record as a .md file beside it"))
                continue
            try:
                info = item.stat()  # one call a file: its mtime and size are needed anyway
            except OSError:
                info = None
            kind = _kind_of(info)
            if kind == "broken":
                problems.append(_broken(rel))
                continue
            if kind == "folder":
                problems.append(Problem(rel, 0, "", "a folder inside a collection is not read: "
                                                    "move its records up a level, or start its "
                                                    "name with _ to keep it out"))
                continue
            if kind != "file":
                problems.append(Problem(rel, 0, "", "not a regular file: records are .md or "
                                                    ".csv files"))
                continue
            if not item.name.endswith((".md", ".csv")):
                problems.append(Problem(rel, 0, "", "not a record file: use .md (one record) "
                                                    "or .csv (a table of records)"))
                continue
            assert info is not None
            files.append(SourceFile(collection, item.path, rel, *version_of(info)))
    return files, problems


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        info = entry.stat()
    except OSError:
        info = None
    return _kind_of(info)


def _kind_of(info: os.stat_result | None) -> str:
    """folder, file, other (a device, a pipe) or broken (a link that loops or points nowhere:
    no stat result)."""
    if info is None:
        return "broken"
    mode = info.st_mode
    return "folder" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _broken(rel: str) -> Problem:
    return Problem(rel, 0, "", "a symbolic link that loops or points nowhere: remove it or "
                               "point it at a file or folder that exists")


# `errors.CONTROL` in a text whose line ends are "\n" (any CR left is a lone one): one
# class of characters, which `re` scans three times as fast as CONTROL's alternative (0.8 s
# of CPU over the 90,000 Markdown files of bench/export_speed.py's node).
_CONTROL_OR_CR = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}]")


def read(source: SourceFile, collection: Collection, *, validated: bool = True
         ) -> tuple[list[SourceRecord], list[Problem]]:
    """Parse and validate one file (only parse it: `validated=False`). Returns its records
    and its problems."""
    try:
        with open(source.path, "rb") as handle:
            text = handle.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [Problem(source.rel, 0, "", f"not UTF-8 text ({exc.reason} at byte "
                                                f"{exc.start}); save the file as UTF-8")]
    except OSError as exc:
        return [], [Problem(source.rel, 0, "", f"cannot read: {exc.strerror}")]
    text = text.replace("\r\n", "\n")
    parse = _parse_csv if source.rel.endswith(".csv") else _parse_markdown
    records, problems = parse(text, source, collection)
    said = {(p.line, p.field) for p in problems}  # a cell refused already: not "required"
    # A field can hold a control character only where the file does, or writes one as an
    # escape (TOML's \u0007): a file with neither needs no look at each field (most files).
    controls = "\\" in text or _CONTROL_OR_CR.search(text) is not None
    for record in records:
        found = validate(record, collection, controls=controls) if validated else []
        if not found:
            record.seal()
        problems.extend(p for p in found if p.message != "required"
                        or (p.line, p.field) not in said)
    return records, problems


# Reading is shared among worker processes, one a core, from this many files: below it,
# starting them costs more than they save.
PARALLEL_FROM = 256
CHUNK = 128  # files a worker reads in one go


def read_all(files: Sequence[SourceFile]) -> Iterator[tuple[list[SourceRecord], list[Problem]]]:
    """`read` of each file, in order. Many files are read by worker processes, one a core
    (parsing and validating is Python's work, one core's at a time in one process): forked
    on Linux, so they start at once with the schemas loaded and their validators compiled
    (here, once), and handed files in chunks. Should a worker die, what it had not read is
    read here."""
    workers = cores(8)
    if len(files) < PARALLEL_FROM or workers < 2:
        yield from _read_chunk(files)
        return
    import multiprocessing  # here: an export reading few files starts without it
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    known = collections()
    for name in {source.collection for source in files}:
        known[name].fast  # noqa: B018 (compiled now, not in each worker)
    chunks = [files[start:start + CHUNK] for start in range(0, len(files), CHUNK)]
    done = 0
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for results in pool.map(_read_chunk, chunks):
                yield from results
                done += 1
    except BrokenProcessPool:
        for chunk in chunks[done:]:
            yield from _read_chunk(chunk)


def _read_chunk(files: Sequence[SourceFile]) -> list[tuple[list[SourceRecord], list[Problem]]]:
    known = collections()
    return [read(source, known[source.collection]) for source in files]


def reload(source: SourceFile, collection: Collection) -> dict[str, SourceRecord]:
    """Every record of an unchanged, previously valid file, by id: one read of the file,
    however many of its records are needed. The file is parsed, not validated again: a record
    whose hash is the one remembered (the caller checks) has the very fields found valid
    then, under the same schemas (the cache is tied to them)."""
    records, problems = read(source, collection, validated=False)
    if problems:
        raise ExportError(f"{problems[0]}: the file changed while the export ran; run the "
                          f"export again")
    return {record.id: record for record in records}


def _parse_markdown(text: str, source: SourceFile, collection: Collection
                    ) -> tuple[list[SourceRecord], list[Problem]]:
    lines = text.split("\n")
    if not lines or lines[0].strip() != FENCE:
        return [], [Problem(source.rel, 1, "", f"front matter missing: the file must start "
                                              f"with a line '{FENCE}'")]
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == FENCE)
    except StopIteration:
        return [], [Problem(source.rel, 1, "", f"front matter not closed: add a line '{FENCE}' "
                                              f"after the fields")]
    front = "\n".join(lines[1:end]) + "\n"
    try:
        data = rtoml.loads(front)
    except rtoml.TomlParsingError as exc:
        found = _TOML_LINE.search(str(exc))
        line = int(found.group(1)) + 1 if found else 1
        reason = re.sub(r" at line \d+ column \d+", "", str(exc)).strip()
        return [], [Problem(source.rel, line, "", f"front matter is not valid TOML: {reason}")]
    field_lines = _field_lines(lines[1:end], first=2)
    fields = {key: value if type(value) is str else _plain(value)
              for key, value in data.items()}
    below = "\n".join(lines[end + 1:])
    body = below.strip("\n")
    if body.strip():
        if "body" in fields:
            return [], [Problem(source.rel, field_lines.get("body", 1), "body",
                                "set twice: in the front matter and below it")]
        fields["body"] = body.rstrip() + "\n"
        # its first line: after the closing fence and the empty lines left out
        field_lines["body"] = end + 2 + len(below) - len(below.lstrip("\n"))
    return [SourceRecord.parsed(collection.name, source.rel, 1, fields, field_lines)], []


_LITERAL = re.compile(r"'[^'\n]*'")  # a one-line string of each kind
_BASIC = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _field_lines(lines: list[str], first: int) -> dict[str, int]:
    """The line of each top-level field of TOML front matter (numbered from `first`): its
    key's line, or its table's header. Lines inside a multi-line string or a multi-line
    array or inline table are not keys, nor are the keys inside a table (a problem of
    `family` was named at the line of a `family = ...` written inside a description)."""
    simple = _simple_field_lines(lines, first)
    return simple if simple is not None else _scanned_field_lines(lines, first)


def _simple_field_lines(lines: list[str], first: int) -> dict[str, int] | None:
    """`_field_lines` of front matter where each line is a key with a value that ends on it
    (or blank, or a comment): most files. None where it is not so (a multi-line string or
    value, a table), for `_scanned_field_lines`. A quarter of the time of reading each line
    for what could open or close on it; the two agree (tests/test_content.py)."""
    found: dict[str, int] = {}
    for number, raw in enumerate(lines, start=first):
        key = _KEY_LINE.match(raw)
        if key is not None:
            value = raw[key.end():]
            if _TRIPLE_QUOTE in value or _TRIPLE_APOSTROPHE in value or (
                    ("[" in value or "{" in value) and _nesting(value)):
                return None
            found.setdefault(key[1] or key[2] or key[3], number)
        elif raw and not raw.isspace() and not raw.lstrip().startswith("#"):
            return None
    return found


_TRIPLE_QUOTE, _TRIPLE_APOSTROPHE = '"' * 3, "'" * 3


def _scanned_field_lines(lines: list[str], first: int) -> dict[str, int]:
    """`_field_lines` of any front matter: each line read for what opens or closes on it."""
    found: dict[str, int] = {}
    open_quote: str | None = None  # the delimiter of a multi-line string being read
    depth = 0  # of brackets and braces open in a value that goes on to the next lines
    in_table = False
    for number, raw in enumerate(lines, start=first):
        if open_quote is not None:
            if raw.count(open_quote) % 2:
                open_quote = None
            continue
        for quote, other in (('"""', _LITERAL), ("'''", _BASIC)):
            # a multi-line string opens here (most lines hold no quote three times: the
            # regular expression only where it could count one)
            if quote in raw and other.sub("", raw).count(quote) % 2:
                open_quote = quote
        if depth:
            depth = max(0, depth + _nesting(raw))
            continue
        table = _TABLE_LINE.match(raw)
        if table:
            in_table = True
            found.setdefault(next(g for g in table.groups() if g), number)
        elif (key := _KEY_LINE.match(raw)) is not None:
            if not in_table:
                found.setdefault(next(g for g in key.groups() if g), number)
            value = raw[key.end():]
            # a value without a bracket or brace opens none (the usual line: no expressions)
            depth = max(0, _nesting(value)) if "[" in value or "{" in value else 0
    return found


def _nesting(text: str) -> int:
    """How many brackets and braces a line of TOML opens, less those it closes (quoted
    text left out)."""
    bare = _BASIC.sub("", _LITERAL.sub("", text.replace('"""', "").replace("'''", "")))
    return bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")


def table_rows(reader: _csv.Reader, rel: str, width: int, problems: list[Problem]
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


def _parse_csv(text: str, source: SourceFile, collection: Collection
               ) -> tuple[list[SourceRecord], list[Problem]]:
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


_WHOLE = re.compile(r"-?[0-9]+", re.ASCII)
# Whole numbers are 64-bit, as TOML's are (and the hub's BIGINT): a larger one is an error
# of its file, not a number some reader silently loses.
WHOLE_MIN, WHOLE_MAX = -2**63, 2**63 - 1
OUT_OF_RANGE = f"out of range: a whole number here runs from {WHOLE_MIN} to {WHOLE_MAX}"
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


def _coerce(cell: str, spec: dict[str, Any] | None) -> tuple[Any, str]:
    """Turn a CSV cell into the type its schema asks for. Numbers are ASCII digits only:
    `+5`, `1_0`, `٣` or `nan` are refused, not guessed at."""
    kind = (spec or {}).get("type")
    if kind == "integer":
        if not _WHOLE.fullmatch(cell):
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


def _too_large(value: Any) -> bool:
    """Whether a value holds a whole number beyond 64 bits (in a list or table too)."""
    if type(value) is int:
        return not WHOLE_MIN <= value <= WHOLE_MAX
    if isinstance(value, list):
        return any(_too_large(item) for item in value)
    if isinstance(value, dict):
        return any(_too_large(item) for item in value.values())
    return False


def _shortened(text: str) -> str:
    return repr(text if len(text) <= 24 else f"{text[:10]}...{text[-10:]}")


def _plain(value: Any) -> Any:
    """TOML dates and times become the strings the schema expects."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return [item if type(item) is str else _plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def validate(record: SourceRecord, collection: Collection, *, controls: bool = True
             ) -> list[Problem]:
    """Schema problems of one record, each naming its line and field (`controls=False`:
    its fields are known to hold no control character)."""
    problems = []
    for name in record.fields:
        if collection.served_by_node(name):
            problems.append(Problem(record.path, record.line_of(name), name,
                                    "set by the node, not by content: remove it"))
    fields = {k: v for k, v in record.fields.items() if not collection.served_by_node(k)}
    for error in collection.errors(fields):
        problems.extend(_describe(error, record, collection))
    for name in _numeric(collection):
        if name in fields and _too_large(fields[name]):
            problems.append(Problem(record.path, record.line_of(name), name, OUT_OF_RANGE))
    for name, value in fields.items() if controls else ():
        found = _control_in(value)
        if found is not None:
            line = record.line_of(name)
            if name == "body" and type(value) is str:  # the line it is on, below the fence
                line += value[:CONTROL.search(value).start()].count("\n")  # type: ignore[union-attr]
            problems.append(Problem(record.path, line, name, control_problem(found)))
    for name in _integers(collection):
        # JSON Schema takes 10.0 (and 1e300) for an integer; a reader of the record would
        # not: 1e300 became NULL in a hub's BIGINT column
        if isinstance(fields.get(name), float):
            problems.append(Problem(record.path, record.line_of(name), name,
                                    f"expected a whole number, found {fields[name]!r}: write "
                                    f"it without a decimal point or exponent (10, not 10.0)"))
    return list(dict.fromkeys(problems))  # each once (a validator may say one thing twice)


def _control_in(value: Any) -> str | None:
    """The first control character in a field's text (in a list or table too), if any."""
    if type(value) is str:
        return control_character(value)
    if isinstance(value, list):
        return next(filter(None, map(_control_in, value)), None)
    if isinstance(value, dict):
        return next(filter(None, map(_control_in, (*value, *value.values()))), None)
    return None


@functools.cache
def _integers(collection: Collection) -> tuple[str, ...]:
    """The fields whose schema asks for a whole number."""
    return tuple(name for name in collection.content_fields
                 if (collection.property(name) or {}).get("type") == "integer")


@functools.cache
def _numeric(collection: Collection) -> tuple[str, ...]:
    """The fields whose schema may let a whole number through: a number or untyped (an
    enum). Anywhere else the schema's type refuses one, so only these are walked for
    numbers beyond 64 bits (walking every field cost about 5 us a record)."""
    found = []
    for name in collection.content_fields:
        spec = json.dumps(collection.property(name) or {})
        if '"integer"' in spec or '"number"' in spec or '"type"' not in spec:
            found.append(name)
    return tuple(found)


def _describe(error: Any, record: SourceRecord, collection: Collection) -> Iterator[Problem]:
    if error.validator == "required":
        for name in error.validator_value:
            if name not in error.instance:
                yield Problem(record.path, record.line, name, "required")
        return
    if error.validator == "additionalProperties":
        allowed = list(collection.schema["properties"])
        for name in error.instance:
            if name not in error.schema.get("properties", {}):
                guess = difflib.get_close_matches(name, allowed, n=1)
                hint = f"; did you mean {guess[0]}?" if guess else ""
                yield Problem(record.path, record.line_of(name), name, f"unknown field{hint}")
        return
    name = str(error.absolute_path[0]) if error.absolute_path else ""
    where = ".".join(str(part) for part in error.absolute_path)
    spec = collection.property(name) or {}
    message = error.message
    if error.instance == "" or error.instance == []:
        if where != name:
            message = "empty: fill it in or remove it from the list"
        elif name in collection.schema["required"]:
            message = "empty: fill it in"
        else:
            message = "empty: fill it in or remove the line"
    elif error.validator == "type" and where == name:
        message = _expected_form(name, spec, error.instance, record.path.endswith(".csv"))
    elif error.validator == "type" and error.validator_value == "string":
        message = f"expected text in quotes: {toml_string(_scalar_text(error.instance))}"
    elif error.validator == "enum":
        message = f"{error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    elif error.validator == "format":
        message = f"{error.instance!r} is not a valid {error.validator_value}"
    elif error.validator == "pattern" and name == "id":
        message = (f"{error.instance!r} is not a lowercase UUID; `fednode new` writes one, "
                   f"or use python3 -c 'import uuid; print(uuid.uuid4())'")
    elif error.validator == "pattern" and name == "access":
        message = (f"{error.instance!r} is neither public nor a group name: write public, or "
                   f"a group in lowercase letters, digits, - and _ (e.g. partners)")
    elif error.validator == "pattern":
        hint = spec.get("description") or f"pattern {spec.get('pattern')}"
        message = f"{error.instance!r} does not have the expected form: {hint}"
    yield Problem(record.path, record.line_of(name), where or name, message)


def _expected_form(name: str, spec: dict[str, Any], value: Any, in_csv: bool) -> str:
    """What a value of the wrong type should look like, written the way the file needs it."""
    kind = spec.get("type")
    items = value if isinstance(value, list) else [value]
    if kind == "array":
        if in_csv:
            return "expected a list: separate the items with ;"
        parts = [part.strip() for item in items for part in re.split(r"[,;]", str(item))]
        example = [part for part in parts if part] or ["..."]
        return f"expected a list: {name} = [{', '.join(toml_string(p) for p in example)}]"
    if kind == "string":
        shown = _scalar_text(items[0]) if len(items) == 1 else "..."
        return f"expected text in quotes: {name} = {toml_string(shown)}"
    if kind == "integer":
        digits = str(value).strip() if isinstance(value, str) else ""
        shown = digits if _WHOLE.fullmatch(digits) else "100"
        return f"expected a whole number without quotes: {name} = {shown}"
    if kind == "boolean":
        shown = "false" if str(value).strip().lower() in ("false", "no", "0") else "true"
        return f"expected true or false without quotes: {name} = {shown}"
    return f"expected {kind}, found {type(value).__name__}"


def _scalar_text(value: Any) -> str:
    """A TOML value as the text it would be in quotes ("..." for tables and lists)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "..." if isinstance(value, (dict, list)) else str(value)
