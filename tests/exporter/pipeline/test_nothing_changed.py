"""What the last export read, kept on disk (`exporter.pipeline.inputs`): an export with
nothing changed opens no content file and writes nothing; any change to what an export
reads (a file's bytes, its name, a file added or removed, node.toml, the ledger, the base
URL, the signing key, the library's PDFs) or to the build published makes it run, and what
it publishes is what a fresh export of the same content and ledger publishes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from builders import REPO, Node, engine_file, make_pdf, record_text, species, team
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.contract.builds import identity
from exporter.contract.signing import KEY_ENV, KEY_FILE, ROTATIONS_FILE
from exporter.pipeline import inputs
from exporter.pipeline.delta import Session
from exporter.pipeline.export import export
from exporter.pipeline.report import BuildReport, TreeStats
from exporter.project.config import Project

# Every file opened in this process while `opened` collects: an audit hook (PEP 578) sees
# each open() and os.open(), whichever module makes it.
_OPENED: list[list[str]] = []
_HOOKED = threading.Lock()


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED[-1].append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@contextmanager
def opened() -> Iterator[list[str]]:
    with _HOOKED:
        _OPENED.append([])
        try:
            yield _OPENED[-1]
        finally:
            _OPENED.pop()


def small_node(root: Path) -> Node:
    node = Node(root)
    node.write("species", "hogweed", species("Heracleum mantegazzianum"), "Tall.")
    node.write("species", "balsam", species("Impatiens glandulifera"), "Pink.")
    node.write("team", "ada", team("Ada Lovelace"))
    (root / "content" / "germination").mkdir()
    (root / "content" / "germination" / "trials.csv").write_text(
        "id,title,species,program,setting,seedsSown,seedsGerminated,source\n"
        "5b0a8f4e-8f35-4a8e-9a3e-0d6c3a1b2c01,Trial one,Heracleum mantegazzianum,"
        "Seed bank,nursery,40,12,Log\n", "utf-8")
    return node


def settle(root: Path) -> None:
    """Wait until every file of the node changed longer ago than a look hashes files
    changed within (`inputs.RACY`): from then on a look reads no file whose version held."""
    newest = max(p.stat().st_ctime_ns for p in root.rglob("*"))
    time.sleep(max(0.0, (newest + inputs.RACY - time.time_ns()) / 1e9) + 0.01)


def site(root: Path) -> dict[str, bytes]:
    out = root / "site_out"
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not engine_file(str(p.relative_to(out)))}


def fresh_export_of(root: Path, elsewhere: Path) -> dict[str, bytes]:
    """What a fresh export of the same content, ledger and key publishes."""
    shutil.copytree(root / "content", elsewhere / "content")
    shutil.copy(root / "ledger.jsonl", elsewhere / "ledger.jsonl")
    (elsewhere / ".fednode").mkdir()
    shutil.copy(root / ".fednode" / KEY_FILE, elsewhere / ".fednode" / KEY_FILE)
    report = export(Project(elsewhere), frozen=True)
    assert not report.unchanged
    return site(elsewhere)


def test_the_record_names_what_signing_names() -> None:
    assert f".fednode/{KEY_FILE}" in inputs.WRITTEN
    assert {ROTATIONS_FILE, "ledger.jsonl"} < set(inputs.OTHERS)
    assert inputs.KEY_ENV == KEY_ENV


def test_nothing_changed_opens_no_content_file_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "node"
    small_node(root)
    first = export(Project(root))
    assert not first.unchanged and first.events == 4
    settle(root)  # (the files the export just read are hashed once more, being so recent)
    assert export(Project(root)).unchanged
    published = site(root)
    current = identity(root / ".fednode" / "bundle")
    with opened() as files:
        again = export(Project(root))
    assert again.unchanged, again.summary()
    assert again.summary().startswith("nothing changed since the last export: exported "
                                      "species 2, resources 0, treatments 0, germination 1, "
                                      "team 1;")
    assert again.site == TreeStats(0, first.site.written + first.site.reused, 0)  # type: ignore[union-attr]
    content = str(root / "content")
    assert [f for f in files if f.startswith(content)] == []
    assert site(root) == published
    assert identity(root / ".fednode" / "bundle") == current


def test_the_command_says_nothing_changed_with_the_last_exports_warnings(
        tmp_path: Path) -> None:
    root = tmp_path / "node"
    node = small_node(root)
    node.write("species", "new", species("Reynoutria japonica"),
               "Describe Reynoutria japonica here, in Markdown.")  # `fednode new`'s
    command = [sys.executable, "-m", "cli.main", "export", "--project", str(root)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing changed since the last export: exported species 3")
    warned = [line for line in first.stderr.splitlines() if line.startswith("Warning:")]
    assert warned and [line for line in again.stderr.splitlines()
                       if line.startswith("Warning:")] == warned


def _edit_body(root: Path) -> None:
    path = root / "content" / "species" / "hogweed.md"
    path.write_text(path.read_text("utf-8") + "Umbels.\n", "utf-8")


def _same_size_same_time(root: Path) -> None:
    """An edit that keeps the file's size and time (`touch -r`): its change time moves."""
    path = root / "content" / "species" / "hogweed.md"
    info = path.stat()
    path.write_text(path.read_text("utf-8").replace("Tall.", "Huge."), "utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size


def _add(root: Path) -> None:
    (root / "content" / "species" / "knotweed.md").write_text(
        record_text(species("Reynoutria japonica"), "Canes."), "utf-8")


def _remove(root: Path) -> None:
    (root / "content" / "species" / "balsam.md").unlink()


def _rename(root: Path) -> None:
    folder = root / "content" / "species"
    (folder / "balsam.md").rename(folder / "himalayan-balsam.md")


def _csv_row(root: Path) -> None:
    path = root / "content" / "germination" / "trials.csv"
    path.write_text(path.read_text("utf-8").replace(",40,12", ",40,13"), "utf-8")


def _node_toml(root: Path) -> None:
    path = root / "content" / "node.toml"
    path.write_text(path.read_text("utf-8").replace("Test Node", "Test Node Two", 1), "utf-8")


def _ledger_emptied(root: Path) -> None:
    (root / "ledger.jsonl").write_bytes(b"")


def _site_out_gone(root: Path) -> None:
    (root / "site_out").unlink()


def _record_damaged(root: Path) -> None:
    (root / ".fednode" / inputs.FILE).write_bytes(b"\x00not a record")


def _library(root: Path) -> None:
    make_pdf(root / "content" / "library" / "guide.pdf", ["Cut the umbels before seed."])
    (root / "content" / "library" / "guide.md").write_text(record_text({
        "id": "0b7f3a52-3c2d-4f0e-8d53-5f4c1e2d3a40", "title": "Guide", "kind": "document",
        "summary": "How to cut giant hogweed umbels before they set seed.",
        "format": "application/pdf"}), "utf-8")


EDITS = {"a body": _edit_body, "a same-size edit keeping the time": _same_size_same_time,
         "a record added": _add, "a record removed": _remove, "a file renamed": _rename,
         "a CSV row": _csv_row, "node.toml": _node_toml, "the ledger emptied": _ledger_emptied,
         "site_out/ removed": _site_out_gone, "the record damaged": _record_damaged,
         "a library PDF added": _library}


@pytest.mark.parametrize("edit", [
    edit if edit in ("a body", "a same-size edit keeping the time") else
    pytest.param(edit, marks=pytest.mark.slow) for edit in EDITS])
def test_each_change_exports_what_a_fresh_export_would(tmp_path: Path, edit: str) -> None:
    root = tmp_path / "node"
    small_node(root)
    export(Project(root))
    EDITS[edit](root)
    report = export(Project(root))
    assert not report.unchanged, edit
    assert site(root) == fresh_export_of(root, tmp_path / "fresh"), edit
    assert export(Project(root)).unchanged, edit  # and recorded again


def test_options_that_decide_the_outputs_make_it_run(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "node"
    small_node(root)
    export(Project(root))
    assert not export(Project(root), base_url="https://elsewhere.example.org").unchanged
    assert export(Project(root), base_url="https://elsewhere.example.org").unchanged
    assert not export(Project(root), folder_limit=5000).unchanged
    key = (root / ".fednode" / KEY_FILE).read_text("utf-8")
    monkeypatch.setenv(KEY_ENV, key)
    assert not export(Project(root)).unchanged  # (the same key, given another way)
    assert export(Project(root)).unchanged


def test_the_same_bytes_under_a_new_version_are_unchanged_and_not_read_again(
        tmp_path: Path) -> None:
    root = tmp_path / "node"
    small_node(root)
    export(Project(root))
    path = root / "content" / "species" / "hogweed.md"
    settle(root)
    path.write_bytes(path.read_bytes())  # a checkout writing the same bytes
    (root / "ledger.jsonl").write_bytes((root / "ledger.jsonl").read_bytes())
    with opened() as files:
        assert export(Project(root)).unchanged
    assert str(path) in files and str(root / "ledger.jsonl") in files
    assert "content/species/balsam.md" not in files
    settle(root)
    with opened() as files:  # recent enough at the last look to hide an edit: read again
        assert export(Project(root)).unchanged
    assert [f for f in files if f.startswith(str(root / "content"))] == [str(path)]
    with opened() as files:  # older than that at the last look: its version is enough
        assert export(Project(root)).unchanged
    assert not [f for f in files if f.startswith(str(root / "content"))]


def test_another_build_published_since_makes_it_run(tmp_path: Path) -> None:
    """A `--watch` export, or one killed after it switched: the record names another build."""
    root = tmp_path / "node"
    small_node(root)
    export(Project(root))
    last = inputs.Last.read(Project(root))
    assert last is not None
    other = dataclasses.replace(last, build=("/elsewhere/bundle", None))
    other.write(Project(root))
    assert not export(Project(root)).unchanged
    assert export(Project(root)).unchanged


def test_after_edits_brought_up_to_date_under_watch_nothing_changed_for_the_command(
        tmp_path: Path) -> None:
    """A `--watch` export brought up to date from the last one renews its record (the files
    it read, the ledger, the build it published): `fednode export` then has nothing to do."""
    root = tmp_path / "node"
    small_node(root)
    session = Session(Project(root))
    session.export(None)
    session.prepare()
    _edit_body(root)
    session.export({root / "content" / "species" / "hogweed.md"})
    assert (session.deltas, session.failures) == (1, [])
    assert export(Project(root)).unchanged
    assert site(root) == fresh_export_of(root, tmp_path / "fresh")
    _csv_row(root)  # and an edit the watch did not see is still exported
    assert not export(Project(root)).unchanged
    assert site(root) == fresh_export_of(root, tmp_path / "fresh again")


# The decision alone, on sequences of file operations: `unchanged` says so exactly when
# every file the export reads holds the bytes it held when the record was written; a pipe
# put in a file's place is never opened for reading.

OPERATIONS = st.sampled_from(["write", "same", "touch", "add", "remove", "rename", "folder",
                              "hide", "pipe", "remember"])


def _fake_build(root: Path) -> None:
    """A published build's links, as `switch` lays them out (its files do not matter here)."""
    build = root / ".fednode" / "builds" / "a"
    (build / "bundle").mkdir(parents=True)
    (build / "site").mkdir()
    (build / "bundle" / "meta.json").write_text("{}")
    os.symlink("builds/a", root / ".fednode" / "current")
    os.symlink("current/bundle", root / ".fednode" / "bundle")
    os.symlink(".fednode/current/site", root / "site_out")


def _bytes_of(root: Path) -> dict[str, bytes | None]:
    found = {}
    for path in sorted((root / "content").rglob("*")):
        rel = path.relative_to(root)
        if any(not inputs.is_read(part) for part in rel.parts[1:]):
            continue
        found[str(rel)] = path.read_bytes() if path.is_file() else \
            None if path.is_dir() else b"\x00a pipe"
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(OPERATIONS, st.integers(0, 3)), max_size=12))
def test_unchanged_exactly_when_the_bytes_are_the_records(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]) -> None:
    root = tmp_path_factory.mktemp("decide")
    folder = root / "content" / "species"
    folder.mkdir(parents=True)
    for n in range(3):
        (folder / f"r{n}.md").write_text(f"record {n}\n")
    _fake_build(root)
    project = Project(root)
    report = BuildReport(site=TreeStats(1, 0, 0))

    def remember() -> dict[str, bytes | None]:
        inputs.remember(project, inputs.look(project, inputs.Last.read(project),
                                             base_url=None, folder_limit=10), report, [])
        return _bytes_of(root)

    recorded = remember()
    for operation, n in steps:
        path = folder / f"r{n}.md"
        if operation in ("write", "same", "add", "touch") and path.exists() and \
                not path.is_file():
            path.unlink()  # (a pipe is replaced: writing one would wait for a reader)
        if operation == "remember":
            recorded = remember()
        elif operation == "write":
            path.write_text(f"edited {n}\n")
        elif operation == "same" and path.exists():
            path.write_bytes(path.read_bytes())
        elif operation == "touch" and path.exists():
            os.utime(path)
        elif operation == "add":
            path.write_text(f"record {n}\n")
        elif operation == "remove":
            path.unlink(missing_ok=True)
        elif operation == "rename" and path.exists():
            path.rename(folder / f"r{(n + 1) % 4}.md")
        elif operation == "folder":
            (root / "content" / f"extra{n}").mkdir(exist_ok=True)
        elif operation == "hide" and path.exists():
            path.rename(folder / f"_r{n}.md")  # set aside: not read
        elif operation == "pipe":  # where a file was: never read (an export would wait)
            path.unlink(missing_ok=True)
            os.mkfifo(path)
        last = inputs.Last.read(project)
        looked = inputs.look(project, last, base_url=None, folder_limit=10)
        said = inputs.unchanged(project, last, looked)
        assert (said is not None) == (_bytes_of(root) == recorded), (steps, operation, n)
