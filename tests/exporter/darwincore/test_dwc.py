"""Darwin Core in and out: `fednode import dwc` and the archive the export publishes.

The Belgian checklist (2,617 real taxa) is imported, re-imported, modified and read back
from the published archive with python-dwca-reader; small checklists written here cover
restricted records, byte-identical archives and bad input."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
import threading
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from builders import REPO, Node, ServerThread, app_for, checklist_core, http_get, species, team
from click.testing import CliRunner
from dwca.read import DwCAReader
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.darwincore import unpack
from exporter.darwincore.importer import apply_import, plan_import, record_id
from exporter.darwincore.source import read_checklist
from exporter.pipeline import forks as aside
from exporter.pipeline.build import BuildReport, load
from exporter.project.config import Project
from exporter.shared.errors import ContentError
from exporter.site import downloads

BELGIUM = REPO.parent / "shared" / "data" / "alien-plants-belgium"
if not BELGIUM.is_dir():
    BELGIUM = Path("/work/shared/data/alien-plants-belgium")
needs_belgium = pytest.mark.skipif(not BELGIUM.is_dir(), reason="the Belgian checklist is "
                                                                "not beside the repository")
DATASET = "https://doi.org/10.15468/wtda1m"
EXTENSION_FILES = ("distribution.csv", "description.csv", "speciesprofile.csv")


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, table: list[dict[str, str]], header: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def stamps(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*.md")}


# ---- a small checklist ---------------------------------------------------------------------

TAXA = [
    {"taxonID": "t1", "scientificName": "Impatiens glandulifera Royle", "family": "Balsaminaceae",
     "taxonRank": "species", "datasetID": "urn:test:checklist"},
    {"taxonID": "t2", "scientificName": "Fallopia japonica (Houtt.) Ronse Decr.",
     "family": "Polygonaceae", "taxonRank": "species", "datasetID": "urn:test:checklist"},
    {"taxonID": "t3", "scientificName": 'Populus x jackii Sargent "Gileadensis"',
     "family": "Salicaceae", "taxonRank": "cultivar", "datasetID": "urn:test:checklist"},
]
DISTRIBUTION = [
    {"taxonID": "t1", "locationID": "ISO_3166-2:BE-WAL", "locality": "Walloon Region",
     "occurrenceStatus": "present", "establishmentMeans": "introduced",
     "degreeOfEstablishment": "invasive", "pathway": "horticulture", "eventDate": "1939/2019"},
    {"taxonID": "t1", "locationID": "ISO_3166-2:BE-WAL", "locality": "Walloon Region",
     "occurrenceStatus": "present", "establishmentMeans": "introduced",
     "degreeOfEstablishment": "invasive", "pathway": "seedContaminant",
     "eventDate": "1939/2019"},
    {"taxonID": "t2", "locationID": "ISO_3166-2:BE", "locality": "Belgium",
     "occurrenceStatus": "present", "establishmentMeans": "introduced",
     "degreeOfEstablishment": "established", "pathway": "", "eventDate": ""},
]
VERNACULAR = [{"taxonID": "t1", "vernacularName": "Himalayan balsam", "language": "en"},
              {"taxonID": "t1", "vernacularName": "Reuzenbalsemien", "language": "nl"}]
PROFILE = [{"taxonID": "t1", "isMarine": "FALSE", "isFreshwater": "TRUE",
            "isTerrestrial": "TRUE"}]


def small_checklist(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_rows(folder / "taxon.csv", TAXA, list(TAXA[0]))
    write_rows(folder / "distribution.csv", DISTRIBUTION, list(DISTRIBUTION[0]))
    write_rows(folder / "vernacularname.csv", VERNACULAR, list(VERNACULAR[0]))
    write_rows(folder / "speciesprofile.csv", PROFILE, list(PROFILE[0]))
    return folder


def test_a_small_checklist_arrives_whole(node: Node, tmp_path: Path) -> None:
    source = small_checklist(tmp_path / "list")
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0, result.output
    assert "3 added, 0 updated, 0 unchanged" in result.output
    records = {r.fields["taxonID"]: r for r in load(Project(node.root)).records}
    balsam = records["t1"]
    assert balsam.id == record_id("urn:test:checklist", "t1")
    assert balsam.fields["scientificName"] == "Impatiens glandulifera"
    assert balsam.fields["scientificNameAuthorship"] == "Royle"
    assert balsam.fields["verbatimScientificName"] == "Impatiens glandulifera Royle"
    assert balsam.fields["distributions"] == [{
        "locationID": "ISO_3166-2:BE-WAL", "locality": "Walloon Region",
        "occurrenceStatus": "present", "establishmentMeans": "introduced",
        "degreeOfEstablishment": "invasive", "eventDate": "1939/2019",
        "pathway": ["horticulture", "seedContaminant"]}]
    assert balsam.fields["vernacularNames"] == [
        {"vernacularName": "Himalayan balsam", "language": "en"},
        {"vernacularName": "Reuzenbalsemien", "language": "nl"}]
    assert (balsam.fields["isMarine"], balsam.fields["isFreshwater"]) == (False, True)
    assert balsam.fields["category"] == "invasive"
    knotweed = records["t2"].fields
    assert knotweed["scientificNameAuthorship"] == "(Houtt.) Ronse Decr."  # the source's
    assert records["t3"].fields["taxonRank"] == "cultivar"
    # Twice: nothing is written again.
    before = stamps(node.root / "content")
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert "0 added, 0 updated, 3 unchanged" in again.output
    assert stamps(node.root / "content") == before


def test_a_publishers_own_fields_survive_a_reimport(node: Node, tmp_path: Path) -> None:
    source = small_checklist(tmp_path / "list")
    run("import", "dwc", str(source), "--project", str(node.root))
    path = node.root / "content" / "species" / "impatiens-glandulifera.md"
    text = path.read_text()
    path.write_text(text.replace("category = \"invasive\"\n",
                                 "category = \"invasive\"\ncontrolPriority = \"high\"\n")
                    + "Pull it before it seeds.\n")
    table = [dict(row, eventDate="1939/2020") if row["taxonID"] == "t1" else row
             for row in DISTRIBUTION]
    write_rows(source / "distribution.csv", table, list(DISTRIBUTION[0]))
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert "0 added, 1 updated, 2 unchanged" in result.output
    text = path.read_text()
    assert 'controlPriority = "high"' in text and text.endswith("Pull it before it seeds.\n")
    assert 'eventDate = "1939/2020"' in text and "1939/2019" not in text


def test_a_name_already_used_is_reported_not_duplicated(node: Node, tmp_path: Path) -> None:
    node.write("species", "balsam", species("Impatiens glandulifera", family="Balsaminaceae"))
    source = small_checklist(tmp_path / "list")
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0
    assert "'Impatiens glandulifera' is already content/species/balsam.md: not imported" \
        in result.output
    assert "2 added" in result.output and "1 not imported" in result.output
    assert not (node.root / "content" / "species" / "impatiens-glandulifera.md").exists()
    # fednode check warns on two species with one name (a hand-made duplicate).
    node.write("species", "balsam2", species("Impatiens  glandulifera", family="Balsaminaceae"))
    checked = run("check", "--project", str(node.root))
    assert checked.exit_code == 0
    assert "content/species/balsam.md:3: scientificName: warning: also used by " \
           "content/species/balsam2.md:3" in checked.output


def test_dry_run_access_dataset_and_prune(node: Node, tmp_path: Path,
                                          export: Callable[..., BuildReport]) -> None:
    source = small_checklist(tmp_path / "list")
    write_rows(source / "taxon.csv", [{k: v for k, v in t.items() if k != "datasetID"}
                                      for t in TAXA], [k for k in TAXA[0] if k != "datasetID"])
    project = ("--project", str(node.root))
    refused = run("import", "dwc", str(source), *project)
    assert refused.exit_code == 1 and "datasetID: missing: give the checklist" in refused.output
    dry = run("import", "dwc", str(source), *project, "--dataset", "urn:mine", "--dry-run")
    assert dry.output.startswith("dry run: dwc import of urn:mine: 3 added")
    assert not (node.root / "content" / "species").exists()
    run("import", "dwc", str(source), *project, "--dataset", "urn:mine", "--access", "partners")
    records = load(Project(node.root)).records
    assert {r.access for r in records} == {"partners"}
    assert {r.id for r in records} == {record_id("urn:mine", t) for t in ("t1", "t2", "t3")}
    export(node.root)
    with zipfile.ZipFile(archive_of(node.root)) as bundle:
        assert b"Impatiens" not in bundle.read("taxon.csv")  # restricted: absent
    write_rows(source / "taxon.csv", [{k: v for k, v in t.items() if k != "datasetID"}
                                      for t in TAXA[1:]], [k for k in TAXA[0] if k != "datasetID"])
    for name in ("distribution.csv", "vernacularname.csv", "speciesprofile.csv"):
        (source / name).unlink()
    listed = run("import", "dwc", str(source), *project, "--dataset", "urn:mine")
    assert "impatiens-glandulifera.md: taxonID t1 left the checklist" in listed.output
    assert "1 left the checklist (kept; --prune deletes them)" in listed.output
    pruned = run("import", "dwc", str(source), *project, "--dataset", "urn:mine", "--prune")
    assert "1 left the checklist and were deleted" in pruned.output
    assert sorted(p.name for p in (node.root / "content" / "species").iterdir()) == [
        "fallopia-japonica.md", "populus-x-jackii-gileadensis.md"]


def test_imported_vernacular_names_and_regions_are_searchable(node: Node, tmp_path: Path,
                                                              export: Callable[..., BuildReport]
                                                              ) -> None:
    run("import", "dwc", str(small_checklist(tmp_path / "list")), "--project", str(node.root))
    export(node.root)
    with ServerThread(app_for(node.root, anonymous_rate=0)) as server:
        for query in ("reuzenbalsemien", "walloon"):
            _, _, body = http_get(f"{server.url}/api/search?q={query}&mode=keyword")
            titles = [item["title"] for item in json.loads(body)["items"]]
            assert titles[:1] == ["Impatiens glandulifera"], (query, titles)


# ---- bad input -----------------------------------------------------------------------------

def _bad_rows(source: Path) -> None:
    """The small checklist with a core row without taxonID (its five extension rows then
    belong to no taxon) and a vernacular name of a taxon that is not in it."""
    taxa = [dict(TAXA[0], taxonID=""), *TAXA[1:]]
    write_rows(source / "taxon.csv", [dict(t, colour="red") for t in taxa],
               [*TAXA[0], "colour"])
    write_rows(source / "vernacularname.csv", [*VERNACULAR, dict(VERNACULAR[0], taxonID="t9")],
               list(VERNACULAR[0]))


def test_strict_lists_bad_input_all_at_once_and_writes_nothing(node: Node,
                                                               tmp_path: Path) -> None:
    source = small_checklist(tmp_path / "list")
    _bad_rows(source)
    before = snapshot(node.root)
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert f"{source}/taxon.csv:2: taxonID: missing: every row needs one" in lines
    assert any(line.startswith(f"{source}/vernacularname.csv:4: taxonID: 't9' is not a "
                               f"taxonID of the core") for line in lines)
    # t1 is gone with its taxonID: its five extension rows belong to no taxon, each said.
    assert sum("is not a taxonID of the core" in line for line in lines) == 6
    assert lines[-1] == "Error: 7 problems in 4 files; nothing was written"
    assert snapshot(node.root) == before


def test_bad_rows_are_left_out_and_the_rest_imports(node: Node, tmp_path: Path) -> None:
    source = small_checklist(tmp_path / "list")
    _bad_rows(source)
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 3, result.output
    lines = result.output.strip().splitlines()
    assert f"{source}/taxon.csv:2: taxonID: missing: every row needs one; this taxon is " \
           f"left out" in lines
    assert f"{source}/vernacularname.csv:4: taxonID: 't9' is not a taxonID of the core: " \
           f"this row belongs to no taxon; this row is left out" in lines
    assert lines[-1].startswith("dwc import of urn:test:checklist: 2 added, 0 updated")
    assert lines[-1].endswith("; left out 7 of 10 rows")
    assert sorted(p.name for p in (node.root / "content" / "species").iterdir()) == [
        "fallopia-japonica.md", "populus-x-jackii-gileadensis.md"]
    # Again: the rows left out are said again, and nothing is written.
    before = stamps(node.root / "content")
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert again.exit_code == 3 and "0 added, 0 updated, 2 unchanged" in again.output
    assert stamps(node.root / "content") == before


def test_values_outside_the_vocabularies_leave_their_row_out(node: Node,
                                                             tmp_path: Path) -> None:
    source = small_checklist(tmp_path / "list")
    write_rows(source / "distribution.csv",
               [*DISTRIBUTION, dict(DISTRIBUTION[2], degreeOfEstablishment="rampant")],
               list(DISTRIBUTION[0]))
    write_rows(source / "speciesprofile.csv", [dict(PROFILE[0], isMarine="maybe")],
               list(PROFILE[0]))
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 3, result.output
    assert f"{source}/distribution.csv:5: degreeOfEstablishment: 'rampant' is not one of " \
           f"native, captive," in result.output
    assert f"{source}/speciesprofile.csv:2: isMarine: 'maybe' is not true or false; this " \
           f"row is left out" in result.output
    assert "3 added" in result.output and "left out 2 of 10 rows" in result.output
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    assert "isMarine" not in records["t1"]  # the row left out is not half kept
    assert [e["degreeOfEstablishment"] for e in records["t2"]["distributions"]] == [
        "established"]


@pytest.mark.parametrize("family, says", [
    ("Charophyceae", None),  # a class an INBO checklist writes in family: kept
    ("Compositae", None),
    ("asteraceae", "'asteraceae' is not a scientific name of one word with a capital first "
                   "letter"),
    ("Aster family", "'Aster family' is not a scientific name of one word"),
])
def test_a_family_is_one_name_and_a_bad_one_is_said_in_words(
        node: Node, tmp_path: Path, family: str, says: str | None) -> None:
    source = small_checklist(tmp_path / "list")
    write_rows(source / "taxon.csv", [dict(TAXA[0], family=family), *TAXA[1:]], list(TAXA[0]))
    result = run("import", "dwc", str(source), "--project", str(node.root))
    if says is None:
        assert result.exit_code == 0, result.output
        assert "3 added" in result.output
        return
    assert result.exit_code == 3
    line = next(line for line in result.output.splitlines() if "taxon.csv:2:" in line)
    assert line.startswith(f"{source}/taxon.csv:2: family: {says}")
    assert line.endswith("; this taxon is left out, with its 5 extension rows")
    assert "^" not in line and "$" not in line  # no regular expression
    assert "2 added" in result.output and "left out 6 of 9 rows" in result.output


def test_a_broken_zip_is_one_clear_problem(node: Node, tmp_path: Path) -> None:
    broken = tmp_path / "checklist.zip"
    broken.write_bytes(b"PK\x03\x04 this is not really a zip")
    result = run("import", "dwc", str(broken), "--project", str(node.root))
    assert result.exit_code == 1
    assert result.output.startswith(f"{broken}: not a readable Darwin Core Archive")
    assert "Traceback" not in result.output


CELLS = st.one_of(st.text(max_size=12), st.sampled_from(
    ["t1", "t2", "Impatiens glandulifera Royle", "Rosa rugosa Thunb.", "Apiaceae", "species",
     "cultivar", "kingdom", "Populus x jackii Sargent \"Gileadensis\"", " ", "x"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(header=st.lists(st.sampled_from(["taxonID", "scientificName", "family", "taxonRank",
                                        "bogus", ""]), max_size=3).map(
           lambda extra: ["taxonID", "scientificName", *extra]), data=st.data())
def test_any_taxon_table_imports_or_is_refused_clearly(tmp_path: Path, header: list[str],
                                                       data: st.DataObject) -> None:
    """Rows mostly as wide as the header, cells often real values: every table either
    imports (each taxon a valid record) or is refused with problems naming the file, and
    then nothing is written."""
    width = st.integers(len(header) - 1, len(header) + 1) if data.draw(st.booleans()) \
        else st.just(len(header))
    cells = data.draw(st.lists(width.flatmap(lambda n: st.lists(CELLS, min_size=n,
                                                                 max_size=n)), max_size=5))
    folder = checklist_core(tmp_path / "hyp", header, cells)
    shutil.rmtree(tmp_path / "hypnode", ignore_errors=True)
    project = Project(Node(tmp_path / "hypnode").root)
    try:
        plan = plan_import(project, read_checklist(folder), dataset="urn:x")
    except ContentError as error:
        event("refused")
        assert error.problems and all(str(p).startswith(str(folder)) for p in error.problems)
        assert not (project.content / "species").exists()  # nothing written
        return
    event("imported")
    apply_import(project, plan)
    assert not plan.overlaps and not plan.updated
    written = list((project.content / "species").glob("*.md"))
    event("rows left out" if plan.left_out else "every row imported")
    # every row is a record or left out, with its problems
    assert len(plan.added) == len(written)
    assert len(written) + plan.rows_left_out == plan.rows
    assert all(left.problems for left in plan.left_out)
    assert len(load(project).records) == len(written)  # and every record is valid


# ---- the published archive -----------------------------------------------------------------

def archive_of(root: Path) -> Path:
    return root / "site_out" / "download" / "species-dwca.zip"


def test_the_csv_download_opens_in_a_spreadsheet_as_text(
        node: Node, export: Callable[..., BuildReport]) -> None:
    """A cell starting as a formula (`=HYPERLINK(...)` from a checklist) is made inert in
    the CSV download, which is made for spreadsheets; numbers stay as they are, and the
    record's JSON and the Darwin Core archive keep the value as it was given."""
    formula = '=HYPERLINK("http://evil.example/","Click")'
    fields = species("Impatiens glandulifera", family="Balsaminaceae", habitat=formula,
                     vernacularName="-  balsam")
    node.write("species", "open", fields)
    export(node.root)
    table = list(csv.reader(io.StringIO(
        (node.root / "site_out" / "download" / "species.csv").read_text("utf-8-sig"))))
    row = dict(zip(table[0], table[1], strict=True))
    assert row["habitat"] == "'" + formula and row["vernacularName"] == "'-  balsam"
    assert row["scientificName"] == "Impatiens glandulifera"
    served = json.loads(next((node.root / "site_out" / "api" / "species").rglob(
        f"{fields['id']}.json")).read_text())
    assert served["habitat"] == formula
    with zipfile.ZipFile(archive_of(node.root)) as bundle:
        packed = b"".join(bundle.read(n) for n in bundle.namelist())
        assert b",=HYPERLINK(" in packed or b',"=HYPERLINK(' in packed
        assert b",-  balsam," in packed


