"""Hostile content: anything ambiguous about a record's id or access fails closed.

Each test runs the real reader (`exporter.pipeline.build.load`) or the real export
(`build`), and the property tests look at what actually lands in site_out/."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import marshal
import tempfile
import unicodedata
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from builders import REPO, Node, record_text, species, team
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from exporter import __version__
from exporter.pipeline.build import build, load
from exporter.pipeline.cache import FILE as CACHE_FILE
from exporter.project.config import Project
from exporter.project.content import SourceRecord
from exporter.project.schemas import collections
from exporter.project.tomltext import toml_string
from exporter.project.validation import validate
from exporter.shared.errors import ContentError

NOW = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
TABLE = "content/germination/results.csv"
FIELDS = ["id", "title", "species", "program", "setting", "seedsSown", "seedsGerminated",
          "source"]
CELLS = {"species": "Succisa pratensis", "program": "Seed bank", "setting": "nursery",
         "seedsSown": "100", "seedsGerminated": "40", "source": "Seed bank register 2025"}
# Headers a person would read as "access", the exact one given most often.
ACCESS_HEADERS = ["access", "access", "access", " access ", "Access", "ACCESS",
                  "\ufeffaccess", "access\u200b", "acces"]
ACCESS_CELLS = ["", "public", "public", "public", "partners", "sensitive", " public",
                "public ", "PUBLIC", "Public", " Partners", "\ufeffpublic", "public\n",
                "\u00a0public", "pub lic", "public;partners", "   ", "\tpublic", "public\r\n"]
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


def row_id(n: int) -> str:
    return f"0000000a-0000-4000-a000-{n:012d}"


def write_table(root: Path, header: list[str], rows: list[list[str]]) -> None:
    path = root / TABLE
    path.parent.mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(out.getvalue(), "utf-8")


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as caught:
        load(Project(root))
    return [str(p) for p in caught.value.problems]


def published(root: Path) -> bytes:
    """Every byte under site_out/ (nothing when no export succeeded)."""
    site = root / "site_out"
    return b"\n".join(p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file())


# --- CSV headers and access cells ------------------------------------------------------------

def test_access_named_twice_publishes_nothing(node: Node) -> None:
    """The probe's case: `...,access,body,access` and `...,partners,...,public`."""
    header = [*FIELDS, "access", "body", "access"]
    write_table(node.root, header, [[row_id(1), "Secret trial", *CELLS.values(), "partners",
                                     "Restricted notes.", "public"]])
    with pytest.raises(ContentError) as caught:
        build(Project(node.root), now=NOW)
    assert [str(p) for p in caught.value.problems] == [
        f"{TABLE}:1: access: named twice (columns 9 and 11): keep one of them"]
    assert not (node.root / "site_out").exists()


def test_unknown_unnamed_and_served_columns_are_errors_of_line_1(node: Node) -> None:
    header = [*FIELDS, "Access", "\ufeffbody", "created_at", "", "notes"]
    write_table(node.root, header, [[row_id(1), "Trial", *CELLS.values(), "public", "x",
                                     "2020-01-01T00:00:00Z", "", "n"]])
    found = problems(node.root)
    assert f"{TABLE}:1: Access: unknown column; did you mean access? rename it to one of " \
           f"the fields of germination or remove it" in found
    assert any(p.startswith(f"{TABLE}:1: '\\ufeffbody': unknown column; did you mean body?")
               for p in found)
    assert f"{TABLE}:1: created_at: set by the node, not by content: remove the column" in found
    assert f"{TABLE}:1: column 12 has no name: name it after a field or remove the column" \
        in found
    assert any(p.startswith(f"{TABLE}:1: notes: unknown column") for p in found)
    assert len(found) == 5


@pytest.mark.parametrize("cell", [" public", "public ", "PUBLIC", "Public", " Partners",
                                  "\ufeffpublic", "public\n", "\u00a0public", "   ",
                                  "public;partners"])
