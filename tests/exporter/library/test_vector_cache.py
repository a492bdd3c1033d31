"""The machine's cache of the sentence encoder's vectors (exporter/library/vector_cache.py):
a first export in a new process takes the vectors another export made, to the bit, without
loading the encoder; a damaged cache or none at all changes nothing but the time, and a
damaged vector, in the cache or in the build before, is never carried into a build."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from builders import NODE_TOML, REPO, Node, make_pdf, record_text
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.library import vector_cache
from exporter.shared import encoder
from sidecar.library import answer
from sidecar.store import Snapshot

PAGES = ["Cut knotweed stems in June, below the first node.",
         "Inject three millilitres into each cane. Keep ten metres from any watercourse.",
         "Seeds of cowslip need eight to twelve weeks at 4 degrees before sowing."]
# An export in a process of its own. It counts, in a file, the texts the encoder is given
# (the encoder runs as it is; in the export's forks too, which inherit the count).
EXPORT = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from exporter.pipeline.build import build
    from exporter.project.config import Project
    from exporter.shared.encoder import Encoder
    encode = Encoder.encode
    def counted(self, texts, **options):
        with open({count!r}, "a") as count:
            count.write(f"{{len(texts)}}\\n")
        return encode(self, texts, **options)
    Encoder.encode = counted
    build(Project(Path({root!r})))
""")


def library(root: Path) -> Path:
    node = Node(root, NODE_TOML)
    folder = root / "content" / "library"
    make_pdf(folder / "guide.pdf", PAGES)
    (folder / "guide.md").write_text(record_text(
        {"id": "5a6483be-c0b3-4d82-9f9c-6521bd8c1799", "title": "Field guide",
         "kind": "document", "summary": "Control and sowing."}, "A guide."))
    return node.root


def export(root: Path, cache: str, **env: str) -> int:
    """Export the node at `root` in a new process: how many texts it encoded."""
    count = root / "encoded.txt"
    script = EXPORT.format(repo=str(REPO), root=str(root), count=str(count))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, FEDNODE_CACHE_DIR=cache, **env), timeout=300)
    assert done.returncode == 0, done.stderr
    return sum(map(int, count.read_text().split())) if count.exists() else 0


def senses(root: Path) -> list[np.ndarray]:
    folder = root / ".fednode" / "bundle" / "passages" / "public"
    return [np.load(folder / name) for name in ("senses.npy", "sentences.npy")]


@pytest.mark.slow
def test_a_first_export_takes_the_vectors_another_made(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, second = library(tmp_path / "a"), library(tmp_path / "b")
    made = export(first, str(cache))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / vector_cache.FILE).stat().st_mode) == 0o600
    with sqlite3.connect(cache / vector_cache.FILE) as connection:
        kept = connection.execute("SELECT count(*) FROM vectors").fetchone()[0]
    # each text once (a one-sentence passage is its sentence too)
    assert kept == made >= 3 and sum(len(vectors) for vectors in senses(first)) > made
    assert export(second, str(cache)) == 0
    for mine, theirs in zip(senses(second), senses(first), strict=True):
        assert mine.tobytes() == theirs.tobytes()


@pytest.mark.slow
def test_a_damaged_cache_or_none_changes_nothing_but_the_time(tmp_path: Path) -> None:
    reference = library(tmp_path / "reference")
    made = export(reference, "", HOME=str(tmp_path / "home"),
                  XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert made >= 3
    assert not (tmp_path / "home").exists() and not (tmp_path / "xdg").exists()  # none kept
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)  # made by another program: made the user's alone when used
    (cache / vector_cache.FILE).write_bytes(b"not a database" * 100)
    damaged = library(tmp_path / "damaged")
    assert export(damaged, str(cache)) == made
    for mine, theirs in zip(senses(damaged), senses(reference), strict=True):
        assert np.abs(mine - theirs).max() < 1e-5
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / vector_cache.FILE).stat().st_mode) == 0o600
    link_file = tmp_path / "link-file"
    link_file.mkdir()
    (link_file / vector_cache.FILE).symlink_to(tmp_path / "target.sqlite3")
    assert export(library(tmp_path / "link-file-node"), str(link_file)) == made
    assert not (tmp_path / "target.sqlite3").exists()  # a link to a file is not followed


def test_vectors_of_another_encoder_or_another_length_are_never_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vector_cache.ENV, str(tmp_path))
    texts = ["Cut knotweed stems in June.", "Sow cowslip in autumn."]
    vectors = np.arange(2 * encoder.DIMENSIONS, dtype=np.float32).reshape(2, -1)
    vector_cache.keep(texts, vectors)
    found = vector_cache.look_up([texts[1], "another text", texts[0]])
    assert sorted(found) == [0, 2]
    assert found[0].tobytes() == vectors[1].tobytes()
    monkeypatch.setattr(encoder, "VERSION", "another-model:1")
    assert vector_cache.look_up(texts) == {}
    monkeypatch.undo()
    monkeypatch.setenv(vector_cache.ENV, str(tmp_path))
    with sqlite3.connect(tmp_path / vector_cache.FILE) as connection:
        connection.execute("UPDATE vectors SET vector = x'00'")
    assert vector_cache.look_up(texts) == {}
    shutil.rmtree(tmp_path)  # made again when a vector is kept
    vector_cache.keep(texts, vectors)
    assert sorted(vector_cache.look_up(texts)) == [0, 1]
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setenv(vector_cache.ENV, str(blocked / "cache"))
    vector_cache.keep(texts, vectors)  # cannot be kept: passed by
    assert vector_cache.look_up(texts) == {}


