"""The node's signing key as the export uses it (exporter/contract/signing.py): made by
`fednode init` or the first export, kept in .fednode/ (0600) or given by FEDNODE_SIGNING_KEY,
never made by a --frozen export, and the same manifest bytes from the same key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import Node, species
from click.testing import CliRunner

from cli.main import main
from exporter.contract.errors import FednodeError
from exporter.contract.signing import (
    KEY_ENV,
    KEY_FILE,
    ROTATIONS_FILE,
    NodeKey,
    check_manifest,
    follow,
)
from exporter.pipeline.build import BuildReport
from exporter.project.config import Project

Export = Callable[..., BuildReport]


def manifest_of(root: Path) -> bytes:
    return (Project(root).site_out / "api" / "manifest.json").read_bytes()


def test_the_first_export_makes_the_key_and_signs_the_manifest(node: Node,
                                                                export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    path = Project(node.root).private / KEY_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    key = NodeKey.load(Project(node.root).private)
    assert key is not None
    data = json.loads(manifest_of(node.root))
    signed = check_manifest(data)
    assert signed is not None and signed.key == key.public
    assert data["node"]["key_fingerprint"] == key.public.fingerprint
    assert list(data)[-1] == "signature"
    # The private key stays in .fednode/: in no file of the site or the bundle.
    secret = b"".join(path.read_bytes().split(b"\n")[1].split()[:1])
    for tree in (Project(node.root).site_out, Project(node.root).bundle):
        for path in tree.resolve().rglob("*"):
            assert not path.is_file() or secret not in path.read_bytes(), path


def test_a_frozen_export_never_makes_a_key_and_takes_one_from_the_environment(
        node: Node, export: Export, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CDN's build (`--frozen`) without the key is refused, and publishes nothing; with
    FEDNODE_SIGNING_KEY it signs as the node does, byte for byte."""
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    before = manifest_of(node.root)
    path = Project(node.root).private / KEY_FILE
    text = path.read_text()
    path.unlink()
    with pytest.raises(FednodeError, match=f"a --frozen export never makes one.*{KEY_ENV}"):
        export(node.root, frozen=True)
    assert manifest_of(node.root) == before and not path.exists()
    monkeypatch.setenv(KEY_ENV, text)
    export(node.root, frozen=True)
    assert manifest_of(node.root) == before
    monkeypatch.setenv(KEY_ENV, "-----BEGIN PRIVATE KEY-----\nnot one\n")
    with pytest.raises(FednodeError, match=f"{KEY_ENV}: not a PEM private key"):
        export(node.root, frozen=True)


def test_init_makes_the_key_and_identity_shows_it(tmp_path: Path) -> None:
    folder = tmp_path / "our-node"
    made = CliRunner().invoke(main, ["init", str(folder)])
    assert made.exit_code == 0, made.output
    key = NodeKey.load(Project(folder).private)
    assert key is not None and key.public.fingerprint in made.stderr
    shown = CliRunner().invoke(main, ["identity", "--project", str(folder)])
    assert shown.exit_code == 0, shown.output
    assert f"fingerprint: {key.public.fingerprint}" in shown.stdout
    assert f"public key: {key.public.text}" in shown.stdout
    broken = Project(folder).private / KEY_FILE
    broken.write_text("not a key")
    refused = CliRunner().invoke(main, ["identity", "--project", str(folder)])
    assert refused.exit_code == 1 and "not a PEM private key" in refused.stderr


def test_rotate_keeps_the_statement_beside_the_ledger_and_refuses_an_environment_key(
        node: Node, export: Export, monkeypatch: pytest.MonkeyPatch) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    old = NodeKey.load(Project(node.root).private)
    assert old is not None
    monkeypatch.setenv(KEY_ENV, (Project(node.root).private / KEY_FILE).read_text())
    refused = CliRunner().invoke(main, ["identity", "--project", str(node.root), "rotate"])
    assert refused.exit_code == 1 and f"{KEY_ENV} is set" in refused.stderr
    monkeypatch.delenv(KEY_ENV)
    rotated = CliRunner().invoke(main, ["identity", "--project", str(node.root), "rotate"])
    assert rotated.exit_code == 0, rotated.output
    statements = json.loads((node.root / ROTATIONS_FILE).read_text())
    new = NodeKey.load(Project(node.root).private)
    assert new is not None and new.public != old.public
    export(node.root)
    data = json.loads(manifest_of(node.root))
    assert data["node"]["key_rotations"] == statements
    assert follow(data["node"]["id"], old.public.fingerprint, new.public, statements)
