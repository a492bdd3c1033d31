"""Content validation: every problem named by path, line and field; nothing written."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from builders import Node, species, team
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.pipeline.build import load
from exporter.project.config import Project
from exporter.project.content import CHUNK, PARALLEL_FROM, discover, read, read_all
from exporter.project.schemas import FORMATS, collections
from exporter.shared.errors import ContentError


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as caught:
        load(Project(root))
    return [str(p) for p in caught.value.problems]


def test_valid_content_loads(node: Node) -> None:
    node.write("species", "hogweed", species("Heracleum mantegazzianum"), "Tall umbellifer.")
    content = load(Project(node.root))
    assert [r.fields["scientificName"] for r in content.records] == ["Heracleum mantegazzianum"]
    assert content.records[0].fields["body"] == "Tall umbellifer.\n"


def test_every_problem_is_listed_with_path_line_and_field(node: Node) -> None:
    fields = species("Heracleum mantegazzianum")
    del fields["scientificName"]  # family is optional (checklists lack it)
    fields["category"] = "weedy"
    fields["scientificNam"] = "typo"
    node.write("species", "hogweed", fields)
    node.write("team", "ann", team("Ann", orcid="not-an-orcid"))
    found = problems(node.root)
    assert "content/species/hogweed.md:1: scientificName: required" in found
    assert ("content/species/hogweed.md:4: category: 'weedy' is not one of invasive, native, "
            "introduced") in found
    assert ("content/species/hogweed.md:6: scientificNam: unknown field; did you mean "
            "scientificName?") in found
    assert any(p.startswith("content/team/ann.md:6: orcid:") for p in found)
    assert len(found) == 4


def test_a_problem_is_named_at_its_keys_line_however_the_key_is_written(node: Node) -> None:
    """A quoted key, a key after a multi-line string that mentions it, and a table's header
    each give their own line (they were named at line 1, or at a line inside the string)."""
    path = node.path("species", "lines")
    path.parent.mkdir(parents=True)
    path.write_text(
        '+++\n'                                                     # 1
        f'id = "{species("x")["id"]}"\n'                            # 2
        'scientificName = "Fallopia japonica"\n'                    # 3
        'habitat = """Riverbanks.\n'                                # 4
        'category = "written inside the string"\n'                  # 5
        '"""\n'                                                     # 6
        '"category" = "weedy"\n'                                    # 7
        'establishmentMeans = "introduced"\n'                       # 8
        '[[distributions]]\n'                                       # 9
        'locality = 5\n'                                            # 10
        '+++\n')
    found = problems(node.root)
    assert any(p.startswith("content/species/lines.md:7: category: 'weedy'") for p in found), \
        found
    assert any(p.startswith("content/species/lines.md:9: distributions") for p in found), found


@pytest.mark.parametrize("lines, expected", [
    (['coords = [', '  [1, 2],', ']', 'family = "X"'], {"coords": 2, "family": 5}),
    (["a = '\"\"\"'", 'family = "X"'], {"a": 2, "family": 3}),
    (['x = """one line"""', 'family = "X"'], {"x": 2, "family": 3}),
    (['t = { a = [', '1 ] }', 'family = "X"'], {"t": 2, "family": 4}),
])
def test_field_lines_pass_over_values_that_span_lines(lines: list[str],
                                                      expected: dict[str, int]) -> None:
    """A multi-line array (whose inner lines start with "[") and a quoted triple quote are
    values, not table headers or multi-line strings: the keys after them keep their lines."""
    from exporter.project.frontmatter import _field_lines
    assert _field_lines(lines, 2) == expected