def test_an_access_cell_is_taken_exactly_as_written(node: Node, cell: str) -> None:
    write_table(node.root, [*FIELDS, "access"], [[row_id(1), "Trial", *CELLS.values(), cell]])
    found = problems(node.root)
    assert found == [f"{TABLE}:2: access: {cell!r} is neither public nor a group name: write "
                     f"public, or a group in lowercase letters, digits, - and _ (e.g. partners)"]


def test_an_empty_access_cell_means_public_and_a_group_is_restricted(node: Node) -> None:
    write_table(node.root, [*FIELDS, "access"],
                [[row_id(1), "Open trial", *CELLS.values(), ""],
                 [row_id(2), "Partner trial", *CELLS.values(), "partners"]])
    report = build(Project(node.root), now=NOW)
    assert report.public["germination"] == 1 and report.restricted["germination"] == 1
    site = published(node.root)
    assert row_id(1).encode() in site and row_id(2).encode() not in site


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """A header with the required fields, access columns (none, one, or several variants)
    and perhaps a duplicated, unknown or unnamed column, in any order; rows of access cells."""
    access = draw(st.lists(st.sampled_from(ACCESS_HEADERS), max_size=3))
    extra = draw(st.lists(st.sampled_from(["tags", "tags", "title", "notes", ""]), max_size=1))
    header = draw(st.permutations([*FIELDS, *access, *extra]))
    cell = st.sampled_from(ACCESS_CELLS) | st.text(max_size=6)
    count = draw(st.integers(1, 4))
    values = {"tags": "", "notes": "", "": ""} | CELLS
    rows = []
    for n in range(count):
        values |= {"id": row_id(n + 1), "title": f"Row marker {n + 1} zq"}
        rows.append([draw(cell) if name in ACCESS_HEADERS else values[name]
                     for name in header])
    return header, rows


@pytest.mark.slow
@SETTINGS
@given(tables())
@example(([*FIELDS, "access", "access"], [[row_id(1), "Row marker 1 zq", *CELLS.values(),
                                           "partners", "public"]]))
def test_no_row_with_an_access_cell_other_than_public_is_ever_published(
        table: tuple[list[str], list[list[str]]]) -> None:
    header, rows = table
    access_columns = [i for i, name in enumerate(header) if name in ACCESS_HEADERS]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        Node(root)
        write_table(root, header, rows)
        try:
            build(Project(root), now=NOW)
            exported = True
        except ContentError:
            exported = False
        site = published(root)
    for n, row in enumerate(rows, start=1):
        cells = [row[i] for i in access_columns]
        if not all(c in ("public", "") for c in cells):
            assert row_id(n).encode() not in site and f"marker {n} zq".encode() not in site
    # And the rule is not "refuse everything": a clean table exports, its public rows show.
    names = [name.strip() for name in header]
    clean = len(set(names)) == len(names) and set(names) <= {*FIELDS, "access", "tags"} and all(
        row[i] == "" or group_name(row[i]) for row in rows for i in access_columns)
    event(f"clean={clean} exported={exported}")
    if clean:
        assert exported
        for n, row in enumerate(rows, start=1):
            public = all(row[i] in ("public", "") for i in access_columns)
            assert (row_id(n).encode() in site) == public


@pytest.mark.parametrize("cell", ["+5", "1_0", " 5 5", "٣", "５", "nan", "5.0", "0x10"])
def test_csv_numbers_are_ascii_digits_only(node: Node, cell: str) -> None:
    row = [row_id(1), "Trial", *CELLS.values()]
    row[FIELDS.index("seedsGerminated")] = cell
    write_table(node.root, FIELDS, [row])
    found = problems(node.root)
    assert f"{TABLE}:2: seedsGerminated: expected a whole number, found {cell.strip()!r}" \
        in found


@pytest.mark.parametrize("cell", ["9223372036854775808", "-9223372036854775809",
                                  "1" + "0" * 30, "9" * 5000])
