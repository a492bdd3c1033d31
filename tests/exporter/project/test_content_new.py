"""`fednode new` and `fednode check` as a new publisher meets them: titles of any text,
Latin names in scientificName, warnings that do not fail, messages that show the fix."""

from __future__ import annotations

import re
import tempfile
import unicodedata
from pathlib import Path

import pytest
import rtoml
from builders import REPO, Node, record_text, species
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.contract.wire import COLLECTIONS
from exporter.pipeline.build import load
from exporter.project.config import Project
from exporter.project.names import LatinName, latin_name, species_records
from exporter.project.schemas import collections
from exporter.shared.errors import ContentError


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def front_matter(path: Path) -> dict[str, object]:
    return rtoml.loads(path.read_text("utf-8").split("+++\n")[1])


def problems(root: Path) -> list[str]:
    with pytest.raises(ContentError) as caught:
        load(Project(root))
    return [str(p) for p in caught.value.problems]


# --- titles of any text make valid TOML -----------------------------------------------------

def test_an_emoji_title_writes_toml_that_parses(node: Node) -> None:
    made = run("new", "species", "Hogweed 🌿", "--project", str(node.root))
    assert made.exit_code == 0, made.output
    path = Path(made.stdout.strip())
    assert front_matter(path)["vernacularName"] == "Hogweed 🌿"
    check = run("check", "--project", str(node.root))
    assert "not valid TOML" not in check.output
    assert "content/species/hogweed.md:4: scientificName: empty: fill it in" in check.output


TITLES = (st.text(min_size=1, max_size=80)
          | st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20)
          | st.sampled_from(["Hogweed 🌿", "🌿", "Hogweed\n", "Ho\x00gweed", "Ho\udcffgweed",
                             "a\\\"b", "\u2028x\u2029", "Ab", "\ufeffTitle", "ℌ𝔬𝔤𝔴𝔢𝔢𝔡",
                             "Impatiens glandulifera Royle", "x" * 80, "+++", "'''\"\"\""]))


def acceptable(collection: str, title: str) -> bool:
    """A title `new` must take: printable text on one line, long enough for its field."""
    text = title.strip()
    if not text or any(unicodedata.category(c) in ("Cc", "Cs") for c in text):
        return False
    if re.search("[\u202a-\u202e\u2066-\u2069]", text):  # bidirectional embeddings,
        return False  # overrides and isolates: content refuses them in every field
    if collection == "species":
        return True
    spec = collections()[collection].property(collections()[collection].title_field) or {}
    return len(text) >= spec.get("minLength", 0)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(collection=st.sampled_from(COLLECTIONS), title=TITLES)
@example(collection="species", title="Hogweed 🌿")
@example(collection="resources", title="Ab")
@example(collection="species", title="Impatiens glandulifera Royle")
@example(collection="species", title="\u202a")
def test_new_writes_a_file_that_check_explains_for_any_title(collection: str,
                                                              title: str) -> None:
    """The scaffolded file always parses, holds the title, and `check` asks only for the
    required fields left to fill in; a title it cannot take is one clear error."""
    schema = collections()[collection].schema
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        Node(root)
        made = run("new", "--project", str(root), "--", collection, title)
        written = sorted((root / "content").glob("*/*.md"))
        if not acceptable(collection, title):
            assert made.exit_code == 1 and written == []
            assert made.output.startswith("Error: ") and made.output.count("\n") == 1
            return
        assert made.exit_code == 0, made.output
        assert written == [Path(made.stdout.strip())]
        fields = front_matter(written[0])
        filled = {k: v for k, v in fields.items() if k != "id" and v not in ("", [])}
        text = title.strip()
        if collection == "species" and "vernacularName" not in filled:
            name = str(fields["scientificName"])
            author = str(fields.get("scientificNameAuthorship", ""))
            assert " ".join(filter(None, [name, author])) == " ".join(text.split())
        else:
            assert list(filled.values()) == [text]
        check = run("check", "--project", str(root))
    *lines, summary = check.output.splitlines()
    rel = written[0].relative_to(root).as_posix()
    asked = set()
    for line in lines:
        if re.fullmatch(rf"{re.escape(rel)}:\d+: body: still the placeholder text.*", line):
            continue  # a warning: the body `new` wrote is still in place
        # (a whole number has no empty value: its line is commented out, so "required")
        found = re.fullmatch(rf"{re.escape(rel)}:\d+: (\w+): (empty: fill it in|required)",
                             line)
        assert found, line
        asked.add(found.group(1))
    # Only required fields are asked for; those merely prompted (a species' family) are
    # commented out in the file, never an error.
    assert asked == set(schema["required"]) - {"id"} - set(filled)
    assert check.exit_code == (1 if asked else 0)
    assert summary.startswith("Error: " if asked else "ok: 1 records valid")


