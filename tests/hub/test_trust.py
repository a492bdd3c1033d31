"""Who a member is (hub/trust.py, exporter/contract/signing.py, `fednode verify`): real
member nodes on 127.0.0.1 that lie about who they are (an impersonator, one claiming the
hub's id, a replay of another member's signed files, a key changed without a word), a key
rotated as the docs say, and a record checked back through two hubs to the node that wrote
it, with the real `fednode hub sync`, `hub export` and sidecars."""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from builders import NODE_TOML, Node, ServerThread, app_for, http_get, species
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processes import free_port

from cli.main import main
from exporter.contract.signing import (
    KEY_FILE,
    NodeKey,
    PublicKey,
    check_manifest,
    follow,
    rotation,
    signed_manifest,
)
from exporter.contract.wire import encode
from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.errors import SyncError
from hub.export import hub_project
from hub.members import Hub, Member, load_hub
from hub.messages import parse_manifest
from hub.project import read_identity
from hub.status import Status
from hub.trust import Claims, MemberTrust


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@dataclass
class Served:
    """A node exported with its sidecar's address as its base URL, and that sidecar."""

    node: Node
    node_id: str
    port: int
    server: ServerThread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def export(self, at: datetime) -> None:
        build(Project(self.node.root), now=at, base_url=self.url)

    def start(self, stack: ExitStack) -> None:
        self.server = stack.enter_context(ServerThread(app_for(self.node.root,
                                                               reload_interval=0),
                                                       port=self.port))


def make_node(root: Path, name: str, node_id: str, title: str, plants: list[str]) -> Served:
    toml = (NODE_TOML.replace("00000000-0000-4000-8000-000000000001", node_id)
            .replace("Test Node", title))
    node = Node(root / name, toml)
    for n, plant in enumerate(plants):
        node.write("species", f"s{n}", species(plant))
    return Served(node, node_id, free_port())