@pytest.mark.parametrize("text, shown", [("-3.5", "-3.5"), ("+32", "+32"), ("@home", "'@home"),
                                         ("-", "'-"), ("\tx", "'\tx"), ("a=b", "a=b")])
def test_inert_cells(text: str, shown: str) -> None:
    from exporter.site.downloads import inert
    assert inert(text) == shown


def test_restricted_species_are_absent_from_the_archive_and_the_csv(
        node: Node, export: Callable[..., BuildReport]) -> None:
    node.write("species", "open", species("Impatiens glandulifera", family="Balsaminaceae",
                                          vernacularName="Himalayan balsam"))
    node.write("species", "hidden", species("Arnica montana", access="sensitive",
                                            family="Asteraceae", vernacularName="Arnica"),
               "Secret site near the quarry.")
    export(node.root)
    data = archive_of(node.root).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as bundle:
        text = b"".join(bundle.read(name) for name in bundle.namelist())
    assert b"Impatiens glandulifera" in text and b"Himalayan balsam" in text
    assert b"Arnica" not in text and b"quarry" not in text
    table = (node.root / "site_out" / "download" / "species.csv").read_bytes()
    assert b"Impatiens glandulifera" in table and b"Arnica" not in table
    with DwCAReader(str(archive_of(node.root))) as archive:
        assert [row.data["http://rs.tdwg.org/dwc/terms/scientificName"]
                for row in archive] == ["Impatiens glandulifera"]
        assert archive.metadata is not None
        assert archive.metadata.find("dataset/title").text == "Test Node"
        assert "CC0" in (archive.metadata.find("dataset/intellectualRights/para") is not None
                         and "".join(archive.metadata.find(
                             "dataset/intellectualRights").itertext()))


