"""Importing checklists as GBIF publishers write them: excerpts of three published
checklists (tests/data/dwc/SOURCES.md) of different publishers and kingdoms, as CSV folders
and as archives the way the IPT writes them; names as the field writes them; and headers
of any standard terms in any order."""

from __future__ import annotations

import csv
import io
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import REPO, Node, checklist_core, examples
from click.testing import CliRunner
from dwca.read import DwCAReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.darwincore.encoding import codec_for
from exporter.darwincore.importer import plan_import
from exporter.darwincore.source import read_checklist
from exporter.darwincore.terms import CORE_TERMS, short, standard_terms
from exporter.pipeline.build import BuildReport, load
from exporter.project.config import Project
from exporter.shared.errors import ContentError

DATA = REPO / "tests" / "data" / "dwc"
RINSE = DATA / "rinse-pathways-checklist"
FISHES = DATA / "alien-fishes-checklist"
MOLLUSCS = DATA / "alien-mollusca-checklist"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def zipped(folder: Path, into: Path) -> Path:
    """The folder as the IPT serves it: one zip of meta.xml, eml.xml and the tables."""
    path = into / f"{folder.name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
        for member in sorted(folder.iterdir()):
            bundle.write(member, member.name)
    return path


def table(path: Path, delimiter: str = "\t", encoding: str = "utf-8") -> list[dict[str, str]]:
    with open(path, newline="", encoding=encoding) as handle:
        return list(csv.DictReader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE
                                   if delimiter == "\t" else csv.QUOTE_MINIMAL))


def stamps(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*.md")}


def test_a_multi_kingdom_archive_imports_its_plants_and_round_trips(
        node: Node, tmp_path: Path, export: Callable[..., BuildReport]) -> None:
    source = zipped(RINSE, tmp_path)
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"{source}: kingdom: left out 15 Animalia taxa: this node's species are plants" \
        in lines
    assert f"{source}!taxon.txt:1: left out the columns accessRights, institutionCode " \
           f"(standard terms the species schema has no field for)" in lines
    assert f"{source}!references.txt: left out: the Literature References extension; the " \
           f"species schema has no field for it" in lines
    assert any(line.startswith(f"{source}: source: RINSE - Pathways and vectors of "
                               f"biological invasions in Northwest Europe; licence: "
                               f"http://creativecommons.org/publicdomain/zero/1.0/legalcode; "
                               f"cite as: Zieritz A") for line in lines)
    assert "20 added, 0 updated, 0 unchanged" in result.output
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    assert len(records) == 20
    assert all(f["kingdom"] == "Plantae" for f in records.values())
    names = {f["verbatimScientificName"]: f for f in records.values()
             if "verbatimScientificName" in f}
    knotweed = names["Fallopia X bohemica (Chrtek & Chrtková) Bailey"]
    assert (knotweed["scientificName"], knotweed["scientificNameAuthorship"]) == \
        ("Fallopia × bohemica", "(Chrtek & Chrtková) Bailey")
    assert names["Lysichiton americanus Hultén & H. St. John"]["scientificNameAuthorship"] \
        == "Hultén & H. St. John"
    # The EML's citation is each record's, the core's own licence and name stay.
    assert all(f["bibliographicCitation"].startswith("Zieritz A") for f in records.values())
    assert all(f["license"] == "http://creativecommons.org/publicdomain/zero/1.0/"
               for f in records.values())
    before = stamps(node.root / "content")
    again = run("import", "dwc", str(source), "--project", str(node.root))
    assert "0 added, 0 updated, 20 unchanged" in again.output
    assert stamps(node.root / "content") == before
    export(node.root)
    _round_trips(node.root / "site_out" / "download" / "species-dwca.zip")


def _round_trips(archive: Path) -> None:
    """Every imported taxon of the source, its kept core terms verbatim and its extension
    rows as sets, is in the archive python-dwca-reader reads."""
    source = {row["taxonID"]: row for row in table(RINSE / "taxon.txt")
              if row["kingdom"] == "Plantae"}
    rows: dict[str, dict[str, set[tuple[tuple[str, str], ...]]]] = {}
    for kind in ("distribution", "description", "speciesprofile"):
        for row in table(RINSE / f"{kind}.txt"):
            # (cells are read without the spaces around them: ' WGSRPD:GRB')
            terms = {k: (v.lower() if kind == "speciesprofile" else v.strip())
                     for k, v in row.items() if v.strip() and k != "taxonID"}
            rows.setdefault(row["taxonID"], {}).setdefault(kind, set()).add(
                tuple(sorted(terms.items())))
    seen = set()
    with DwCAReader(str(archive)) as reader:
        for core in reader:
            terms = {short(k): v for k, v in core.data.items() if v}
            seen.add(terms["taxonID"])
            expected = {k: v for k, v in source[terms["taxonID"]].items()
                        if v and k in CORE_TERMS}
            assert {k: terms.get(k) for k in expected} == expected
            got: dict[str, set[tuple[tuple[str, str], ...]]] = {}
            for row in core.extensions:
                kind = row.rowtype.rsplit("/", 1)[-1].lower()
                got.setdefault(kind, set()).add(tuple(sorted(
                    (short(k), v) for k, v in row.data.items() if v)))
            for kind, want in rows.get(terms["taxonID"], {}).items():
                assert got.get(kind) == want, (terms["taxonID"], kind)
    assert seen == set(source)


@pytest.mark.parametrize("folder", [FISHES, MOLLUSCS], ids=["csv-folder", "archive"])
def test_an_animal_checklist_is_refused_in_one_line(node: Node, tmp_path: Path,
                                                    folder: Path) -> None:
    source = folder if folder == FISHES else zipped(folder, tmp_path)
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"{source}: kingdom: no plants: the checklist's 15 Animalia taxa are not Plantae, "
        f"and this node's species collection holds plants only; nothing was imported",
        "Error: 1 problem in 1 file; nothing was written"]
    assert not (node.root / "content" / "species").exists()


