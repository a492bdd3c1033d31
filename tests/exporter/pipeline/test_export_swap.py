"""site_out/ and the bundle switch together: whenever an export is killed, both exist and
belong to one build; the sidecar picks up each new build; private files stay private."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from builders import (
    REPO,
    Node,
    app_for,
    copy_sample,
    engine_file,
    examples,
    exported_sample,
    multiply,
    same_key,
    search_ids,
    species,
)

from exporter.contract.layout import record_file
from exporter.pipeline.build import BuildReport

Export = Callable[..., BuildReport]
Client = Callable[..., Awaitable[TestClient]]
COMMAND = [sys.executable, "-m", "cli.main", "export", "--project"]
ENV = dict(os.environ, PYTHONPATH=str(REPO))
# The named steps of an export after the ledger, in order (writer.checkpoint).
# ("indexed": the records table is written ahead, beside the builds: `writer.Placed`)
STEPS = ("ledger", "site", "indexed", "bundle", "recorded", "flipped")


def run_export(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, str(root)], env=dict(ENV, **env), capture_output=True,
                          text=True)


def one_build(root: Path) -> bytes:
    """Assert that site_out/ and the bundle exist and are the two halves of one build;
    return that build's manifest."""
    site, private = root / "site_out", root / ".fednode" / "bundle"
    assert site.is_dir() and private.is_dir()
    manifest = (site / "api" / "manifest.json").read_bytes()
    assert manifest == (private / "manifest.json").read_bytes()
    assert (site / "index.html").read_bytes() == (private / "index.html").read_bytes()
    assert (site / "api" / "sync" / "changes.ndjson").read_bytes() == \
        (private / "changes.ndjson").read_bytes()
    meta = json.loads((private / "meta.json").read_bytes())
    assert meta["base_url"] == json.loads(manifest)["node"]["base_url"]
    return manifest


def edit(root: Path, n: int) -> None:
    """Change one record, so that each export makes a different build."""
    path = root / "content" / "species" / "fallopia-japonica.md"
    text = path.read_text()
    marker = 'vernacularName = "'
    path.write_text(text.replace(marker, f"{marker}edit {n} ", 1))


