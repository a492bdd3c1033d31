"""Importing checklists as GBIF publishers write them: excerpts of five published
checklists (tests/data/dwc/SOURCES.md) of different publishers and kingdoms, as CSV folders
and as archives the way the IPT writes them; names as the field writes them; controlled
values as checklists write them; and headers of any standard terms in any order."""

from __future__ import annotations

import csv
import io
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from builders import REPO, Node, checklist_core, examples
from click.testing import CliRunner
from dwca.read import DwCAReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.darwincore.checklist import ChecklistRefused
from exporter.darwincore.encoding import codec_for
from exporter.darwincore.importer import plan_import, record_id
from exporter.darwincore.source import read_checklist
from exporter.darwincore.terms import CORE_TERMS, EXTENSIONS, LINKS, short, standard_terms
from exporter.darwincore.values import controlled
from exporter.pipeline.build import BuildReport, load
from exporter.project.config import Project
from exporter.shared.errors import ContentError

DATA = REPO / "tests" / "data" / "dwc"
RINSE = DATA / "rinse-pathways-checklist"
FISHES = DATA / "alien-fishes-checklist"
MOLLUSCS = DATA / "alien-mollusca-checklist"
GRIIS = DATA / "griis-macedonia"
CONGO = DATA / "alien-flora-congo-checklist"


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
    _imports_again_as_a_no_op(source, node, 20)
    export(node.root)
    _round_trips(node.root / "site_out" / "download" / "species-dwca.zip", Tables(RINSE))


@dataclass(frozen=True)
class Tables:
    """A published checklist's tables as its publisher wrote them, read here without the
    importer: `taxon` (the core) and the extensions, each joined to the core on `key`."""
    folder: Path
    suffix: str = ".txt"
    delimiter: str = "\t"
    key: str = "taxonID"

    def rows(self, kind: str) -> list[dict[str, str]]:
        path = self.folder / f"{kind}{self.suffix}"
        return table(path, self.delimiter) if path.exists() else []


def _round_trips(archive: Path, tables: Tables, read_as: dict[str, str] | None = None,
                 named: dict[str, str] | None = None) -> None:
    """Every plant of the source, its kept core terms verbatim and its extension rows (the
    kept terms) as sets, is in the archive python-dwca-reader reads; `read_as` names the
    values published as their vocabulary's (`SPECIES`: `species`). `named` gives the
    synonyms whose accepted taxon has no row (by taxonID): each is in the archive as a row
    of its accepted name (the taxonID given), whose extension rows are theirs."""
    read_as = read_as or {}
    named = named or {}

    def published(value: str) -> str:  # (cells are read without the spaces around them)
        return read_as.get(value.strip(), value.strip())

    core = tables.rows("taxon")
    ids = {row[tables.key]: row["taxonID"] for row in core}
    source = {row["taxonID"]: row for row in core if row.get("kingdom") in ("Plantae", "")
              and row["taxonID"] not in named}
    for row in core:
        if row["taxonID"] in named:
            source[named[row["taxonID"]]] = {"scientificName": row["acceptedNameUsage"],
                                             "taxonomicStatus": "accepted"}
    rows: dict[str, dict[str, set[tuple[tuple[str, str], ...]]]] = {}
    for kind, extension in EXTENSIONS.items():
        for row in tables.rows(kind):
            terms = {k: (v.lower() if kind == "speciesprofile" else published(v))
                     for k, v in row.items() if v.strip() and k in extension.terms}
            taxon = named.get(ids[row[tables.key]], ids[row[tables.key]])
            if terms and taxon in source:
                rows.setdefault(taxon, {}).setdefault(kind, set()).add(
                    tuple(sorted(terms.items())))
    seen = set()
    with DwCAReader(str(archive)) as reader:
        for core_row in reader:
            terms = {short(k): v for k, v in core_row.data.items() if v}
            seen.add(terms["taxonID"])
            expected = {k: published(v) for k, v in source[terms["taxonID"]].items()
                        if v.strip() and k in CORE_TERMS}
            assert {k: terms.get(k) for k in expected} == expected
            got: dict[str, set[tuple[tuple[str, str], ...]]] = {}
            for row in core_row.extensions:
                kind = row.rowtype.rsplit("/", 1)[-1].lower()
                got.setdefault(kind, set()).add(tuple(sorted(
                    (short(k), v) for k, v in row.data.items() if v)))
            assert got == rows.get(terms["taxonID"], {}), terms["taxonID"]
    assert seen == set(source)


