"""`fednode export --watch` keeps what each export ends with in memory for the next
(`exporter.warm`). Whatever happens between two exports (edits, additions, removals, access
changes, a broken file and its fix, an export by another command, a ledger restored), a warm
export gives exactly the bytes an export from nothing gives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from builders import Node, search_ids, species, team
from conftest import Clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_export_fast_paths import tree

from exporter.build import build
from exporter.config import Project
from exporter.errors import ContentError
from exporter.warm import Warm

SLUGS = [f"s{n}" for n in range(6)]
STEPS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["name", "body", "access", "add", "remove", "broken"]),
              st.sampled_from(SLUGS)),
    st.tuples(st.sampled_from(["cold export", "ledger restored", "team"]), st.just(""))),
    min_size=1, max_size=6)


class Edits:
    """A node whose every write gets a time of its own (two writes in one tick of the
    file system's clock, of the same size, would otherwise look unchanged)."""

    def __init__(self, root: Path) -> None:
        self.node = Node(root)
        self.tick = 1_700_000_000 * 10**9
        self.names = {slug: f"Species {slug}" for slug in SLUGS[:4]}
        self.access = {slug: "public" for slug in SLUGS}
        self.bodies = {slug: "" for slug in SLUGS}
        for slug in self.names:
            self.write(slug)
        self.node.write("team", "t", team("Bea", access="sensitive"))

    def write(self, slug: str, text: str | None = None) -> None:
        path = self.node.path("species", slug)
        if text is None:
            self.node.write("species", slug, species(self.names[slug], access=self.access[slug],
                                                      id=_id(slug)), self.bodies[slug])
        else:
            path.write_text(text)
        self.tick += 10**9
        os.utime(path, ns=(self.tick, self.tick))

    def step(self, action: str, slug: str) -> None:
        if action == "team":
            self.node.write("team", "t", team("Bea " + "B" * (self.tick % 7), access="sensitive"))
        elif action in ("cold export", "ledger restored"):
            return
        elif action == "remove":
            if self.names.pop(slug, None) is not None:
                self.node.remove("species", slug)
        elif action == "broken":
            self.write(slug, "+++\nid = \n")
        else:
            if action == "add" or slug not in self.names:
                self.names[slug] = f"Added {slug}"
            elif action == "name":
                self.names[slug] = "Aaa " + self.names[slug]  # moves in list order
            elif action == "body":
                self.bodies[slug] += f"More about {slug}. "
            elif action == "access":
                self.access[slug] = "public" if self.access[slug] != "public" else "sensitive"
            self.write(slug)


def _id(slug: str) -> str:
    return f"00000000-0000-4000-8000-{int(slug[1:]) + 100:012d}"


@pytest.mark.slow
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_warm_export_gives_what_an_export_from_nothing_gives(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str]]) -> None:
    root = tmp_path_factory.mktemp("warm")
    edits, clock, warm = Edits(root / "node"), Clock(), Warm()
    build(Project(edits.node.root), now=clock.tick(), warm=warm)
    ledger = root / "node" / "ledger.jsonl"
    before = ledger.read_bytes()  # the ledger before the last export
    for number, (action, slug) in enumerate(steps):
        edits.step(action, slug)
        if action == "ledger restored":  # to before the last export, as `git checkout` would
            ledger.write_bytes(before)
        before = ledger.read_bytes()
        if action == "cold export":
            build(Project(edits.node.root), now=clock.tick())  # `fednode export`, meanwhile
            continue
        try:
            build(Project(edits.node.root), now=clock.tick(), warm=warm)
        except ContentError:
            assert action == "broken"
            assert warm == Warm()  # a failed export keeps nothing
            edits.write(slug) if slug in edits.names else edits.node.remove("species", slug)
            build(Project(edits.node.root), now=clock.tick(), warm=warm)
        assert warm.cache is not None and warm.ledger is not None and warm.records is not None
        cold = root / f"cold{number}"
        shutil.copytree(edits.node.root / "content", cold / "content")
        shutil.copy(edits.node.root / "ledger.jsonl", cold / "ledger.jsonl")
        build(Project(cold), now=clock.now)  # the ledger is up to date: no events
        for name in ("site_out", ".fednode/bundle"):
            assert tree(cold / name) == tree(edits.node.root / name), (steps, number)
        for words, groups in (("species", ("public",)), ("bea", ("public", "sensitive"))):
            assert (search_ids(cold / ".fednode" / "bundle", words, groups)
                    == search_ids(edits.node.root / ".fednode" / "bundle", words, groups))
