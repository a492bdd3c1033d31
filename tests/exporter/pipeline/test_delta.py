"""Exports brought up to date (`exporter.pipeline.delta`, under `fednode export --watch`) give every
file a whole export gives, byte for byte, after any run of edits; and only the edits that
leave every other output as it was are brought up to date."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from builders import (
    REPO,
    THOROUGH,
    copy_sample,
    examples,
    exported_sample,
    multiply,
    same_key,
    search_ids,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.pipeline.build import build
from exporter.pipeline.delta import Session
from exporter.pipeline.export import export
from exporter.project.config import Project
from exporter.shared.errors import ContentError
from exporter.site import downloads

Edit = Callable[[Path, random.Random], set[Path]]


def markdown(root: Path, pick: random.Random, restricted: bool | None = None) -> Path:
    files = [p for p in sorted((root / "content").glob("*/*.md"))
             if p.parent.name != "library"
             and (restricted is None or ("\naccess = " in p.read_text()) == restricted)]
    return pick.choice(files)


def body(root: Path, pick: random.Random) -> set[Path]:
    """A paragraph added to a record's body: the usual edit."""
    path = markdown(root, pick)
    path.write_text(path.read_text() + f"\nA paragraph added {pick.random()}.\n")
    return {path}


def retitle(root: Path, pick: random.Random) -> set[Path]:
    """A record's title changed: brought up to date when no other page shows it."""
    path = markdown(root, pick)
    path.write_text(re.sub(r'^((?:title|name|scientificName) = "[^"]*)"', r'\1 again"',
                           path.read_text(), count=1, flags=re.M))
    return {path}


def vernacular(root: Path, pick: random.Random) -> set[Path]:
    """A species' vernacular name changed: the species list shows it beside the name."""
    files = [p for p in sorted((root / "content" / "species").glob("*.md"))
             if re.search(r'^vernacularName = "', p.read_text(), re.M)]
    path = pick.choice(files)
    path.write_text(re.sub(r'^(vernacularName = "[^"]*)"', r'\1 too"', path.read_text(),
                           count=1, flags=re.M))
    return {path}


def csv_cell(root: Path, pick: random.Random) -> set[Path]:
    """One germination row's program renamed: one record of a file of many."""
    path = root / "content" / "germination" / "results.csv"
    lines = path.read_text().split("\n")
    row = pick.randrange(1, len([line for line in lines if line]))
    lines[row] = lines[row].replace("Meuse Valley seed bank", "Meuse seed bank", 1)
    path.write_text("\n".join(lines))
    return {path}


