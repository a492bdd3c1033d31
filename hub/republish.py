"""A member's public records as records of the hub's own node (`hub/project.py`).

Each record of a member's copy (`members/<name>.duckdb`, hub/index.py) whose JSON says
`access = "public"` (a second guard: hub sync keeps nothing else in members/) becomes a
content file of the hub's node: the member's fields as its node served them, under an id of
the hub's own (`hub_id`: stable, made from the member node's id and the record's id, so
that two members' records never share one), with its provenance (`schemas.PROVENANCE`): the
member node's id and name, the record's URL at the member, and the licence the record is
published under (its own where it is a licence the hub knows, `contract.licences`, else the
member node's); and its times (`created_at`, `updated_at`) as the member served them. The
node is always the member the hub read it from: a record that came to the member from
another hub names that member, and its URL there leads on to the node that published it
first.

A library document keeps its metadata and links to its PDF at the member (`link`): a hub
serves records, not the members' files. Fields this fednode does not know (a member running
a newer version) are left out; a record the hub's export would refuse (a hostile member) is
left out and reported, and never stops the other records or members."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from exporter import __version__
from exporter.contract import licences as licence_table
from exporter.contract.licences import LICENCE_MAX, licence_id
from exporter.contract.wire import COLLECTIONS, PUBLIC, is_time
from exporter.project import frontmatter, records, tomltext
from exporter.project import validation as validation_module
from exporter.project.content import RULES
from exporter.project.frontmatter import parse_markdown
from exporter.project.records import SourceFile
from exporter.project.schemas import PROVENANCE, SOURCE_TIMES, Collection, collections
from exporter.project.tomltext import toml_string
from exporter.project.validation import validate

from .errors import one_line

# The namespace of the ids a hub gives its members' records (`hub_id`).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://fednode.org/hub/record")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# What a source_url's path may not hold: a step out of the base URL (`..`, also encoded), an
# address of its own (`@`, `//`), a query or a fragment.
_UNSAFE = re.compile(r"^/|(^|/)\.\.?(/|$)|%2e|%2f|[@?#\\]|//", re.IGNORECASE)


def hub_id(node_id: str, record_id: str) -> str:
    """The id a hub serves a member's record under: a UUID (the record ids' pattern) made
    from the member node's id and the record's, the same at every export and on every hub."""
    return str(uuid.uuid5(NAMESPACE, f"{node_id}\n{record_id}"))


@dataclass(frozen=True)
class Source:
    """A member as its records are republished: its node and the licence it names."""

    name: str  # the member's name in hub.toml
    node_id: str
    node_name: str
    licence: str | None  # None: the node's manifest names none (`node_licence`)
    base_url: str | None = None  # the node's base URL, as its signed manifest names it

    def holds(self, url: str) -> bool:
        """Whether `url` lies under the node's own base URL: a record's `source_url` must
        (a member cannot point its records at another node's)."""
        base = (self.base_url or "").rstrip("/")
        rest = url[len(base) + 1:]
        return bool(base) and url.startswith(base + "/") and not _UNSAFE.search(rest)


def node_licence(text: str | None) -> str | None:
    """A member node's licence as the hub serves it: a known licence's id
    (`contract.licences`), else its text as one line of at most LICENCE_MAX characters;
    None where it names none."""
    if text is None or not text.strip():
        return None
    return licence_id(text) or one_line(text, LICENCE_MAX)


# What the last export made of each of a member's records, by the record's id: the MD5 of
# its JSON in the copy, its collection, its file ("" where it was refused), its licence
# ("" for none), why it was refused ("" where it was not) and "unknown" where the licence it
# names is not one the hub knows, so it carries another ("" where it does not).
Entry = list[str]
ENTRY_SIZE = 6


@dataclass
class Republished:
    """One member's records as content files of the hub's node, and what was left out.
    `files` holds the texts made now; `kept` the files of records that did not change since
    the last export (`memo`), which content/ holds already as they would be made."""

    files: dict[str, str] = field(default_factory=dict)  # "collection/file.md" -> text
    kept: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)  # records by collection
    licences: Counter[str] = field(default_factory=Counter)  # records by license ("": none)
    relicensed: int = 0  # records whose own licence is not one the hub knows
    refused: list[str] = field(default_factory=list)  # why records were left out
    memo: dict[str, Entry] = field(default_factory=dict)  # by record id, for the next export
    digest: str = ""  # of the source, this code's rules and every record's JSON
    remade: bool = False  # the memo differs from the one given: records made, or gone

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class CopyUnreadable(Exception):
    """A member's copy cannot be read (not a hub file, in use, damaged)."""


