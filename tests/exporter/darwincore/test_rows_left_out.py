"""Imports that get past a bad row, and synonyms: a row with a problem is left out and said,
the rest imports; a synonym is a name on its accepted taxon's record; a publisher's own
record under a synonym's name is reported. Each test runs `fednode import dwc` on real
files: the alien flora of D.R. Congo (tests/data/dwc) and small checklists written here."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders import REPO, Node, ServerThread, app_for, examples, http_get, species
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.pipeline.build import BuildReport, load
from exporter.project.config import Project

CONGO = REPO / "tests" / "data" / "dwc" / "alien-flora-congo-checklist"
DOI = "https://doi.org/10.15468/p8edza"
SUMMARY = re.compile(r"(\d+) added, (\d+) updated, (\d+) unchanged;.*; (\d+) synonyms "
                     r"attached; left out ([\d,]+) of ([\d,]+) rows$")


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def read(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows([header, *rows])


def summary(output: str) -> tuple[int, ...]:
    found = SUMMARY.search(output.strip().splitlines()[-1])
    assert found, output
    return tuple(int(group.replace(",", "")) for group in found.groups())


# ---- random bad cells in a real checklist --------------------------------------------------

# Values no species record takes, by the column they go in ("" takes any kept column).
BAD = {"": ["bad\x1btext", "x\u202ey"], "taxonID": [""], "taxonRank": ["rank of its own"],
       "family": ["not a family"], "establishmentMeans": ["rampant"],
       "degreeOfEstablishment": ["everywhere"], "description": ["x" * 10_001]}
FILES = ("taxon.csv", "distribution.csv", "description.csv")
KEPT = {"taxon.csv": ["taxonID", "scientificName", "family", "taxonRank", "nomenclaturalCode"],
        "distribution.csv": ["taxonID", "locality", "establishmentMeans",
                             "degreeOfEstablishment", "eventDate"],
        "description.csv": ["taxonID", "description", "type"]}


@st.composite
def bad_cells(draw: st.DrawFn) -> list[tuple[str, int, str, str]]:
    """Some cells of the Congo flora, each given a value its term refuses: (file, row index,
    column, value); at most 20 of the 21 taxa's rows."""
    picked = draw(st.lists(st.tuples(st.sampled_from(FILES), st.integers(0, 40)),
                           min_size=1, max_size=8, unique=True))
    cells = []
    for file, row in picked:
        if file == "taxon.csv":
            row %= 20
        elif file == "distribution.csv":
            row %= 21
        column = draw(st.sampled_from(KEPT[file]))
        value = draw(st.sampled_from([*BAD[""], *BAD.get(column, [])]))
        cells.append((file, row, column, value))
    return cells