@pytest.mark.slow
def test_a_kill_at_any_step_leaves_one_whole_build(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    assert run_export(root).returncode == 0
    before = one_build(root)
    for n, step in enumerate(STEPS):
        edit(root, n)
        killed = run_export(root, FEDNODE_EXPORT_KILL_AT=step)
        assert killed.returncode == -signal.SIGKILL, (step, killed.stderr)
        manifest = one_build(root)
        # Until the flip, readers see the build before; from the flip on, the new one.
        assert (manifest == before) == (step != "flipped"), step
        before = manifest
    done = run_export(root)
    assert done.returncode == 0, done.stderr
    assert one_build(root) == before  # the kill after the flip had published the last edit
    page = json.loads((root / "site_out" / "api" / "species" / "index.json").read_bytes())
    edits = " ".join(f"edit {n}" for n in reversed(range(len(STEPS))))
    assert any(item.get("vernacularName", "").startswith(edits) for item in page["items"])
    assert sorted(p.name for p in (root / ".fednode" / "builds").iterdir()) == ["a", "b"]
    assert not [p for p in root.iterdir() if p.name.startswith("site_out.")]


@pytest.mark.slow
def test_kills_at_random_moments_leave_one_whole_build(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    multiply(root / "content", 3000)
    started = time.monotonic()
    assert run_export(root).returncode == 0
    seconds = time.monotonic() - started
    one_build(root)
    node_toml = root / "content" / "node.toml"
    original = node_toml.read_text()
    rng = random.Random(7)
    for n in range(examples(4, 24)):
        # A base_url change re-renders every file: the longest export there is.
        node_toml.write_text(original.replace('base_url = "http://127.0.0.1:8000"',
                                              f'base_url = "https://n{n}.example.org"'))
        process = subprocess.Popen([*COMMAND, str(root)], env=ENV, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, seconds * 1.2))
        process.send_signal(signal.SIGKILL)
        process.wait()
        one_build(root)
        if n % 3 == 2:  # the next export completes
            done = run_export(root)
            assert done.returncode == 0, done.stderr
            assert json.loads(one_build(root))["node"]["base_url"] == f"https://n{n}.example.org"


@pytest.mark.slow
def test_private_folders_are_closed_and_their_files_0600(tmp_path: Path) -> None:
    root = copy_sample(tmp_path)
    (root / ".fednode").mkdir(mode=0o755)  # as `keys create` or an older fednode left it
    assert run_export(root).returncode == 0
    private = root / ".fednode"
    for folder in (private, private / "builds", *(private / "builds").iterdir()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o711, folder  # pass through, no list
    for folder in (private / "cache", (private / "bundle").resolve()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    found = [*(private / "bundle").resolve().rglob("*"), *(private / "cache").rglob("*")]
    files = [path for path in found if path.is_file()]
    assert len(files) >= 8 and any(path.parent.name == "public" for path in files)
    for path in found:
        assert stat.S_IMODE(path.stat().st_mode) == (0o600 if path.is_file() else 0o700), path
    assert stat.S_IMODE((private / "export.lock").stat().st_mode) == 0o600
    for build in (private / "builds").iterdir():
        assert stat.S_IMODE((build / "outputs.marshal").stat().st_mode) == 0o600
    site = (root / "site_out").resolve()
    assert stat.S_IMODE(site.stat().st_mode) & 0o005 == 0o005  # a web server may read it
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o004 for p in site.rglob("*"))


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not engine_file(str(p.relative_to(root)))}


@pytest.mark.slow
def test_builds_take_turns_and_each_is_complete(node: Node, export: Export,
                                                tmp_path: Path) -> None:
    """The spare build is brought up to date in place: after any number of exports, each
    tree equals what a fresh export of the same content writes."""
    records = {n: species(f"Species number{n:03d}") for n in range(60)}
    for n, fields in records.items():
        node.write("species", f"s{n:03d}", fields)
    export(node.root)
    for round_ in range(4):
        node.write("species", f"s{round_:03d}", dict(records[round_], habitat=f"r{round_}"))
        node.remove("species", f"s{59 - round_:03d}")
        node.write("species", f"new{round_}", species(f"Added number{round_}"))
        report = export(node.root)
        assert report.site is not None and report.site.written < 20
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["cp", "-r", str(node.root / "content"), str(fresh / "content")], check=True)
    (fresh / "ledger.jsonl").write_bytes((node.root / "ledger.jsonl").read_bytes())
    same_key(node.root, fresh)
    export(fresh)
    assert tree(node.root / "site_out") == tree(fresh / "site_out")
    assert tree(node.root / ".fednode" / "bundle") == tree(fresh / ".fednode" / "bundle")
    for words in ("added", "r1", "number007 number058", "number059"):
        found = search_ids(node.root / ".fednode" / "bundle", words)
        assert found == search_ids(fresh / ".fednode" / "bundle", words)
    assert len(search_ids(node.root / ".fednode" / "bundle", "added")) == 4


async def test_the_sidecar_picks_up_each_new_build(node: Node, export: Export,
                                                   aiohttp_client: Client
                                                   ) -> None:
    first = species("Fallopia japonica")
    node.write("species", "a", first)
    export(node.root)
    client = await aiohttp_client(app_for(node.root, reload_interval=0.0))
    seen = []
    for n in range(4):  # builds a, b, a, b: in place from the second round on
        node.write("species", f"n{n}", species(f"Added number{n}"))
        export(node.root)
        answer = await client.get("/api/species")
        body = await answer.read()
        assert body == (node.root / "site_out" / "api" / "species" / "index.json").read_bytes()
        seen.append(json.loads(body)["total"])
    assert seen == [2, 3, 4, 5]


