"""Parse a Markdown record: TOML front matter between `+++` lines, then its body. Each
top-level field's line is found too, so that a problem names the line the publisher wrote."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import rtoml

from exporter.project.records import SourceFile, SourceRecord
from exporter.project.schemas import Collection
from exporter.shared.errors import Problem

FENCE = "+++"
# A top-level key (bare or quoted; of a dotted key, its first part) and a table's header.
_KEY_LINE = re.compile(r"""^\s*(?:([A-Za-z0-9_-]+)|"([^"\\]+)"|'([^']+)')\s*[=.]""")
_TABLE_LINE = re.compile(r"""^\s*\[\[?\s*(?:([A-Za-z0-9_-]+)|"([^"\\]+)"|'([^']+)')""")
_TOML_LINE = re.compile(r"line (\d+)")


def parse_markdown(text: str, source: SourceFile, collection: Collection
                   ) -> tuple[list[SourceRecord], list[Problem]]:
    """The one record of a Markdown file (its text, line ends made "\\n"): the fields of
    its front matter, and the text below it as `body`; or the problem that keeps it from
    being read."""
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
    array or inline table are not keys, nor are the keys inside a table (a `family = ...`
    written inside a description is not the line of the field `family`)."""
    simple = _simple_field_lines(lines, first)
    return simple if simple is not None else _scanned_field_lines(lines, first)


def _simple_field_lines(lines: list[str], first: int) -> dict[str, int] | None:
    """`_field_lines` of front matter where each line is a key with a value that ends on it
    (or blank, or a comment): most files. None where it is not so (a multi-line string or
    value, a table), for `_scanned_field_lines`, which reads each line for what could open
    or close on it, and takes longer; the two agree (tests/exporter/project/test_content.py)."""
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