def test_the_archive_is_byte_identical_across_exports(node: Node, tmp_path: Path,
                                                      export: Callable[..., BuildReport]
                                                      ) -> None:
    run("import", "dwc", str(small_checklist(tmp_path / "list")), "--project", str(node.root))
    export(node.root)
    first = archive_of(node.root).read_bytes()
    # From nothing but the content and the ledger: every file rendered again.
    shutil.rmtree(node.root / ".fednode")
    (node.root / "site_out").unlink()
    export(node.root)
    assert archive_of(node.root).read_bytes() == first
    with zipfile.ZipFile(archive_of(node.root)) as bundle:
        assert {info.date_time for info in bundle.infolist()} == {(1980, 1, 1, 0, 0, 0)}


EDITS = st.lists(st.tuples(st.sampled_from(["edit", "add", "remove", "restrict"]),
                          st.integers(0, 10**6)), min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(EDITS, min_size=1, max_size=3))
def test_downloads_after_edits_equal_downloads_made_afresh(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        export: Callable[..., BuildReport], rounds: list[list[tuple[str, int]]]) -> None:
    """The downloads are put together from parts kept between exports; whatever the edits,
    they are byte for byte what an export that keeps nothing makes. The parts kept are made
    in a process aside, those made afresh here."""
    monkeypatch.setattr(downloads, "PART", 4)  # many parts, some of them one record long
    monkeypatch.setattr(downloads, "ASIDE_FROM", 1)
    assert aside.forks(), threading.enumerate()  # else the parts would be made here
    node = Node(tmp_path_factory.mktemp("parts") / "node")
    fields = {f"s{n:03}": species(f"Genus{n:03} species", vernacularName=f"v{n}")
              for n in range(40)}
    for slug, record in fields.items():
        node.write("species", slug, record)
    export(node.root)
    for count, edits in enumerate(rounds):
        for kind, pick in edits:
            slugs = sorted(fields)
            slug = slugs[pick % len(slugs)]
            if kind == "add":
                slug = f"n{count}-{pick}"
                fields[slug] = species(f"Added{pick} species")
            elif kind == "remove" and len(fields) > 1:
                del fields[slug]
                node.remove("species", slug)
                continue
            elif kind == "restrict":
                fields[slug]["access"] = "partners"
            else:
                fields[slug]["habitat"] = f"h{pick}"
            node.write("species", slug, fields[slug])
        export(node.root)
    kept = snapshot(node.root / "site_out" / "download")
    assert (node.root / ".fednode" / "cache" / "parts" / "download_species.csv.marshal").is_file()
    fresh = tmp_path_factory.mktemp("fresh") / "node"
    shutil.copytree(node.root / "content", fresh / "content")
    shutil.copy(node.root / "ledger.jsonl", fresh / "ledger.jsonl")
    monkeypatch.setattr(downloads, "ASIDE_FROM", 10**9)
    export(fresh)  # the same ledger: the same times
    assert snapshot(fresh / "site_out" / "download") == kept


