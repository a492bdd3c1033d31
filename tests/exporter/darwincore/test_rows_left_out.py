"""Imports that get past a bad row, and synonyms: a row with a problem is left out and said,
the rest imports; a synonym is a name on its accepted taxon's record, and an accepted taxon
named only by its synonyms' acceptedNameUsage is a record of that name, made of their rows;
a publisher's own record under a synonym's name is reported. Each test runs `fednode import
dwc` on real files: the alien flora of D.R. Congo (tests/data/dwc) and small checklists
written here."""

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
from exporter.darwincore.importer import record_id
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
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"{source}: taxonomicStatus: 4 synonyms kept as names of their accepted taxa " \
           f"(their 1 extension rows are not kept)" in lines
    # t7's accepted taxon has no row: a record of the name its acceptedNameUsage gives
    assert f"{source}: acceptedNameUsage: 1 synonyms name 1 accepted taxa that have no row: " \
           f"each imported as a record of the accepted name, with its synonyms' names and " \
           f"extension rows" in lines
    assert summary(result.output) == (3, 0, 0, 5, 0, 10)
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    assert sorted(records) == ["Erigeron bonariensis", "t1", "t5"]
    # by acceptedNameUsageID, by acceptedNameUsage as written, a synonym of a synonym
    assert records["t1"]["synonyms"] == ["Fallopia japonica (Houtt.) Ronse Decr.",
                                         "Polygonum cuspidatum Siebold & Zucc.",
                                         "Tiniaria japonica (Houtt.) Hedberg"]
    # by acceptedNameUsage without its authorship
    assert records["t5"]["synonyms"] == ["Impatiens roylei Walp."]
    erigeron = records["Erigeron bonariensis"]
    assert erigeron["id"] == record_id("urn:test", "Erigeron bonariensis")
    assert {k: erigeron.get(k) for k in ("scientificName", "scientificNameAuthorship",
                                         "verbatimScientificName", "taxonomicStatus",
                                         "family", "synonyms", "distributions")} == {
        "scientificName": "Erigeron bonariensis", "scientificNameAuthorship": "L.",
        "verbatimScientificName": "Erigeron bonariensis L.", "taxonomicStatus": "accepted",
        "family": "Asteraceae", "synonyms": ["Conyza bonariensis (L.) Cronq."],
        "distributions": [{"locality": "Belgium", "establishmentMeans": "introduced"}]}
    text = (node.root / "content" / "species" / "reynoutria-japonica.md").read_text()
    assert 'synonyms = ["Fallopia japonica (Houtt.) Ronse Decr.", ' in text
    before = {p: p.stat().st_mtime_ns for p in (node.root / "content").rglob("*.md")}
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert summary(again.output) == (0, 0, 3, 5, 0, 10)
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


def test_a_synonym_naming_no_accepted_taxon_is_left_out_and_refused_by_strict(
        node: Node, tmp_path: Path) -> None:
    """A synonym whose accepted taxon has no row but a name is a record of that name, with
    or without --strict; one that names no accepted taxon is left out (--strict refuses)."""
    named = run("import", "dwc", str(synonym_list(tmp_path / "named")), "--project",
                str(node.root), "--strict", "--dry-run")
    assert named.exit_code == 0, named.output
    source = synonym_list(tmp_path / "list", [*TAXA, ["t8", "Aster novi-belgii L.", "SYNONYM",
                                                      "", "", "Asteraceae", "urn:test"]])
    result = run("import", "dwc", str(source), "--project", str(node.root), "--strict")
    assert result.exit_code == 1
    assert f"{source}/taxon.csv:9: taxonomicStatus: 'Aster novi-belgii L.' is a synonym " \
           f"(SYNONYM) that names no accepted taxon (acceptedNameUsageID or " \
           f"acceptedNameUsage)" in result.output.splitlines()
    assert result.output.strip().splitlines()[-1] == \
        "Error: 1 problem in 1 file; nothing was written"
    assert not (node.root / "content" / "species").exists()
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 3, result.output
    assert summary(result.output) == (3, 0, 0, 5, 1, 11)


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