def test_csv_whole_numbers_beyond_64_bits_are_errors_of_their_cell(node: Node,
                                                                    cell: str) -> None:
    """64 bits, as TOML's whole numbers (a hub stores them as BIGINT): larger is an error of
    the cell, never a crash (Python turns at most 4,300 digits into a number)."""
    row = [row_id(1), "Trial", *CELLS.values()]
    row[FIELDS.index("seedsGerminated")] = cell
    write_table(node.root, FIELDS, [row])
    found = problems(node.root)
    assert any(line.startswith(f"{TABLE}:2: seedsGerminated: '") and "out of range" in line
               for line in found), found
    assert f"{TABLE}:2: seedsGerminated: required" not in found  # said once, rightly
    row[FIELDS.index("seedsGerminated")] = "9223372036854775807"
    write_table(node.root, FIELDS, [row])
    load(Project(node.root))  # the largest is a number like any other


def test_toml_whole_numbers_beyond_64_bits_are_errors_of_their_line(node: Node) -> None:
    path = node.path("germination", "big")
    path.parent.mkdir(parents=True)
    fields = {"id": row_id(1), "title": "Trial", **CELLS, "seedsSown": 100, "seedsGerminated": 40}
    text = record_text(fields).replace("seedsSown = 100", "seedsSown = " + "9" * 30)
    path.write_text(text)
    line = text.splitlines().index("seedsSown = " + "9" * 30) + 1
    found = problems(node.root)
    assert found == [f"content/germination/big.md:{line}: seedsSown: out of range: a whole "
                     f"number here runs from -9223372036854775808 to 9223372036854775807"]


@pytest.mark.parametrize("written", ["1e300", "10.0", "7.0e0"])
def test_a_float_is_no_whole_number(node: Node, written: str) -> None:
    """JSON Schema takes 10.0 and 1e300 for integers; they were published as such, and a
    hub's BIGINT view turned 1e+300 into NULL without a word."""
    path = node.path("germination", "float")
    path.parent.mkdir(parents=True)
    fields = {"id": row_id(1), "title": "Trial", **CELLS, "seedsSown": 100, "seedsGerminated": 4}
    text = record_text(fields).replace("seedsSown = 100", f"seedsSown = {written}")
    path.write_text(text)
    line = text.splitlines().index(f"seedsSown = {written}") + 1
    found = problems(node.root)
    assert found == [f"content/germination/float.md:{line}: seedsSown: expected a whole "
                     f"number, found {float(written)!r}: write it without a decimal point or "
                     f"exponent (10, not 10.0)"], found


def test_each_missing_field_is_said_once(node: Node) -> None:
    path = node.path("germination", "bare")
    path.parent.mkdir(parents=True)
    path.write_text(record_text({"id": row_id(1), "title": "Bare trial"}))
    found = problems(node.root)
    missing = [line for line in found if line.endswith(": required")]
    assert len(missing) == len(set(missing)) == 6, found


def test_a_problem_is_one_printable_line_whatever_the_names_hold(node: Node) -> None:
    """A file name or a field name holding a line break, an escape sequence or a
    right-to-left mark is written escaped: a problem stays one line, and says what it is."""
    node.write("species", "ok", species("Fallopia japonica"))
    folder = node.root / "content" / "species"
    (folder / "bad\x1b[31m\nname.md").write_text("+++\nid = 5\n+++\n")
    (folder / "key.md").write_text(record_text(species("Arnica montana")).replace(
        "+++\n", '+++\n"x\u202ey" = 1\n', 1))
    (folder / "long.md").write_text(record_text(species("Rosa rugosa", family="x" * 10**6)))
    found = problems(node.root)
    assert found and all(line.isprintable() for line in found), found
    assert all(len(line) < 1100 for line in found)  # a megabyte value is not printed whole
    assert any(line.startswith("content/species/bad\\x1b[31m\\nname.md:") for line in found)
    assert any("x\\u202ey: unknown field" in line for line in found), found


def test_a_quote_left_open_in_a_table_is_an_error_not_lost_rows(node: Node) -> None:
    """An unclosed quote made the rest of the table one cell: the records after it were
    gone from the node (their deletion published), without a word."""
    rows = [[row_id(n), f"Trial {n}", *CELLS.values()] for n in range(1, 4)]
    write_table(node.root, FIELDS, rows)
    path = node.root / TABLE
    path.write_text(path.read_text().replace("Trial 1", '"Trial 1', 1))
    found = problems(node.root)
    assert any("not valid CSV" in line for line in found), found