def test_an_archive_imports_back(node: Node, tmp_path: Path,
                                 export: Callable[..., BuildReport]) -> None:
    run("import", "dwc", str(small_checklist(tmp_path / "list")), "--project", str(node.root))
    export(node.root)
    other = Node(tmp_path / "other")
    result = run("import", "dwc", str(archive_of(node.root)), "--project", str(other.root))
    assert result.exit_code == 0, result.output
    assert "3 added" in result.output
    first = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    second = {r.fields["taxonID"]: r.fields for r in load(Project(other.root)).records}
    for taxon_id, fields in first.items():
        # The archive's eml.xml is the imported records' provenance: the node's name and
        # licence, where the records had none.
        assert {k: v for k, v in second[taxon_id].items() if k != "id"} == {
            **{k: v for k, v in fields.items() if k != "id"}, "datasetName": "Test Node",
            "license": "http://creativecommons.org/publicdomain/zero/1.0/legalcode"}


def test_an_unkept_extension_or_term_is_named_and_left_out(
        node: Node, tmp_path: Path, export: Callable[..., BuildReport]) -> None:
    run("import", "dwc", str(small_checklist(tmp_path / "list")), "--project", str(node.root))
    export(node.root)
    with zipfile.ZipFile(archive_of(node.root)) as bundle:
        files = {name: bundle.read(name) for name in bundle.namelist()}
    files["meta.xml"] = files["meta.xml"].replace(
        b"terms/1.0/VernacularName", b"terms/1.0/Reference").replace(
        b"dwc/terms/genus", b"dwc/terms/colour")
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
    other = Node(tmp_path / "other")
    result = run("import", "dwc", str(bad), "--project", str(other.root))
    assert result.exit_code == 0, result.output
    assert f"{bad}!vernacularname.csv: left out: the Literature References extension; the " \
           f"species schema has no field for it" in result.output
    assert f"{bad}!taxon.csv:1: left out the column 'colour' (not Darwin Core or Dublin " \
           f"Core terms: check the spelling)" in result.output
    assert "3 added" in result.output