# ---- accepted taxa named only by their synonyms ---------------------------------------------

# Accepted names as synonyms' acceptedNameUsage writes them, and synonyms of each.
WRITTEN = {"Reynoutria japonica": ["Reynoutria japonica Houtt.", "Reynoutria japonica",
                                   "Reynoutria  japonica Houtt."],
           "Erigeron bonariensis": ["Erigeron bonariensis", "Erigeron bonariensis L."]}
AUTHORSHIP = {"Reynoutria japonica": "Houtt.", "Erigeron bonariensis": "L."}
NAMES = {"Reynoutria japonica": ["Fallopia japonica (Houtt.) Ronse Decr.",
                                 "Polygonum cuspidatum Siebold & Zucc."],
         "Erigeron bonariensis": ["Conyza bonariensis (L.) Cronq.", "Conyza ambigua DC."]}
REGIONS = [("Belgium", "introduced"), ("France", "introduced"), ("Spain", "native")]


@st.composite
def synonym_rows(draw: st.DrawFn) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """Synonym rows naming accepted taxa without a row: (accepted name, acceptedNameUsage
    as written, the synonym, its distributions)."""
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        accepted = draw(st.sampled_from(sorted(WRITTEN)))
        rows.append((accepted, draw(st.sampled_from(WRITTEN[accepted])),
                     draw(st.sampled_from(NAMES[accepted])),
                     draw(st.lists(st.sampled_from(REGIONS), max_size=2, unique=True))))
    return rows