@settings(max_examples=examples(25, 200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=bad_cells())
def test_random_bad_cells_never_refuse_the_rest_and_the_counts_add_up(
        tmp_path: Path, cells: list[tuple[str, int, str, str]]) -> None:
    source = tmp_path / "congo"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(CONGO, source)
    tables = {file: read(source / file) for file in FILES}
    for file, row, column, value in cells:
        header, rows = tables[file]
        rows[row][header.index(column)] = value
    for file, (header, rows) in tables.items():
        write(source / file, header, rows)
    node = Node(tmp_path / "node")
    shutil.rmtree(node.root / "content" / "species", ignore_errors=True)
    result = run("import", "dwc", str(source), "--project", str(node.root), "--dataset", DOI)
    assert result.exit_code == 3, result.output
    added, _, _, _, left_rows, rows_read = summary(result.output)
    assert rows_read == sum(len(rows) for _, rows in tables.values())
    said = {}  # file:line -> the rows it leaves out
    for line in result.output.splitlines():
        where = re.match(r"(.+?:\d+): .*; this (taxon|row) is left out(?:, with its (\d+))?",
                         line)
        if where:
            said[where[1]] = 1 + int(where[3] or 0)
    # every bad cell's row is said to be left out (its line is its index + 2) ...
    for file, row, _, _ in cells:
        owner = _owner(tables, source, file, row)
        assert f"{source}/{file}:{row + 2}" in said or owner in said, (file, row, said)
    # ... the rows said add up to the summary's count, and the taxa left are the records
    assert sum(said.values()) == left_rows
    taxa_left = sum(1 for where in said if where.startswith(f"{source}/taxon.csv:"))
    assert added == len(tables["taxon.csv"][1]) - taxa_left
    assert len(load(Project(node.root)).records) == added
    event(f"{taxa_left} taxa left out")


def _owner(tables: dict[str, tuple[list[str], list[list[str]]]], source: Path, file: str,
           row: int) -> str:
    """Where the core row owning an extension row is (an extension row goes with it)."""
    header, rows = tables[file]
    key = rows[row][header.index("taxonID")]
    core_header, core = tables["taxon.csv"]
    for number, cells in enumerate(core):
        if key and cells[core_header.index("taxonID")] == key:
            return f"{source}/taxon.csv:{number + 2}"
    return ""


# ---- synonyms ------------------------------------------------------------------------------

HEADER = ["taxonID", "scientificName", "taxonomicStatus", "acceptedNameUsageID",
          "acceptedNameUsage", "family", "datasetID"]
TAXA = [
    ["t1", "Reynoutria japonica Houtt.", "accepted", "t1", "", "Polygonaceae", "urn:test"],
    ["t2", "Fallopia japonica (Houtt.) Ronse Decr.", "heterotypicSynonym", "t1", "",
     "Polygonaceae", "urn:test"],
    ["t3", "Polygonum cuspidatum Siebold & Zucc.", "SYNONYM", "",
     "Reynoutria japonica Houtt.", "Polygonaceae", "urn:test"],
    ["t4", "Tiniaria japonica (Houtt.) Hedberg", "", "t2", "", "Polygonaceae", "urn:test"],
    ["t5", "Impatiens glandulifera Royle", "accepted", "", "", "Balsaminaceae", "urn:test"],
    ["t6", "Impatiens roylei Walp.", "homotypic synonym", "", "Impatiens glandulifera",
     "Balsaminaceae", "urn:test"],
    ["t7", "Conyza bonariensis (L.) Cronq.", "SYNONYM", "", "Erigeron bonariensis L.",
     "Asteraceae", "urn:test"],
]
DISTRIBUTION = [["t1", "Belgium", "introduced"], ["t2", "Belgium", "introduced"],
                ["t7", "Belgium", "introduced"]]


def synonym_list(folder: Path, taxa: list[list[str]] = TAXA) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write(folder / "taxon.csv", HEADER, taxa)
    ids = {taxon[0] for taxon in taxa}
    write(folder / "distribution.csv", ["taxonID", "locality", "establishmentMeans"],
          [row for row in DISTRIBUTION if row[0] in ids])
    return folder


def test_synonyms_are_names_of_their_accepted_taxa(node: Node, tmp_path: Path) -> None:
    source = synonym_list(tmp_path / "list")
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 3, result.output  # t7's accepted taxon is not in the list
    lines = result.output.splitlines()
    assert f"{source}/taxon.csv:8: acceptedNameUsage: 'Conyza bonariensis (L.) Cronq.' is a " \
           f"synonym of 'Erigeron bonariensis L.', which is not a taxon of this checklist; " \
           f"this taxon is left out, with its 1 extension row" in lines
    assert f"{source}: taxonomicStatus: 4 synonyms kept as names of their accepted taxa " \
           f"(their 1 extension rows are not kept)" in lines
    assert summary(result.output) == (2, 0, 0, 4, 2, 10)
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    assert sorted(records) == ["t1", "t5"]
    # by acceptedNameUsageID, by acceptedNameUsage as written, a synonym of a synonym
    assert records["t1"]["synonyms"] == ["Fallopia japonica (Houtt.) Ronse Decr.",
                                         "Polygonum cuspidatum Siebold & Zucc.",
                                         "Tiniaria japonica (Houtt.) Hedberg"]
    # by acceptedNameUsage without its authorship
    assert records["t5"]["synonyms"] == ["Impatiens roylei Walp."]
    text = (node.root / "content" / "species" / "reynoutria-japonica.md").read_text()
    assert 'synonyms = ["Fallopia japonica (Houtt.) Ronse Decr.", ' in text
    before = {p: p.stat().st_mtime_ns for p in (node.root / "content").rglob("*.md")}
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert summary(again.output) == (0, 0, 2, 4, 2, 10)
    assert {p: p.stat().st_mtime_ns for p in (node.root / "content").rglob("*.md")} == before
    checked = run("check", "--project", str(node.root))
    assert checked.exit_code == 0, checked.output


def test_a_synonym_that_was_a_record_leaves_the_checklist(node: Node, tmp_path: Path) -> None:
    """Imported as records before (every row its own), the synonyms are now names: their
    records left the checklist, and --prune deletes them; a synonym's own name moves onto
    its accepted taxon."""
    source = synonym_list(tmp_path / "list", [t[:2] + ["accepted", "", ""] + t[5:]
                                              for t in TAXA[:2]])
    run("import", "dwc", str(source), "--project", str(node.root))
    assert len(load(Project(node.root)).records) == 2
    synonym_list(source, TAXA[:2])
    result = run("import", "dwc", str(source), "--project", str(node.root), "--prune")
    assert result.exit_code == 0, result.output
    assert "0 added, 1 updated, 0 unchanged; 1 left the checklist and were deleted" \
        in result.output
    [record] = load(Project(node.root)).records
    assert record.fields["synonyms"] == ["Fallopia japonica (Houtt.) Ronse Decr."]


def test_a_publishers_own_record_under_a_synonym_is_reported(node: Node,
                                                              tmp_path: Path) -> None:
    node.write("species", "knotweed", species("Fallopia japonica", family="Polygonaceae"))
    source = synonym_list(tmp_path / "list", TAXA[:2])
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0, result.output
    assert f"content/species/knotweed.md:3: scientificName: 'Fallopia japonica' is a synonym " \
           f"of 'Reynoutria japonica Houtt.' ({source}/taxon.csv:2, which lists 'Fallopia " \
           f"japonica (Houtt.) Ronse Decr.'): the same plant as two records; merge them by " \
           f"hand" in result.output.splitlines()
    assert "1 own records under a synonym" in result.output


def test_strict_refuses_a_synonym_without_its_accepted_taxon(node: Node,
                                                             tmp_path: Path) -> None:
    source = synonym_list(tmp_path / "list")
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == \
        "Error: 1 problem in 1 file; nothing was written"
    assert not (node.root / "content" / "species").exists()


def test_a_rank_and_a_status_in_each_others_columns_are_read_swapped(
        node: Node, tmp_path: Path) -> None:
    """Some GRIIS archives map taxonRank and taxonomicStatus the other way round in their
    meta.xml (`ACCEPTED` as a rank, `SPECIES` as a status): read back, and said."""
    source = tmp_path / "list"
    source.mkdir()
    write(source / "taxon.csv", ["taxonID", "scientificName", "taxonRank", "taxonomicStatus",
                                 "datasetID"],
          [["t1", "Rosa rugosa Thunb.", "ACCEPTED", "SPECIES", "urn:x"],
           ["t2", "Acer negundo L.", "SPECIES", "ACCEPTED", "urn:x"]])
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0, result.output
    assert f"{source}/taxon.csv: taxonRank: read as taxonomicStatus, and taxonomicStatus as " \
           f"taxonRank, in 1 row whose rank is a status (ACCEPTED, SYNONYM) and whose status " \
           f"is a rank (SPECIES)" in result.output.splitlines()
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    assert (records["t1"]["taxonRank"], records["t1"]["taxonomicStatus"]) == \
        ("species", "ACCEPTED")


def test_a_taxon_is_found_by_its_synonyms(node: Node, tmp_path: Path,
                                          export: Callable[..., BuildReport]) -> None:
    run("import", "dwc", str(synonym_list(tmp_path / "list", TAXA[:3])), "--project",
        str(node.root))
    export(node.root)
    with ServerThread(app_for(node.root, anonymous_rate=0)) as server:
        _, _, body = http_get(f"{server.url}/api/search?q=polygonum+cuspidatum&mode=keyword")
        titles = [item["title"] for item in json.loads(body)["items"]]
        assert titles[:1] == ["Reynoutria japonica"], titles