def ident(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def add_by_hand(folder: Path, name: str, url: str, **pins: str) -> None:
    """A [[member]] table as an operator writes it, pins or none."""
    lines = ["", "[[member]]", f'name = "{name}"', f'url = "{url}"',
             *(f'{key} = "{value}"' for key, value in pins.items())]
    with (folder / "hub.toml").open("a") as file:
        file.write("\n".join(lines) + "\n")


def lines_of(result: Result) -> dict[str, str]:
    return {line.split(":", 1)[0]: line for line in result.stdout.splitlines()}


def hub_species(folder: Path) -> list[dict[str, Any]]:
    """Every species record the hub's export wrote, as served."""
    root = hub_project(folder).site_out / "api" / "species"
    found = [json.loads(path.read_bytes()) for path in sorted(root.glob("*/*.json"))]
    return [record for record in found if "items" not in record]


class Proxy:
    """A real aiohttp server answering, at its own address, what another node serves:
    replayed as it is, or with its records' answers changed by `edit`."""

    def __init__(self, target: str, edit: Callable[[str, bytes], bytes] | None = None) -> None:
        self.target = target
        self.edit = edit or (lambda path, body: body)
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.answer)
        self.server = ServerThread(app, runner=web.AppRunner)

    async def answer(self, request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(
                self.target + request.path_qs) as answer:
            body = self.edit(request.path, await answer.read())
            return web.Response(body=body, status=answer.status,
                                content_type=answer.content_type)


@pytest.mark.slow
def test_no_member_takes_another_members_place(tmp_path: Path) -> None:
    """Beta is added (pinned) but down at the first sync; an impersonator listed before it
    claims beta's node id and name, another the hub's own id, and a third replays beta's
    signed manifest and files at its own address. Each fails on its own line, naming what it
    claimed; beta, once up, is served under its own name with its own records only, and
    nothing any of them sent is served."""
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    alpha = make_node(tmp_path, "alpha", ident(1), "Node Alpha", ["Alpha plant"])
    beta = make_node(tmp_path, "beta", ident(2), "Node Beta", ["Beta one", "Beta two"])
    liar = make_node(tmp_path, "liar", ident(2), "Node Beta", ["Liar weed"])
    folder = tmp_path / "hub"
    assert cli("hub", "init", str(folder)).exit_code == 0
    hub_id = read_identity(load_hub(folder))["node"]["id"]
    usurper = make_node(tmp_path, "usurper", hub_id, "Test hub", ["Usurper weed"])
    with ExitStack() as stack:
        for one in (alpha, beta, liar, usurper):
            one.export(at)
        alpha.start(stack)
        assert cli("hub", "add", alpha.url, "--hub", str(folder), "--name",
                   "alpha").exit_code == 0
        for one in (liar, usurper):  # listed before beta: the hub's order gives them nothing
            one.start(stack)
            add_by_hand(folder, one.node.root.name, one.url)
        with ServerThread(app_for(beta.node.root, reload_interval=0), port=beta.port):
            added = cli("hub", "add", beta.url, "--hub", str(folder), "--name", "beta")
        assert added.exit_code == 0, added.output
        beta_key = NodeKey.load(Project(beta.node.root).private)
        assert beta_key is not None and beta_key.public.fingerprint in added.stderr
        # beta is down at the first sync (its retries bounded, to keep the test short)
        with (folder / "hub.toml").open("a") as file:
            file.write("timeout = 3\n")
        first = cli("hub", "sync", "--hub", str(folder))
        assert first.exit_code == 1
        said = lines_of(first)
        assert said["alpha"].startswith("alpha: ok: added 1")
        assert said["beta"].startswith("beta: failed:") and "no copy yet" in said["beta"]
        assert said["liar"].startswith(
            f"liar: failed: its manifest claims the node id {ident(2)}, which the member beta "
            f"holds") and "nothing it sent is served" in said["liar"]
        assert said["usurper"].startswith(
            f"usurper: failed: its manifest claims the node id {hub_id}, which the hub itself "
            f"holds")
        beta.start(stack)
        replay = Proxy(beta.url)
        stack.enter_context(replay.server)
        add_by_hand(folder, "mirror", replay.server.url)
        second = cli("hub", "sync", "--hub", str(folder))
        said = lines_of(second)
        assert said["beta"].startswith("beta: ok: added 2"), second.output
        assert said["liar"].startswith("liar: failed: its manifest claims the node id")
        assert said["mirror"].startswith(
            f"mirror: failed: its manifest claims the node id {ident(2)}, which the member "
            f"beta holds")
        exported = cli("hub", "export", "--hub", str(folder))
        assert exported.exit_code == 0, exported.output
        records = hub_species(folder)
        titles = sorted(record["title"] for record in records)
        assert titles == ["Alpha plant", "Beta one", "Beta two"]
        for record in records:
            name = "Node Beta" if record["title"].startswith("Beta") else "Node Alpha"
            assert record["source_node_name"] == name
            base = beta.url if name == "Node Beta" else alpha.url
            assert record["source_url"].startswith(base + "/api/species/")
        site = b"".join(path.read_bytes() for path in
                        hub_project(folder).site_out.rglob("*") if path.is_file())
        assert b"Liar weed" not in site and b"Usurper weed" not in site
        manifest = json.loads((hub_project(folder).site_out / "api" /
                               "manifest.json").read_bytes())
        listed = {m["name"]: m for m in manifest["network"]["members"]}
        assert listed["beta"]["node_id"] == ident(2) and "manifest" in listed["beta"]
        assert "manifest" not in listed["liar"] and "node_id" not in listed["liar"]


def following(folder: Path, node: Served, at: datetime, stack: ExitStack, name: str) -> None:
    """A hub in `folder` following `node` (exported at `at` and served), added as `name`
    and synced once."""
    node.export(at)
    node.start(stack)
    assert cli("hub", "init", str(folder)).exit_code == 0
    assert cli("hub", "add", node.url, "--hub", str(folder), "--name", name).exit_code == 0
    assert cli("hub", "sync", "--hub", str(folder)).exit_code == 0


@pytest.mark.slow
def test_a_changed_key_is_refused_until_the_operator_pins_it(tmp_path: Path) -> None:
    """A member whose key changes without a rotation statement (a lost key) fails, keeps
    its last good copy, and is followed again once hub.toml names the new fingerprint."""
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    beta = make_node(tmp_path, "beta", ident(2), "Node Beta", ["Beta one"])
    folder = tmp_path / "hub"
    with ExitStack() as stack:
        following(folder, beta, at, stack, "beta")
        old = NodeKey.load(Project(beta.node.root).private)
        (Project(beta.node.root).private / KEY_FILE).unlink()
        beta.node.write("species", "s1", species("Beta two"))
        beta.export(at + timedelta(minutes=1))
        new = NodeKey.load(Project(beta.node.root).private)
        assert old is not None and new is not None
        assert beta.server is not None
        beta.server.settle()
        refused = cli("hub", "sync", "--hub", str(folder))
        assert refused.exit_code == 1
        line = refused.stdout.splitlines()[0]
        assert f"is signed by the key {new.public.fingerprint}, not its pinned key " \
               f"{old.public.fingerprint}" in line and "stale since" in line, line
        assert "set it as fingerprint in hub.toml; stale since" in line
        text = (folder / "hub.toml").read_text()
        (folder / "hub.toml").write_text(text.replace(old.public.fingerprint,
                                                      new.public.fingerprint))
        followed = cli("hub", "sync", "--hub", str(folder))
        assert followed.exit_code == 0, followed.output
        assert followed.stdout.startswith("beta: ok"), followed.stdout
        assert "added 1, updated 0, removed 0; 2 records" in followed.stdout


@pytest.mark.slow
def test_a_rotated_key_is_followed_and_pinned(tmp_path: Path) -> None:
    """`fednode identity rotate` twice, each followed by an export: the hub follows each
    statement signed by the key it pinned, and pins the new key in its status file."""
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    alpha = make_node(tmp_path, "alpha", ident(1), "Node Alpha", ["Alpha plant"])
    folder = tmp_path / "hub"
    with ExitStack() as stack:
        following(folder, alpha, at, stack, "alpha")
        keys = [cli("identity", "--project", str(alpha.node.root)).stdout]
        for turn in (1, 2):
            rotated = cli("identity", "--project", str(alpha.node.root), "rotate")
            assert rotated.exit_code == 0, rotated.output
            keys.append(cli("identity", "--project", str(alpha.node.root)).stdout)
            alpha.export(at + timedelta(minutes=turn))
            assert alpha.server is not None
            alpha.server.settle()
            if turn == 1:
                continue
            synced = cli("hub", "sync", "--hub", str(folder))
            assert synced.exit_code == 0, synced.output
            prints = [text.split("fingerprint: ")[1].strip() for text in keys]
            assert f"Note: alpha: followed its key's rotation from {prints[0]} to " \
                   f"{prints[2]}" in synced.stderr
            status = json.loads((folder / "members" / "alpha.status.json").read_text())
            assert status["key_fingerprint"] == prints[2]
            again = cli("hub", "sync", "--hub", str(folder))
            assert again.exit_code == 0 and "Note:" not in again.stderr, again.output


# --- the claims of any sequence of members, generated ---------------------------------------


KEYS = [NodeKey.generate() for _ in range(4)]  # the last is the hub's
IDS = ["node-a", "node-b", "node-c", "hub-id"]  # the last is the hub's
NAMES = ["m0", "m1", "m2"]


def claimed(node_id: str, key: NodeKey) -> Any:
    """A signed manifest claiming `node_id` with `key`, parsed as a hub reads it."""
    manifest = signed_manifest({
        "node": {"id": node_id, "name": node_id, "base_url": "http://127.0.0.1:9"},
        "sync": {"seq": 0, "snapshots": [], "changes": {
            "url": "http://127.0.0.1:9/api/sync/changes.ndjson", "sha256": "0" * 64}}},
        key, [])
    return parse_manifest(encode(manifest), "test")


MANIFESTS = {(node_id, n): claimed(node_id, key) for node_id in IDS
             for n, key in enumerate(KEYS)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(IDS),
                                          st.integers(0, len(KEYS) - 1)),
                                max_size=6), min_size=1, max_size=5),
       pins=st.dictionaries(st.sampled_from(NAMES), st.tuples(
           st.sampled_from(IDS), st.integers(0, len(KEYS) - 1)), max_size=3))