def test_access_set_twice_in_front_matter_is_a_toml_error(node: Node) -> None:
    path = node.path("species", "twice")
    path.parent.mkdir(parents=True)
    fields = species("Fallopia japonica")
    text = "".join(f"{key} = {toml_string(value)}\n" for key, value in fields.items())
    path.write_text(f'+++\n{text}access = "partners"\n"access" = "public"\n+++\n', "utf-8")
    found = problems(node.root)
    assert len(found) == 1
    assert found[0].startswith("content/species/twice.md:8: front matter is not valid TOML")


# --- ids and access values: full match, no trailing newline -----------------------------------

def write_species(node: Node, record_id: str, access: str) -> None:
    path = node.path("species", "odd")
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = dict(species("Fallopia japonica"), id=record_id, access=access)
    lines = "".join(f"{key} = {toml_string(value)}\n" for key, value in fields.items())
    path.write_text(f"+++\n{lines}+++\n", "utf-8")


def test_an_id_or_access_with_a_final_newline_is_refused(node: Node) -> None:
    """The probe's case: `id = \"\"\"<uuid>\\n\"\"\"` passed the check, skipped duplicate
    detection and named a file with a newline."""
    first = str(uuid.uuid4())
    node.write("species", "a", species("Fallopia japonica", id=first))
    path = node.path("species", "b")
    path.write_text(f'+++\nid = """{first}\n"""\nscientificName = "Reynoutria japonica"\n'
                    f'family = "Polygonaceae"\ncategory = "invasive"\n'
                    f'establishmentMeans = "introduced"\naccess = """partners\n"""\n+++\n')
    with pytest.raises(ContentError) as caught:
        build(Project(node.root), now=NOW)
    found = [str(p) for p in caught.value.problems]
    assert found[0].startswith(f"content/species/b.md:2: id: {first + chr(10)!r} is not a "
                               f"lowercase UUID")
    assert found[1].startswith("content/species/b.md:8: access: 'partners\\n' is neither")
    assert len(found) == 2
    assert not (node.root / "site_out").exists() and not (node.root / ".fednode").exists()


ODD = "\n\r\t \u00a0\u2028\u2029\u0085\ufeff\u200b\x00\x7f\x0bA\uff10\u0663é"