def copy_identity(copy: Path) -> tuple[str | None, str | None]:
    """The node id and name a member's copy was synced from (its `hub` table)."""
    try:
        with duckdb.connect(str(copy), read_only=True) as db:
            state = dict(db.execute("SELECT name, value FROM hub WHERE name IN "
                                    "('node_id', 'node_name')").fetchall())
    except duckdb.Error as exc:
        raise CopyUnreadable(one_line(str(exc), 160)) from None
    return state.get("node_id"), state.get("node_name")


def republish(source: Source, copy: Path, memo: dict[str, Entry] | None = None,
              present: frozenset[str] = frozenset()) -> Republished:
    """The member's public records as the hub's content files (CopyUnreadable if the copy
    cannot be read). A record whose JSON is the one `memo` (the last export's, for this
    source and these rules) made a file of, a file `present` in content/, is kept as it is
    and not made again: an export after a few edits reads and checks only those."""
    out = Republished(counts={name: 0 for name in COLLECTIONS})
    known, before = collections(), memo or {}
    rows, data = _rows(copy, source.node_id, lambda r: not _reusable(before.get(r[1]), r,
                                                                      present))
    made = hashlib.sha256(memo_key(source).encode())
    seen: set[str] = set()
    for row in rows:
        collection, record_id, md5 = row
        made.update(f"\0{collection}\0{record_id}\0{md5}".encode())
        if record_id in seen:  # an id in two collections: a node's ids are unique in all
            out.refused.append(f"{collection}/{one_line(record_id, 40)}: its id is a record's "
                               f"of another collection too")
            continue
        seen.add(record_id)
        remembered = before.get(record_id)
        if (collection, record_id) in data:
            entry = _made(source, known[collection], data[collection, record_id], row, out)
            out.remade = True
        elif remembered is not None and _reusable(remembered, row, present):
            entry = remembered
            if entry[2]:
                out.kept.add(entry[2])
        else:  # its JSON is not a public record of this id
            entry = [md5, collection, "", "", "its JSON is not a public record of this id",
                     ""]
            out.remade = True
        out.memo[record_id] = entry
        if entry[4]:
            out.refused.append(f"{collection}/{one_line(record_id, 40)}: {entry[4]}")
            continue
        out.counts[collection] += 1
        out.licences[entry[3]] += 1
        out.relicensed += bool(entry[5])
    out.digest = made.hexdigest()
    out.remade = out.remade or len(out.memo) != len(before)
    return out


def _reusable(entry: Entry | None, row: tuple[str, str, str], present: frozenset[str]
              ) -> bool:
    return entry is not None and entry[:2] == [row[2], row[0]] and (
        not entry[2] or entry[2] in present)


def _made(source: Source, collection: Collection, data: dict[str, Any],
          row: tuple[str, str, str], out: Republished) -> Entry:
    """The record made a file (in `out.files`), or refused: its memo entry."""
    fields = hub_fields(source, collection, data)
    rel = f"{collection.name}/{source.name}-{fields['id']}.md"
    try:
        text = record_text(fields)
    except ValueError as exc:  # a value TOML cannot hold (hub sync's checks keep them out)
        return [row[2], row[0], "", "", str(exc), ""]
    problem = refusal(text, rel, collection)
    if problem is not None:
        return [row[2], row[0], "", "", problem, ""]
    out.files[rel] = text
    unknown = "unknown" if _unknown_licence(data.get("license")) else ""
    return [row[2], row[0], rel, str(fields.get("license", "")), "", unknown]


def _rows(copy: Path, node_id: str, wanted: Callable[[tuple[str, str, str]], bool]
          ) -> tuple[list[tuple[str, str, str]], dict[tuple[str, str], dict[str, Any]]]:
    """(collection, id, MD5 of its JSON) of each public record of the copy, in a stable
    order, and the JSON of those `wanted`, by (collection, id): a JSON object marked public
    whose id is its row's."""
    try:
        with duckdb.connect(str(copy), read_only=True) as db:
            rows = [(str(c), str(i), str(m)) for c, i, m in db.execute(
                "SELECT collection, id, md5(json::VARCHAR) FROM records WHERE node_id = ? "
                "AND (json->>'access') = ? AND collection IN (SELECT unnest(?)) "
                "ORDER BY collection, id", [node_id, PUBLIC, list(COLLECTIONS)]).fetchall()]
            ids = [row[1] for row in rows if wanted(row)]
            texts = db.execute(
                "SELECT collection, id, json::VARCHAR FROM records WHERE node_id = ? AND "
                "(json->>'access') = ? AND id IN (SELECT unnest(?))",
                [node_id, PUBLIC, ids]).fetchall() if ids else []
    except duckdb.Error as exc:
        raise CopyUnreadable(one_line(str(exc), 160)) from None
    data: dict[tuple[str, str], dict[str, Any]] = {}
    for collection, record_id, text in texts:
        record = json.loads(text)
        if isinstance(record, dict) and record.get("access") == PUBLIC and \
                record.get("id") == record_id:
            data[str(collection), str(record_id)] = record
    return rows, data


