"""A killed export publishes nothing. With a sidecar serving throughout, an export is killed
with SIGKILL at every named step and at random points inside its writes, in scenarios that
open a restricted record, restrict a public one and edit public text. After each kill,
everything served (API, pages, PDFs, downloads, sync files, manifest, search, the keyed
changes feed) is what the last published build served, byte for byte, and nothing else was
served meanwhile; the next export publishes what the content says, and a kill after the
switch leaves nothing for the next export to add to the ledger."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from builders import (
    REPO,
    ServerThread,
    app_for,
    examples,
    exported_sample,
    http_get,
    issue_key,
)

from exporter.contract.builds import hold_exclusive
from exporter.contract.page_urls import collection_href, record_href
from exporter.contract.wire import COLLECTIONS

COMMAND = [sys.executable, "-m", "cli.main", "export", "--project"]
ENV = dict(os.environ, PYTHONPATH=str(REPO))
STEPS = ("ledger", "site", "indexed", "bundle", "recorded", "flipped", "appended")
AFTER_SWITCH = {"flipped", "appended"}
ARNICA = "63a0c899-c7e8-4941-87d6-f7a814e184b9"  # a sensitive species of the sample
KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"  # a public one
PROTOCOL = "5a6483be-c0b3-4d82-9f9c-6521bd8c1799"  # a sensitive library document
ID_LINE = re.compile(r'^id = "([0-9a-f-]{36})"', re.MULTILINE)
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

Served = dict[str, tuple[int, bytes]]


def export(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, str(root)], env=dict(ENV, **env), capture_output=True,
                          text=True, timeout=300)


def record_ids(content: Path) -> dict[str, str]:
    """Every record id in the content, restricted ones included, with its collection."""
    found = {}
    for path in content.rglob("*"):
        if path.suffix == ".md":
            collection = "resources" if path.parent.name == "library" else path.parent.name
            for record_id in ID_LINE.findall(path.read_text("utf-8")):
                found[record_id] = collection
        elif path.suffix == ".csv":
            for record_id in UUID.findall(path.read_text("utf-8")):
                found[record_id] = path.parent.name
    return found


def urls(ids: dict[str, str]) -> list[str]:
    """What a caller can ask for about these records, and every open document."""
    found = ["/", "/sitemap.xml", "/api/manifest", "/api/schema", "/api/openapi.json",
             "/api/sync/changes.ndjson", "/download/species-dwca.zip",
             "/api/search?q=arnica", "/api/search?q=knotweed%20injection",
             "/api/search?q=herbicide%20protocol&collections=resources"]
    for name in COLLECTIONS:
        found += [f"/api/{name}", f"/api/{name}?limit=200", collection_href(name),
                  f"/download/{name}.csv", f"/api/sync/{name}/0.ndjson"]
    for record_id, name in sorted(ids.items()):
        found += [f"/api/{name}/{record_id}", record_href(name, record_id)]
        if name == "resources":
            found.append(f"/library/{record_id}.pdf")
    return found


@dataclass
class Callers:
    """Anonymous callers, a public key and a key holding every group."""

    public_key: str
    partner_key: str

    def headers(self) -> dict[str, dict[str, str]]:
        return {"open": {}, "public": {"X-API-Key": self.public_key},
                "partner": {"X-API-Key": self.partner_key}}


def crawl(server: ServerThread, paths: list[str], callers: Callers) -> Served:
    served: Served = {}
    feed = "/api/changes?since=2000-01-01T00:00:00Z&limit=500"
    for who, headers in callers.headers().items():
        # (a public key reads what anonymous callers read: its feed and search are asked)
        asked = {"open": paths, "partner": [*paths, feed],
                 "public": [feed, *(p for p in paths if p.startswith("/api/search"))]}[who]
        for path in asked:
            status, _, body = http_get(server.url + path, headers)
            served[f"{who} {path}"] = (status, body)
    return served


class Watcher:
    """Asks for what a scenario touches again and again while an export runs, keeping every
    answer."""

    def __init__(self, server: ServerThread, paths: list[str], callers: Callers) -> None:
        self.server, self.paths, self.callers = server, paths, callers
        self.seen: list[tuple[str, tuple[int, bytes]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for who, headers in self.callers.headers().items():
                if who == "public":
                    continue  # (crawled for its feed and search only)
                for path in self.paths:
                    status, _, body = http_get(self.server.url + path, headers)
                    self.seen.append((f"{who} {path}", (status, body)))

    @contextmanager
    def running(self) -> Iterator[None]:
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join(60)


@dataclass
class Scenario:
    name: str
    path: str  # the content file it edits
    change: Callable[[str], str]
    watched: list[str]  # what to ask for while the export runs

    def apply(self, root: Path) -> None:
        file = root / "content" / self.path
        file.write_text(self.change(file.read_text("utf-8")), "utf-8")


def _open(text: str) -> str:
    return text.replace('access = "sensitive"\n', "")


def _close(text: str) -> str:
    return text.replace("\n+++\n", '\naccess = "sensitive"\n+++\n', 1)


def _edit(text: str) -> str:
    return text.rstrip("\n") + "\n\nAn unpublished line about knotweed crowns.\n"


SCENARIOS = [
    Scenario("a restricted species opens", "species/arnica-montana.md", _open,
             [f"/api/species/{ARNICA}", record_href("species", ARNICA), collection_href("species"),
              "/api/sync/changes.ndjson"]),
    Scenario("a restricted PDF opens", "library/herbicide-use-protocol.md", _open,
             [f"/library/{PROTOCOL}.pdf", f"/api/resources/{PROTOCOL}",
              record_href("resources", PROTOCOL)]),
    Scenario("a public species closes", "species/fallopia-japonica.md", _close,
             [f"/api/species/{KNOTWEED}", record_href("species", KNOTWEED),
              "/download/species.csv", "/api/search?q=knotweed%20injection"]),
    Scenario("public text is edited", "species/fallopia-japonica.md", _edit,
             [record_href("species", KNOTWEED), f"/api/species/{KNOTWEED}", "/api/manifest"]),
]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Path, ServerThread, Callers]]:
    root = exported_sample(tmp_path)
    for _ in range(2):  # the second changes nothing and switches builds all the same
        done = export(root)
        assert done.returncode == 0, done.stderr
    callers = Callers(issue_key(root, "public")[0],
                      issue_key(root, "partner", groups=["sensitive", "partners"])[0])
    with ServerThread(app_for(root, anonymous_rate=0)) as server:
        server.settle()
        yield root, server, callers


def differences(served: Served, expected: Served) -> list[str]:
    return [key for key in expected if served.get(key) != expected[key]]


@pytest.mark.slow
def test_after_an_export_that_changed_nothing_a_killed_export_publishes_nothing(
        node: tuple[Path, ServerThread, Callers]) -> None:
    """The two leaks as they were met: a sidecar still reading the build before last when
    the next export is killed inside its writes, then the edit reverted and exported."""
    root, server, callers = node
    paths = urls(record_ids(root / "content"))
    published = crawl(server, paths, callers)
    ledger = (root / "ledger.jsonl").read_bytes()
    assert export(root).returncode == 0  # changes nothing: the sidecar is not told
    scenario = SCENARIOS[0]
    original = (root / "content" / scenario.path).read_text("utf-8")
    scenario.apply(root)
    killed = export(root, FEDNODE_EXPORT_KILL_AT="site")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    page = root / ".fednode" / "builds"
    assert any(p.read_bytes().count(ARNICA.encode())
               for p in page.glob(f"*/site/{record_href('species', ARNICA).strip('/')}*"))
    assert differences(crawl(server, paths, callers), published) == []
    server.settle()
    assert differences(crawl(server, paths, callers), published) == []
    (root / "content" / scenario.path).write_text(original, "utf-8")
    done = export(root)
    assert done.returncode == 0, done.stderr
    assert " 0 ledger events" in done.stdout
    assert (root / "ledger.jsonl").read_bytes() == ledger
    server.settle()
    assert differences(crawl(server, paths, callers), published) == []
    assert ARNICA.encode() not in (root / "site_out/api/sync/changes.ndjson").read_bytes()


@pytest.mark.slow
def test_kills_at_every_step_and_inside_the_writes_publish_nothing(
        node: tuple[Path, ServerThread, Callers]) -> None:
    root, server, callers = node
    paths = urls(record_ids(root / "content"))
    published = crawl(server, paths, callers)
    rng = random.Random(44)
    steps = list(STEPS) * examples(1, 4)
    for turn, scenario in enumerate(SCENARIOS):
        # Every step once over the scenarios (four times in the thorough profile), and
        # kills at random inside the writes.
        share = steps[turn::len(SCENARIOS)]
        kills = [{"FEDNODE_EXPORT_KILL_AT": step} for step in share] + [
            {"FEDNODE_EXPORT_KILL_AFTER_WRITES": str(rng.randint(1, 40))}
            for _ in range(examples(1, 4))]
        for n, kill in enumerate(kills):
            what = f"{scenario.name}, {kill}"
            file = root / "content" / scenario.path
            original = file.read_text("utf-8")
            ledger = (root / "ledger.jsonl").read_bytes()
            if n % 2:
                server.settle()  # else it may still read the build before last
            scenario.apply(root)
            watcher = Watcher(server, scenario.watched, callers)
            with watcher.running():
                killed = export(root, **kill)
            switched = "FEDNODE_EXPORT_KILL_AT" in kill and kill[
                "FEDNODE_EXPORT_KILL_AT"] in AFTER_SWITCH or killed.returncode == 0
            assert killed.returncode in (0, -signal.SIGKILL), (what, killed.stderr)
            if not switched:
                assert (root / "ledger.jsonl").read_bytes() == ledger, what
            before_settling = crawl(server, paths, callers)
            server.settle()
            after = crawl(server, paths, callers)
            if switched:
                assert differences(after, published), what  # the edit is published
            else:
                assert differences(after, published) == [], what
            for key, answer in watcher.seen + list(before_settling.items()):
                assert answer in (published[key], after[key]), (what, key)
            if switched:
                # Published with its ledger events; the next export adds none.
                again = export(root)
                assert again.returncode == 0 and " 0 ledger events" in again.stdout, what
                server.settle()
                assert differences(crawl(server, paths, callers), after) == [], what
                published = after
                file.write_text(original, "utf-8")
            elif n % 3 == 0:
                # The edit is taken back: the next export publishes exactly what was.
                file.write_text(original, "utf-8")
                again = export(root)
                assert again.returncode == 0 and " 0 ledger events" in again.stdout, what
                assert (root / "ledger.jsonl").read_bytes() == ledger, what
                server.settle()
                assert differences(crawl(server, paths, callers), published) == [], what
                continue
            else:
                again = export(root)  # the edit, exported whole this time
                assert again.returncode == 0, (what, again.stderr)
                server.settle()
                edited = crawl(server, paths, callers)
                assert differences(edited, published), what
                published = edited
                file.write_text(original, "utf-8")
            back = export(root)
            assert back.returncode == 0, (what, back.stderr)
            server.settle()
            published = crawl(server, paths, callers)


@pytest.mark.slow
def test_events_published_before_the_ledger_was_appended_are_appended_next(
        tmp_path: Path) -> None:
    """Killed after its switch, an export's events are in the published build and not yet
    in ledger.jsonl: the next export appends them (whole, or the rest of a torn append),
    and makes none of its own for them. A ledger written since by something else is left
    as it is."""
    root = exported_sample(tmp_path)
    assert export(root).returncode == 0
    ledger = root / "ledger.jsonl"
    before = ledger.read_bytes()
    SCENARIOS[0].apply(root)
    assert export(root, FEDNODE_EXPORT_KILL_AT="flipped").returncode == -signal.SIGKILL
    assert ledger.read_bytes() == before
    for torn in (False, True):
        if torn:  # killed again after its switch, with its append cut inside a line
            ledger.write_bytes(before)
            assert export(root, FEDNODE_EXPORT_KILL_AT="flipped").returncode == \
                -signal.SIGKILL
        published = (root / "site_out/api/sync/changes.ndjson").read_bytes()
        assert ARNICA.encode() in published
        pending = (root / ".fednode/current/ledger.pending").read_bytes()
        lines = pending.partition(b"\n")[2]
        assert lines.count(b"\n") == 1 and ARNICA.encode() in lines
        if torn:
            with ledger.open("ab") as handle:
                handle.write(lines[:len(lines) // 2])
        done = export(root)
        assert done.returncode == 0 and " 0 ledger events" in done.stdout, done.stdout
        assert ledger.read_bytes() == before + lines
        assert (root / "site_out/api/sync/changes.ndjson").read_bytes() == published
    # The ledger replaced from version control after a published export: it is the
    # publisher's, and the next export works from it.
    ledger.write_bytes(before)
    done = export(root)
    assert done.returncode == 0 and " 1 ledger events" in done.stdout, done.stdout
    assert ledger.read_bytes().startswith(before) and ledger.read_bytes() != before + lines


@pytest.mark.slow
def test_a_sidecar_pins_the_build_it_reads_and_lets_go_of_the_one_it_leaves(
        node: tuple[Path, ServerThread, Callers]) -> None:
    """No export takes a build a sidecar reads; once a new build is published, the sidecar
    moves to it without being asked anything, and the build it left is free again."""
    root, server, _ = node
    private = root / ".fednode"

    def current() -> str:
        return os.readlink(private / "current").rpartition("/")[2]

    read = current()
    assert hold_exclusive(private, read) is None  # pinned by the sidecar
    record = root / "content" / "species" / "fallopia-japonica.md"
    original = record.read_text("utf-8")
    for turn in range(4):  # a paragraph added and taken away again, each time published
        record.write_text(original + ("\nA paragraph for the pins.\n" if turn % 2 == 0
                                      else ""), "utf-8")
        done = export(root)
        assert done.returncode == 0, done.stderr
        assert current() != read
        deadline = time.monotonic() + 10
        while (lock := hold_exclusive(private, read)) is None:
            assert time.monotonic() < deadline, f"build {read} is still pinned"
            time.sleep(0.05)
        os.close(lock)
        read = current()
    assert sorted(p.name for p in (private / "builds").iterdir()) == ["a", "b"]