def test_no_sequence_of_claims_serves_a_record_under_another_members_name(
        rounds: list[list[tuple[str, str, int]]],
        pins: dict[str, tuple[str, int]]) -> None:
    """Members claiming any ids and keys, in any order, over several syncs, some pinned in
    hub.toml: no two members ever hold one node id or key, none holds the hub's, a member
    holds its pinned id and key or nothing, and its key never changes once pinned."""
    hub = Hub(Path("/nonexistent"), "hub", 4, 300.0, tuple(
        Member(name, f"http://127.0.0.1:{n + 10}",
               node_id=pins[name][0] if name in pins else None,
               fingerprint=KEYS[pins[name][1]].public.fingerprint if name in pins else None)
        for n, name in enumerate(NAMES)))
    statuses = {name: Status(name, "", False) for name in NAMES}
    hub_key = KEYS[-1].public.fingerprint
    for run in rounds:
        claims = Claims.of(hub, statuses, IDS[-1], KEYS[-1])
        for name, node_id, n in run:
            member = next(m for m in hub.members if m.name == name)
            trust = MemberTrust(member, statuses[name], claims)
            try:
                trust(MANIFESTS[node_id, n])
            except SyncError:
                continue
            status = statuses[name]
            assert status.key_fingerprint in (None, trust.key)  # (no rotations here)
            status.node_id, status.key_fingerprint = node_id, trust.key
            status.last_success = "2026-03-01T08:00:00Z"
        held = [(s.node_id, s.key_fingerprint) for s in statuses.values() if s.node_id]
        ids, keys = [i for i, _ in held], [k for _, k in held]
        assert len(set(ids)) == len(ids) and len(set(keys)) == len(keys)
        assert IDS[-1] not in ids and hub_key not in keys
        for name, (node_id, n) in pins.items():
            status = statuses[name]
            assert status.node_id in (None, node_id)
            assert status.key_fingerprint in (None, KEYS[n].public.fingerprint)