def decorated(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A valid value, perhaps with odd characters before, after or in place of one of its."""
    odd = st.text(alphabet=ODD, max_size=2)
    swapped = st.tuples(valid, st.integers(0, 40), st.sampled_from(ODD)).map(
        lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + 1:])
    return (st.tuples(odd, valid, odd).map("".join) | swapped | valid | st.text(max_size=12))


def canonical_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def group_name(value: str) -> bool:
    return (0 < len(value) <= 40 and value[0] in "abcdefghijklmnopqrstuvwxyz"
            and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-_" for c in value))


GROUPS = st.sampled_from(["public", "partners", "sensitive", "a", "x" * 40, "b-2_c"])


@SETTINGS
@given(record_id=decorated(st.uuids().map(str)), access=decorated(GROUPS))
@example(record_id=str(uuid.UUID(int=1)) + "\n", access="public")
@example(record_id=str(uuid.UUID(int=1)), access="partners\n")
def test_ids_and_access_values_load_only_when_exact(record_id: str, access: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        node = Node(Path(folder))
        write_species(node, record_id, access)
        try:
            records = load(Project(node.root)).records
            found: list[str] = []
        except ContentError as exc:
            records, found = [], [str(p) for p in exc.problems]
    id_ok, access_ok = canonical_uuid(record_id), group_name(access)
    if id_ok and access_ok:
        assert [(r.id, r.access) for r in records] == [(record_id, access)]
    else:
        assert records == []
        assert any(p.startswith("content/species/odd.md:2: id: ") for p in found) != id_ok
        assert any(p.startswith("content/species/odd.md:7: access: ") for p in found) \
            != access_ok


@pytest.mark.parametrize(("collection", "fields"), [
    ("species", {"family": "Apiaceae\n"}),
    ("team", {"orcid": "0000-0002-1825-009\u0665"}),  # an Arabic-Indic digit
    ("team", {"orcid": "0000-0002-1825-0097\n"}),
])
def test_every_pattern_matches_the_whole_value_in_ascii(node: Node, collection: str,
                                                        fields: dict[str, str]) -> None:
    base = species("Fallopia japonica") if collection == "species" else team("Ann")
    node.write(collection, "a", dict(base, **fields))
    [name] = fields
    assert [p.split(": ")[1] for p in problems(node.root)] == [name]


def test_the_served_schema_is_unchanged_and_valid_2020_12() -> None:
    """Validation reads `$` as the end of the text; /api/schema still says `^...$`."""
    for collection in collections().values():
        Draft202012Validator.check_schema(collection.schema)
        schemas = REPO / "exporter" / "project" / "schemas"
        text = (schemas / f"{collection.name}.schema.json").read_text()
        assert collection.schema == json.loads(text)


def test_a_record_the_two_validators_disagree_on_is_refused() -> None:
    """Should the reference validator ever accept what the compiled one refuses, the record
    is refused with the compiled validator's reason, never published."""
    collection = collections()["species"]
    lenient = dataclasses.replace(collection)
    lenient.__dict__["validator"] = Draft202012Validator({})  # made when first used: made now
    fields = dict(species("Fallopia japonica"), access="Public")
    record = SourceRecord.parsed("species", "content/species/a.md", 1, fields, {"access": 7})
    found = [str(p) for p in validate(record, lenient)]
    assert found == ["content/species/a.md:7: access: 'Public' is neither public nor a group "
                     "name: write public, or a group in lowercase letters, digits, - and _ "
                     "(e.g. partners)"]


# --- a cache of records read under older rules ----------------------------------------------

def test_a_cache_made_under_older_reading_rules_is_not_trusted(node: Node) -> None:
    """A table cached as valid by an older fednode (which read `access` twice as public)
    is read again under today's rules, not taken from the cache."""
    header = [*FIELDS, "access", "access"]
    write_table(node.root, header, [[row_id(1), "Secret trial", *CELLS.values(), "partners",
                                     "public"]])
    table = node.root / TABLE
    stat = table.stat()
    schemas = "".join(repr(c.schema) for c in collections().values())
    old_version = __version__ + ":" + hashlib.sha256(schemas.encode()).hexdigest()[:16]
    entry = (stat.st_mtime_ns, stat.st_size,
             [("germination", TABLE, 2, row_id(1), "public", 2, "sha256:" + "0" * 64)])
    cache = node.root / ".fednode" / "cache"
    cache.mkdir(parents=True)
    with open(cache / CACHE_FILE, "wb") as handle:
        marshal.dump({"version": old_version, "sources": {TABLE: entry}, "digests": {}}, handle)
    with pytest.raises(ContentError) as caught:
        build(Project(node.root), now=NOW)
    assert [p.field for p in caught.value.problems] == ["access"]
    assert not (node.root / "site_out").exists()


def _refused_page(text: str, where: str) -> tuple[list[str], int]:
    """A node whose one page holds `text` in its title, a tag or its body (`where`): the
    export must refuse it and write nothing. Its problems, and the line `text` is on."""
    fields: dict[str, object] = {"id": row_id(1), "title": "Clean title", "kind": "page",
                                 "summary": "A page about nothing at all."}
    body = "A body.\n"
    if where == "title":
        fields["title"] = text
    elif where == "tags":
        fields["tags"] = ["ok", text]
    else:
        body = f"A body.\n\n{text}\n"
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        node = Node(root)
        path = node.write("resources", "page", fields, body)
        if where != "body":  # TOML's own escape, for what record_text writes as it is
            path.write_text(path.read_text("utf-8").replace("\x7f", "\\u007f"), "utf-8")
        lines = path.read_text("utf-8").split("\n")
        with pytest.raises(ContentError) as caught:
            build(Project(root), now=NOW)
        assert not (root / "site_out").exists()
    # the body's text starts two lines below the closing fence (one empty line between)
    line = lines.index("+++", 1) + 4 if where == "body" else next(
        n for n, one in enumerate(lines, 1) if one.startswith(f"{where} ="))
    return [str(p) for p in caught.value.problems], line


CONTROLS = [chr(c) for c in (*range(0x00, 0x09), 0x0B, 0x0C, 0x0D, *range(0x0E, 0x20),
                             *range(0x7F, 0xA0))]  # (0x0D: a CR not before a line feed)


@SETTINGS
@given(before=st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]),
                      max_size=20),
       control=st.sampled_from(CONTROLS), where=st.sampled_from(["title", "body", "tags"]))
