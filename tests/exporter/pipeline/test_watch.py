"""`fednode export --watch`: the content watch wakes for every change the export reads and
for nothing else, with inotify and without it; the command exports again after each edit,
reports a broken file and keeps the last good export, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from builders import REPO, Node, record_text, species
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.pipeline import watch
from exporter.pipeline.watch import ContentWatch

NOTHING = 0.3  # seconds a wait is given to show that nothing woke it


@pytest.fixture(params=[True, False], ids=["inotify", "polling"])
def content(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Node, ContentWatch]]:
    monkeypatch.setattr(watch, "POLL", 0.05)
    node = Node(tmp_path / "node")
    node.write("species", "knotweed", species("Fallopia japonica"))
    with ContentWatch(node.root / "content", inotify=request.param) as changes:
        yield node, changes


def test_the_watch_wakes_for_each_change_the_export_reads(
        content: tuple[Node, ContentWatch]) -> None:
    node, changes = content
    folder = node.root / "content"
    assert not changes.wait(NOTHING)
    record = node.write("species", "knotweed", species("Reynoutria japonica"))
    assert changes.wait(5) and not changes.wait(NOTHING)  # once, then settled
    node.write("species", "balsam", species("Impatiens glandulifera"))  # a new file
    assert changes.wait(5)
    (folder / "node.toml").write_text((folder / "node.toml").read_text() + "\n")
    assert changes.wait(5)
    node.write("treatments", "pulling", {"id": "x"})  # in a collection folder made now
    assert changes.wait(5)
    (folder / "treatments" / "pulling.md").write_text("edited")  # and watched since
    assert changes.wait(5)
    record.rename(record.with_name("renamed.md"))
    assert changes.wait(5)
    record.with_name("renamed.md").unlink()
    assert changes.wait(5) and not changes.wait(NOTHING)


def test_the_watch_names_the_files_saved_where_it_can(
        content: tuple[Node, ContentWatch]) -> None:
    """What a delta export (`exporter.pipeline.delta`) starts from: the files saved, or None where
    anything else changed (node.toml, a folder) or polling cannot say."""
    node, changes = content
    folder = node.root / "content"
    assert changes.taken() is None  # the first export: whole
    record = node.write("species", "knotweed", species("Reynoutria japonica"))
    other = node.write("species", "balsam", species("Impatiens glandulifera"))
    assert changes.wait(5)
    polling = changes._inotify is None
    assert changes.taken() == (None if polling else {record, other})
    assert changes.taken() == set()  # taken: nothing since
    (folder / "node.toml").write_text((folder / "node.toml").read_text() + "\n")
    record.write_text(record.read_text() + "\n")
    assert changes.wait(5) and changes.taken() is None
    if not polling:  # (polling looks at files: an empty folder changes nothing it reads)
        (folder / "team").mkdir()
        assert changes.wait(5) and changes.taken() is None


def test_names_the_export_skips_wake_nothing(content: tuple[Node, ContentWatch]) -> None:
    node, changes = content
    folder = node.root / "content"
    (folder / "species" / ".knotweed.md.swp").write_text("an editor's swap file")
    (folder / "species" / "knotweed.md~").write_text("its backup")
    (folder / "species" / "#knotweed.md#").write_text("its autosave")
    (folder / "species" / "_draft.md").write_text("kept out by its name")
    (folder / "_notes").mkdir()
    assert not changes.wait(NOTHING)
    (folder / "_notes" / "todo.md").write_text("not read by the export")
    assert not changes.wait(NOTHING)


def test_an_edit_to_a_linked_file_wakes_the_watch(content: tuple[Node, ContentWatch],
                                                 tmp_path: Path) -> None:
    """A content file may be a symbolic link to a file kept elsewhere (a folder shared with
    colleagues). The export reads the file it points to, and an edit there wakes the watch:
    the site does not keep the old text until something else changes."""
    node, changes = content
    folder = node.root / "content"
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "balsam.md"
    target.write_text(record_text(species("Impatiens glandulifera")))
    link = folder / "species" / "balsam.md"
    link.symlink_to(target)
    assert changes.wait(5)  # the link itself, made in a watched folder
    polling = changes._inotify is None
    changes.taken()
    target.write_text(target.read_text() + "\nMore text.\n")  # edited in place
    assert changes.wait(5) and not changes.wait(NOTHING)
    assert changes.taken() == (None if polling else {link})
    saved = shared / ".balsam.md.tmp"  # saved as many editors save: a new file renamed over
    saved.write_text(target.read_text() + "Even more.\n")
    saved.replace(target)
    assert changes.wait(5)
    assert changes.taken() == (None if polling else {link})
    (shared / "unrelated.md").write_text("not linked: read by nothing")
    assert not changes.wait(NOTHING)
    # node.toml kept elsewhere too: its edits make the next export whole
    toml = shared / "node.toml"
    (folder / "node.toml").replace(toml)
    (folder / "node.toml").symlink_to(toml)
    assert changes.wait(5)
    changes.taken()
    toml.write_text(toml.read_text() + "\n")
    assert changes.wait(5) and changes.taken() is None
    # the link pointed elsewhere: the new target is watched, the old one no longer
    other = shared / "other.md"
    other.write_text(record_text(species("Heracleum mantegazzianum")))
    link.unlink()
    link.symlink_to(other)
    assert changes.wait(5)
    changes.taken()
    target.write_text("no longer linked")
    assert not changes.wait(NOTHING)
    other.write_text(other.read_text() + "\nEdited.\n")
    assert changes.wait(5) and changes.taken() == (None if polling else {link})


NAMES = ["a.md", "b.csv", ".a.md.swp", "_draft.md", "a.md~", "#a.md#"]
READ = {"a.md", "b.csv"}  # the others are skipped by the export: swap, set aside, backup
OPERATIONS = st.lists(st.tuples(st.sampled_from(["write", "delete", "rename"]),
                                st.sampled_from(["species", "treatments"]),
                                st.sampled_from(NAMES), st.sampled_from(NAMES)), max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(operations=OPERATIONS, inotify=st.booleans())
def test_the_watch_wakes_exactly_for_names_the_export_reads(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        operations: list[tuple[str, str, str, str]], inotify: bool) -> None:
    """Any sequence of writes, deletions and renames: a wait says "changed" exactly when one
    of them touched a name the export reads (a rename counts for both its names)."""
    monkeypatch.setattr(watch, "POLL", 0.01)
    monkeypatch.setattr(watch, "QUIET", 0.01)
    content = tmp_path_factory.mktemp("watched") / "content"
    for folder in ("species", "treatments"):
        (content / folder).mkdir(parents=True)
    with ContentWatch(content, inotify=inotify) as changes:
        for n, (operation, folder, name, other) in enumerate(operations):
            path, touched = content / folder / name, [name]
            if operation == "write":
                path.write_text("x" * n)  # a new size each time: polling sees sizes and times
            elif operation == "delete" and path.exists():
                path.unlink()
            elif operation == "rename" and path.exists() and name != other:
                path.rename(content / folder / other)
                touched.append(other)
            else:
                continue
            read = any(t in READ for t in touched)
            assert changes.wait(5 if read else 0.05) is read, (operation, touched)


def test_content_moved_away_and_back_is_watched_again(
        content: tuple[Node, ContentWatch]) -> None:
    node, changes = content
    folder, away = node.root / "content", node.root / "away"
    folder.rename(away)
    assert changes.wait(5)
    (away / "species" / "knotweed.md").write_text("edited where the export no longer reads")
    assert not changes.wait(NOTHING)
    away.rename(folder)
    assert changes.wait(5)
    node.write("species", "knotweed", species("Fallopia japonica", family="Polygonaceae"))
    assert changes.wait(5) and not changes.wait(NOTHING)


# Run as root of a user namespace of its own, where the limit on inotify watches is two
# (the limit is the namespace's: the machine's is untouched). content/ holds three folders.
LIMITED = """
import sys, time
from pathlib import Path
Path("/proc/sys/user/max_inotify_watches").write_text("2")
from exporter.pipeline import watch
watch.POLL = 0.05
content = Path(sys.argv[1])
with watch.ContentWatch(content) as changes:
    assert not changes._folders, "watched more folders than the limit allows"
    assert not changes.wait(0.3), "woke for nothing"
    (content / "species" / "knotweed.md").write_text("edited")
    assert changes.wait(5), "missed an edit"
    assert not changes.wait(0.3), "woke twice"
    (content / "treatments").mkdir()
    (content / "treatments" / "pulling.md").write_text("new")
    assert changes.wait(5), "missed a new folder's file"
    assert not changes.wait(0.3), "woke twice"