# Lines of front matter, as a publisher may write them: keys with values that end on their
# line, values that go on (arrays, inline tables, multi-line strings), their inner lines,
# tables, comments, blanks, and numbers whose digits look like a dotted key ("1.5").
FRONT_LINES = [
    'family = "Apiaceae"', "'quoted key' = 1", '"category" = "weedy"', "a.b = 2",
    'tags = ["x", "y"]', "t = { a = [1, 2] }", "coords = [", "  [1, 2],", "  1.5,", "  2.5]",
    "]", "t = { a = [", "1 ] }", 'habitat = """Riverbanks.', 'x = """one line"""',
    "note = '''", "category = \"inside a string\"", '"""', "'''", "[[distributions]]",
    "[table]", "locality = 5", "# a comment", "", "   ", 'bracket = "[not open"',
    "a = '\"\"\"'", "id = 'it''s'",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRONT_LINES), max_size=12))
def test_the_quick_field_lines_are_the_scanned_ones(lines: list[str]) -> None:
    """Front matter whose every line is a key with a value ending on it is read line by line
    without looking for what opens or closes (`_simple_field_lines`); anything else is
    left to the full reading, and where the quick one answers, it answers alike."""
    from exporter.project.frontmatter import _field_lines, _scanned_field_lines, _simple_field_lines
    quick = _simple_field_lines(lines, 2)
    assert quick is None or quick == _scanned_field_lines(lines, 2)
    assert _field_lines(lines, 2) == _scanned_field_lines(lines, 2)


def test_the_quick_field_lines_read_an_ordinary_file() -> None:
    """The quick reading is the one most files get: keys, an array, a comment, a blank."""
    from exporter.project.frontmatter import _simple_field_lines
    assert _simple_field_lines(['id = "x"', "# note", "", 'tags = ["a", "[b"]', "n = 1.5"],
                               2) == {"id": 2, "tags": 5, "n": 6}


def test_bad_toml_names_the_file_line(node: Node) -> None:
    path = node.path("species", "broken")
    path.parent.mkdir(parents=True)
    path.write_text('+++\nid = "x"\nfamily = "Apiaceae\n+++\nbody\n')
    found = problems(node.root)
    assert len(found) == 1
    assert found[0].startswith("content/species/broken.md:3: front matter is not valid TOML")


def test_missing_front_matter_and_unclosed_fence(node: Node) -> None:
    (node.root / "content" / "species").mkdir()
    node.path("species", "plain").write_text("just text\n")
    node.path("species", "open").write_text('+++\nid = "x"\n')
    found = problems(node.root)
    assert any("plain.md:1: front matter missing" in p for p in found)
    assert any("open.md:1: front matter not closed" in p for p in found)


def test_duplicate_and_malformed_ids(node: Node) -> None:
    first = species("Fallopia japonica")
    node.write("species", "a", first)
    node.write("species", "b", dict(species("Fallopia sachalinensis"), id=first["id"]))
    node.write("species", "c", dict(species("Impatiens glandulifera"), id="not-a-uuid"))
    node.write("species", "d", dict(species("Prunus serotina"), id=first["id"].upper()))
    found = problems(node.root)
    assert "content/species/b.md:2: id: duplicate: also used by content/species/a.md:2" in found
    assert any(p.startswith("content/species/c.md:2: id: 'not-a-uuid' is not a lowercase UUID")
               for p in found)
    assert any(p.startswith("content/species/d.md:2: id:") for p in found)


def test_served_fields_cannot_be_set_by_content(node: Node) -> None:
    node.write("species", "a", species("Fallopia japonica", updated_at="2020-01-01T00:00:00Z"))
    assert problems(node.root) == [
        "content/species/a.md:7: updated_at: set by the node, not by content: remove it"]