def _imports_again_as_a_no_op(source: Path, node: Node, count: int, *args: str,
                              code: int = 0) -> None:
    before = stamps(node.root / "content")
    again = run("import", "dwc", str(source), "--project", str(node.root), *args)
    assert again.exit_code == code, again.output
    assert f"0 added, 0 updated, {count} unchanged" in again.output
    assert stamps(node.root / "content") == before


def test_a_griis_archive_imports_its_plants_in_the_vocabularies_and_round_trips(
        node: Node, tmp_path: Path, export: Callable[..., BuildReport]) -> None:
    """The GRIIS checklist of North Macedonia, the IPT's own archive: plants, animals, a
    fungus and a chromist in one core, ranks in capitals (`SPECIES`, `GENUS`), `Alien` for
    introduced, an EML without a DOI (the dataset is named on the command line)."""
    source = zipped(GRIIS, tmp_path)
    dataset = "https://cloud.gbif.org/griis/resource?r=griis-macedonia"
    result = run("import", "dwc", str(source), "--project", str(node.root),
                 "--dataset", dataset)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"{source}: kingdom: left out 8 Animalia, 1 Fungi, 1 Chromista taxa: this " \
           f"node's species are plants" in lines
    assert f"{source}!taxon.txt: taxonRank: read 'SPECIES' as 'species' (17 rows), " \
           f"'GENUS' as 'genus' (1 row), 'SUBSPECIES' as 'subspecies' (1 row), 'VARIETY' as " \
           f"'variety' (1 row)" in lines
    assert f"{source}!distribution.txt: establishmentMeans: read 'Alien' as 'introduced' " \
           f"(20 rows)" in lines
    assert f"{source}!speciesprofile.txt:1: left out the columns isInvasive, habitat " \
           f"(standard terms the species schema has no field for)" in lines
    assert any(line.startswith(f"{source}: source: Global Register of Introduced and "
                               f"Invasive Species - North Macedonia; licence: http://"
                               f"creativecommons.org/licenses/by/4.0/legalcode; cite as: "
                               f"Trajanovski S") for line in lines)
    # Its five plant synonyms name accepted taxa it has no row for, in acceptedNameUsage:
    # each is a record of its accepted name, with the synonym's distributions.
    assert f"{source}: acceptedNameUsage: 5 synonyms name 5 accepted taxa that have no row: " \
           f"each imported as a record of the accepted name, with its synonyms' names and " \
           f"extension rows" in lines
    assert "20 added, 0 updated, 0 unchanged" in result.output
    assert result.output.endswith("; 5 synonyms attached; left out 0 of 90 rows\n")
    records = {r.fields.get("verbatimScientificName", r.fields["scientificName"]): r.fields
               for r in load(Project(node.root)).records}
    assert len(records) == 20 and {f["datasetID"] for f in records.values()} == {dataset}
    knotweed = records["Reynoutria japonica Houtt."]
    assert {k: knotweed.get(k) for k in ("id", "taxonID", "scientificName",
                                         "scientificNameAuthorship", "synonyms", "taxonRank",
                                         "taxonomicStatus", "family")} == {
        "id": record_id(dataset, "Reynoutria japonica"), "taxonID": "Reynoutria japonica",
        "scientificName": "Reynoutria japonica", "scientificNameAuthorship": "Houtt.",
        "synonyms": ["Fallopia japonica (Houtt.) Ronse Decraene"], "taxonRank": "species",
        "taxonomicStatus": "accepted", "family": "Polygonaceae"}
    assert knotweed["distributions"] == [{"locationID": "North Macedonia", "countryCode": "MK",
                                          "occurrenceStatus": "Present",
                                          "establishmentMeans": "introduced"}]
    # a subspecies' synonym of a species: the record has the accepted name's rank
    assert records["Erigeron strigosus Muhl. ex Willd."]["taxonRank"] == "species"
    assert all(f["category"] == "introduced" and f["distributions"][0]["establishmentMeans"]
               == "introduced" for f in records.values())
    for verbatim, name, authorship, rank in [
            ("Chenopodium L.", "Chenopodium", "L.", "genus")]:
        fields = records[verbatim]
        assert (fields["scientificName"], fields.get("scientificNameAuthorship"),
                fields["taxonRank"]) == (name, authorship, rank), verbatim
    # the core has no licence, the EML's is every record's
    assert {f["license"] for f in records.values()} == {
        "http://creativecommons.org/licenses/by/4.0/legalcode"}
    _imports_again_as_a_no_op(source, node, 20, "--dataset", dataset)
    export(node.root)
    _round_trips(node.root / "site_out" / "download" / "species-dwca.zip",
                 Tables(GRIIS, key="id"), {"SPECIES": "species", "GENUS": "genus",
                                           "SUBSPECIES": "subspecies", "VARIETY": "variety",
                                           "Alien": "introduced"},
                 {"42922": "Erigeron bonariensis", "42931": "Erigeron strigosus",
                  "42932": "Erigeron annuus", "42919": "Euphorbia maculata",
                  "42933": "Reynoutria japonica"})


