"""A hub of many members (hub.toml, `fednode hub ...`) against real nodes on 127.0.0.1:
real sidecars over exported content, and a real aiohttp server playing the members that
misbehave (a web page, JSON that is no manifest, a node that never answers) and standing
in front of real nodes to stall or rewrite what they answer."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import signal
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import pytest
from aiohttp import web
from builders import (
    NODE_TOML,
    REPO,
    Node,
    ServerThread,
    app_for,
    issue_key,
    resigned,
    species,
)
from click.testing import CliRunner, Result
from processes import ENV, FEDNODE, free_port
from worlds import hub_view, node_view
from yarl import URL

from cli.main import main
from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.members import load_hub, locked
from hub.network import sync_members
from hub.node import Limits
from hub.status import Status, copy_version

QUICK = Limits(attempts=2, backoff=0.01, connect_timeout=1.0)


class Tricks:
    """A real aiohttp server on 127.0.0.1 playing members under a path prefix each: /html
    answers a web page, /junk JSON that is no manifest, /slow/... never answers (until the
    test ends), and /to/<name>/... forwards to the real node `targets[name]`, stalling the
    requests `stall` picks and rewriting the bodies `edits` names by path."""

    def __init__(self) -> None:
        self.targets: dict[str, str] = {}
        self.stall: Callable[[str], bool] = lambda path: False
        self.edits: dict[str, Callable[[bytes], bytes]] = {}
        self.released = False
        self.arrivals: list[float] = []  # when each request to /slow came (monotonic)
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.answer)
        self.server = ServerThread(app, runner=web.AppRunner)

    def url(self, prefix: str) -> str:
        return f"{self.server.url}/{prefix}"

    def reset(self) -> None:
        self.targets, self.edits, self.stall = {}, {}, lambda path: False
        self.arrivals = []

    async def answer(self, request: web.Request) -> web.StreamResponse:
        first, _, rest = request.path.lstrip("/").partition("/")
        if first == "html":
            return web.Response(text="<html><body>It works!</body></html>",
                                content_type="text/html")
        if first == "junk":
            return web.json_response({"node": {"id": 7}, "sync": "soon"})
        if first == "slow":
            self.arrivals.append(time.monotonic())
            await self._stalled(request)
            return web.Response(status=503)
        name, _, tail = rest.partition("/")
        path = "/" + tail
        if self.stall(path):
            await self._stalled(request)
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("authorization", "x-api-key")}
        async with aiohttp.ClientSession() as session, session.get(
                self.targets[name] + path, params=request.query, headers=headers) as answer:
            body = await answer.read()
            status, kind = answer.status, answer.content_type
        if path in self.edits:
            body = self.edits[path](body)
        return web.Response(body=body, status=status, content_type=kind)

    async def _stalled(self, request: web.Request) -> None:
        """Answer nothing until the client goes away or the test ends."""
        deadline = time.monotonic() + 30
        while not self.released and time.monotonic() < deadline and \
                request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.02)

    def __enter__(self) -> Tricks:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released = True
        self.server.__exit__(*exc)


@pytest.fixture(scope="module")
def tricks() -> Iterator[Tricks]:
    with Tricks() as server:
        yield server


@pytest.fixture
def playing(tricks: Tricks) -> Iterator[Tricks]:
    tricks.reset()
    yield tricks
    tricks.reset()


class Nodes:
    """Small real nodes, each with an id and content of its own, exported at times the test
    moves on."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

    def make(self, n: int, names: list[str]) -> Node:
        toml = NODE_TOML.replace("00000000-0000-4000-8000-000000000001",
                                 f"00000000-0000-4000-8000-{n:012d}")
        node = Node(self.root / f"node{n}", toml.replace("Test Node", f"Node {n}"))
        for i, name in enumerate(names):
            node.write("species", f"s{i}", species(name))
        self.export(node)
        return node

    def export(self, node: Node) -> None:
        self.now += timedelta(minutes=1)
        build(Project(node.root), now=self.now)