print("ok")
"""


def test_a_watch_over_the_limit_of_watches_polls_and_misses_nothing(tmp_path: Path) -> None:
    """Where the folders cannot all be watched (the limit on inotify watches reached), the
    watch looks at the files every POLL seconds instead: every edit wakes it, once, and
    nothing else does, from the start."""
    probe = ["unshare", "-U", "-r", "sh", "-c", "echo 2 > /proc/sys/user/max_inotify_watches"]
    if subprocess.run(probe, capture_output=True).returncode:
        pytest.skip("no user namespace of its own here (unshare -U), or its limit on inotify "
                    "watches cannot be set: the limit cannot be reached apart")
    node = Node(tmp_path / "node")
    node.write("species", "knotweed", species("Fallopia japonica"))
    node.write("germination", "trial", {"id": "x"})
    result = subprocess.run(
        ["unshare", "-U", "-r", sys.executable, "-c", LIMITED, str(node.root / "content")],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


# `python -m cli.main`, with Ctrl-C's handler set as an interactive shell leaves it: a suite
# started in the background by a shell without job control (`./scripts/test &`) runs with
# SIGINT ignored, which its processes inherit, and the command never saw the Ctrl-C (its
# /proc status said so: SigIgn held SIGINT).
INTERACTIVE = ("import runpy, signal, sys; signal.signal(signal.SIGINT, "
               "signal.default_int_handler); sys.argv[0] = 'fednode'; "
               "runpy.run_module('cli.main', run_name='__main__', alter_sys=True)")


class Watching:
    """`fednode export --watch` as a real process, its output read line by line."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", INTERACTIVE, "export", "--watch", "--project", str(root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)))
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        for name, stream in (("out", self.process.stdout), ("err", self.process.stderr)):
            threading.Thread(target=self._read, args=(name, stream), daemon=True).start()

    def _read(self, name: str, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put((name, line.rstrip("\n")))

    def until(self, text: str, seconds: float = 60) -> list[tuple[str, str]]:
        """Every line up to the first that holds `text`."""
        seen: list[tuple[str, str]] = []
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} in {seen}") from None
            seen.append(line)
            if text in line[1]:
                return seen

    def stop(self) -> None:
        """Ctrl-C: the process ends, with status 0. Where it does not within 30 s, the
        failure says what its signal masks and threads were, and what it printed."""
        self.process.send_signal(signal.SIGINT)
        try:
            assert self.process.wait(30) == 0
            return
        except subprocess.TimeoutExpired:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
            threads = []
            for task in Path(f"/proc/{self.process.pid}/task").iterdir():
                stat = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                threads.append(f"{(task / 'comm').read_text().strip()} {stat} "
                               f"{(task / 'wchan').read_text()}")
            self.process.kill()
            self.process.wait(10)
        printed = []
        while not self.lines.empty():
            printed.append(self.lines.get())
        masks = [line for line in status.splitlines()
                 if line.startswith(("State", "Threads", "Sig"))]
        raise AssertionError(f"--watch did not stop on Ctrl-C within 30 s: {masks}; "
                             f"threads {threads}; printed {printed}")