def test_a_republished_record_may_carry_its_sources_times(node: Node) -> None:
    """A record that names its source (`source_node`, as a hub's records do) may carry the
    times its source serves it with, in the form nodes serve them; no other record may."""
    times = {"created_at": "2020-01-01T00:00:00Z", "updated_at": "2021-06-30T12:00:00Z"}
    node.write("species", "a", species("Fallopia japonica", source_node="n1", **times))
    assert [r.fields["updated_at"] for r in load(Project(node.root)).records] == [
        "2021-06-30T12:00:00Z"]
    node.write("species", "a", species("Fallopia japonica", source_node="n1",
                                       created_at="2020-02-30T00:00:00Z"))
    node.write("species", "b", species("Impatiens glandulifera", **times))
    found = problems(node.root)
    assert len(found) == 3 and found[0].startswith(
        "content/species/a.md:8: created_at: '2020-02-30T00:00:00Z' is not a valid date-time")
    assert found[1:] == [
        "content/species/b.md:7: created_at: set by the node, not by content: remove it",
        "content/species/b.md:8: updated_at: set by the node, not by content: remove it"]


def test_unknown_collection_and_stray_files(node: Node) -> None:
    (node.root / "content" / "specie").mkdir()
    (node.root / "content" / "team").mkdir()
    (node.root / "content" / "team" / "notes.txt").write_text("x")
    found = problems(node.root)
    assert any(p.startswith("content/specie: unknown collection") and "did you mean species" in p
               for p in found)
    assert any(p.startswith("content/team/notes.txt: not a record file") for p in found)


def test_editor_backups_and_set_aside_names_are_not_read(node: Node) -> None:
    """An editor's backup ("name~"), autosave ("#name#") or swap file (".name.swp"), and
    what a publisher sets aside with "_", sit beside the records without stopping the
    export; a stray file of any other name is still a problem."""
    node.write("species", "hogweed", species("Heracleum mantegazzianum"))
    folder = node.root / "content" / "species"
    for name in ("hogweed.md~", "#hogweed.md#", ".hogweed.md.swp", "_draft.md", ".#hogweed.md"):
        (folder / name).write_text("+++\nnot = [a record\n")
    (node.root / "content" / "_old").mkdir()
    (node.root / "content" / "_old" / "x.md").write_text("not a record")
    content = load(Project(node.root))
    assert [r.path for r in content.records] == ["content/species/hogweed.md"]
    (folder / "#hogweed.md").write_text("x")  # not an autosave: both ends, or neither
    assert problems(node.root) == [
        "content/species/#hogweed.md:1: front matter missing: the file must start with a "
        "line '+++'"]


def test_csv_rows_report_their_own_line(node: Node) -> None:
    table = node.root / "content" / "germination" / "results.csv"
    table.parent.mkdir(parents=True)
    table.write_text(
        "id,title,species,program,setting,seedsSown,seedsGerminated,source,verified\n"
        "3f1d0a52-7a55-4d0c-9d2c-8f1b1c2d3e4f,Trial A,Succisa pratensis,Seed bank,nursery,"
        "100,40,Seed bank register 2025,true\n"
        "4f1d0a52-7a55-4d0c-9d2c-8f1b1c2d3e4f,Trial B,Succisa pratensis,Seed bank,greenhouse,"
        "many,40,Seed bank register 2025,maybe\n")
    found = problems(node.root)
    assert "content/germination/results.csv:3: seedsSown: expected a whole number, found 'many'" \
        in found
    assert "content/germination/results.csv:3: verified: expected true or false, found 'maybe'" \
        in found
    assert ("content/germination/results.csv:3: setting: 'greenhouse' is not one of nursery, "
            "field") in found


def test_a_long_cell_is_a_cell(node: Node) -> None:
    """A CSV cell may be as long as a Markdown body (the csv module's limit of 128 KiB made
    a longer one "not valid CSV")."""
    table = node.root / "content" / "species" / "table.csv"
    table.parent.mkdir(parents=True)
    body = "A long description. " * 20_000  # 400 kB
    table.write_text("id,scientificName,family,category,establishmentMeans,body\n"
                     f"{species('x')['id']},Fallopia japonica,Polygonaceae,invasive,"
                     f"introduced,\"{body}\"\n")
    content = load(Project(node.root))
    assert content.records[0].fields["body"].strip() == body.strip()