def germinated(root: Path, pick: random.Random) -> set[Path]:
    """One germination row's count of seeds germinated changed: a number its species' page
    charts (`exporter.site.charts`), not only its own page."""
    path = root / "content" / "germination" / "results.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    column = rows[0].index("seedsGerminated")
    row = rows[pick.randrange(1, len(rows))]
    row[column] = str(int(row[column]) // 2 + pick.randrange(1, 9))
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    return {path}


def access(root: Path, pick: random.Random) -> set[Path]:
    """A public record restricted: a whole export (lists and counts change)."""
    path = markdown(root, pick, restricted=False)
    head, rest = path.read_text().split("\n", 1)
    path.write_text(f'{head}\naccess = "partners"\n{rest}')
    return {path}


def touch(root: Path, pick: random.Random) -> set[Path]:
    """Saved as it was."""
    path = markdown(root, pick)
    path.write_text(path.read_text())
    return {path}


def node_toml(root: Path, pick: random.Random) -> set[Path]:
    path = root / "content" / "node.toml"
    path.write_text(re.sub(r'^description = "', 'description = "Again: ', path.read_text(),
                           count=1, flags=re.M))
    return {path}


def some(root: Path, pick: random.Random, restricted: bool | None = None) -> Path | None:
    """A record's Markdown file (`markdown`), or None where there is none left."""
    try:
        return markdown(root, pick, restricted)
    except IndexError:
        return None


def restricted_body(root: Path, pick: random.Random) -> set[Path]:
    """A paragraph added to a restricted record: nothing public changes."""
    path = some(root, pick, restricted=True)
    if path is None:
        return set()
    path.write_text(path.read_text() + f"\nA paragraph for partners {pick.random()}.\n")
    return {path}


def unrestrict(root: Path, pick: random.Random) -> set[Path]:
    """A restricted record made public: a whole export (lists and counts change)."""
    path = some(root, pick, restricted=True)
    if path is None:
        return set()
    path.write_text(re.sub(r'^access = "[^"]*"\n', "", path.read_text(), count=1, flags=re.M))
    return {path}


def fresh_id(pick: random.Random) -> str:
    return str(uuid.UUID(int=pick.getrandbits(128), version=4))


def added(root: Path, pick: random.Random) -> set[Path]:
    """A record added to a collection: a copy of one of its records with an id and a title
    of its own (a whole export)."""
    source = some(root, pick)
    if source is None:
        return set()
    tag = pick.randrange(10**6)
    text = re.sub(r'^id = "[^"]*"', f'id = "{fresh_id(pick)}"', source.read_text(), count=1,
                  flags=re.M)
    path = source.with_name(f"added-{tag}.md")
    path.write_text(re.sub(r'^((?:title|name|scientificName) = "[^"]*)"', rf'\1 {tag}"', text,
                           count=1, flags=re.M))
    return {path}


def removed(root: Path, pick: random.Random) -> set[Path]:
    """A record's file removed (a whole export)."""
    path = some(root, pick)
    if path is None:
        return set()
    path.unlink()
    return {path}


def species_names(root: Path) -> list[str]:
    """The species' scientific names, each as its TOML string (quoted), in files' order."""
    return [m for p in sorted((root / "content" / "species").glob("*.md"))
            for m in re.findall(r'^scientificName = ("[^"]*")', p.read_text(), flags=re.M)]


def relink(root: Path, pick: random.Random) -> set[Path]:
    """A treatment or a resource naming one more species, or one fewer: it links to other
    species pages (a whole export)."""
    files = [p for folder in ("treatments", "resources")
             for p in sorted((root / "content" / folder).glob("*.md"))]
    names = species_names(root)
    if not files or not names:
        return set()
    path = pick.choice(files)
    text = path.read_text()
    listed = re.search(r"^(?:targetSpecies|relatedSpecies) = \[(.*)\]$", text, flags=re.M)
    if listed is None:
        return set()
    items = [item for item in listed[1].split(", ") if item]
    items = items[:-1] if len(items) > 1 and pick.random() < 0.5 else [*items,
                                                                       pick.choice(names)]
    path.write_text(text[:listed.start(1)] + ", ".join(items) + text[listed.end(1):])
    return {path}


def csv_lines(root: Path) -> tuple[Path, list[str]]:
    path = root / "content" / "germination" / "results.csv"
    return path, path.read_text().split("\n")


def csv_added(root: Path, pick: random.Random) -> set[Path]:
    """A germination row added: a copy of another with an id of its own (a whole export)."""
    path, lines = csv_lines(root)
    rows = [n for n, line in enumerate(lines) if line][1:]
    if rows:
        line = lines[pick.choice(rows)]
        lines.insert(pick.randrange(1, len(lines)),
                     fresh_id(pick) + line[line.index(","):])
        path.write_text("\n".join(lines))
    return {path}


def csv_removed(root: Path, pick: random.Random) -> set[Path]:
    """A germination row removed (a whole export)."""
    path, lines = csv_lines(root)
    rows = [n for n, line in enumerate(lines) if line][1:]
    if len(rows) > 1:
        del lines[pick.choice(rows)]
        path.write_text("\n".join(lines))
    return {path}


def csv_access(root: Path, pick: random.Random) -> set[Path]:
    """A germination row restricted, or a restricted one made public (a whole export)."""
    path, lines = csv_lines(root)
    rows = [n for n, line in enumerate(lines) if line][1:]
    if rows:
        n = pick.choice(rows)
        cells = next(csv.reader([lines[n]]))
        at = lines[0].split(",").index("access")
        cells[at] = "" if cells[at] else "partners"
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(cells)
        lines[n] = out.getvalue()
        path.write_text("\n".join(lines))
    return {path}


def csv_moved(root: Path, pick: random.Random) -> set[Path]:
    """A germination row moved to another line of its file: the same records, each on a
    line of its own (a whole export: the file holds its ids in another order)."""
    path, lines = csv_lines(root)
    rows = [n for n, line in enumerate(lines) if line][1:]
    if len(rows) > 1:
        line = lines.pop(pick.choice(rows))
        lines.insert(pick.randrange(1, len(lines)), line)
        path.write_text("\n".join(lines))
    return {path}


def moved(root: Path, pick: random.Random) -> set[Path]:
    """A resource made a treatment: its file removed, and one of the same id, title, summary
    and body written in the treatments' folder (a whole export: it leaves one collection's
    lists and enters another's)."""
    files = sorted((root / "content" / "resources").glob("*.md"))
    names = species_names(root)
    if not files or not names:
        return set()
    source = pick.choice(files)
    text = source.read_text()
    head, body = text.split("+++\n", 2)[1:]
    kept = [line for line in head.split("\n")
            if line.startswith(("id = ", "title = ", "summary = ", "access = "))]
    target = root / "content" / "treatments" / source.name
    if target.exists():
        return set()
    target.write_text("+++\n" + "\n".join([*kept, 'method = "mechanical"',
                                            f"targetSpecies = [{pick.choice(names)}]"])
                      + "\n+++\n" + body)
    source.unlink()
    return {source, target}


def base_url(root: Path, pick: random.Random) -> set[Path]:
    """node.toml's base_url changed (to another host, or back): every address the site
    writes changes (a whole export)."""
    path = root / "content" / "node.toml"
    text = path.read_text()
    url = re.search(r'^base_url = "([^"]*)"', text, flags=re.M)
    assert url is not None
    other = "https://nodes.example.net" if "127.0.0.1" in url[1] else \
        "http://127.0.0.1:8000"
    path.write_text(text[:url.start(1)] + other + text[url.end(1):])
    return {path}


def command(root: Path, pick: random.Random) -> set[Path]:
    """`fednode export` run between two saves, as a publisher may beside the watch: it says
    nothing changed if the last published export's record of inputs still holds
    (`exporter.pipeline.inputs`), else exports whole; the watch's next export starts from
    whatever it published."""
    report = export(Project(root), now=NOW)
    assert report.made is None
    return set()


# What one save of the property test holds: edits a delta export brings up to date (where
# nothing else shows what they change: most saves), or any edits, after which the export may
# be whole and the saves after it brought up to date from it.
IN_PLACE: list[Edit] = [body, restricted_body, retitle, vernacular, csv_cell, germinated,
                         touch]
ANY: list[Edit] = [*IN_PLACE, access, unrestrict, added, removed, relink, csv_added,
                   csv_removed, csv_access, csv_moved, moved, node_toml, base_url, command]
SAVE = st.one_of(st.lists(st.sampled_from(IN_PLACE), min_size=1, max_size=3),
                 st.lists(st.sampled_from(IN_PLACE), min_size=1, max_size=3),
                 st.lists(st.sampled_from(ANY), min_size=1, max_size=2))


def engine(relative: str) -> bool:
    """A file tantivy names at random (in the search index and the library's passages):
    builds of equal content differ there, and are compared by what they answer instead."""
    parts = relative.split("/")
    return parts[0] in ("search", "passages") and len(parts) == 3 and \
        parts[2] not in ("state.json", "vectors.npy", "senses.npy", "passages.json")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not engine(str(p.relative_to(root)))}