def memo_key(source: Source) -> str:
    """What a memo of a member's records is valid for: its source and `rules`."""
    return hashlib.sha256(json.dumps([rules(), source.name, source.node_id, source.node_name,
                                      source.licence, source.base_url]).encode()).hexdigest()


@functools.cache
def rules() -> str:
    """What the text and the checks of a republished record follow: fednode's version,
    this module, the licences the hub knows, the modules that read and check a record file,
    and the collections' schemas. Another version of them makes every record again."""
    made = hashlib.sha256(f"{__version__}\0{RULES}".encode())
    for module in (sys.modules[__name__], licence_table, validation_module, frontmatter, records,
                   tomltext):
        made.update(Path(str(module.__file__)).read_bytes())
    made.update(json.dumps([c.schema for c in collections().values()], sort_keys=True,
                           default=str).encode())
    return made.hexdigest()


def hub_fields(source: Source, collection: Collection, data: dict[str, Any]
               ) -> dict[str, Any]:
    """The fields of the hub's record of `data` (a member's record as its node served it),
    in the schema's order, the body last."""
    given = {name: value for name, value in data.items()
             if name not in ("id", "access", *PROVENANCE)
             and not collection.served_by_node(name)}
    # Where the hub found it, whatever the record says of itself: a member cannot pass its
    # records off as another node's.
    given["source_node"], given["source_node_name"] = source.node_id, source.node_name
    if isinstance(data.get("url"), str) and source.holds(data["url"]):
        given["source_url"] = data["url"]
    licence = _licence(source, data)
    if licence is not None:
        given["license"] = licence
    if all(is_time(data.get(name)) for name in SOURCE_TIMES):  # its times at the member
        given.update((name, data[name]) for name in SOURCE_TIMES)
    document = data.get("document_url")  # a library document's PDF, at the member
    if collection.name == "resources" and "link" not in given and \
            isinstance(document, str) and document.startswith(("https://", "http://")):
        given["link"] = document
    order = [name for name in collection.schema["properties"] if name != "body"]
    fields = {"id": hub_id(source.node_id, str(data["id"]))}
    fields.update((name, given[name]) for name in order if name in given and name != "id")
    if "body" in given:
        fields["body"] = given["body"]
    return fields


def _licence(source: Source, data: dict[str, Any]) -> str | None:
    """The licence the hub's record carries: the record's own where it is a licence the hub
    knows, written as its id; none where it names one the hub does not know (its terms are
    its own, at its source_url: never its node's, which may be more open); else its node's,
    for a node's own record (one a member hub republished, with a source of its own, carries
    a known licence or has none known)."""
    own = licence_id(data.get("license"))
    if own is not None:
        return own
    if _unknown_licence(data.get("license")):
        return None
    return None if isinstance(data.get("source_node"), str) else source.licence


def _unknown_licence(value: object) -> bool:
    """Whether a record names a licence (anything but none or blank text) that the hub does
    not know."""
    named = value is not None and not (isinstance(value, str) and not value.strip())
    return named and licence_id(value) is None


def record_text(fields: dict[str, Any]) -> str:
    """A Markdown record file: every field but the body in TOML front matter, the body
    below it. ValueError for a value TOML cannot hold (null, NaN, a lone surrogate)."""
    lines = ["+++", *(f"{toml_key(name)} = {toml_value(value)}"
                      for name, value in fields.items() if name != "body"), "+++"]
    text = "\n".join(lines) + "\n"
    body = fields.get("body")
    if body is None:
        return text
    if not isinstance(body, str):
        raise ValueError("body: not text")
    return text + "\n" + body


def toml_key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else toml_string(name)


def toml_value(value: Any) -> str:
    """A JSON value written as TOML (inline: lists and tables on one line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a number TOML holds: {value!r}")
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise ValueError("null: TOML has no null")


def refusal(text: str, rel: str, collection: Collection) -> str | None:
    """Why the hub's export would refuse this record file, or None: it is read here as the
    export reads it (content.read: front matter, then the schema and the other rules)."""
    source = SourceFile(collection.name, rel, f"content/{rel}", 0, 0, 0, 0)
    records, problems = parse_markdown(text.replace("\r\n", "\n"), source, collection)
    for record in records:
        problems += validate(record, collection)
    if not problems:
        return None
    first = problems[0]
    return one_line(f"{first.field}: {first.message}" if first.field else first.message, 200)