def damaged(vector: np.ndarray, kind: str) -> bytes | str | int:
    """A cache entry where `vector` was, damaged in this way."""
    if kind in ("NaN", "infinity"):
        vector = vector.copy()
        vector[len(vector) // 2] = np.nan if kind == "NaN" else -np.inf
        return vector.astype("<f4").tobytes()
    return {"short": vector[:-1].astype("<f4").tobytes(),
            "long": vector.astype("<f4").tobytes() + bytes(4),
            "float64": vector.astype("<f8").tobytes(),
            "text": "a vector", "number": 7}[kind]


DAMAGE = ["NaN", "infinity", "short", "long", "float64", "text", "number"]


@settings(max_examples=30, deadline=None)
@given(damage=st.lists(st.sampled_from(DAMAGE) | st.none(), min_size=1, max_size=6))
def test_a_damaged_entry_is_never_taken_and_is_written_anew(damage: list[str | None]) -> None:
    """An entry holding NaN or an infinity, of another length, or not bytes at all, is
    passed by (its text is encoded again), and the vector kept for that text replaces it."""
    texts = [f"Sentence {n} of the field guide." for n in range(len(damage))]
    vectors = np.random.default_rng(len(damage)).standard_normal(
        (len(texts), encoder.DIMENSIONS)).astype(np.float32)
    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setenv(vector_cache.ENV, scratch)
        vector_cache.keep(texts, vectors)
        with closing(sqlite3.connect(Path(scratch) / vector_cache.FILE)) as connection, \
                connection:
            for vector, kind in zip(vectors, damage, strict=True):
                if kind is not None:
                    connection.execute("UPDATE vectors SET vector = ? WHERE vector = ?",
                                       (damaged(vector, kind), vector.tobytes()))
        found = vector_cache.look_up(texts)
        assert sorted(found) == [n for n, kind in enumerate(damage) if kind is None]
        vector_cache.keep([t for t, kind in zip(texts, damage, strict=True) if kind],
                          vectors[[kind is not None for kind in damage]])
        found = vector_cache.look_up(texts)
    assert [found[n].tobytes() for n in range(len(texts))] == [v.tobytes() for v in vectors]


@pytest.mark.slow
def test_a_damaged_vector_is_never_carried_into_the_next_build(tmp_path: Path) -> None:
    """Cache entries holding NaN (or an infinity, or of another length) were taken as they
    were: every vector of the build NaN, and the library answered nothing; an export
    without the cache then kept them, from the build before. Each is encoded again, the
    cache's entry rewritten, and the next build's vectors are all finite."""
    cache = tmp_path / "cache"
    first = library(tmp_path / "a")
    made = export(first, str(cache))
    with closing(sqlite3.connect(cache / vector_cache.FILE)) as connection, connection:
        entries = connection.execute("SELECT key, vector FROM vectors").fetchall()
        for n, (key, blob) in enumerate(entries):
            vector = np.frombuffer(blob, "<f4")
            connection.execute("UPDATE vectors SET vector = ? WHERE key = ?",
                               (damaged(vector, ["NaN", "infinity", "short"][n % 3]), key))
    second = library(tmp_path / "b")
    assert export(second, str(cache)) == made  # every one encoded again
    for mine, theirs in zip(senses(second), senses(first), strict=True):
        assert np.isfinite(mine).all() and np.abs(mine - theirs).max() < 1e-5
    assert export(library(tmp_path / "c"), str(cache)) == 0  # the entries written anew

    # A build holding NaN (as one made from a damaged cache did) is not linked or copied
    # into the next, made without the cache: its damaged vectors are encoded again.
    folder = second / ".fednode" / "bundle" / "passages" / "public"
    for name in ("senses.npy", "sentences.npy"):
        matrix = np.load(folder / name)
        matrix[0, 7] = np.nan
        np.save(folder / name, matrix)
    guide = second / "content" / "library" / "guide.md"
    guide.write_text(guide.read_text().replace("Control and sowing.", "Control; sowing."))
    (second / "encoded.txt").unlink()  # (counted afresh)
    assert 0 < export(second, "") < made
    for mine, theirs in zip(senses(second), senses(first), strict=True):
        assert np.isfinite(mine).all() and np.abs(mine - theirs).max() < 1e-5
    found = answer(Snapshot(second / ".fednode" / "bundle"), ["public"],
                   "How many weeks do cowslip seeds need before sowing?", 3)
    assert found["grounded"] and "eight to twelve weeks" in found["answer"], found