QUERIES = (("knotweed", ("public",)), ("paragraph added", ("public",)),
           ("again", ("public", "partners", "sensitive")))


def assert_whole(root: Path, elsewhere: Path, queries: tuple[tuple[str, tuple[str, ...]], ...]
                 = QUERIES) -> None:
    """Every file of the node's export is what a whole export of its content and ledger
    gives, and its search finds the same records (`search_ids`: the first 50, so queries
    that rank cloned records alike at the 50th are left out: tantivy breaks ties by its own
    documents' order)."""
    shutil.rmtree(elsewhere, ignore_errors=True)
    shutil.copytree(root / "content", elsewhere / "content")
    shutil.copy(root / "ledger.jsonl", elsewhere / "ledger.jsonl")
    same_key(root, elsewhere)
    build(Project(elsewhere))
    for name in ("site_out", ".fednode/bundle"):
        ours, theirs = tree(root / name), tree(elsewhere / name)
        assert ours.keys() == theirs.keys()
        assert [path for path in ours if ours[path] != theirs[path]] == []
    bundle = ".fednode/bundle"
    for words, groups in queries:
        assert search_ids(root / bundle, words, groups) == \
            search_ids(elsewhere / bundle, words, groups)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample exported twice (the second export leaves both builds), to copy from."""
    root = exported_sample(tmp_path_factory.mktemp("delta") / "node")
    build(Project(root))
    build(Project(root))
    return root


def watched(sample: Path, folder: Path, now: datetime | None = None) -> tuple[Path, Session]:
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(sample, folder, symlinks=True)
    session = Session(Project(folder), now=now)
    session.export(None)
    return folder, session


# The time the property test's exports stamp their events with: each gets the second after
# the ledger's last event (`Ledger.reconcile`), so that no export waits for a second of its
# own, and a run of edits gives the same ledger every time.
NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def reference(sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node exported whole again after each edit the property test brings up to date."""
    root = tmp_path_factory.mktemp("reference") / "node"
    shutil.copytree(sample, root, symlinks=True)
    return root