def test_broken_node_toml(node: Node) -> None:
    (node.root / "content" / "node.toml").write_text('[node]\nname = "x"\nbase_url = "ftp://a"\n')
    found = problems(node.root)
    assert ("content/node.toml:3: node.base_url: must be a URL starting with http:// or "
            "https://, then a host") in found
    assert "content/node.toml: node.id: required text" in found  # no line: the key is absent


@pytest.mark.parametrize("key, value, says", [
    ("sidecar_url", "https://api.example.org\n/api/species/*  https://evil.example/:splat  200!",
     "must be one URL, with no spaces, line breaks or control characters"),
    ("base_url", "https://node.example.org\nSitemap: https://evil.example/",
     "must be one URL, with no spaces"),
    ("base_url", "https://admin:hunter2@node.example.org", "must not hold a user name"),
    ("base_url", "https://", "must be a URL starting with http:// or https://, then a host"),
    ("base_url", "https://node.example.org/?x=1", "must not hold a ?query"),
    # pages link from the site's root: under a path every page's links missed the node
    ("base_url", "https://example.org/meuse", "must be the site's origin, with no path "
     "(https://example.org, not https://example.org/meuse)"),
    ("sidecar_url", "https://api.example.org:port", "must be a URL"),
    ("description", "A node\fwith a form feed", "holds the control character U+000C"),
    # shown as "Meuse node" where "Meuse edon" is stored
    ("name", "Meuse \u202eedon\u202c", "holds U+202E (right-to-left override), which makes "
     "text display in another order than it is stored"),
    ("id", "meuse valley node", "must be letters, digits and . _ : - only"),
])
def test_node_toml_values_that_would_be_published_wrongly(node: Node, key: str, value: str,
                                                          says: str) -> None:
    """node.toml's URLs are written as given into _redirects, robots.txt, the manifest and
    every record: a line break in one added a CDN rule of anyone's choosing, a password
    was published; its texts go into eml.xml, which a form feed made invalid XML."""
    toml = (node.root / "content" / "node.toml").read_text()
    line = f"{key} = {json.dumps(value)}\n"
    toml = re.sub(rf"(?m)^{key} = .*\n", "", toml) + line
    (node.root / "content" / "node.toml").write_text(toml)
    found = problems(node.root)
    assert any(f"node.{key}: {says}" in problem for problem in found), found


def test_not_utf8(node: Node) -> None:
    path = node.path("species", "latin1")
    path.parent.mkdir(parents=True)
    path.write_bytes('+++\nid = "é"\n+++\n'.encode("latin-1"))
    found = problems(node.root)
    assert found[0].startswith("content/species/latin1.md: not UTF-8 text")