# --- signatures --------------------------------------------------------------------------


@given(st.dictionaries(st.text(max_size=8), st.recursive(
    st.none() | st.booleans() | st.integers(-2**53 + 1, 2**53 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10), max_size=5), st.text(min_size=1, max_size=5))
@settings(max_examples=100, deadline=None)
def test_a_signed_manifest_checks_and_any_change_breaks_it(extra: dict[str, Any],
                                                           changed: str) -> None:
    key = KEYS[0]
    manifest = signed_manifest({"node": {"id": "node-a"}, **extra}, key, [])
    sent = json.loads(json.dumps(manifest, indent=3, sort_keys=True))  # other bytes, same value
    found = check_manifest(sent)
    assert found is not None and found.key == key.public and found.node_id == "node-a"
    sent["node"]["name"] = changed
    with pytest.raises(Exception, match="does not verify"):
        check_manifest(sent)


def test_a_rotation_is_followed_only_from_the_key_that_signed_it() -> None:
    old, new, other = KEYS[0], KEYS[1], KEYS[2]
    statement = rotation("node-a", old, new.public, "2026-03-01T08:00:00Z")
    assert follow("node-a", old.public.fingerprint, new.public, [statement]) == [
        old.public.fingerprint, new.public.fingerprint]
    assert follow("node-b", old.public.fingerprint, new.public, [statement]) is None
    assert follow("node-a", other.public.fingerprint, new.public, [statement]) is None
    forged = {**statement, "old_key": other.public.text}  # the old key's signature on it
    assert follow("node-a", other.public.fingerprint, new.public, [forged]) is None
    # a rotation tried twice (the first lost), then on: every statement is followed
    lost = rotation("node-a", old, KEYS[3].public, "2026-03-01T08:00:00Z")
    onward = rotation("node-a", new, other.public, "2026-03-02T08:00:00Z")
    assert follow("node-a", old.public.fingerprint, other.public, [lost, statement, onward]) \
        == [old.public.fingerprint, new.public.fingerprint, other.public.fingerprint]
    assert PublicKey.parse(new.public.text) == new.public


# --- a record back through two hubs ------------------------------------------------------


def retitled(path: str, body: bytes) -> bytes:
    """A record served one by one with its title changed (not the sync files): a hub
    altering what its member signed, as a client sees it."""
    if path.startswith("/api/species/"):
        return body.replace(b'"title":"Alpha plant"', b'"title":"Alpha plant (ours)"')
    return body


def export_hub_at(folder: Path, port: int) -> None:
    exported = cli("hub", "export", "--hub", str(folder), "--base-url",
                   f"http://127.0.0.1:{port}")
    assert exported.exit_code == 0, exported.output


@pytest.mark.slow
def test_a_record_is_verified_through_two_hubs_to_the_node_that_wrote_it(
        tmp_path: Path) -> None:
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    alpha = make_node(tmp_path, "alpha", ident(1), "Node Alpha", ["Alpha plant"])
    inner, outer = tmp_path / "inner", tmp_path / "outer"
    ports = {"inner": free_port(), "outer": free_port()}
    with ExitStack() as stack:
        alpha.export(at)
        alpha.start(stack)
        assert cli("hub", "init", str(inner), "--name", "Inner hub").exit_code == 0
        assert cli("hub", "add", alpha.url, "--hub", str(inner), "--name",
                   "alpha").exit_code == 0
        assert cli("hub", "sync", "--hub", str(inner)).exit_code == 0
        export_hub_at(inner, ports["inner"])
        stack.enter_context(ServerThread(app_for(hub_project(inner).root, reload_interval=0),
                                         port=ports["inner"]))
        assert cli("hub", "init", str(outer), "--name", "Outer hub").exit_code == 0
        assert cli("hub", "add", f"http://127.0.0.1:{ports['inner']}", "--hub", str(outer),
                   "--name", "inner").exit_code == 0
        synced = cli("hub", "sync", "--hub", str(outer))
        assert synced.exit_code == 0, synced.output
        export_hub_at(outer, ports["outer"])
        stack.enter_context(ServerThread(app_for(hub_project(outer).root, reload_interval=0),
                                         port=ports["outer"]))
        status, _, body = http_get(f"http://127.0.0.1:{ports['outer']}/api/species")
        assert status == 200
        (item,) = json.loads(body)["items"]
        url = item["url"]
        checked = cli("verify", url)
        assert checked.exit_code == 0, checked.output
        said = checked.stdout
        assert "served by Outer hub" in said and "as Inner hub" in said
        assert said.rstrip().endswith("ok") and "written by Node Alpha" in said
        alpha_key = NodeKey.load(Project(alpha.node.root).private)
        assert alpha_key is not None and alpha_key.public.fingerprint in said
        whole = cli("verify", f"http://127.0.0.1:{ports['outer']}")
        assert whole.exit_code == 0, whole.output
        assert "member inner: Inner hub" in whole.stdout
        wrong = cli("verify", url, "--fingerprint", alpha_key.public.fingerprint)
        assert wrong.exit_code == 1 and "not by " + alpha_key.public.fingerprint in wrong.stderr
        tamper = Proxy(f"http://127.0.0.1:{ports['outer']}", retitled)
        stack.enter_context(tamper.server)
        altered = cli("verify", tamper.server.url + url.split(str(ports["outer"]), 1)[1])
        assert altered.exit_code == 1
        assert "differs from the one in the sync files" in altered.stderr, altered.output


def test_hub_toml_keeps_the_pins_hub_add_writes(tmp_path: Path) -> None:
    """hub.toml's node_id and fingerprint: read back as written; malformed ones refused."""
    folder = tmp_path / "hub"
    assert cli("hub", "init", str(folder)).exit_code == 0
    add_by_hand(folder, "alpha", "http://127.0.0.1:9", node_id=ident(1),
                fingerprint=KEYS[0].public.fingerprint)
    (member,) = load_hub(folder).members
    assert (member.node_id, member.fingerprint) == (ident(1), KEYS[0].public.fingerprint)
    assert tomllib.loads((folder / "hub.toml").read_text())["member"][0]["node_id"] == ident(1)
    add_by_hand(folder, "beta", "http://127.0.0.1:10", fingerprint="SHA256:short")
    refused = cli("hub", "sync", "--hub", str(folder))
    assert refused.exit_code == 1 and "fingerprint: expected the node's key fingerprint" in \
        refused.stderr


def test_a_manifest_signed_by_no_one_or_changed_is_refused() -> None:
    manifest = signed_manifest({"node": {"id": "node-a", "name": "A"},
                                "sync": {"seq": 0, "snapshots": [], "changes": {
                                    "url": "http://x/api/sync/changes.ndjson",
                                    "sha256": "0" * 64}}}, KEYS[0], [])
    body = encode(manifest)
    assert parse_manifest(body, "m").signed is not None
    changed = dict(manifest, sync={**manifest["sync"], "seq": 1})
    with pytest.raises(SyncError, match="does not verify"):
        parse_manifest(encode(changed), "m")
    stranger = dict(manifest, node={**manifest["node"], "public_key": KEYS[1].public.text})
    with pytest.raises(SyncError, match="not the fingerprint"):
        parse_manifest(encode(stranger), "m")
    huge = dict(manifest, sync={**manifest["sync"], "seq": 2**70})
    with pytest.raises(SyncError):
        parse_manifest(encode(huge), "m")



def test_a_source_url_outside_the_members_base_url_is_left_out() -> None:
    """A member's record that points at another node's record (its `url` set to beta's) is
    served without a source_url; one under the member's own base URL keeps it."""
    from exporter.project.schemas import collections
    from hub.republish import Source, hub_fields

    source = Source("liar", ident(9), "Liar node", "CC0-1.0", "https://liar.example.org")
    record = {"id": ident(7), "access": "public", "title": "Liar weed",
              "scientificName": "Liar weed"}
    kind = collections()["species"]
    for url, kept in (("https://beta.example.org/api/species/" + ident(7), False),
                      ("https://liar.example.org.evil/api/species/" + ident(7), False),
                      ("https://liar.example.org/../beta/api/species/" + ident(7), False),
                      ("https://liar.example.org//beta.example.org/x", False),
                      ("https://liar.example.org/api/species/" + ident(7), True)):
        fields = hub_fields(source, kind, {**record, "url": url})
        assert ("source_url" in fields) is kept, url
        assert fields["source_node"] == ident(9) and fields["source_node_name"] == "Liar node"


@pytest.mark.slow
def test_an_old_signed_manifest_replayed_is_a_restore_said_as_such(tmp_path: Path) -> None:
    """A member's own older signed state served again (a replay, or a restore from a
    backup): signed by its key, so followed, and reloaded with a line that says so; the
    records served are the older ones, still under the member's own name."""
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    beta = make_node(tmp_path, "beta", ident(2), "Node Beta", ["Beta one"])
    beta.export(at)
    old = tmp_path / "beta-old"
    shutil.copytree(beta.node.root, old, symlinks=True)
    folder = tmp_path / "hub"
    assert cli("hub", "init", str(folder)).exit_code == 0
    with ServerThread(app_for(beta.node.root, reload_interval=0), port=beta.port):
        assert cli("hub", "add", beta.url, "--hub", str(folder), "--name",
                   "beta").exit_code == 0
        assert cli("hub", "sync", "--hub", str(folder)).exit_code == 0
    beta.node.write("species", "s1", species("Beta two"))
    beta.export(at + timedelta(minutes=1))
    with ServerThread(app_for(beta.node.root, reload_interval=0), port=beta.port):
        newer = cli("hub", "sync", "--hub", str(folder))
        assert "beta: ok: added 1" in newer.stdout, newer.output
    with ServerThread(app_for(old, reload_interval=0), port=beta.port):
        replayed = cli("hub", "sync", "--hub", str(folder))
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout.startswith(
        "beta: ok: the node's sync position went back from 2 to 1 (restored from a backup?): "
        "reloaded everything; added 0, updated 0, removed 1; 1 records"), replayed.stdout
    assert cli("hub", "export", "--hub", str(folder)).exit_code == 0
    assert [(r["title"], r["source_node_name"]) for r in hub_species(folder)] == [
        ("Beta one", "Node Beta")]