@pytest.mark.slow
def test_a_second_export_at_the_same_time_stops(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    assert run_export(root).returncode == 0
    before = one_build(root)
    edit(root, 0)
    with open(root / ".fednode" / "export.lock", "w") as held:  # an export running
        fcntl.flock(held, fcntl.LOCK_EX)
        result = run_export(root)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: another `fednode export` of this node is running")
    assert one_build(root) == before
    assert run_export(root).returncode == 0
    assert one_build(root) != before


@pytest.mark.slow
def test_a_write_that_fails_is_one_error_and_keeps_the_build(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    assert run_export(root).returncode == 0
    before = one_build(root)
    edit(root, 0)
    export_refused_with_unwritable(root, root / ".fednode" / "builds")
    assert one_build(root) == before


def export_refused_with_unwritable(root: Path, folder: Path) -> None:
    """Export while `folder` cannot be written to: one clear error, no traceback."""
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("needs chattr +i (root on ext4) to make a folder unwritable")
    try:
        result = run_export(root)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "Error: cannot write the export: Operation not permitted" in result.stderr


@pytest.mark.slow
def test_a_file_that_cannot_be_created_is_one_error_and_keeps_the_build(tmp_path: Path
                                                                        ) -> None:
    """Files are created by writer threads: a failure there still stops the export with one
    message, and the published build stays whole."""
    root = exported_sample(tmp_path)
    assert run_export(root).returncode == 0
    edit(root, 0)
    assert run_export(root).returncode == 0  # both builds exist now
    before = one_build(root)
    staging = root / ".fednode" / "builds" / (
        "a" if os.readlink(root / ".fednode" / "current").endswith("b") else "b")
    while True:  # a new record whose file goes into a folder the staging build has
        fields = species("Addenda nova")
        folder = (staging / "site" / record_file("species", fields["id"])).parent
        if folder.is_dir():
            break
    Node(root, node_toml=(root / "content" / "node.toml").read_text()).write(
        "species", "addenda-nova", fields)
    export_refused_with_unwritable(root, folder)
    assert one_build(root) == before
    assert run_export(root).returncode == 0


@pytest.mark.slow
def test_builds_recorded_by_an_older_fednode_are_reused_and_a_damaged_record_is_rebuilt(
        tmp_path: Path) -> None:
    """Each build records what its files were rendered from (outputs.marshal, each tree's
    record marshalled apart; fednode before it wrote the trees' records in one, and before
    that outputs.json, both still read). Unreadable, a build is rebuilt, not trusted."""
    import marshal

    from exporter.pipeline.build import build
    from exporter.project.config import Project

    root = exported_sample(tmp_path / "node")
    build(Project(root))
    first = build(Project(root))  # both builds exist and are recorded now
    assert first.site is not None and first.site.written == 0
    builds = root / ".fednode" / "builds"
    records = {}
    for record in builds.glob("*/outputs.marshal"):
        trees = marshal.loads(record.read_bytes())
        assert all(type(each) is bytes for each in trees.values())
        records[record] = {tree: marshal.loads(each) for tree, each in trees.items()}
        record.write_bytes(marshal.dumps(records[record]))  # the form before
    older = build(Project(root))
    assert older.site is not None and (older.site.written, older.site.reused) == (
        0, first.site.reused)
    for record, trees in records.items():
        record.unlink(missing_ok=True)
        (record.parent / "outputs.json").write_text(json.dumps(trees))  # the form before that
    oldest = build(Project(root))
    assert oldest.site is not None and (oldest.site.written, oldest.site.reused) == (
        0, first.site.reused)
    current = builds / os.readlink(root / ".fednode" / "current").rpartition("/")[2]
    # The build this export brought up to date has the new record only.
    assert (current / "outputs.marshal").is_file()
    assert not (current / "outputs.json").exists()
    before = one_build(root)
    spare = next(p for p in builds.iterdir() if p != current)
    (spare / "outputs.marshal").write_bytes(b"\x00damaged")
    stray = spare / "site" / "stray.txt"
    stray.write_text("a file no record of the build names")
    build(Project(root))
    assert not stray.exists()  # the build was made afresh, not trusted
    assert one_build(root) == before


@pytest.mark.slow
@pytest.mark.parametrize("limit", [4096, 50_000])
def test_a_full_disk_is_one_error_line_and_keeps_the_build(tmp_path: Path, limit: int) -> None:
    """Files that cannot grow past `limit` bytes (RLIMIT_FSIZE, as a full disk): the export
    says so in one line and leaves the last build whole, whatever it was writing (the
    library's page cache, written while the content is read, included: no traceback)."""
    import resource
    root = exported_sample(tmp_path / "node")
    assert run_export(root).returncode == 0
    before = one_build(root)
    shutil.rmtree(root / ".fednode" / "cache")  # everything is written again
    (root / "content" / "species" / "added.md").write_text(
        '+++\nid = "6f1c5d0e-6a34-4a3b-9a62-3c3a6e0d2b11"\nscientificName = "Added one"\n'
        'family = "Apiaceae"\ncategory = "invasive"\nestablishmentMeans = "introduced"\n+++\n')

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    result = subprocess.run([*COMMAND, str(root)], env=ENV, capture_output=True, text=True,
                            preexec_fn=small_files)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ") and "File too large" in lines[-1], result.stderr
    assert "Traceback" not in result.stderr
    assert one_build(root) == before