@pytest.mark.slow
def test_export_watch_exports_each_edit_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    fields = species("Fallopia japonica")
    node.write("species", "knotweed", fields)
    watching = Watching(node.root)
    try:
        first = watching.until("exported species 1")
        assert ("err", f"watching {node.root / 'content'} (Ctrl-C stops)") in first
        served = next((node.root / "site_out").rglob(f"{fields['id']}.json"))
        node.write("species", "knotweed", {**fields, "vernacularName": "Japanese knotweed"})
        assert "1 ledger events" in watching.until("exported species 1")[-1][1]
        assert "Japanese knotweed" in served.read_text()

        node.path("species", "knotweed").write_text("+++\nid = \n+++\n")  # broken TOML
        said = watching.until("waiting for a fix")
        assert any(line.startswith("content/species/knotweed.md:2") for _, line in said), said
        assert "Japanese knotweed" in served.read_text()  # the last good export stays

        node.write("species", "knotweed", {**fields, "vernacularName": "Asian knotweed"})
        watching.until("exported species 1")
        assert "Asian knotweed" in served.read_text()
        assert watching.process.poll() is None
    finally:
        watching.stop()
    assert ("err", "stopped") in watching.until("stopped")


@pytest.mark.slow
def test_export_watch_exports_an_edit_to_a_linked_file(tmp_path: Path) -> None:
    """The record file is a link to a file kept elsewhere: saving that file exports it."""
    node = Node(tmp_path / "node")
    fields = species("Fallopia japonica")
    kept = tmp_path / "shared" / "knotweed.md"
    kept.parent.mkdir()
    kept.write_text(record_text(fields))
    node.path("species", "knotweed").parent.mkdir(parents=True, exist_ok=True)
    node.path("species", "knotweed").symlink_to(kept)
    watching = Watching(node.root)
    try:
        watching.until("exported species 1")
        served = next((node.root / "site_out").rglob(f"{fields['id']}.json"))
        kept.write_text(record_text({**fields, "vernacularName": "Japanese knotweed"}))
        watching.until("exported species 1", seconds=30)
        assert "Japanese knotweed" in served.read_text()
    finally:
        watching.stop()