def test_an_archive_in_windows_1252_with_default_values_is_read_whole(tmp_path: Path) -> None:
    checklist = read_checklist(zipped(MOLLUSCS, tmp_path))
    assert len(checklist.taxa) == 15
    # meta.xml's default value fills the column the tables lack
    assert {t.row.terms["language"] for t in checklist.taxa} == {"en"}
    sources = [row.terms.get("source", "") for t in checklist.taxa
               for row in t.extensions.get("distribution", [])]
    assert any("gastéropodes" in text for text in sources)  # decoded as declared
    assert {t.row.terms["scientificName"] for t in checklist.taxa} >= {
        "Cernuella virgata (Da Costa, 1778)"}
    assert checklist.provenance is not None
    assert checklist.provenance.doi == "https://doi.org/10.15468/t13kwo"


def test_a_folder_of_the_publishers_csv_files_is_read_whole() -> None:
    checklist = read_checklist(FISHES)
    assert len(checklist.taxa) == 15
    assert checklist.notes == [f"{FISHES}/taxon.csv:1: left out the columns accessRights, "
                               f"institutionCode (standard terms the species schema has no "
                               f"field for)"]
    assert checklist.provenance is None


@pytest.mark.parametrize("declared, codec", [
    ("UTF-8", "utf-8"), ("ISO-8859-1", "iso8859-1"), ("windows-1252", "cp1252"),
    ("MacRoman", "mac-roman"), (None, "utf-8"), ("UTF-16", None), ("raw_unicode_escape", None),
    ("rot13", None), ("no such thing", None)])
def test_encodings_a_table_may_declare(declared: str | None, codec: str | None) -> None:
    assert codec_for(declared) == codec


# ---- names as the field writes them --------------------------------------------------------

NAMES = {
    "Salix alba x S. fragilis": ("Salix alba x S. fragilis", None, "hybrid"),
    "Fallopia × bohemica": ("Fallopia × bohemica", None, "hybrid"),
    "Mentha ×piperita L.": ("Mentha × piperita", "L.", "hybrid"),
    "Cortaderia selloana (Schultes) Ascherson & Gräbner":
        ("Cortaderia selloana", "(Schultes) Ascherson & Gräbner", "species"),
    "Rosa canina var. dumalis Baker": ("Rosa canina var. dumalis", "Baker", "variety"),
    "Poa annua subsp. exilis (Tomm.) Asch. & Graebn.":
        ("Poa annua subsp. exilis", "(Tomm.) Asch. & Graebn.", "subspecies"),
    "Carex": ("Carex", None, "genus"),
    "Oenothera  biennis  L. ": ("Oenothera biennis", "L.", "species"),
    "Hosta spec.": ("Hosta spec.", None, "species"),
}


