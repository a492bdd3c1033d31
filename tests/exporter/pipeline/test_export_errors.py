"""A damaged ledger or content folder: one clear line naming the file, the line and the fix,
never a traceback, and nothing public or private changes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import REPO, Node, species, team
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cli.main import main

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def snapshot(root: Path) -> dict[str, str]:
    """Every byte an export writes or keeps: site_out, the private folder, the ledger."""
    files = {"ledger.jsonl": root / "ledger.jsonl"}
    for top in ("site_out", ".fednode"):
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "cache" not in path.parts:
                files[str(path.relative_to(root))] = path
    return {name: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for name, path in files.items()}


def exported_node(folder: Path) -> Path:
    node = Node(folder)
    node.write("species", "a", species("Fallopia japonica"))
    node.write("species", "b", species("Arnica montana", access="sensitive", family="Asteraceae",
                                       category="native", establishmentMeans="native"))
    node.write("team", "c", team("Bea"))
    result = CliRunner().invoke(main, ["export", "--project", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


def cli_export(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "export", "--project", str(root)],
                          env=ENV, capture_output=True, text=True)


def assert_one_error(result: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for part in parts:
        assert part in result.stderr, (part, result.stderr)
    return result.stderr


def set_field(ledger: Path, number: int, name: str, value: Any) -> None:
    lines = ledger.read_text().splitlines(keepends=True)
    row = json.loads(lines[number - 1])
    row[name] = value
    lines[number - 1] = json.dumps(row) + "\n"
    ledger.write_text("".join(lines))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "value"), [
    ("seq", "2"), ("seq", 1.5), ("seq", True), ("seq", None), ("id", 5), ("id", ["x"]),
    ("id", "8ED5B2E8-0000-4000-8000-000000000001\n"), ("at", 1772352000),
    ("at", "\u0662\u0660\u0662\u0666-03-01T08:00:00Z"),  # digits of another script
    ("access", {"group": "partners"}),
    ("seq", 10**18), ("seq", 10**30), ("at", "9999-99-99T99:99:99Z"),
    ("at", "2026-02-30T08:00:00Z"), ("at", "2026-03-01T24:00:00Z"),
])
def test_ledger_field_of_the_wrong_type(tmp_path: Path, name: str, value: Any) -> None:
    root = exported_node(tmp_path / "node")
    before = snapshot(root)
    set_field(root / "ledger.jsonl", 2, name, value)
    ledger = (root / "ledger.jsonl").read_bytes()
    message = assert_one_error(cli_export(root), f"ledger.jsonl:2: {name}:",
                               "restore it from version control")
    said = [line for line in message.splitlines()  # (not the progress of a slow machine)
            if not re.fullmatch(r"[a-z ]+: \d+", line)]
    assert len(said) == 1
    assert (root / "ledger.jsonl").read_bytes() == ledger
    before.pop("ledger.jsonl")
    after = snapshot(root)
    after.pop("ledger.jsonl")
    assert after == before


def test_a_ledger_number_too_long_to_read_is_said_so(tmp_path: Path) -> None:
    """Python turns at most 4,300 digits into a number: a longer seq is an error of its
    line, never a traceback."""
    root = exported_node(tmp_path / "node")
    lines = (root / "ledger.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"seq":2,', '"seq":2' + "0" * 5000 + ",")
    (root / "ledger.jsonl").write_text("".join(lines))
    assert_one_error(cli_export(root), "ledger.jsonl:2: not a ledger event (a number of 5001 "
                                       "digits)", "restore it from version control")


def test_ledger_that_is_a_folder(tmp_path: Path) -> None:
    root = exported_node(tmp_path / "node")
    (root / "ledger.jsonl").rename(root / "saved.jsonl")
    (root / "ledger.jsonl").mkdir()
    before = snapshot(root)
    assert_one_error(cli_export(root), "ledger.jsonl: is a folder", "restore ledger.jsonl")
    assert snapshot(root) == before


@pytest.mark.parametrize(("link", "target", "said"), [
    ("content/loop", "loop", "content/loop: a symbolic link that loops"),
    ("content/species/x.md", "x.md", "content/species/x.md: a symbolic link that loops"),
    ("content/species/gone.md", "nowhere.md", "content/species/gone.md: a symbolic link"),
    ("content/species/more", "../species", "content/species/more: a folder inside a collection"),
    ("content/node.toml", "node.toml", "content/node.toml: a symbolic link that loops"),
])
def test_links_under_content_that_cannot_be_read(tmp_path: Path, link: str, target: str,
                                                 said: str) -> None:
    root = exported_node(tmp_path / "node")
    before = snapshot(root)
    path = root / link
    path.unlink(missing_ok=True)
    path.symlink_to(target)
    assert_one_error(cli_export(root), said, "nothing was written")
    assert snapshot(root) == before


@pytest.mark.slow
def test_a_linked_collection_folder_is_read(tmp_path: Path) -> None:
    """A collection kept elsewhere (another checkout) and linked in is content like any."""
    root = exported_node(tmp_path / "node")
    elsewhere = tmp_path / "private-team"
    shutil.move(root / "content" / "team", elsewhere)
    (root / "content" / "team").symlink_to(elsewhere)
    Node(root).write("team", "d", team("Dee"))
    result = cli_export(root)
    assert result.returncode == 0, result.stderr
    page = json.loads((root / "site_out" / "api" / "team" / "index.json").read_bytes())
    assert [item["name"] for item in page["items"]] == ["Bea", "Dee"]


# --- generated damage ---------------------------------------------------------------

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
VALID: dict[str, Callable[[Any], bool]] = {  # what a ledger field may hold (line 2)
    "seq": lambda v: type(v) is int and v > 1,
    "at": lambda v: isinstance(v, str)
    and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v) is not None,
    "op": lambda v: v in ("create", "update", "access", "delete"),
    "collection": lambda v: v in ("species", "resources", "treatments", "germination", "team"),
    "id": lambda v: isinstance(v, str) and UUID.fullmatch(v) is not None,
    "hash": lambda v: isinstance(v, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", v) is not None,
    "access": lambda v: isinstance(v, str)
    and re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", v) is not None,
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=5)


@pytest.fixture(scope="module")
def damaged_node() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fednode-ledger-") as folder:
        yield exported_node(Path(folder) / "node")


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(VALID)), value=json_values)
def test_generated_wrong_ledger_values(damaged_node: Path, name: str, value: Any) -> None:
    assume(not VALID[name](value))
    root = damaged_node
    ledger = root / "ledger.jsonl"
    good = ledger.read_bytes()
    before = snapshot(root)
    try:
        set_field(ledger, 2, name, value)
        result = CliRunner().invoke(main, ["export", "--project", str(root)])
        assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
        assert result.exit_code == 1
        assert result.output.count("Error:") == 1
        assert f"ledger.jsonl:2: {name}:" in result.output
        ledger.write_bytes(good)
        assert snapshot(root) == before
    finally:
        ledger.write_bytes(good)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.binary(max_size=80).filter(lambda b: b"\n" not in b), number=st.integers(1, 3))
def test_generated_garbage_ledger_lines(damaged_node: Path, line: bytes, number: int) -> None:
    """Any line in place of an event: the export completes (a blank line is allowed) or
    fails with one error naming the line, and nothing changes."""
    root = damaged_node
    ledger = root / "ledger.jsonl"
    good = ledger.read_bytes()
    before = snapshot(root)
    try:
        lines = good.split(b"\n")
        lines[number - 1] = line
        ledger.write_bytes(b"\n".join(lines))
        result = CliRunner().invoke(main, ["export", "--project", str(root)])
        assert isinstance(result.exception, SystemExit | None), result.exception
        if result.exit_code:
            assert result.output.count("Error:") == 1
            assert f"ledger.jsonl:{number}:" in result.output
            ledger.write_bytes(good)
            assert snapshot(root) == before
        else:
            assert not line.strip()
    finally:
        ledger.write_bytes(good)