def write_hub(folder: Path, members: list[dict[str, Any]], **settings: Any) -> None:
    """hub.toml as an operator writes it (TOML's strings, numbers and booleans are JSON's
    for these plain values)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["[hub]", 'name = "Test hub"', *(f"{k} = {json.dumps(v)}"
                                             for k, v in settings.items())]
    for member in members:
        lines += ["", "[[member]]", *(f"{k} = {json.dumps(v)}" for k, v in member.items())]
    (folder / "hub.toml").write_text("\n".join(lines) + "\n")


def hub_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["hub", *args], env=env)


def sync_api(folder: Path, *, limits: Limits = QUICK, **options: Any) -> dict[str, Status]:
    statuses = asyncio.run(sync_members(load_hub(folder), limits=limits, **options))
    return {status.member: status for status in statuses}


def status_file(folder: Path, name: str, place: str = "members") -> dict[str, Any]:
    return dict(json.loads((folder / place / f"{name}.status.json").read_text()))


def held(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """A copy as a query reads it: its records, its `hub` table and its tables."""
    with duckdb.connect(str(path), read_only=True) as db:
        records = db.execute("SELECT collection, id, node_id, content_hash, updated_at, "
                             "json::VARCHAR FROM records ORDER BY 1, 2").fetchall()
        state = db.execute("SELECT name, value FROM hub ORDER BY name").fetchall()
        tables = [t for (t,) in db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = "
            "'BASE TABLE' ORDER BY 1").fetchall()]
    return records, state, tables


# --- hub.toml and the commands that edit it ------------------------------------------------


def test_init_add_and_remove_manage_hub_toml_and_keep_its_comments(tmp_path: Path) -> None:
    folder = tmp_path / "hub"
    made = hub_cli("init", str(folder), "--name", "Weeds hub")
    assert made.exit_code == 0, made.stderr
    assert (folder / "members").is_dir() and (folder / "private").stat().st_mode & 0o777 == 0o700
    assert tomllib.loads((folder / "hub.toml").read_text())["hub"] == {
        "name": "Weeds hub", "concurrency": 4, "timeout": 300}
    again = hub_cli("init", str(folder))
    assert again.exit_code == 1 and "exists already" in again.stderr
    with (folder / "hub.toml").open("a") as file:
        file.write("\n# our own note, kept\n")
    assert hub_cli("add", "https://www.weeds.example.org/", "--hub", str(folder)).exit_code == 0
    added = hub_cli("add", "http://127.0.0.1:8123", "--hub", str(folder), "--name", "partner",
                    "--key-env", "PARTNER_KEY", "--private")
    assert added.exit_code == 0, added.stderr
    assert "private/partner.duckdb" in added.stderr and "PARTNER_KEY is not set" in added.stderr
    members = tomllib.loads((folder / "hub.toml").read_text())["member"]
    assert members == [
        {"name": "weeds-example-org", "url": "https://www.weeds.example.org", "private": False},
        {"name": "partner", "url": "http://127.0.0.1:8123", "key_env": "PARTNER_KEY",
         "private": True}]
    for args, says in (
            (["https://weeds.example.org", "--name", "partner"], "named 'partner' already"),
            (["https://www.weeds.example.org", "--name", "other"], "already, as "
                                                                   "'weeds-example-org'"),
            (["weeds.example.org", "--name", "x"], "must start with http:// or https://"),
            (["https://x.example.org", "--name", "Not A Slug"], "name: expected a short name"),
            (["https://x.example.org", "--key-env", "A-B"], "key_env: expected the name")):
        refused = hub_cli("add", *args, "--hub", str(folder))
        assert refused.exit_code == 1, args
        assert refused.stderr.startswith("Error: ") and says in refused.stderr, refused.stderr
    text = (folder / "hub.toml").read_text()
    (folder / "hub.toml").write_text(text.replace("[[member]]\nname = \"partner\"",
                                                  "# the partners' node\n[[member]]\n"
                                                  "name = \"partner\""))
    for name in ("partner.duckdb", "partner.status.json"):
        (folder / "private" / name).write_text("")
    removed = hub_cli("remove", "partner", "--hub", str(folder))
    assert removed.exit_code == 0, removed.stderr
    assert "private/partner.duckdb" in removed.stderr and not list((folder / "private").iterdir())
    text = (folder / "hub.toml").read_text()
    assert "partner" not in text and "# our own note, kept" in text
    assert text.startswith("# A fednode hub") and "# One table a member" in text
    assert [m["name"] for m in tomllib.loads(text)["member"]] == ["weeds-example-org"]
    gone = hub_cli("remove", "partner", "--hub", str(folder))
    assert gone.exit_code == 1 and "no member named 'partner'" in gone.stderr


@pytest.mark.parametrize("member, says", [
    ({"key": "eyJhbGciOi.secret.key"}, "a key is never written in hub.toml; put it in an "
                                       "environment variable and name that variable with "
                                       "key_env = \"ALPHA_KEY\""),
    ({"keyenv": "ALPHA_KEY"}, "unknown setting 'keyenv'"),
    ({"private": "yes"}, "private: expected true or false"),
    ({"timeout": 0}, "timeout: expected a number of seconds"),
])
def test_a_wrong_hub_toml_is_refused_before_anything_syncs(
        member: dict[str, Any], says: str, tmp_path: Path) -> None:
    write_hub(tmp_path, [{"name": "alpha", "url": f"http://127.0.0.1:{free_port()}",
                          **member}])
    result = hub_cli("sync", "--hub", str(tmp_path))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and says in result.stderr, result.stderr
    assert "eyJhbGciOi" not in result.stderr
    assert not (tmp_path / "members").exists()


def test_a_second_run_on_the_folder_is_refused(tmp_path: Path) -> None:
    write_hub(tmp_path, [{"name": "alpha", "url": f"http://127.0.0.1:{free_port()}"}])
    with locked(tmp_path):
        for args in (["sync"], ["remove", "alpha"]):
            result = hub_cli(*args, "--hub", str(tmp_path))
            assert result.exit_code == 1 and "is running on" in result.stderr, result.stderr
    assert [m.name for m in load_hub(tmp_path).members] == ["alpha"]


# --- every member on its own ---------------------------------------------------------------


@pytest.mark.slow
def test_each_member_is_synced_on_its_own_and_a_failure_stays_its_own(
        tmp_path: Path, playing: Tricks) -> None:
    """Three real nodes and four that fail (down, a web page, JSON that is no manifest,
    one that never answers): one line a member, then the total, exit code 1; the nodes'
    copies are right and made long before the slow member's timeout. Then one node
    changes, one goes down and one is restored from an older backup: the first is
    followed, the second keeps its copy exactly, stale since its success, and the third
    is reloaded and says so."""
    nodes = Nodes(tmp_path)
    alpha = nodes.make(1, ["Alpha one", "Alpha two", "Alpha three"])
    beta = nodes.make(2, ["Beta one", "Beta two"])
    gamma = nodes.make(3, ["Gamma one", "Gamma two"])
    backup = tmp_path / "gamma-backup"
    shutil.copytree(gamma.root / "content", backup / "content")
    shutil.copy(gamma.root / "ledger.jsonl", backup / "ledger.jsonl")
    gamma.write("species", "s2", species("Gamma three"))
    gamma.write("species", "s3", species("Gamma four"))
    nodes.export(gamma)
    folder = tmp_path / "hub"
    servers = [ServerThread(app_for(node.root, reload_interval=0)) for node in (alpha, beta,
                                                                                 gamma)]
    for server in servers:
        server.__enter__()
    try:
        write_hub(folder, [
            {"name": "alpha", "url": servers[0].url}, {"name": "beta", "url": servers[1].url},
            {"name": "gamma", "url": servers[2].url},
            {"name": "down", "url": f"http://127.0.0.1:{free_port()}", "timeout": 4},
            {"name": "html", "url": playing.url("html")},
            {"name": "junk", "url": playing.url("junk")},
            {"name": "slow", "url": playing.url("slow"), "timeout": 4}], timeout=60)
        started = time.monotonic()
        first = hub_cli("sync", "--hub", str(folder))
        took = time.monotonic() - started
        assert first.exit_code == 1, first.stderr
        lines = first.stdout.splitlines()
        assert lines[:3] == ["alpha: ok: added 3, updated 0, removed 0; 3 records",
                             "beta: ok: added 2, updated 0, removed 0; 2 records",
                             "gamma: ok: added 4, updated 0, removed 0; 4 records"]
        assert lines[3].startswith("down: failed: stopped at its timeout of 4 s; it was "
                                   "at: http://127.0.0.1:") and "retry" in lines[3]
        assert lines[4].startswith("html: failed: ") and "not JSON" in lines[4]
        assert lines[5].startswith("junk: failed: ") and "node: id: expected a string" \
            in lines[5]
        assert lines[6] == (f"slow: failed: stopped at its timeout of 4 s; it was at: "
                            f"reading {playing.url('slow')}/api/manifest; no copy yet")
        assert all(line.endswith("; no copy yet") for line in lines[3:7])
        assert lines[7:] == ["total: 7 members, 3 ok, 4 failed; 9 records"]
        assert took < 15
        statuses = {name: status_file(folder, name) for name in ("alpha", "beta", "gamma",
                                                                 "slow")}
        assert all(statuses[name]["seconds"] < 4 for name in ("alpha", "beta", "gamma"))
        assert statuses["slow"]["seconds"] >= 4 and statuses["slow"]["ok"] is False
        assert statuses["beta"]["licence"] == "CC0-1.0" and statuses["beta"]["node_name"] == \
            "Node 2"
        for name, server in zip(("alpha", "beta", "gamma"), servers, strict=True):
            assert hub_view(folder / "members" / f"{name}.duckdb") == node_view(server.url,
                                                                                None)
        assert sorted(p.name for p in (folder / "members").glob("*.duckdb")) == [
            "alpha.duckdb", "beta.duckdb", "gamma.duckdb"]
        succeeded = statuses["beta"]["last_success"]
        changed_and_restored(nodes, alpha, gamma, backup)
        servers[1].__exit__(None, None, None)
        servers.remove(servers[1])
        before = held(folder / "members" / "beta.duckdb")
        second = sync_api(folder)
        assert second["alpha"].line() == "alpha: ok: added 1, updated 1, removed 0; 4 records"
        assert second["beta"].line().startswith("beta: failed: ")
        assert "tried 2 times" in second["beta"].line()
        assert second["beta"].line().endswith(f"; stale since {succeeded}, 2 records kept")
        assert held(folder / "members" / "beta.duckdb") == before
        beta_status = status_file(folder, "beta")
        assert beta_status["stale"] is True and beta_status["last_success"] == succeeded
        assert beta_status["last_attempt"] >= succeeded and "tried 2" in beta_status["last_error"]
        assert second["gamma"].line().startswith(
            "gamma: ok: the node's sync position went back from 4 to 3 (restored from a "
            "backup?): reloaded everything; added 1, updated 0, removed 2; 3 records")
        assert hub_view(folder / "members" / "gamma.duckdb") == node_view(servers[1].url, None)
        assert hub_view(folder / "members" / "alpha.duckdb") == node_view(servers[0].url, None)
        assert "tried 2 times" in second["down"].line()
    finally:
        for server in servers:
            server.__exit__(None, None, None)


def changed_and_restored(nodes: Nodes, alpha: Node, gamma: Node, backup: Path) -> None:
    """Alpha edits a record and adds one; gamma is restored from its backup, then adds one."""
    edited = alpha.path("species", "s0")
    edited.write_text(edited.read_text().replace("Alpha one", "Alpha one, edited"))
    alpha.write("species", "s9", species("Alpha nine"))
    nodes.export(alpha)
    shutil.rmtree(gamma.root / "content")
    shutil.copytree(backup / "content", gamma.root / "content")
    shutil.copy(backup / "ledger.jsonl", gamma.root / "ledger.jsonl")
    gamma.write("species", "s7", species("Gamma seven"))
    nodes.export(gamma)


@pytest.mark.slow
def test_members_sync_at_once_within_the_bound(tmp_path: Path, playing: Tricks) -> None:
    write_hub(tmp_path, [{"name": f"slow-{n}", "url": playing.url(f"slow/{n}")}
                         for n in range(3)], timeout=2, concurrency=3)
    started = time.monotonic()
    statuses = sync_api(tmp_path, concurrency=2)
    took = time.monotonic() - started
    first, second, third = sorted(playing.arrivals)
    # Two at once (one by one, the second would come 2 s after the first), the third once
    # a place is free (all at once, it would come with them): two rounds of two seconds.
    assert second - first < 1 and third - first >= 1.9
    assert took >= 4
    assert all("stopped at its timeout of 2 s" in s.line() for s in statuses.values())


def test_a_hub_sync_cancelled_stops_every_member_at_once(tmp_path: Path,
                                                         playing: Tricks) -> None:
    write_hub(tmp_path, [{"name": "slow", "url": playing.url("slow")}], timeout=60)

    async def cancelled() -> None:
        await asyncio.wait_for(sync_members(load_hub(tmp_path), limits=QUICK), 0.5)

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(cancelled())
    assert time.monotonic() - started < 3
    status = status_file(tmp_path, "slow")
    assert status["ok"] is False and "the hub sync was interrupted" in status["last_error"]


@pytest.mark.slow
def test_ctrl_c_stops_the_real_command_at_once(tmp_path: Path, playing: Tricks) -> None:
    """`fednode hub sync` as a process: Ctrl-C stops every member at once, each status
    saying so, and the command exits 1."""
    write_hub(tmp_path, [{"name": "slow", "url": playing.url("slow")},
                         {"name": "down", "url": f"http://127.0.0.1:{free_port()}"}])
    command = subprocess.Popen(
        [*FEDNODE, "hub", "sync", "--hub", str(tmp_path)], env=ENV, cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's
    try:
        deadline = time.monotonic() + 30
        while not playing.arrivals:  # the slow member is waiting for its answer
            assert time.monotonic() < deadline and command.poll() is None
            time.sleep(0.05)
        interrupted = time.monotonic()
        command.send_signal(signal.SIGINT)
        out, err = command.communicate(timeout=30)
    finally:
        command.kill()
    assert time.monotonic() - interrupted < 3
    assert command.returncode == 1 and "Aborted!" in err, err
    for name in ("slow", "down"):
        status = status_file(tmp_path, name)
        assert status["ok"] is False and status["last_error"] == \
            "stopped before it finished (the hub sync was interrupted)"


# --- a run cut midway ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_cut_midway_leaves_the_copy_at_its_last_complete_state(
        tmp_path: Path, playing: Tricks) -> None:
    """Cut at its timeout in its first load, no copy is left; cut while fetching a batch
    of changed records, and while reloading everything (the second snapshot file stalls
    after the first was loaded aside), the copy reads exactly as before; once the node
    answers again, it is brought up to date."""
    nodes = Nodes(tmp_path)
    node = nodes.make(4, ["Delta one", "Delta two"])
    node.write("team", "t0", {"id": "6a0e2d54-93a4-4bd4-8f0c-2d1a3b7d5e01", "name": "Lead",
                              "role": "Field lead", "affiliation": "Delta"})
    nodes.export(node)
    folder = tmp_path / "hub"
    copy = folder / "members" / "delta.duckdb"
    with ServerThread(app_for(node.root, reload_interval=0)) as server:
        playing.targets["delta"] = server.url
        write_hub(folder, [{"name": "delta", "url": playing.url("to/delta")}], timeout=1.5)
        playing.stall = lambda path: path == "/api/sync/team/0.ndjson"
        first = sync_api(folder)["delta"]  # cut in its first load: no copy is left
        assert "stopped at its timeout" in first.line() and first.line().endswith("no copy yet")
        assert [p.name for p in (folder / "members").iterdir()] == ["delta.status.json"]
        playing.stall = lambda path: False
        assert sync_api(folder)["delta"].ok
        succeeded = status_file(folder, "delta")["last_success"]
        before = held(copy)
        for n in range(2, 5):
            node.write("species", f"s{n}", species(f"Delta {n}"))
        nodes.export(node)
        playing.stall = lambda path: path.startswith("/api/species/")
        cut = sync_api(folder)["delta"]
        assert "stopped at its timeout of 1.5 s" in cut.line()
        assert cut.line().endswith(f"stale since {succeeded}, 3 records kept")
        assert held(copy) == before
        with duckdb.connect(str(copy)) as db:  # the hub file says it is ahead: a full reload
            db.execute("UPDATE hub SET value = '999' WHERE name = 'position'")
        before = held(copy)
        snapshots: list[str] = []

        def second_snapshot(path: str) -> bool:
            if path.startswith("/api/sync/") and path != "/api/sync/changes.ndjson":
                snapshots.append(path)
            return len(snapshots) >= 2 and path == snapshots[1]

        playing.stall = second_snapshot
        assert "stopped at its timeout" in sync_api(folder)["delta"].line()
        assert held(copy) == before and held(copy)[2] == ["hub", "records"]
        assert snapshots[0] == "/api/sync/species/0.ndjson"
        playing.stall = lambda path: False
        caught_up = sync_api(folder)["delta"]
        assert caught_up.ok and "reloaded everything" in caught_up.line()
        assert hub_view(copy) == node_view(server.url, None)


# --- restricted records stay with the key; licences ----------------------------------------


def test_a_key_holding_groups_is_kept_private_or_refused(tmp_path: Path,
                                                         playing: Tricks) -> None:
    """A member whose key holds an access group, not marked private: refused, naming the
    member and what to set, and nothing of its records in members/. Marked private: its
    copy, restricted records included, is in private/ (its owner's alone). A key without
    groups syncs into members/; a key_env that is not set fails its member alone; a node
    whose manifest names no licence is warned of."""
    nodes = Nodes(tmp_path)
    node = nodes.make(5, ["Open one"])
    node.write("species", "r0", species("Restricted one", access="partners"))
    nodes.export(node)
    grouped, _ = issue_key(node.root, "hub", scopes=["read", "changes"], groups=["partners"])
    plain, _ = issue_key(node.root, "plain hub", scopes=["read", "changes"])
    folder = tmp_path / "hub"
    env = {"PARTNER_KEY": grouped, "PLAIN_KEY": plain}
    with ServerThread(app_for(node.root, reload_interval=0)) as server:
        playing.targets.update(node=server.url, again=server.url)
        playing.edits["/api/manifest"] = without_licence(node.root)
        write_hub(folder, [
            {"name": "partner", "url": server.url, "key_env": "PARTNER_KEY"},
            {"name": "plain", "url": playing.url("to/node"), "key_env": "PLAIN_KEY"},
            {"name": "unset", "url": playing.url("to/again"), "key_env": "UNSET_KEY"}])
        refused = hub_cli("sync", "--hub", str(folder), env={**env, "UNSET_KEY": ""})
        assert refused.exit_code == 1
        lines = refused.stdout.splitlines()
        assert lines[0] == (
            "partner: failed: its key (from PARTNER_KEY) holds the access group partners, "
            "whose restricted records stay with whoever holds the key, and members/ is what "
            "the hub serves: set private = true for partner in hub.toml to keep its copy in "
            "private/ (never served), or give it a key without groups; no copy yet")
        assert lines[1] == "plain: ok: added 1, updated 0, removed 0; 1 records"
        assert lines[2].startswith("unset: failed: the environment variable UNSET_KEY")
        assert [p.name for p in (folder / "members").iterdir() if "partner" in p.name] == [
            "partner.status.json"]
        assert not list((folder / "private").iterdir())
        assert ("Warning: plain: the node's manifest names no licence" in refused.stderr)
        assert status_file(folder, "plain")["licence"] is None
        toml = (folder / "hub.toml").read_text()
        (folder / "hub.toml").write_text(toml.replace('key_env = "PARTNER_KEY"',
                                                      'key_env = "PARTNER_KEY"\nprivate = true'))
        private = hub_cli("sync", "--hub", str(folder), env={**env, "UNSET_KEY": ""})
        assert private.stdout.splitlines()[0] == \
            "partner: ok: added 2, updated 0, removed 0; 2 records"
        assert "Warning: partner" not in private.stderr
        copy = folder / "private" / "partner.duckdb"
        assert all(path.stat().st_mode & 0o777 == 0o600
                   for path in (folder / "private").iterdir())
        assert hub_view(copy) == node_view(server.url, grouped)
        assert {json.loads(j)["access"] for j in
                (v.decode() for v in hub_view(copy).values())} == {"public", "partners"}
        assert status_file(folder, "partner", "private")["licence"] == "CC0-1.0"
        assert not list((folder / "members").glob("partner*"))
        assert all(json.loads(j)["access"] == "public" for j in
                   (v.decode() for v in hub_view(folder / "members" / "plain.duckdb").values()))


def without_licence(root: Path) -> Callable[[bytes], bytes]:
    """The manifest of the node at `root` as that node publishes it when it names no
    licence (signed with its key)."""
    def edit(body: bytes) -> bytes:
        manifest = json.loads(body)
        del manifest["node"]["licence"]
        return resigned(manifest, root)
    return edit


def test_a_copy_in_members_holding_a_restricted_record_is_deleted(
        tmp_path: Path, playing: Tricks) -> None:
    """A node that serves a record marked for a group in its public files (a broken or
    hostile node): the hub serves open records only, so the copy is not kept."""
    nodes = Nodes(tmp_path)
    node = nodes.make(6, ["Open one", "Open two"])
    with ServerThread(app_for(node.root, reload_interval=0)) as server:
        playing.targets["node"] = server.url
        snapshot = "/api/sync/species/0.ndjson"
        lines = aiohttp_get(server.url + snapshot).splitlines(keepends=True)
        lines[0] = lines[0].replace(b'"access":"public"', b'"access":"partners"')
        marked = b"".join(lines)
        assert b"partners" in marked

        def rehashed(body: bytes) -> bytes:
            manifest = json.loads(body)
            for entry in manifest["sync"]["snapshots"]:
                if URL(entry["url"]).path == snapshot:
                    entry["sha256"] = hashlib.sha256(marked).hexdigest()
            return resigned(manifest, node.root)

        playing.edits = {"/api/manifest": rehashed, snapshot: lambda body: marked}
        folder = tmp_path / "hub"
        write_hub(folder, [{"name": "marked", "url": playing.url("to/node")}])
        status = sync_api(folder)["marked"]
        assert status.line().startswith("marked: failed: the node served 1 records not "
                                        "marked public (access partners, ...)")
        assert not list((folder / "members").glob("marked.duckdb*"))


def test_a_copy_changed_behind_the_hubs_back_is_checked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync that changes no record does not read every record's access again (its
    status keeps the version of the copy found open); one that finds the copy at another
    version (written by a run killed before its status was saved, or one of its records
    marked for a group by hand, which the node's counts and change list cannot show) reads
    it again, counts a change for the next export, and deletes a copy not all open."""
    from hub import network

    nodes = Nodes(tmp_path)
    node = nodes.make(7, ["Open one", "Open two"])
    reads: list[Path] = []
    only_open = network._only_open
    monkeypatch.setattr(network, "_only_open", lambda copy: (reads.append(copy),
                                                             only_open(copy))[1])
    with ServerThread(app_for(node.root, reload_interval=0)) as server:
        folder = tmp_path / "hub"
        write_hub(folder, [{"name": "open", "url": server.url}])
        copy = folder / "members" / "open.duckdb"
        assert sync_api(folder)["open"].ok and reads == [copy]
        for _ in range(2):
            status = sync_api(folder)["open"]
            assert status.ok and status.checked == copy_version(copy)
        assert reads == [copy]  # nothing changed: not read again
        changes = status.changes
        with duckdb.connect(str(copy)) as db:  # written as a run killed midway would leave it
            db.execute("UPDATE records SET json = json_merge_patch(json, '{\"notes\": \"x\"}')")
        status = sync_api(folder)["open"]
        assert status.ok and status.changes == changes + 1  # told to the next export
        assert reads == [copy, copy]
        with duckdb.connect(str(copy)) as db:  # the same records, one marked for a group
            (key, text) = db.execute("SELECT id, json::VARCHAR FROM records").fetchone() \
                or ("", "")
            db.execute("UPDATE records SET json = ?::JSON WHERE id = ?",
                       [json.dumps(dict(json.loads(text), access="partners")), key])
        status = sync_api(folder)["open"]
        assert status.line().startswith("open: failed: the node served 1 records not marked "
                                        "public (access partners, ...)"), status.line()
        assert reads == [copy, copy, copy] and not copy.exists()


def test_a_copy_written_before_a_failed_run_counts_a_change(tmp_path: Path) -> None:
    """A copy written since its last run ended (by a run killed before its status was
    saved), then a run that fails (its node down): the failure's status counts the change,
    so that the next export reads the copy."""
    nodes = Nodes(tmp_path)
    node = nodes.make(8, ["Open one"])
    folder = tmp_path / "hub"
    with ServerThread(app_for(node.root, reload_interval=0)) as server:
        write_hub(folder, [{"name": "open", "url": server.url}])
        status = sync_api(folder)["open"]
        assert status.ok
    copy = folder / "members" / "open.duckdb"
    with duckdb.connect(str(copy)) as db:
        db.execute("UPDATE records SET json = json_merge_patch(json, '{\"notes\": \"x\"}')")
    failed = sync_api(folder)["open"]
    assert not failed.ok and failed.stale
    assert failed.changes == status.changes + 1
    assert failed.checked == copy_version(copy)


def aiohttp_get(url: str) -> bytes:
    async def get() -> bytes:
        async with aiohttp.ClientSession() as session, session.get(url) as answer:
            assert answer.status == 200
            return await answer.read()
    return asyncio.run(get())
