"""`fednode init` and what a new publisher meets next: a node that checks and exports at
once, a base URL that stays where it was put, progress on a long export, and the sidecar's
warning when a reloaded bundle links elsewhere."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import tomllib
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from builders import copy_sample
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from processes import ENV, FEDNODE

from cli.main import main
from cli.progress import Progress
from exporter.contract.wire import COLLECTIONS
from exporter.shared.errors import control_character
from sidecar import serve


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_init_makes_a_node_that_checks_and_exports_at_once(tmp_path: Path) -> None:
    root = tmp_path / "my-node"
    made = run("init", str(root))
    assert made.exit_code == 0, made.output
    node = tomllib.loads((root / "content" / "node.toml").read_text())["node"]
    assert uuid.UUID(node["id"]).version == 4
    assert "#" in (root / "content" / "node.toml").read_text()  # commented for the publisher
    for name in (*COLLECTIONS, "library"):
        assert (root / "content" / name).is_dir()
    assert "fednode export" in (root / "README.md").read_text()
    checked = run("check", "--project", str(root))
    assert checked.exit_code == 0 and "ok: 0 records valid" in checked.output
    exported = run("export", "--project", str(root))
    assert exported.exit_code == 0, exported.output
    assert (root / "site_out" / "api" / "manifest.json").is_file()


def test_two_inits_give_two_ids_and_never_overwrite_a_node(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "a")).exit_code == 0
    assert run("init", str(tmp_path / "b")).exit_code == 0
    ids = {tomllib.loads((tmp_path / n / "content" / "node.toml").read_text())["node"]["id"]
           for n in "ab"}
    assert len(ids) == 2
    before = (tmp_path / "a" / "content" / "node.toml").read_bytes()
    again = run("init", str(tmp_path / "a"))
    assert again.exit_code == 1
    assert again.output.strip().splitlines()[-1].startswith("Error: ")
    assert "already holds a node" in again.output
    assert (tmp_path / "a" / "content" / "node.toml").read_bytes() == before


def test_init_keeps_the_publishers_own_readme(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("mine\n")
    assert run("init", str(tmp_path)).exit_code == 0
    assert (tmp_path / "README.md").read_text() == "mine\n"


# A folder's name as a file system takes it: any text without "/" and NUL (nor "." and
# "..", which name folders that are there), of at most 255 bytes, controls, bidirectional
# controls and bytes that are not UTF-8 (Python's surrogates U+DC80..U+DCFF) among them.
ODD = list("\x1b\x07\x7f\x85\x9b\x1c\r\n\t\u202a\u202e\u2066\u2069\u200e\u200f -_ é×")
FOLDER_NAMES = st.text(
    st.sampled_from(ODD) | st.characters(exclude_categories=["Cs"], exclude_characters="/\x00")
    | st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF), min_size=1, max_size=40,
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) <= 255)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=FOLDER_NAMES)
@example(name="weeds\x1b[31m-of-the\u202enorth")
@example(name="\x1b\u202e\u2066 \r\n")
@example(name="caf\udce9")
def test_init_then_check_succeeds_whatever_the_folder_is_named(
        name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The node's name comes from its folder's, without what `fednode check` refuses in a
    name (controls, bidirectional controls) or cannot write (a byte that is not UTF-8)."""
    root = tmp_path_factory.mktemp("init") / name
    made = run("init", str(root))
    assert made.exit_code == 0, made.output
    checked = run("check", "--project", str(root))
    assert checked.exit_code == 0 and "ok: 0 records valid" in checked.output, checked.output
    node = tomllib.loads((root / "content" / "node.toml").read_text("utf-8"))["node"]
    assert node["name"] == " ".join(node["name"].split()) != ""
    assert control_character(node["name"]) is None
    readme = (root / "README.md").read_text("utf-8")
    assert readme.startswith(f"# {node['name']}\n")


@pytest.mark.parametrize("folder, name", [
    ("weeds-of-the_north", "Weeds of the north"), ("Renouée du Japon", "Renouée du japon"),
    ("Fallopia × bohemica", "Fallopia × bohemica"), ("イタドリ", "イタドリ"),
    ("\u202eknot\x1b[0mweed", "Knot[0mweed"), ("\x1b\u2066", "My node")])