def test_a_flora_of_the_publishers_csv_files_imports_and_round_trips(
        node: Node, export: Callable[..., BuildReport]) -> None:
    """The alien flora of D.R. Congo (Meise Botanic Garden) as the publisher's CSV files:
    plants only, an empty datasetID column (the DOI is given on the command line), names
    with no-break spaces, a double space, `×`, `ex` and `sp.`, years as `1937 / 1987`."""
    refused = run("import", "dwc", str(CONGO), "--project", str(node.root))
    assert refused.exit_code == 1
    assert f"{CONGO}/taxon.csv:2: datasetID: missing: give the checklist a datasetID column " \
           f"or pass --dataset (a DOI or URL naming it)" in refused.output
    doi = "https://doi.org/10.15468/p8edza"
    result = run("import", "dwc", str(CONGO), "--project", str(node.root), "--dataset", doi)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:-1] == [
        f"{CONGO}/taxon.csv:16: scientificName: 'Taraxacum sp.': an informal name: kept whole"]
    assert "21 added, 0 updated, 0 unchanged" in result.output
    records = {r.fields["taxonID"].rsplit(":", 1)[1]: r.fields
               for r in load(Project(node.root)).records}
    assert len(records) == 21 and {f["datasetID"] for f in records.values()} == {doi}
    for key, verbatim, name, authorship, category in [
            ("027344bba93f018fea22698c3950c9cc", "Scoparia dulcis\xa0L.", "Scoparia dulcis",
             "L.", "invasive"),
            ("1f1b7100ee8484d91ba196ad7adb6776", "Abelmoschus\xa0manihot\xa0(L.) Medik.",
             "Abelmoschus manihot", "(L.) Medik.", "introduced"),
            ("11fb62656eec96dea2237c845f41d5a9", "Imperata cylindrica (L.)  P.Beauv.",
             "Imperata cylindrica", "(L.) P.Beauv.", "invasive"),
            ("03d1c2d437fcf3b85a4b2bfe7d5354a9", "Crocosmia × crocosmiiflora\xa0(Lemoine) N.E.Br.",
             "Crocosmia × crocosmiiflora", "(Lemoine) N.E.Br.", "introduced"),
            ("1afa7eac94ad54d9ca9ab135fcffba38", "Hibiscus acetosella Welw. ex Hiern.",
             "Hibiscus acetosella", "Welw. ex Hiern.", None)]:
        fields = records[key]
        assert (fields["verbatimScientificName"], fields["scientificName"],
                fields["scientificNameAuthorship"], fields.get("category")) == \
            (verbatim, name, authorship, category), verbatim
    assert records["1a4d1a68dca66c060cf543c57ae3286d"]["distributions"] == [{
        "locality": "the Democratic Republic of the Congo", "countryCode": "CD",
        "establishmentMeans": "introduced", "degreeOfEstablishment": "casual"}]
    _imports_again_as_a_no_op(CONGO, node, 21, "--dataset", doi)
    export(node.root)
    _round_trips(node.root / "site_out" / "download" / "species-dwca.zip",
                 Tables(CONGO, ".csv", ","))