def test_a_control_character_in_any_field_is_refused_with_its_place(
        before: str, control: str, where: str) -> None:
    """ESC, NUL, DEL, C1 controls and the like in a field reached CSV downloads (a terminal
    runs ESC sequences), archives and pages as they were. Each is refused, naming its file,
    line and field, and nothing is published; a tab or a line break is text."""
    problems, line = _refused_page("Title " + before + control + "x", where)
    assert problems == [
        f"content/resources/page.md:{line}: {where}: holds the control character "
        f"U+{ord(control):04X}, which no reader shows and a terminal may act on: remove it "
        f"(text copied from a terminal or a word processor can carry one)"]


BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@SETTINGS
@given(before=st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"],
                                    exclude_characters="".join(BIDI)), max_size=20),
       bidi=st.sampled_from(BIDI), where=st.sampled_from(["title", "body", "tags"]))
def test_a_character_that_reorders_text_is_refused_with_its_place(
        before: str, bidi: str, where: str) -> None:
    """A right-to-left override (or another embedding, override or isolate) made a page show
    "knotweed" where the record's JSON, its CSV row and an agent's tool result hold
    "deewtonk" ("Trojan Source", CVE-2021-42574): readers and programs saw different texts.
    Each is refused, naming its file, line and field, and nothing is published."""
    problems, line = _refused_page("Title " + before + bidi + "deewtonk", where)
    name = unicodedata.name(bidi).lower()
    assert problems == [
        f"content/resources/page.md:{line}: {where}: holds U+{ord(bidi):04X} ({name}), which "
        f"makes text display in another order than it is stored, so that readers and programs "
        f"see different texts: remove it (right-to-left text displays correctly without it)"]


def test_right_to_left_text_and_its_marks_are_text(node: Node) -> None:
    """Hebrew and Arabic need none of those characters to display in their own order, and
    the marks (U+200E, U+200F), which reorder nothing, are text: all published as written."""
    title = "\u05e4\u05e8\u05d7 \u200f(Impatiens)\u200e \u0632\u0647\u0631\u0629"
    record_id = row_id(1)
    node.write("resources", "page", {"id": record_id, "title": title, "kind": "page",
                                     "summary": "A page about nothing at all."}, "Body.\n")
    build(Project(node.root), now=NOW)
    served = json.loads(next((node.root / "site_out" / "api" / "resources").rglob(
        f"{record_id}.json")).read_text("utf-8"))
    assert served["title"] == title


def test_a_tab_and_line_breaks_are_text(node: Node) -> None:
    """A tab, and line breaks of either kind, are text, not control characters: published."""
    record_id = row_id(1)
    node.write("resources", "page", {"id": record_id, "title": "Tabs\tand breaks",
                                     "kind": "page", "summary": "A page about nothing at all."},
               "One\r\ntwo\n")
    build(Project(node.root), now=NOW)
    served = json.loads(next((node.root / "site_out" / "api" / "resources").rglob(
        f"{record_id}.json")).read_text("utf-8"))
    assert served["title"] == "Tabs\tand breaks"
    assert "One" in served["body"] and "two" in served["body"]
    assert "\n" in served["body"].strip()