@pytest.mark.parametrize("title", ["\udcff", "a\nb", "   "])
def test_a_title_that_is_not_one_line_of_text_is_refused(node: Node, title: str) -> None:
    made = run("new", "team", title, "--project", str(node.root))
    assert made.exit_code == 1 and made.output.startswith("Error: ")
    assert not (node.root / "content" / "team").exists()


def test_a_title_too_long_for_its_field_is_refused(node: Node) -> None:
    made = run("new", "resources", "x" * 201, "--project", str(node.root))
    assert made.exit_code == 1
    assert made.output == ("Error: a title of resources takes 3 to 200 characters; this one "
                           "has 201: give a title of that length\n")
    short = run("new", "germination", "x", "--project", str(node.root))
    assert short.output == ("Error: a title of germination takes 3 to 200 characters; this "
                            "one has 1: give a title of that length\n")


# --- node.toml -------------------------------------------------------------------------------

def test_node_settings_that_are_not_text_are_refused(node: Node) -> None:
    toml = node.root / "content" / "node.toml"
    toml.write_text(toml.read_text() + 'sidecar_url = 8123\nlanguage = ["en"]\n')
    found = problems(node.root)
    assert found == [
        'content/node.toml:10: node.sidecar_url: must be text in quotes, e.g. '
        'sidecar_url = "https://api.example.org"',
        'content/node.toml:11: node.language: must be text in quotes, e.g. language = "en"']


# --- a Latin name goes to scientificName -----------------------------------------------------

def test_a_latin_title_fills_scientific_name(node: Node) -> None:
    made = run("new", "species", "Impatiens glandulifera", "--project", str(node.root))
    assert made.exit_code == 0, made.output
    fields = front_matter(Path(made.stdout.strip()))
    assert fields["scientificName"] == "Impatiens glandulifera"
    assert "vernacularName" not in fields
    assert made.stderr == 'filled scientificName = "Impatiens glandulifera"\n'
    check = run("check", "--project", str(node.root))
    assert "scientificName" not in check.output


def test_an_authorship_in_the_title_fills_its_own_field(node: Node) -> None:
    made = run("new", "species", "Fallopia japonica (Houtt.) Ronse Decr.", "--project",
               str(node.root))
    fields = front_matter(Path(made.stdout.strip()))
    assert (fields["scientificName"], fields["scientificNameAuthorship"]) == \
        ("Fallopia japonica", "(Houtt.) Ronse Decr.")


def test_the_sample_names_are_told_apart() -> None:
    """Every scientific name of the sample (with and without its authorship) reads as Latin,
    every common name as a common name."""
    records = species_records(REPO / "content")
    assert len(records) > 30
    for record in records:
        name = record.fields["scientificName"]
        author = record.fields.get("scientificNameAuthorship", "")
        assert latin_name(name) == LatinName(name, "")
        if author:
            found = latin_name(f"{name} {author}")
            assert found is not None and (found.name, found.authorship) == (name, author)
        vernacular = record.fields.get("vernacularName")
        if vernacular:
            assert latin_name(vernacular) is None, vernacular


def test_new_says_when_the_file_exists(node: Node) -> None:
    run("new", "species", "Giant hogweed", "--project", str(node.root))
    again = run("new", "species", "Giant hogweed", "--project", str(node.root))
    assert again.exit_code == 0
    assert again.stdout.strip().endswith("giant-hogweed-2.md")
    existing = node.root / "content" / "species" / "giant-hogweed.md"
    assert f"warning: {existing} exists; wrote giant-hogweed-2.md beside it" in again.stderr


def test_new_never_writes_through_a_link_nor_fails_on_a_file(node: Node,
                                                            tmp_path: Path) -> None:
    """A link at the record's path, even to nothing, is taken (the record is not written
    through it, outside content/); a file where the collection's folder should be is one
    error line, not a traceback. The path printed is escaped."""
    folder = node.root / "content" / "species"
    folder.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside.md"
    (folder / "giant-hogweed.md").symlink_to(outside)
    made = run("new", "species", "Giant hogweed", "--project", str(node.root))
    assert made.exit_code == 0 and made.stdout.strip().endswith("giant-hogweed-2.md")
    assert not outside.exists()
    (node.root / "content" / "team").write_text("not a folder")
    failed = run("new", "team", "Ana", "--project", str(node.root))
    assert failed.exit_code == 1 and "content/team is not a folder" in failed.output
    assert "Traceback" not in failed.output