def test_names_as_the_field_writes_them_import(node: Node, tmp_path: Path) -> None:
    folder = tmp_path / "names"
    folder.mkdir()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["taxonID", "scientificName", "taxonRank", "kingdom"])
    writer.writerows([f"n{i}", name, rank, "Plantae"]
                     for i, (name, (_, _, rank)) in enumerate(NAMES.items()))
    (folder / "taxon.csv").write_text(out.getvalue(), "utf-8")
    result = run("import", "dwc", str(folder), "--project", str(node.root),
                 "--dataset", "urn:test:names")
    assert result.exit_code == 0, result.output
    assert f"{len(NAMES)} added" in result.output
    # a name kept whole is reported on its own row, and the others go on
    assert f"{folder}/taxon.csv:2: scientificName: 'Salix alba x S. fragilis': not a name " \
           f"the parser reads (a hybrid formula?)" in result.output
    records = {r.fields["taxonID"]: r.fields for r in load(Project(node.root)).records}
    for i, (name, (canonical, authorship, _)) in enumerate(NAMES.items()):
        fields = records[f"n{i}"]
        assert fields["scientificName"] == canonical, name
        assert fields.get("scientificNameAuthorship") == authorship, name


def test_kingdoms_left_out_are_counted_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    rows = [("p1", "Impatiens glandulifera Royle", "Plantae"), ("p2", "Carex", ""),
            ("a1", "Vespa velutina Lepeletier, 1836", "Animalia"),
            ("a2", "Procambarus clarkii (Girard, 1852)", "Animalia"),
            ("f1", "Batrachochytrium salamandrivorans Martel et al., 2013", "Fungi")]
    (folder / "taxon.csv").write_text("taxonID,scientificName,kingdom\n" + "".join(
        f"{a},\"{b}\",{c}\n" for a, b, c in rows), "utf-8")
    project = Project(Node(tmp_path / "node").root)
    plan = plan_import(project, read_checklist(folder), dataset="urn:x")
    assert {p.taxon_id for p in plan.added} == {"p1", "p2"}  # no kingdom given: kept
    assert f"{folder}: kingdom: left out 2 Animalia, 1 Fungi taxa: this node's species are " \
           f"plants" in plan.notes


# ---- any standard terms, in any order ------------------------------------------------------

VALUES = {"kingdom": "Plantae", "family": "Rosaceae", "taxonRank": "species",
          "scientificName": "Rosa canina L.", "taxonID": "t1", "datasetID": "urn:x",
          "isMarine": "false", "isFreshwater": "false", "isTerrestrial": "true"}
TERMS = sorted(standard_terms() - {"taxonID", "scientificName"})


@settings(max_examples=examples(25, 200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(st.sampled_from(TERMS), unique=True, max_size=12), data=st.data())
def test_any_header_of_standard_terms_imports(tmp_path: Path, extra: list[str],
                                              data: st.DataObject) -> None:
    """A core of any standard terms in any order imports; the terms without a field are
    named in one line, and none is a problem."""
    header = data.draw(st.permutations(["taxonID", "scientificName", *extra]))
    folder = checklist_core(tmp_path / "hyp", header,
                            [[VALUES.get(name, f"a {name}") for name in header]])
    shutil.rmtree(tmp_path / "hypnode", ignore_errors=True)
    project = Project(Node(tmp_path / "hypnode").root)
    try:
        checklist = read_checklist(folder)
        plan = plan_import(project, checklist, dataset="urn:x")
    except ContentError as error:
        raise AssertionError(f"{header}: {error.problems}") from None
    assert len(plan.added) == 1
    unkept = [n for n in header if n not in CORE_TERMS and n != "modified"]
    assert len(checklist.notes) == (1 if unkept else 0)
    if unkept:
        assert all(name in checklist.notes[0] for name in unkept)