@pytest.mark.parametrize("folder", [FISHES, MOLLUSCS], ids=["csv-folder", "archive"])
def test_an_animal_checklist_is_refused_in_one_line(node: Node, tmp_path: Path,
                                                    folder: Path) -> None:
    source = folder if folder == FISHES else zipped(folder, tmp_path)
    result = run("import", "dwc", str(source), "--project", str(node.root))
    assert result.exit_code == 1
    *notes, refusal, error = result.output.splitlines()
    # What was read comes first (the columns left out, the archive's source), then the one
    # line of the refusal
    assert notes and all(": left out" in note or ": source: " in note for note in notes)
    assert refusal == (
        f"{source}: kingdom: no plants: the checklist's 15 Animalia taxa are not Plantae, "
        f"and this node's species collection holds plants only; nothing was imported")
    assert error == "Error: 1 problem in 1 file; nothing was written"
    assert not (node.root / "content" / "species").exists()


def test_a_refused_checklist_says_what_was_read_as_well(node: Node, tmp_path: Path) -> None:
    """A checklist refused, for its kingdoms or a problem, carries the notes of what was
    read before (its provenance, the columns and extensions left out), for the user to read
    beside the problems: a column left out as no term is often why a term is missing."""
    project = Project(node.root)
    with pytest.raises(ChecklistRefused) as fishes:
        plan_import(project, read_checklist(FISHES))
    assert [p.field for p in fishes.value.problems] == ["kingdom"]
    assert fishes.value.notes == [f"{FISHES}/taxon.csv:1: left out the columns accessRights, "
                                  f"institutionCode (standard terms the species schema has no "
                                  f"field for)"]
    source = zipped(MOLLUSCS, tmp_path)
    with pytest.raises(ChecklistRefused) as molluscs:
        plan_import(project, read_checklist(source))
    assert [note.split(": ", 2)[1] for note in molluscs.value.notes] == [
        "source", "left out", "left out the columns accessRights, institutionCode (standard "
                              "terms the species schema has no field for)"]
    assert molluscs.value.notes[0].startswith(f"{source}: source: Registry of introduced "
                                              f"terrestrial molluscs in Belgium; licence:")
    assert molluscs.value.notes[1] == f"{source}!references.txt: left out: the Literature " \
                                      f"References extension; the species schema has no " \
                                      f"field for it"
    folder = checklist_core(tmp_path / "typo", ["taxonId", "scientificName", "datasetID"],
                            [["t1", "Rosa canina L.", "urn:x"]])
    with pytest.raises(ChecklistRefused) as typo:
        read_checklist(folder)
    assert [str(p) for p in typo.value.problems] == [
        f"{folder}/taxon.csv:2: taxonID: missing: every row needs one"]
    assert typo.value.notes == [f"{folder}/taxon.csv:1: left out the column 'taxonId' (not "
                                f"Darwin Core or Dublin Core terms: check the spelling)"]
    (folder / "taxon.csv").write_text("taxonID,scientificName,colour\nt1,Rosa canina L.,red\n")
    with pytest.raises(ChecklistRefused) as missing:  # no datasetID: a problem of the plan
        plan_import(project, read_checklist(folder))
    assert [p.field for p in missing.value.problems] == ["datasetID"]
    assert missing.value.notes == [f"{folder}/taxon.csv:1: left out the column 'colour' (not "
                                   f"Darwin Core or Dublin Core terms: check the spelling)"]


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