def test_cli_check_lists_all_and_exits_nonzero(node: Node) -> None:
    bad = species("Heracleum mantegazzianum")
    del bad["scientificName"]
    node.write("species", "a", bad)
    node.write("species", "b", dict(species("Fallopia japonica"), category="x"))
    result = CliRunner().invoke(main, ["check", "--project", str(node.root)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[0] == "content/species/a.md:1: scientificName: required"
    assert lines[1].startswith("content/species/b.md:5: category:")
    assert lines[-1] == "Error: 2 problems in 2 files; nothing was written"


def test_cli_check_ok(node: Node) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    result = CliRunner().invoke(main, ["check", "--project", str(node.root)])
    assert result.exit_code == 0, result.output
    assert "1 records valid" in result.output


def test_cli_new_scaffolds_a_record_that_check_explains(node: Node) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["new", "species", "Giant hogweed", "--project", str(node.root)])
    assert result.exit_code == 0, result.output
    path = node.root / "content" / "species" / "giant-hogweed.md"
    assert result.stdout.strip() == str(path)
    text = path.read_text()
    assert 'vernacularName = "Giant hogweed"' in text
    again = runner.invoke(main, ["new", "species", "Giant hogweed", "--project", str(node.root)])
    assert again.output.strip().endswith("giant-hogweed-2.md")
    ids = [line for p in path.parent.glob("*.md") for line in p.read_text().splitlines()
           if line.startswith("id = ")]
    assert len(set(ids)) == 2
    check = runner.invoke(main, ["check", "--project", str(node.root)])
    assert check.exit_code == 1
    # A required field cannot be removed: the message says only to fill it in.
    assert "giant-hogweed.md:4: scientificName: empty: fill it in\n" in check.output
    assert "scientificName: empty: fill it in or remove" not in check.output
    # What a new species is asked for though a record may lack it (a checklist's taxon
    # without a family) is written commented out: optional, so never an error.
    assert '# family = ""' in text and "family" not in check.output
    bad = runner.invoke(main, ["new", "plants", "X", "--project", str(node.root)])
    assert bad.exit_code == 1 and "unknown collection 'plants'" in bad.output


def test_many_files_are_read_by_workers_in_order_with_every_problem(node: Node) -> None:
    """Past `PARALLEL_FROM` files, worker processes read them: records come back in the
    files' order, and each broken file's problems with their own path, line and field, as
    reading them one by one here gives them."""
    count = PARALLEL_FROM + CHUNK + 7  # several chunks, the last one short
    broken = {17: {"category": "weedy"}, CHUNK + 3: {"scientificNam": "typo"}}
    for n in range(count):
        node.write("species", f"s{n:04d}", species(f"Planta numero{n:04d}",
                                                   **broken.get(n, {})))
    node.path("species", f"s{count - 1:04d}").write_text("+++\nid = \"x\n")
    files, _ = discover(node.root / "content", collections())
    assert len(files) == count
    one_by_one = [read(source, collections()["species"]) for source in files]
    by_workers = list(read_all(files))
    assert [[r.hash for r in records] for records, _ in by_workers] == \
        [[r.hash for r in records] for records, _ in one_by_one]
    assert [list(map(str, found)) for _, found in by_workers] == \
        [list(map(str, found)) for _, found in one_by_one]
    # A chunk's records come back sharing one string for each field name, in their fields
    # and field lines alike (`SourceRecord.parsed`: a node's records hold a few dozen names).
    chunk = [r for records, _ in by_workers[:CHUNK] for r in records]
    names = {id(name) for r in chunk for name in (*r.fields, *r.field_lines)}
    assert len(names) == len({name for r in chunk for name in (*r.fields, *r.field_lines)})
    found = problems(node.root)
    assert len(found) == 3, found
    assert found[0] == ("content/species/s0017.md:5: category: 'weedy' is not one of invasive, "
                        "native, introduced")
    assert found[1] == (f"content/species/s{CHUNK + 3:04d}.md:7: scientificNam: unknown field; "
                        f"did you mean scientificName?")
    assert found[2] == (f"content/species/s{count - 1:04d}.md:1: front matter not closed: add a "
                        f"line '+++' after the fields")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.dates().map(str), st.text(alphabet="0123456789-T:Z+ \n٣", max_size=12),
                 st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True), st.integers(),
                 st.none()))
def test_a_date_is_checked_as_jsonschema_checks_it(value: object) -> None:
    """Both validators check the `date` format with `schemas.FORMATS`, the same on every
    install; it accepts exactly what jsonschema's own checker accepts."""
    import jsonschema

    assert FORMATS["date"](value) == jsonschema.FormatChecker().conforms(value, "date")


def test_a_schema_format_no_validator_checks_is_refused() -> None:
    species = collections()["species"]
    odd = dataclasses.replace(species, content_schema={
        "type": "object", "properties": {"when": {"type": "string", "format": "duration"}}})
    with pytest.raises(RuntimeError, match="duration"):
        odd.fast  # noqa: B018
    assert all(c.formats <= set(FORMATS) for c in collections().values())