def test_a_scientific_name_used_twice_is_a_warning_in_new_and_check(node: Node) -> None:
    node.write("species", "balsam", species("Impatiens glandulifera"))
    made = run("new", "species", "Impatiens  glandulifera", "--project", str(node.root))
    assert ("warning: scientificName 'Impatiens glandulifera' is also used by "
            "content/species/balsam.md:3") in made.stderr
    Path(made.stdout.strip()).unlink()
    node.write("species", "copy", species("impatiens glandulifera"))
    check = run("check", "--project", str(node.root))
    assert check.exit_code == 0, check.output
    assert check.stderr.splitlines() == [
        "content/species/balsam.md:3: scientificName: warning: also used by "
        "content/species/copy.md:3",
        "content/species/copy.md:3: scientificName: warning: also used by "
        "content/species/balsam.md:3",
        "ok: 2 records valid"]
    node.write("species", "knotweed", species("Fallopia japonica"))
    run("export", "--project", str(node.root))  # check and new read the export's cache then
    again = run("check", "--project", str(node.root))
    assert again.stderr.splitlines() == [*check.stderr.splitlines()[:2], "ok: 3 records valid"]
    node.write("species", "later", species("IMPATIENS GLANDULIFERA"))  # not in the cache
    made = run("new", "species", "Impatiens glandulifera", "--project", str(node.root))
    assert [line.split(" by ")[-1] for line in made.stderr.splitlines()[:-1]] == [
        "content/species/balsam.md:3", "content/species/copy.md:3",
        "content/species/later.md:3"]
    made = run("new", "species", "Fallopia  japonica", "--project", str(node.root))
    assert "also used by content/species/knotweed.md:3" in made.stderr


_SPACES = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000"])
_CASES = st.sampled_from([str, str.upper, str.lower, str.title, str.casefold])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=("Cs", "Zs", "Cc")), min_size=1,
                        max_size=6), min_size=1, max_size=4),
       st.lists(_SPACES, min_size=5, max_size=5), st.lists(_SPACES, min_size=5, max_size=5),
       _CASES, _CASES)
@example(["STRASSE"], [" "] * 5, [" "] * 5, str, str.casefold)  # ß and ss
def test_check_suspects_every_name_it_could_warn_of(words: list[str], one: list[str],
                                                    other: list[str], case: object,
                                                    other_case: object) -> None:
    """`check` reads only the files whose names the export's sort keys (the names
    casefolded) say may be the same: whatever two names `duplicates` calls the same, their
    sort keys say so too."""
    from exporter.project.names import _key, _suspect_key
    first = "".join(w + s for w, s in zip(words, one, strict=False)).strip()
    second = "".join(w + s for w, s in zip(words, other, strict=False)).strip()
    first, second = case(first), other_case(second)  # type: ignore[operator]
    if _key(first) == _key(second):
        assert _suspect_key(first.casefold()) == _suspect_key(second.casefold())


# --- messages that show the fix --------------------------------------------------------------

def test_empty_required_and_optional_fields_say_different_things(node: Node) -> None:
    node.write("species", "a", species("Fallopia japonica", scientificName="", growthForm="",
                                       tags=["knotweed", ""]))
    assert problems(node.root) == [
        "content/species/a.md:3: scientificName: empty: fill it in",
        "content/species/a.md:7: growthForm: empty: fill it in or remove the line",
        "content/species/a.md:8: tags.1: empty: fill it in or remove it from the list"]


def test_type_mismatches_show_the_toml_form(node: Node) -> None:
    node.write("species", "a", species("Fallopia japonica", tags="knotweed, riverbanks",
                                       vernacularName=3, pathway=["horticulture"]))
    node.write("species", "b", species("Reynoutria japonica", tags=["knotweed", 7]))
    path = node.path("germination", "trial")
    path.parent.mkdir()
    path.write_text(record_text({
        "id": "3f1d0a52-7a55-4d0c-9d2c-8f1b1c2d3e4f", "title": "Trial",
        "species": "Succisa pratensis", "program": "Seed bank", "setting": "nursery",
        "seedsSown": "100", "seedsGerminated": 40, "source": "Register", "verified": "yes"}))
    assert problems(node.root) == [
        "content/germination/trial.md:7: seedsSown: expected a whole number without quotes: "
        "seedsSown = 100",
        "content/germination/trial.md:10: verified: expected true or false without quotes: "
        "verified = true",
        'content/species/a.md:7: tags: expected a list: tags = ["knotweed", "riverbanks"]',
        'content/species/a.md:8: vernacularName: expected text in quotes: '
        'vernacularName = "3"',
        'content/species/a.md:9: pathway: expected text in quotes: pathway = "horticulture"',
        'content/species/b.md:7: tags.1: expected text in quotes: "7"']