def assert_as_whole(root: Path, reference: Path) -> None:
    """Both trees of the node's export are what a whole export of its content and ledger
    gives (in `reference`, a node exported before: its content brought to the node's, each
    changed file a new one, as an editor saves it)."""
    ours = {p.relative_to(root): p.read_bytes()
            for p in (root / "content").rglob("*") if p.is_file()}
    for path in (reference / "content").rglob("*"):
        if path.is_file() and path.relative_to(reference) not in ours:
            path.unlink()
    for relative, data in ours.items():
        path = reference / relative
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_name(path.name + ".new").write_bytes(data)
            os.replace(path.with_name(path.name + ".new"), path)
    shutil.copy(root / "ledger.jsonl", reference / "ledger.jsonl")
    same_key(root, reference)
    build(Project(reference), now=NOW)
    for name in ("site_out", ".fednode/bundle"):
        exported, whole = tree(root / name), tree(reference / name)
        assert exported.keys() == whole.keys()
        assert [path for path in exported if exported[path] != whole[path]] == []


@pytest.mark.slow
@settings(max_examples=examples(12, 150), deadline=None, derandomize=not THOROUGH,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(SAVE, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_any_run_of_edits_exports_what_a_whole_export_does(
        sample: Path, reference: Path, tmp_path: Path, saves: list[list[Edit]],
        pick: random.Random) -> None:
    """Each save is one or more edits of records of any collection (changed, retitled,
    added, removed, restricted, made public, naming other species, moved to another
    collection or another line of a CSV file; node.toml, its base_url; a `fednode export`
    run meanwhile), exported together: after each save brought up to date, both
    trees are what a whole export of the same content and ledger gives, and after the last,
    what one in a fresh folder gives."""
    root, session = watched(sample, tmp_path / "node", now=NOW)
    for n, edits in enumerate(saves, start=1):
        deltas = session.deltas
        session.export(set().union(*(edit(root, pick) for edit in edits)))
        if session.deltas > deltas and n < len(saves):
            assert_as_whole(root, reference)
    assert session.failures == []
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_the_usual_edits_are_brought_up_to_date(sample: Path, tmp_path: Path) -> None:
    root, session = watched(sample, tmp_path / "node")
    pick = random.Random(7)
    restricted = markdown(root, pick, restricted=True)
    restricted.write_text(restricted.read_text() + "\nPartners only.\n")
    report = session.export({restricted})
    # nothing public changed: not a byte of the site (a restricted edit is absent there)
    assert report.site is not None and report.site.written == 0 and report.events == 1
    for edit in (body, csv_cell):
        session.export(edit(root, pick))
    report = session.export(touch(root, pick))
    assert report.events == 0 and report.site is not None and report.site.written == 0 and \
        report.site.reused > 200  # as a whole export says it
    team = root / "content" / "team" / "wouter-haesaerts.md"
    session.export(retitle(root, random.Random(1)) | {team})  # several files at once
    species = sorted((root / "content" / "species").glob("*.md"))[:2]  # on one list page
    for path in species:
        path.write_text(path.read_text() + "\nA paragraph of both.\n")
    session.export(set(species) | csv_cell(root, pick))
    assert (session.whole, session.deltas, session.failures) == (1, 6, [])
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_a_germination_count_edited_is_charted_on_its_species_page(sample: Path,
                                                                    tmp_path: Path) -> None:
    root, session = watched(sample, tmp_path / "node")
    for seed in range(3):
        session.export(germinated(root, random.Random(seed)))
    assert (session.whole, session.deltas, session.failures) == (1, 3, [])
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
@pytest.mark.parametrize("edit", [access, node_toml, moved, base_url, csv_moved])
def test_other_edits_are_exported_whole(sample: Path, tmp_path: Path, edit: Edit) -> None:
    root, session = watched(sample, tmp_path / "node")
    session.export(edit(root, random.Random(3)))
    assert (session.whole, session.deltas) == (2, 0)
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_a_new_file_or_a_changed_id_is_exported_whole(sample: Path, tmp_path: Path) -> None:
    root, session = watched(sample, tmp_path / "node")
    source = markdown(root, random.Random(5), restricted=False)
    added = source.with_name("copy-of-it.md")
    added.write_text(re.sub(r'^id = "[^"]*"', 'id = "00000000-0000-4000-8000-0000000000aa"',
                            source.read_text(), count=1, flags=re.M))
    session.export({added})
    source.write_text(re.sub(r'^id = "[^"]*"', 'id = "00000000-0000-4000-8000-0000000000bb"',
                             source.read_text(), count=1, flags=re.M))
    session.export({source})
    assert (session.whole, session.deltas) == (3, 0)
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_a_broken_file_stops_every_export_until_it_is_fixed(sample: Path,
                                                            tmp_path: Path) -> None:
    root, session = watched(sample, tmp_path / "node")
    pick = random.Random(11)
    broken = markdown(root, pick, restricted=False)
    text = broken.read_text()
    broken.write_text(text.replace("\nid = ", '\nnoSuchField = "x"\nid = ', 1))
    site = tree(root / "site_out")
    with pytest.raises(ContentError) as raised:
        session.export({broken})
    assert [p.path for p in raised.value.problems] == [str(broken.relative_to(root))]
    other = body(root, pick) - {broken}
    with pytest.raises(ContentError):  # another file saved: the broken one still stops it
        session.export(other)
    assert tree(root / "site_out") == site  # the last good export, untouched
    broken.write_text(text)
    session.export({broken})
    assert session.deltas == 1
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_an_export_by_another_command_meanwhile_makes_the_next_whole(
        sample: Path, tmp_path: Path) -> None:
    root, session = watched(sample, tmp_path / "node")
    pick = random.Random(13)
    session.export(body(root, pick))
    build(Project(root))  # `fednode export` run by hand beside the watch
    session.export(body(root, pick))
    assert (session.whole, session.deltas) == (2, 1)
    assert_whole(root, tmp_path / "elsewhere")


KILLED = """
import os, sys
from pathlib import Path
from exporter.project.config import Project
from exporter.pipeline.delta import Session
from exporter.pipeline.export import export
root, at = Path(sys.argv[1]), sys.argv[2]
session = Session(Project(root))
session.export(None)
path = next(p for p in sorted((root / "content" / "species").glob("*.md")))
path.write_text(path.read_text() + "\\nKilled mid-way.\\n")
os.environ["FEDNODE_EXPORT_KILL_AT"] = at
session.export({path})
"""


@pytest.mark.slow
@pytest.mark.parametrize("at", ["ledger", "site", "bundle", "recorded", "flipped"])
def test_a_delta_export_killed_anywhere_leaves_a_whole_build(sample: Path, tmp_path: Path,
                                                             at: str) -> None:
    root = tmp_path / "node"
    shutil.copytree(sample, root, symlinks=True)
    before = tree(root / "site_out")
    killed = subprocess.run([sys.executable, "-c", KILLED, str(root), at], cwd=REPO)
    assert killed.returncode == -signal.SIGKILL
    after = tree(root / "site_out")
    assert after == before or at == "flipped"  # the last good build, or the new one whole
    build(Project(root))  # the next export, after a kill, is whole and right
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_two_records_edited_at_once_that_trade_places_are_exported_whole(
        sample: Path, tmp_path: Path) -> None:
    """Each keeps its place beside its neighbours as they were, but not beside each other
    as they are now: the lists must be made again."""
    root, session = watched(sample, tmp_path / "node")
    listed = json.loads((root / "site_out" / "api" / "species" / "index.json").read_text())[
        "items"]
    texts = "\n".join(p.read_text() for p in (root / "content").glob("*/*.*")
                      if p.parent.name != "species" and p.suffix in (".md", ".csv"))
    first, second = next((a, b) for a, b in zip(listed, listed[1:], strict=False)
                         if a["title"] not in texts and b["title"] not in texts)
    files = {item["id"]: next(p for p in (root / "content" / "species").glob("*.md")
                              if item["id"] in p.read_text()) for item in (first, second)}
    for item, suffix in ((first, "c"), (second, "b")):  # first < second's new < first's new
        path = files[item["id"]]
        path.write_text(path.read_text().replace(f'"{item["title"]}"',
                                                 f'"{first["title"]} {suffix}"', 1))
    session.export(set(files.values()))
    assert (session.whole, session.deltas, session.failures) == (2, 0, [])
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_a_delta_export_makes_only_the_download_parts_it_changed(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts one delta export made are found by the next (they were made again each
    time: after a few edits, many parts at every edit)."""
    root = tmp_path / "node"
    shutil.copytree(sample, root, symlinks=True)
    multiply(root / "content", 400)  # some hundred species: several parts a download
    build(Project(root))
    build(Project(root))
    session = Session(Project(root))
    session.export(None)
    made: list[int] = []
    real = downloads._made
    monkeypatch.setattr(downloads, "_made", lambda make, records: (
        made.append(len(records)), real(make, records))[1])
    species = sorted((root / "content" / "species").glob("synthetic-*.md"))
    for path in (species[0], species[-1], species[0]):
        path.write_text(path.read_text() + "\nOne more paragraph: zyxwvut.\n")
        made.clear()
        session.export({path})
        assert len(made) == 2  # its own part of the CSV and of the archive, nothing else
    assert (session.deltas, session.failures) == (3, [])
    assert_whole(root, tmp_path / "elsewhere", (("zyxwvut", ("public",)),))


@pytest.mark.slow
def test_after_a_whole_export_the_watch_prepares_what_the_first_edit_needs(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A base_url changed and changed back: the whole export takes the downloads as the
    build before last had them (none of their parts made), and the other build differs from
    it at every file. `prepare` (what `--watch` does before it waits) makes the parts and
    links the other build, so that the first edits make their own parts only and find no
    other file to bring up to date; and what they export is what a whole export gives."""
    root = tmp_path / "node"
    shutil.copytree(sample, root, symlinks=True)
    multiply(root / "content", 400)
    build(Project(root))
    toml = root / "content" / "node.toml"
    text = toml.read_text()
    toml.write_text(text.replace('base_url = "http://127.0.0.1:8000"',
                                 'base_url = "https://elsewhere.example.org"'))
    build(Project(root))
    toml.write_text(text)
    session = Session(Project(root))
    session.export(None)
    assert session.state is not None and len(session.state.stale["site"]) > 1000
    made: list[int] = []
    real = downloads._made
    monkeypatch.setattr(downloads, "_made", lambda make, records: (
        made.append(len(records)), real(make, records))[1])
    session.prepare()
    assert session.state.stale == {"site": set(), "bundle": set()}
    species = sorted((root / "content" / "species").glob("synthetic-*.md"))
    for path in (species[0], species[-1]):
        path.write_text(path.read_text() + "\nOne more paragraph: zyxwvut.\n")
        made.clear()
        session.export({path})
        assert len(made) == 2  # its own part of the CSV and of the archive, nothing else
    assert (session.whole, session.deltas, session.failures) == (1, 2, [])
    assert_whole(root, tmp_path / "elsewhere", (("zyxwvut", ("public",)),))


@pytest.mark.slow
def test_the_first_edit_after_a_nodes_very_first_export_is_brought_up_to_date(
        tmp_path: Path) -> None:
    """A node's very first export has no build before it to bring up to date: `prepare`
    makes one beside it (every file linked), and the edits after it are exported as edits,
    the first one too (it was exported whole), giving what a whole export gives."""
    root = copy_sample(tmp_path / "node")
    session = Session(Project(root))
    session.export(None)
    session.prepare()
    assert session.state is not None
    assert session.state.stale == {"site": set(), "bundle": set()}
    builds = root / ".fednode" / "builds"
    assert sorted(p.name for p in builds.iterdir() if p.is_dir()) == ["a", "b"]
    pick = random.Random(5)
    for _ in range(2):
        session.export(body(root, pick))
    assert (session.whole, session.deltas, session.failures) == (1, 2, [])
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_a_ledger_written_by_something_else_makes_the_next_export_whole(
        sample: Path, tmp_path: Path) -> None:
    """A `git pull` replacing ledger.jsonl: the export reads it again rather than append to
    the file as it remembers it."""
    root, session = watched(sample, tmp_path / "node")
    pick = random.Random(17)
    session.export(body(root, pick))
    ledger = root / "ledger.jsonl"
    pulled = ledger.with_name("pulled")
    shutil.copy(ledger, pulled)
    pulled.replace(ledger)  # the same events, another file
    session.export(body(root, pick))
    assert (session.whole, session.deltas, session.failures) == (2, 1, [])
    assert_whole(root, tmp_path / "elsewhere")


@pytest.mark.slow
def test_an_edit_to_a_linked_record_file_is_brought_up_to_date(sample: Path,
                                                              tmp_path: Path) -> None:
    """A record file that is a link to a file kept elsewhere (what `--watch` names when
    that file is saved): read through the link, as a whole export reads it."""
    shutil.rmtree(tmp_path / "node", ignore_errors=True)
    shutil.copytree(sample, tmp_path / "node", symlinks=True)
    root = tmp_path / "node"
    record = sorted((root / "content" / "species").glob("*.md"))[0]
    kept = tmp_path / "shared" / record.name
    kept.parent.mkdir()
    record.replace(kept)
    record.symlink_to(kept)
    session = Session(Project(root))
    session.export(None)
    kept.write_text(kept.read_text() + "\nOne more paragraph: qwertzuiop.\n")
    session.export({record})
    assert (session.whole, session.deltas, session.failures) == (1, 1, [])
    assert_whole(root, tmp_path / "elsewhere", (("qwertzuiop", ("public",)),))


def test_a_record_file_replaced_by_a_link_is_exported_whole(sample: Path,
                                                           tmp_path: Path) -> None:
    """What a whole export makes of a link (here: two files with the same records), not
    what the file it points to holds."""
    root, session = watched(sample, tmp_path / "node")
    first, second = sorted((root / "content" / "species").glob("*.md"))[:2]
    first.unlink()
    first.symlink_to(second.name)
    with pytest.raises(ContentError) as refused:
        session.export({first})
    assert [p.message.split(":")[0] for p in refused.value.problems] == ["duplicate"]
    assert session.deltas == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.lists(st.lists(st.integers(0, 39), max_size=80), max_size=6))
def test_the_change_list_brought_up_to_date_is_the_one_made_whole(
        records: int, batches: list[list[int]]) -> None:
    """`ChangeList.add` cuts the changed records' lines out of the list before and appends their
    new ones (the whole list joined again only past 64 of them): after any batches of
    edits, a record edited twice in one batch among them, the list is the one
    `public_changes` makes from every event."""
    from exporter.contract.feed import Event, public_changes
    from exporter.pipeline.delta import ChangeList
    base = "https://node.example.org"
    ids = [f"{n:08d}-0000-4000-8000-000000000000" for n in range(records)]
    events = [Event(n + 1, "2026-11-26T10:00:00Z", "create", "species", record_id, f"{n:064x}",
                    "public") for n, record_id in enumerate(ids)]
    feed = ChangeList.of(events, public_changes(events, base))
    for second, batch in enumerate(batches, start=1):
        fresh = [Event(len(events) + n + 1, f"2026-11-26T10:00:{second:02d}Z", "update",
                       "species", ids[k % records], f"{len(events) + n:064x}", "public")
                 for n, k in enumerate(batch)]
        events.extend(fresh)
        feed.add(fresh, base)
        assert feed.changes == public_changes(events, base)