# ---- the Belgian checklist -----------------------------------------------------------------

@pytest.fixture(scope="module")
def belgium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty node with the Belgian checklist imported and exported."""
    root = tmp_path_factory.mktemp("belgium")
    Node(root)
    result = run("import", "dwc", str(BELGIUM), "--project", str(root))
    assert result.exit_code == 0, result.output
    assert "2617 added, 0 updated, 0 unchanged" in result.output
    result = run("export", "--project", str(root))
    assert result.exit_code == 0, result.output
    yield root


def _terms(row: Any) -> dict[str, str]:
    return {key.rsplit("/", 1)[-1]: value for key, value in row.data.items() if value}


@needs_belgium
@pytest.mark.slow
def test_belgium_arrives_whole_and_reimports_as_a_no_op(belgium: Path) -> None:
    records = {r.fields["taxonID"]: r.fields for r in load(Project(belgium)).records}
    source = rows(BELGIUM / "taxon.csv")
    assert set(records) == {row["taxonID"] for row in source}  # none lost, none added
    sinacalia = next(f for f in records.values() if f["scientificName"] == "Sinacalia tangutica")
    assert sinacalia["scientificNameAuthorship"] == "(Maxim.) R. Nordenstam"
    ranks = Counter(f["taxonRank"] for f in records.values())
    assert ranks["cultivar"] == 2 and ranks["hybrid"] == 137
    split = sum(1 for f in records.values() if f.get("scientificNameAuthorship"))
    assert split > 2500
    # Distributions: every distinct source row is one pathway of one entry. (The source
    # repeats 768 rows exactly; a repeat says nothing more, and is kept once.)
    kept = {(f["taxonID"], tuple(sorted({**d, "pathway": p}.items())))
            for f in records.values() for d in f.get("distributions", [])
            for p in d.get("pathway", [""])}
    distinct = {(r["taxonID"], tuple(sorted({k: v for k, v in r.items()
                                             if k != "taxonID" and (v or k == "pathway")
                                             }.items())))
                for r in rows(BELGIUM / "distribution.csv")}
    assert kept == distinct and len(distinct) == 8154 - 768
    before = stamps(belgium / "content")
    result = run("import", "dwc", str(BELGIUM), "--project", str(belgium))
    assert "0 added, 0 updated, 2617 unchanged; 0 left" in result.output
    assert stamps(belgium / "content") == before


@needs_belgium
@pytest.mark.slow
def test_belgium_round_trips_through_the_published_archive(belgium: Path) -> None:
    """Every taxon of the source, term by term, in the archive python-dwca-reader reads."""
    source = {row["taxonID"]: {k: v for k, v in row.items() if v}
              for row in rows(BELGIUM / "taxon.csv")}
    extensions: dict[str, dict[str, Counter[tuple[tuple[str, str], ...]]]] = {}
    for name in EXTENSION_FILES:
        kind = name[:-4]
        for row in rows(BELGIUM / name):
            terms = {k: v for k, v in row.items() if v and k != "taxonID"}
            if kind == "speciesprofile":
                terms = {k: v.lower() for k, v in terms.items()}
            extensions.setdefault(kind, {}).setdefault(row["taxonID"], Counter())[
                tuple(sorted(terms.items()))] += 1
    seen = set()
    with DwCAReader(str(archive_of(belgium))) as archive:
        for core in archive:
            terms = _terms(core)
            taxon_id = terms["taxonID"]
            seen.add(taxon_id)
            expected = source[taxon_id]
            assert {k: terms.get(k) for k in expected} == expected, taxon_id
            got: dict[str, Counter[tuple[tuple[str, str], ...]]] = {}
            for row in core.extensions:
                kind = row.rowtype.rsplit("/", 1)[-1].lower()
                got.setdefault(kind, Counter())[tuple(sorted(_terms(row).items()))] += 1
            for kind, by_taxon in extensions.items():
                want = by_taxon.get(taxon_id, Counter())
                # A distribution row without pathway beside rows of the same region with
                # pathways is the one loss (docs/darwin-core.md): compare as sets there.
                assert set(got.get(kind, Counter())) == set(want), (taxon_id, kind)
    assert seen == set(source)


@needs_belgium
@pytest.mark.slow
def test_a_modified_checklist_gives_exactly_those_edits(belgium: Path,
                                                        tmp_path: Path) -> None:
    root = tmp_path / "node"
    shutil.copytree(belgium / "content", root / "content")
    changed = tmp_path / "changed"
    changed.mkdir()
    taxa = rows(BELGIUM / "taxon.csv")
    removed, renamed = taxa[10]["taxonID"], taxa[20]["taxonID"]
    taxa = [dict(t, scientificName="Zinnia renamed L.") if t["taxonID"] == renamed else t
            for t in taxa if t["taxonID"] != removed]
    write_rows(changed / "taxon.csv", taxa, list(taxa[0]))
    distribution = rows(BELGIUM / "distribution.csv")
    moved = next(i for i, d in enumerate(distribution)
                 if d["taxonID"] not in (removed, renamed) and d["occurrenceStatus"] == "present")
    distribution[moved]["occurrenceStatus"] = "absent"
    for name in EXTENSION_FILES:
        table = distribution if name == "distribution.csv" else rows(BELGIUM / name)
        write_rows(changed / name, [r for r in table if r["taxonID"] != removed],
                   list(table[0]))
    before = snapshot(root / "content")
    result = run("import", "dwc", str(changed), "--project", str(root))
    assert "0 added, 2 updated, 2614 unchanged; 1 left the checklist" in result.output
    after = snapshot(root / "content")
    edited = {path for path in before if before[path] != after.get(path)}
    assert len(edited) == 2 and set(after) == set(before)
    texts = [after[path].decode() for path in edited]
    assert any('scientificName = "Zinnia renamed"' in text for text in texts)
    assert any('occurrenceStatus = "absent"' in text and distribution[moved]["taxonID"] in text
               for text in texts)
    gone = run("import", "dwc", str(changed), "--project", str(root), "--prune")
    assert "1 left the checklist and were deleted" in gone.output
    assert set(snapshot(root / "content")) == set(before) - {
        path for path in before if f'taxonID = "{removed}"'.encode() in before[path]}


@needs_belgium
@pytest.mark.slow
def test_belgium_archive_imports_back_to_the_same_files(belgium: Path, tmp_path: Path) -> None:
    """The published archive, imported into an empty node, writes the very files the CSV
    source did: the same ids (dataset and taxonID), names, extensions, byte for byte."""
    other = Node(tmp_path / "other")
    result = run("import", "dwc", str(archive_of(belgium)), "--project", str(other.root))
    assert "2617 added" in result.output, result.output
    assert snapshot(other.root / "content" / "species") == \
        snapshot(belgium / "content" / "species")


# ---- a hostile checklist: nothing outside its folder is read or written --------------------

META = ('<archive xmlns="http://rs.tdwg.org/dwc/text/"><core encoding="{encoding}" '
        'fieldsTerminatedBy="\\t" linesTerminatedBy="\\n" fieldsEnclosedBy="" '
        'ignoreHeaderLines="0" rowType="http://rs.tdwg.org/dwc/terms/Taxon"><files>'
        '<location>{location}</location></files><id index="0"/>'
        '<field index="0" term="http://rs.tdwg.org/dwc/terms/taxonID"/>'
        '<field index="1" term="http://rs.tdwg.org/dwc/terms/scientificName"/>'
        '<field index="2" term="http://rs.tdwg.org/dwc/terms/datasetID"/></core></archive>')
ROWS = "t1\tImpatiens glandulifera Royle\turn:test\n"


def archive(path: Path, members: dict[str, bytes | str], links: dict[str, str] | None = None
            ) -> Path:
    """A .zip, or a .tgz (which can hold links), of these members."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
            for name, data in members.items():
                bundle.writestr(name, data)
        return path
    import tarfile
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in members.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            bundle.addfile(info, io.BytesIO(raw))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            bundle.addfile(info)
    return path