# ---- controlled values as checklists write them -------------------------------------------

@pytest.mark.parametrize("term, written, read", [
    ("taxonRank", "SPECIES", "species"), ("taxonRank", "Variety", "variety"),
    ("taxonRank", "CULTIVAR_GROUP", "cultivarGroup"), ("taxonRank", "subsp.", "subspecies"),
    ("taxonRank", "var.", "variety"), ("taxonRank", "f.", "form"),
    ("taxonRank", "NONE", "NONE"), ("taxonRank", "species", "species"),
    ("establishmentMeans", "Alien", "introduced"), ("establishmentMeans", "exotic",
                                                    "introduced"),
    ("establishmentMeans", "Non-native", "introduced"),
    ("establishmentMeans", "Cryptogenic|Uncertain", "uncertain"),
    ("establishmentMeans", "Cryptogenic/uncertain", "uncertain"),
    ("establishmentMeans", "Native|Alien", "Native|Alien"),  # two values: not one
    ("establishmentMeans", "Present", "Present"), ("establishmentMeans", "casual", "casual"),
    ("degreeOfEstablishment", "Widespread invasive", "widespreadInvasive"),
    ("degreeOfEstablishment", "CASUAL", "casual"), ("occurrenceStatus", "Present", "Present"),
])
def test_controlled_values_as_checklists_write_them(term: str, written: str, read: str
                                                    ) -> None:
    assert controlled(term, written) == read


def test_a_value_that_names_no_one_value_is_a_problem_of_its_row(tmp_path: Path) -> None:
    folder = checklist_core(tmp_path / "values", ["taxonID", "scientificName", "taxonRank"],
                            [["t1", "Rosa canina L.", "SPECIES"],
                             ["t2", "Acer negundo L.", "species"]])
    (folder / "distribution.csv").write_text(
        "taxonID,locality,establishmentMeans\nt1,Belgium,Native|Alien\nt2,Belgium,Alien\n"
        "t2,France,exotic\n", "utf-8")
    project = Project(Node(tmp_path / "node").root)
    with pytest.raises(ChecklistRefused) as refused:
        plan_import(project, read_checklist(folder), dataset="urn:x", strict=True)
    assert [str(p) for p in refused.value.problems] == [
        f"{folder}/distribution.csv:2: establishmentMeans: 'Native|Alien' is not one of "
        f"native, nativeReintroduced, introduced, introducedAssistedColonisation, vagrant, "
        f"uncertain"]
    assert refused.value.notes == [
        f"{folder}/taxon.csv: taxonRank: read 'SPECIES' as 'species' (1 row)",
        f"{folder}/distribution.csv: establishmentMeans: read 'Alien' as 'introduced' (1 row),"
        f" 'exotic' as 'introduced' (1 row)"]


# ---- any standard terms, in any order ------------------------------------------------------

VALUES = {"kingdom": "Plantae", "family": "Rosaceae", "taxonRank": "species",
          "scientificName": "Rosa canina L.", "taxonID": "t1", "datasetID": "urn:x",
          "isMarine": "false", "isFreshwater": "false", "isTerrestrial": "true",
          "acceptedNameUsageID": "t1", "acceptedNameUsage": "Rosa canina L."}
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
    unkept = [n for n in header if n not in CORE_TERMS and n not in LINKS
              and n != "modified"]
    assert len(checklist.notes) == (1 if unkept else 0)
    if unkept:
        assert all(name in checklist.notes[0] for name in unkept)