def _write_synonyms(folder: Path, rows: list[tuple[str, str, str, list[tuple[str, str]]]],
                    numbers: list[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write(folder / "taxon.csv", HEADER, [
        [f"s{n}", rows[n][2], "SYNONYM", "", rows[n][1], "Polygonaceae", "urn:test"]
        for n in numbers])
    write(folder / "distribution.csv", ["taxonID", "locality", "establishmentMeans"],
          [[f"s{n}", *region] for n in numbers for region in rows[n][3]])


@settings(max_examples=examples(10, 100), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=synonym_rows())
def test_synonyms_naming_one_accepted_name_without_a_row_are_one_record(
        tmp_path: Path, rows: list[tuple[str, str, str, list[tuple[str, str]]]]) -> None:
    """However many synonym rows name an accepted taxon the checklist has no row for, and
    however they write its name, they are one record of it: their synonyms, each once, in
    order; their distributions together, each once; an id of the dataset and the name, so
    a re-import is a no-op and rows in another order update the same records."""
    source, node = tmp_path / "list", Node(tmp_path / "node")
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(node.root / "content" / "species", ignore_errors=True)
    _write_synonyms(source, rows, list(range(len(rows))))
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0, result.output
    groups: dict[str, list[int]] = {}
    for number, row in enumerate(rows):
        groups.setdefault(row[0], []).append(number)
    assert summary(result.output) == (len(groups), 0, 0, len(rows), 0,
                                      len(rows) + sum(len(r[3]) for r in rows))
    records = {r.fields["scientificName"]: r.fields for r in load(Project(node.root)).records}
    assert sorted(records) == sorted(groups)
    for name, numbers in groups.items():
        fields = records[name]
        assert fields["id"] == record_id("urn:test", name)
        assert fields["synonyms"] == list(dict.fromkeys(rows[n][2] for n in numbers))
        regions = {region for n in numbers for region in rows[n][3]}
        assert sorted((d["locality"], d["establishmentMeans"])
                      for d in fields.get("distributions", [])) == sorted(regions)
        given = any(rows[n][1].endswith(AUTHORSHIP[name]) for n in numbers)
        assert fields.get("scientificNameAuthorship") == (AUTHORSHIP[name] if given else None)
    before = {p: p.stat().st_mtime_ns for p in (node.root / "content").rglob("*.md")}
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert summary(again.output)[:3] == (0, 0, len(groups))
    assert {p: p.stat().st_mtime_ns for p in (node.root / "content").rglob("*.md")} == before
    _write_synonyms(source, rows, list(reversed(range(len(rows)))))
    reversed_ = run("import", "dwc", str(source), "--project", str(node.root))
    assert summary(reversed_.output)[0] == 0, reversed_.output
    assert {r.id for r in load(Project(node.root)).records} == {
        record_id("urn:test", name) for name in groups}


def test_an_accepted_name_without_a_row_through_a_chain_a_bad_row_and_a_twin(
        node: Node, tmp_path: Path) -> None:
    """A synonym of a synonym whose accepted taxon has no row joins its record; a row whose
    core terms have a problem is left out with its extension rows, and the record made of
    the next; a synonym naming itself as accepted is a record of that name, synonyms
    naming each other in a circle are left out; a publisher's own record under one of the
    synonyms is reported."""
    node.write("species", "cuspidatum", species("Polygonum cuspidatum", family="Polygonaceae"))
    source = synonym_list(tmp_path / "list", [
        ["s1", "Fallopia japonica (Houtt.) Ronse Decr.", "SYNONYM", "",
         "Reynoutria japonica Houtt.", "not a family", "urn:test"],
        ["s2", "Polygonum cuspidatum Siebold & Zucc.", "SYNONYM", "",
         "Fallopia japonica", "Polygonaceae", "urn:test"],
        ["s3", "Conyza bonariensis (L.) Cronq.", "SYNONYM", "", "", "Asteraceae", "urn:test"],
        ["s4", "Prunus persica (L.) Batsch", "SYNONYM", "", "Prunus persica Stokes",
         "Rosaceae", "urn:test"],
        ["s5", "Erigeron bonariensis L.", "SYNONYM", "", "Erigeron bonariensis L.",
         "Asteraceae", "urn:test"],
        ["s6", "Gamochaeta purpurea (L.) Cabrera", "SYNONYM", "", "Gnaphalium purpureum L.",
         "Asteraceae", "urn:test"],
        ["s7", "Gnaphalium purpureum L.", "SYNONYM", "", "Gamochaeta purpurea (L.) Cabrera",
         "Asteraceae", "urn:test"],
    ])
    write(source / "distribution.csv", ["taxonID", "locality", "establishmentMeans"],
          [["s1", "Belgium", "introduced"], ["s2", "France", "introduced"]])
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()
    assert f"{source}/taxon.csv:2: family: 'not a family' is not a scientific name of one " \
           f"word with a capital first letter (Asteraceae, Compositae; a checklist may write " \
           f"a higher rank here, such as Charophyceae); this taxon is left out, with its 1 " \
           f"extension row" in lines
    assert f"content/species/cuspidatum.md:3: scientificName: 'Polygonum cuspidatum' is a " \
           f"synonym of 'Reynoutria japonica Houtt.' ({source}/taxon.csv:3, which lists " \
           f"'Polygonum cuspidatum Siebold & Zucc.'): the same plant as two records; merge " \
           f"them by hand" in lines
    assert f"{source}/taxon.csv:8: acceptedNameUsage: 'Gnaphalium purpureum L.' is a synonym " \
           f"of 'Gamochaeta purpurea (L.) Cabrera', a synonym that leads back to it: synonyms " \
           f"naming each other in a circle name no accepted taxon; this taxon is left out" \
        in lines
    assert summary(result.output) == (3, 0, 0, 3, 5, 9)  # s1 and its row; s3; s6, s7
    records = {r.fields["scientificName"]: r.fields for r in load(Project(node.root)).records
               if r.fields.get("datasetID") == "urn:test"}
    record = records["Reynoutria japonica"]
    assert (record["family"], record["synonyms"], record["distributions"]) == (
        "Polygonaceae", ["Polygonum cuspidatum Siebold & Zucc."],
        [{"locality": "France", "establishmentMeans": "introduced"}])
    # a synonym whose acceptedNameUsage is its own name, or another author's of it
    assert (records["Prunus persica"]["scientificNameAuthorship"],
            records["Prunus persica"]["synonyms"]) == ("Stokes", ["Prunus persica (L.) Batsch"])
    assert "synonyms" not in records["Erigeron bonariensis"]