def test_the_nodes_name_is_its_folders_in_plain_words(folder: str, name: str,
                                                     tmp_path: Path) -> None:
    assert run("init", str(tmp_path / folder)).exit_code == 0
    node = tomllib.loads((tmp_path / folder / "content" / "node.toml").read_text("utf-8"))
    assert node["node"]["name"] == name


def _manifest_base(root: Path) -> str:
    manifest = json.loads((root / "site_out" / "api" / "manifest.json").read_text())
    return str(manifest["node"]["base_url"])


@pytest.mark.slow
def test_export_keeps_the_last_base_url_given_in_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "node"
    assert run("init", str(root)).exit_code == 0
    first = run("export", "--project", str(root))
    assert "base URL http://127.0.0.1:8000 (content/node.toml)" in first.output
    given = run("export", "--project", str(root), "--base-url", "https://mirror.example.net")
    assert given.exit_code == 0 and "--base-url" in given.output
    kept = run("export", "--project", str(root))
    assert kept.exit_code == 0
    assert "base URL https://mirror.example.net (the last --base-url" in kept.output
    assert _manifest_base(root) == "https://mirror.example.net"
    # the publisher edits node.toml's base_url: the file's new value is their choice
    toml = root / "content" / "node.toml"
    toml.write_text(toml.read_text().replace("http://127.0.0.1:8000", "https://n.example.org"))
    edited = run("export", "--project", str(root))
    assert "base URL https://n.example.org (content/node.toml)" in edited.output
    assert _manifest_base(root) == "https://n.example.org"


def test_a_failed_export_does_not_remember_its_base_url(tmp_path: Path) -> None:
    root = tmp_path / "node"
    assert run("init", str(root)).exit_code == 0
    wrong = run("export", "--project", str(root), "--base-url", "https://x.example/sub")
    assert wrong.exit_code == 1
    assert "(content/node.toml)" in run("export", "--project", str(root)).output


class Ticks:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_quiet_for_two_seconds_then_shows_each_phase(
        capsys: pytest.CaptureFixture[str]) -> None:
    clock = Ticks()
    progress = Progress(terminal=False, clock=clock)
    progress("reading", 0, 10)
    progress("reading", 10, 10)
    clock.now += 1.0
    progress("ledger", 0, 10)
    clock.now += 1.5  # the ledger phase is still running when the export reaches 2 s
    progress("ledger", 10, 10)
    progress("encoding library", 0, 4)
    clock.now += 30
    progress("encoding library", 4, 4)
    progress.end()
    assert capsys.readouterr().err.splitlines() == ["ledger: 10", "encoding library: 4"]


def test_a_short_export_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(terminal=True, clock=Ticks())
    for phase in ("reading", "ledger", "rendering"):
        progress(phase, 0, 5)
        progress(phase, 5, 5)
    progress.end()
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_first_export_of_the_sample_names_its_phases(tmp_path: Path) -> None:
    root = copy_sample(tmp_path)
    result = subprocess.run([*FEDNODE, "export", "--project", str(root)],
                            env=dict(ENV, FEDNODE_CACHE_DIR=""),  # (encoding, not cached)
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    shown = [line.split(":")[0] for line in result.stderr.splitlines()]
    assert "encoding library" in shown and "writing bundle" in shown
    assert shown[-1].startswith("base URL")


async def test_serve_warns_on_each_reload_that_links_elsewhere(
        caplog: pytest.LogCaptureFixture) -> None:
    def snapshot(build: str, base: str) -> SimpleNamespace:
        return SimpleNamespace(build=build, meta=SimpleNamespace(base_url=base,
                                                                 sidecar_url=base))
    here = "http://127.0.0.1:8123"
    store = SimpleNamespace(snapshot=snapshot("b1", here))
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, "fednode.sidecar")
    watching = asyncio.create_task(serve._warn_on_reload(store, here, stop,  # type: ignore[arg-type]
                                                         interval=0.01))
    await asyncio.sleep(0.05)
    store.snapshot = snapshot("b2", "http://127.0.0.1:8000")
    await asyncio.sleep(0.05)
    store.snapshot = snapshot("b3", here)
    await asyncio.sleep(0.05)
    stop.set()
    await watching
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "build b2" in warned[0] and "http://127.0.0.1:8000" in warned[0]
    assert f"--base-url {here}" in warned[0]