@pytest.mark.parametrize("case, says", [
    ("zip ../", "would land outside"), ("tgz ../", "would land outside"),
    ("tgz absolute", "would land outside"), ("tgz link", "is a link or a device"),
    ("meta.xml /etc/passwd", "which is not a file of the checklist"),
    ("meta.xml ../", "which is not a file of the checklist"),
    ("meta.xml /dev/zero", "which is not a file of the checklist"),
    ("raw_unicode_escape", "declares the encoding 'raw"),
    ("not UTF-8", "taxon.txt:1: not UTF-8"),
])
def test_a_hostile_archive_is_refused_and_nothing_is_read_or_written_outside(
        node: Node, tmp_path: Path, case: str, says: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A checklist is a third party's: its archive may not write outside the folder it is
    unpacked into (a tar member `../x` or a link did, through the reader's extractall), nor
    make the import read a file of this machine into a record (meta.xml naming /etc/passwd
    did), nor leave its unpacked files behind."""
    outside = tmp_path / "outside"
    outside.mkdir()
    kind, _, detail = case.partition(" ")
    meta = META.format(encoding="UTF-8", location="taxon.txt")
    members: dict[str, bytes | str] = {"meta.xml": meta, "taxon.txt": ROWS}
    links = None
    if detail == "../" and kind != "meta.xml":
        members[f"../{outside.name}/planted.txt"] = "planted"
    if detail == "absolute":
        members[str(outside / "planted.txt")] = "planted"
    if detail == "link":
        links = {"taxon.txt": "/etc/passwd"}
        del members["taxon.txt"]
    if kind == "meta.xml":
        members["meta.xml"] = META.format(encoding="UTF-8", location=detail if detail != "../"
                                          else "../../../../../etc/passwd")
    if case == "raw_unicode_escape":
        members["meta.xml"] = META.format(encoding="raw_unicode_escape", location="taxon.txt")
        members["taxon.txt"] = "t1\tImpatiens \\ud800 Royle\turn:test\n"
    if case == "not UTF-8":
        members["taxon.txt"] = ROWS.encode().replace(b"Royle", b"Roy\xe9le")
    source = archive(tmp_path / ("checklist.tgz" if kind == "tgz" else "checklist.zip"),
                     members, links)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = snapshot(node.root)
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 1, result.output
    assert says in result.output and "Traceback" not in result.output, result.output
    assert "root:" not in result.output  # nothing of /etc/passwd
    assert snapshot(node.root) == before
    assert not list(outside.iterdir()) and not list(scratch.iterdir())


def test_an_archive_that_unpacks_to_too_much_is_refused(node: Node, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A zip's sizes may lie: what it unpacks to is counted as it is written (so a 1 MB zip
    inflating to a gigabyte is one error, not 3 GB of memory and a traceback)."""
    monkeypatch.setattr(unpack, "UNPACKED_MAX", 100_000)
    source = archive(tmp_path / "bomb.zip", {"meta.xml": META.format(
        encoding="UTF-8", location="taxon.txt"), "taxon.txt": ROWS + "a" * 1_000_000})
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 1 and "unpacks to more than" in result.output, result.output


@pytest.mark.parametrize("case, says", [
    ("open quote", 'taxon.txt:2: not valid CSV (unexpected end of data): a quote left open'),
    ("ragged row", "taxon.txt:2: 4 cells where the table's first row has 3"),
    ("taxonID twice", "taxonID: duplicate: 't1' also at line 1"),
    ("taxonID with a line break", "taxonID: 't1\\nurn:evil' holds a control character"),
])
def test_an_archive_table_is_read_strictly(node: Node, tmp_path: Path, case: str,
                                           says: str) -> None:
    """An archive's table as strictly as a folder's: a quote left open would make the rest
    of the table one cell (its taxa gone, and deleted by --prune); a ragged row's cells would
    go into other terms; two core rows with one taxonID would be one record id twice (no
    export could run after), and a taxonID with a line break would get through."""
    meta = META.format(encoding="UTF-8", location="taxon.txt")
    rows = ROWS + "t2\tFallopia japonica (Houtt.) Ronse Decr.\turn:test\n"
    if case == "open quote":
        meta = meta.replace('fieldsEnclosedBy=""', 'fieldsEnclosedBy="&quot;"')
        rows = ROWS + 't2\t"Fallopia japonica\turn:test\nt3\tRosa rugosa Thunb.\turn:test\n'
    elif case == "ragged row":
        rows = ROWS + "t2\tAcer\tnegundo L.\turn:test\n"
    elif case == "taxonID twice":  # the core's id column is another column, unique
        meta = meta.replace('<id index="0"/>', '<id index="3"/>').replace(
            "</core>", '<field index="3" term="http://purl.org/dc/terms/identifier"/></core>')
        rows = "t1\tImpatiens glandulifera Royle\turn:test\tA\n" \
               "t1\tFallopia japonica (Houtt.) Ronse Decr.\turn:test\tB\n"
    else:
        rows = '"t1\nurn:evil"\tImpatiens glandulifera Royle\turn:test\n'
        meta = meta.replace('fieldsEnclosedBy=""', 'fieldsEnclosedBy="&quot;"')
    source = archive(tmp_path / "checklist.zip", {"meta.xml": meta, "taxon.txt": rows})
    before = snapshot(node.root)
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    assert result.exit_code == 1 and says in result.output, result.output
    assert "Traceback" not in result.output and snapshot(node.root) == before


@pytest.mark.parametrize("char", ["\u2028", "\x85", "\x0c", "\x1e"])
def test_a_line_separator_inside_a_cell_is_part_of_the_cell(node: Node, tmp_path: Path,
                                                           char: str) -> None:
    """A CSV folder's lines end at line feeds and carriage returns only: U+2028, U+0085, a
    form feed or U+001E inside a cell cut the row there (the rest of the cell lost, a wrong
    line named in the error). U+2028 is text; the control characters are refused (session
    23), each named on the line of its own row: the rows were not cut."""
    source = tmp_path / "list"
    source.mkdir()
    (source / "taxon.csv").write_text(
        "taxonID,scientificName,datasetID,taxonRemarks\n"
        f"t1,Rosa rugosa Thunb.,urn:x,seen{char}twice\n"
        f't2,Acer negundo L.,urn:x,"quoted{char}x"\n'
        "t3,Betula pendula Roth,urn:x,\n", encoding="utf-8")
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    if char != "\u2028":
        assert result.exit_code == 1, result.output
        assert [line.split(": ")[0].rsplit(":", 1)[1] for line in result.output.splitlines()
                if "control character" in line] == ["2", "3"], result.output
        return
    assert result.exit_code == 0 and "3 added" in result.output, result.output
    text = (node.root / "content" / "species" / "rosa-rugosa.md").read_text()
    assert "twice" in text


def test_a_checklist_without_taxa_is_refused(node: Node, tmp_path: Path) -> None:
    """An empty core was "0 added" and exit 0: with --prune it would have deleted every
    imported taxon as gone from the checklist."""
    source = small_checklist(tmp_path / "list")
    assert run("import", "dwc", str(source), "--project", str(node.root)).exit_code == 0
    before = snapshot(node.root)
    for table in source.iterdir():  # every table its header alone
        table.write_text(table.read_text().splitlines()[0] + "\n")
    result = run("import", "dwc", str(source), "--prune", "--project", str(node.root))
    assert result.exit_code == 1 and "holds no taxa" in result.output, result.output
    assert snapshot(node.root) == before


def test_an_archive_without_species_has_valid_metadata(
        node: Node, export: Callable[..., BuildReport]) -> None:
    node.write("team", "ana", team("Ana"))
    export(node.root)
    with zipfile.ZipFile(archive_of(node.root)) as bundle:
        eml = bundle.read("eml.xml").decode()
    assert "<dateStamp></dateStamp>" not in eml and "<pubDate>" not in eml
    ElementTree.fromstring(eml)


def test_an_empty_access_group_is_refused_not_public(node: Node, tmp_path: Path) -> None:
    """`--access "$GROUP"` with GROUP unset is refused, not taken to mean public records
    without a word."""
    source = small_checklist(tmp_path / "list")
    before = snapshot(node.root)
    result = run("import", "dwc", str(source), "--access", "", "--project", str(node.root))
    assert result.exit_code == 1 and "--access is empty" in result.output, result.output
    assert snapshot(node.root) == before


def test_an_archive_table_is_framed_as_the_reader_frames_it(node: Node,
                                                           tmp_path: Path) -> None:
    """The strict reading follows the reader: the lines meta.xml says to ignore (a title of
    another width) are not rows, and an unquoted table's lines end at its declared ending
    only (a carriage return inside a cell is part of it: refused as a control character, on
    the line of its own row)."""
    meta = META.format(encoding="UTF-8", location="taxon.txt").replace(
        'ignoreHeaderLines="0"', 'ignoreHeaderLines="2"')
    rows = ("Alien plants of a valley\ntaxonID\tscientificName\tdatasetID\n" + ROWS
            + "t2\tFallopia japonica (Houtt.) Ronse\rDecr.\turn:test\n")
    source = archive(tmp_path / "checklist.zip", {"meta.xml": meta, "taxon.txt": rows})
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    assert result.exit_code == 1 and "checklist.zip!taxon.txt:4: scientificName: holds the " \
        "control character U+000D" in result.output, result.output
    rows = rows.replace("\rDecr.", " Decr.")
    source = archive(tmp_path / "checklist2.zip", {"meta.xml": meta, "taxon.txt": rows})
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0 and "2 added" in result.output, result.output


def test_an_archives_dataset_folder_is_not_read(node: Node, tmp_path: Path) -> None:
    """The reader parses every file of dataset/ even with its metadata skipped (a 100 kB
    zip of XML takes 2.3 GB of memory): fednode reads none of it, so broken XML there is no
    error."""
    source = archive(tmp_path / "checklist.zip", {
        "meta.xml": META.format(encoding="UTF-8", location="taxon.txt"), "taxon.txt": ROWS,
        "dataset/x.xml": "<r>" + "<a/>" * 100_000, "dataset/broken.xml": "<not xml"})
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0 and "1 added" in result.output, result.output


def test_a_quote_left_open_is_an_error_not_a_prune(node: Node, tmp_path: Path) -> None:
    """An unclosed quote made the rest of taxon.csv one cell: the taxa in it were gone
    from the checklist, and --prune deleted them."""
    source = small_checklist(tmp_path / "list")
    assert run("import", "dwc", str(source), "--project", str(node.root)).exit_code == 0
    before = snapshot(node.root)
    text = (source / "taxon.csv").read_text()
    (source / "taxon.csv").write_text(text.replace("Balsaminaceae", '"Balsaminaceae', 1))
    result = run("import", "dwc", str(source), "--prune", "--project", str(node.root))
    assert result.exit_code == 1 and "not valid CSV" in result.output, result.output
    assert snapshot(node.root) == before


def test_prune_never_deletes_a_table(node: Node, tmp_path: Path) -> None:
    """A taxon that left the checklist but lives as a row of a species table is the
    publisher's to remove: deleting the file took the table's other rows with it."""
    source = small_checklist(tmp_path / "list")
    table = node.root / "content" / "species" / "table.csv"
    table.parent.mkdir(parents=True)
    ident = record_id("urn:test:checklist", "t2")
    table.write_text("id,scientificName,family,category,establishmentMeans,taxonID,datasetID\n"
                     f"{ident},Fallopia japonica,Polygonaceae,invasive,introduced,t2,"
                     f"urn:test:checklist\n"
                     f"{species('Rosa rugosa')['id']},Rosa rugosa,Rosaceae,invasive,"
                     f"introduced,,\n")
    write_rows(source / "taxon.csv", [t for t in TAXA if t["taxonID"] != "t2"], list(TAXA[0]))
    write_rows(source / "distribution.csv", [d for d in DISTRIBUTION if d["taxonID"] != "t2"],
               list(DISTRIBUTION[0]))
    result = run("import", "dwc", str(source), "--prune", "--project", str(node.root))
    assert result.exit_code == 0, result.output
    assert table.exists() and "Rosa rugosa" in table.read_text()
    assert "is a table row: remove the row by hand" in result.output


@pytest.mark.parametrize("taxon_id, header, says", [
    ("t1\nurn:x", None, "holds a control character"),
    ("t1", ["taxonID", "scientificName", "scientificName", "datasetID"], "named twice"),
])
def test_ids_that_could_collide_and_terms_named_twice_are_refused(
        node: Node, tmp_path: Path, taxon_id: str, header: list[str] | None,
        says: str) -> None:
    source = tmp_path / "list"
    source.mkdir()
    columns = header or ["taxonID", "scientificName", "datasetID"]
    with open(source / "taxon.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerow([taxon_id, "Impatiens glandulifera Royle",
                         *(["Impatiens glandulifera"] if header else []), "urn:test"])
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 1 and says in result.output, result.output
    assert not (node.root / "content" / "species").exists()


_CELLS = st.one_of(st.text(alphabet=st.sampled_from([*',"\r\n \x00\x1f;|a\u00e9\u2028\U0001f33f']) |
                           st.characters(), max_size=12),
                   st.none(), st.integers(), st.floats(allow_nan=False), st.booleans())


@given(st.lists(st.lists(_CELLS, max_size=5), max_size=6), st.sampled_from(["\n", "\r\n"]))
@settings(max_examples=400, deadline=None)
def test_csv_lines_are_what_the_csv_module_writes(rows: list[list[Any]], end: str) -> None:
    """The downloads' and the archive's CSV text is made by joining strings: byte for byte
    what `csv.writer` writes, for any cells (quotes, delimiters, line ends, empty rows, a
    row of one empty cell, None, numbers), and read back as the same cells. Python 3.11's
    writer quotes a carriage return only where the line ends with one; here, as from Python
    3.12, always: a bare one ends the row for many readers."""
    from exporter.site.csv_lines import csv_lines

    text = csv_lines(rows, end)
    expected = io.StringIO()
    csv.writer(expected, lineterminator=end).writerows(rows)
    if end == "\r\n" or not any("\r" in str(cell) for row in rows for cell in row):
        assert text == expected.getvalue()
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    assert list(csv.reader(io.StringIO(text, newline=""))) == cells


@pytest.mark.parametrize("control", ["\x1b", "\x00", "\x7f", "\x85", "\u202e"])
def test_a_control_character_in_a_cell_is_refused_before_anything_is_written(
        tmp_path: Path, control: str) -> None:
    """A term's text holding a control character was imported, and then every export
    refused the record it made: the import refuses it, naming the file, line and term."""
    folder = tmp_path / "checklist"
    folder.mkdir()
    (folder / "taxon.csv").write_text(
        "taxonID,scientificName,vernacularName\n"
        "t1,Impatiens glandulifera Royle,Himalayan balsam\n"
        f"t2,Rosa rugosa Thunb.,\"Japanese{control}rose\"\n", "utf-8", newline="")
    project = Project(Node(tmp_path / "node").root)
    with pytest.raises(ContentError) as caught:
        plan_import(project, read_checklist(folder), dataset="urn:x", strict=True)
    assert [(p.line, p.field) for p in caught.value.problems] == [(3, "vernacularName")]
    assert f"U+{ord(control):04X}" in caught.value.problems[0].message
    assert not (project.content / "species").exists()


@pytest.mark.slow
def test_an_archive_a_zip_cannot_hold_without_zip64_is_refused(tmp_path: Path) -> None:
    """A zip without ZIP64 extensions holds sizes and offsets below 4 GiB: past that the
    archive would be unreadable, so the export stops with a message, before writing. (Made
    of one 64 MiB part given 65 times: the limit is reached without 4 GiB of memory.)"""
    from exporter.darwincore import archive as dwc_archive
    from exporter.project.config import load_node_config
    from exporter.shared.errors import ExportError

    node = load_node_config(Project(Node(tmp_path / "node").root))
    part = dwc_archive.rows(node, [{"id": "t1", "scientificName": "x" * (64 << 20),
                                    "updated_at": "2026-03-01T00:00:00Z"}])
    assert dwc_archive.archive(node, [part])[:4] == b"PK\x03\x04"  # one is a zip
    with pytest.raises(ExportError, match=r"taxon\.csv would hold 4,362,\d{3},\d{3} bytes, "
                                          r"more than a zip without ZIP64 extensions can"):
        dwc_archive.archive(node, [part] * 65)
