"""The hub client against real nodes: the real sidecar, and a crafted node (a real aiohttp
server on 127.0.0.1 that answers what each test tells it: broken, hostile or slow)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import os
import pty
import re
import shutil
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import pytest
from aiohttp import web
from builders import NODE_TOML, REPO, Node, ServerThread, app_for, issue_key, species, team
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from processes import ENV, FEDNODE, free_port
from worlds import World, hub_view, node_view
from yarl import URL

from cli.main import main
from exporter.pipeline.build import build
from exporter.project.config import Project, load_node_config
from hub.index import Index
from hub.node import exposed_key, parse_address
from hub.sync import Limits, SyncError, sync
from hub.waits import retry_after

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
QUICK = Limits(attempts=2, backoff=0.01, read_timeout=0.5, connect_timeout=1.0)
T0 = "2026-03-01T08:00:00Z"


class Crafted:
    """A node that serves `files` (path -> bytes) and `handlers` (path -> handler), and
    records every request it gets (path with query, Authorization header)."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files = dict(files or {})
        self.handlers: dict[str, Handler] = {}
        self.seen: list[tuple[str, str | None]] = []
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.answer)
        self.server = ServerThread(app, runner=web.AppRunner)

    @property
    def url(self) -> str:
        return self.server.url

    def reset(self, files: dict[str, bytes]) -> None:
        self.files, self.handlers, self.seen = dict(files), {}, []

    async def answer(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path_qs, request.headers.get("Authorization")))
        handler = self.handlers.get(request.path)
        if handler is not None:
            return await handler(request)
        body = self.files.get(request.path)
        if body is None:
            return web.json_response({"error": {"code": "not_found", "message": "none"}},
                                     status=404)
        return web.Response(body=body, content_type="application/json")

    def __enter__(self) -> Crafted:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


def json_reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=json.dumps(data).encode(), status=status, headers=headers,
                            content_type="application/json")
    return handler


def once_then(first: Handler, then: Handler) -> Handler:
    calls = []

    async def handler(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        return await (first if len(calls) == 1 else then)(request)
    return handler


def capture(base: str) -> dict[str, bytes]:
    """The sync files and public records of a real node, as its sidecar serves them."""
    async def run() -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        async with aiohttp.ClientSession() as session:
            async def get(path: str) -> bytes:
                async with session.get(base + path) as response:
                    assert response.status == 200, path
                    files[path] = await response.read()
                    return files[path]
            manifest = json.loads(await get("/api/manifest"))
            for snap in manifest["sync"]["snapshots"]:
                await get(URL(snap["url"]).path)
            listing = await get(URL(manifest["sync"]["changes"]["url"]).path)
            for line in listing.splitlines():
                item = json.loads(line)
                if item["op"] == "upsert":
                    await get(f"/api/{item['collection']}/{item['id']}")
        return files
    return asyncio.run(run())


def manifest_of(files: dict[str, bytes]) -> dict[str, Any]:
    return dict(json.loads(files["/api/manifest"]))


def with_manifest(files: dict[str, bytes], manifest: dict[str, Any]) -> dict[str, bytes]:
    """The files with an edited manifest, unsigned (`fednode sync` of one node checks a
    signature where there is one: tests/hub/test_trust.py)."""
    unsigned = {name: value for name, value in manifest.items() if name != "signature"}
    return {**files, "/api/manifest": json.dumps(unsigned).encode()}


def rehashed(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files with the manifest's SHA-256s fitted to the (edited) sync files."""
    manifest = manifest_of(files)
    section = manifest["sync"]
    for snap in section["snapshots"]:
        snap["sha256"] = hashlib.sha256(files[URL(snap["url"]).path]).hexdigest()
    path = URL(section["changes"]["url"]).path
    section["changes"]["sha256"] = hashlib.sha256(files[path]).hexdigest()
    return with_manifest(files, manifest)


def rows(path: Path) -> set[tuple[str, str, str, str]]:
    """The index's records; each (collection, id) once."""
    with duckdb.connect(str(path), read_only=True) as db:
        found = db.execute("SELECT collection, id, node_id, json FROM records").fetchall()
    assert len(found) == len({(c, i) for c, i, _, _ in found})
    return set(found)


def run_sync(base: str, into: Path, key: str | None = None, limits: Limits = QUICK,
             sleep: Callable[[float], Any] | None = None, within: float = 60) -> Any:
    """sync() under a time limit, so a hub that hangs fails the test instead."""
    async def bounded() -> Any:
        options: dict[str, Any] = {"limits": limits}
        if sleep is not None:
            options["sleep"] = sleep
        return await asyncio.wait_for(sync(base, into, key, **options), within)
    return asyncio.run(bounded())


def sync_error(base: str, into: Path, key: str | None = None, **options: Any) -> str:
    with pytest.raises(SyncError) as caught:
        run_sync(base, into, key, **options)
    message = str(caught.value)
    assert "\n" not in message and message
    return message


class States:
    """A real node exported twice (A, then B with edits, a deletion and a creation), and
    the sidecar's bytes of each."""

    def __init__(self, root: Path) -> None:
        self.node = Node(root / "node")
        self.records = {f"s{n}": species(f"Species {n}") for n in range(4)}
        self.records["t0"] = team("Team lead")
        for slug, fields in self.records.items():
            self.node.write("team" if slug.startswith("t") else "species", slug, fields)
        build(Project(self.node.root), now=datetime(2026, 3, 1, 8, 0, tzinfo=UTC))
        with ServerThread(app_for(self.node.root, reload_interval=0)) as server:
            self.a = capture(server.url)
        self.records["s0"]["habitat"] = "Edited"
        self.node.write("species", "s0", self.records["s0"])
        self.node.remove("species", "s1")
        self.node.write("species", "s9", species("Species 9"))
        build(Project(self.node.root), now=datetime(2026, 3, 1, 9, 0, tzinfo=UTC))
        with ServerThread(app_for(self.node.root, reload_interval=0)) as server:
            self.b = capture(server.url)


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> States:
    return States(tmp_path_factory.mktemp("states"))


@pytest.fixture(scope="module")
def crafted() -> Iterator[Crafted]:
    with Crafted() as node:
        yield node


@pytest.fixture(scope="module")
def baseline(states: States, crafted: Crafted, tmp_path_factory: pytest.TempPathFactory
             ) -> Path:
    """A hub file synced (without a key) from state A."""
    path = tmp_path_factory.mktemp("baseline") / "hub.duckdb"
    crafted.reset(states.a)
    run_sync(crafted.url, path)
    return path


def hub_copy(baseline: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "hub.duckdb"
    shutil.copy(baseline, target)
    return target


# --- one line `Error: ...` from the real CLI ---------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FEDNODE, "sync", *args], env=ENV, capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_cli_not_a_fednode(states: States, crafted: Crafted, tmp_path: Path) -> None:
    crafted.reset({"/api/manifest": b"<html><body>Welcome to nginx!</body></html>"})
    assert_one_error_line(cli(crafted.url, "--into", str(tmp_path / "a.duckdb")),
                          "/api/manifest", "not JSON", "check the address")
    manifest = manifest_of(states.a)
    del manifest["sync"]
    crafted.reset(with_manifest(states.a, manifest))
    assert_one_error_line(cli(crafted.url, "--into", str(tmp_path / "b.duckdb")),
                          "no sync section")
    assert not list(tmp_path.iterdir())  # nothing written for a node that is not one


def test_cli_address_without_scheme(tmp_path: Path) -> None:
    assert_one_error_line(cli(f"127.0.0.1:{free_port()}", "--into", str(tmp_path / "h.duckdb")),
                          "must start with http:// or https://", "127.0.0.1")
    assert not (tmp_path / "h.duckdb").exists()


def test_cli_hub_file_in_use(states: States, crafted: Crafted, tmp_path: Path) -> None:
    crafted.reset(states.a)
    into = tmp_path / "hub.duckdb"
    holder = subprocess.Popen(
        [*FEDNODE[:1], "-c", "import duckdb, sys, time; db = duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); time.sleep(60)", str(into)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        assert_one_error_line(cli(crafted.url, "--into", str(into)),
                              "in use by another process")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_cli_hub_file_not_a_hub(states: States, crafted: Crafted, tmp_path: Path) -> None:
    crafted.reset(states.a)
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(b"not a database at all\n" * 500)
    assert_one_error_line(cli(crafted.url, "--into", str(corrupt)),
                          "cannot be opened as a hub index")
    assert corrupt.read_bytes() == b"not a database at all\n" * 500
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as db:
        db.execute("CREATE TABLE birds (name VARCHAR)")
    assert_one_error_line(cli(crafted.url, "--into", str(other)), "not a hub index", "birds")
    # Someone's database of views only, or of tables outside `main`, is refused as it is:
    # no hub table written into it, no view of theirs replaced, its mode left alone.
    for name, made in (("views", "CREATE VIEW species AS SELECT 1 AS mine"),
                       ("schema", "CREATE SCHEMA notes; CREATE TABLE notes.birds (n INT)")):
        theirs = tmp_path / f"{name}.duckdb"
        with duckdb.connect(str(theirs)) as db:
            db.execute(made)
        theirs.chmod(0o644)
        before = theirs.read_bytes()
        assert_one_error_line(cli(crafted.url, "--into", str(theirs)), "not a hub index")
        assert theirs.read_bytes() == before and theirs.stat().st_mode & 0o777 == 0o644


def test_cli_hub_file_in_a_missing_folder(states: States, crafted: Crafted,
                                          tmp_path: Path) -> None:
    crafted.reset(states.a)
    assert_one_error_line(cli(crafted.url, "--into", str(tmp_path / "nowhere" / "h.duckdb")),
                          f"the folder {tmp_path / 'nowhere'} does not exist")


def test_cli_old_layout_is_refused_with_how_to(states: States, crafted: Crafted,
                                                tmp_path: Path) -> None:
    crafted.reset(states.a)
    old = tmp_path / "old.duckdb"
    with duckdb.connect(str(old)) as db:  # the layout of fednode 0.1's hub
        db.execute("""
            CREATE TABLE records (collection TEXT NOT NULL, id TEXT NOT NULL,
                content_hash TEXT, updated_at TEXT, json BLOB NOT NULL,
                PRIMARY KEY (collection, id));
            CREATE TABLE state (name TEXT PRIMARY KEY, value TEXT);
            INSERT INTO state VALUES ('mode', 'open'), ('position', '3');""")
    assert_one_error_line(cli(crafted.url, "--into", str(old)),
                          "older fednode", "delete it and sync again")


@pytest.mark.parametrize("address, key, warned", [
    ("http://node.example.org", "k", True), ("http://192.0.2.7:8000", "k", True),
    ("https://node.example.org", "k", False), ("http://node.example.org", None, False),
    ("http://127.0.0.1:8000", "k", False), ("http://127.8.9.1", "k", False),
    ("http://[::1]:8000", "k", False), ("http://localhost:8000", "k", False),
    ("http://hub.localhost", "k", False)])
def test_a_key_sent_in_plain_text_beyond_this_machine_is_warned_of(
        address: str, key: str | None, warned: bool) -> None:
    warning = exposed_key(parse_address(address), key)
    assert (warning is not None) == warned
    if warning:
        assert warning.startswith("Warning: the key goes to ") and "https://" in warning


def test_cli_help_names_the_scopes() -> None:
    result = CliRunner().invoke(main, ["sync", "--help"])
    assert result.exit_code == 0
    assert "scopes read and changes" in " ".join(result.output.split())


# --- the key stays on the given origin; ids and collections are checked ------------------


KEY_ME = {"id": "k1", "name": "hub", "scopes": ["read", "changes"], "collections": ["species"],
          "groups": [], "rate": 100}


def keyed_node(crafted: Crafted, states: States, feed: Handler) -> None:
    """A keyed node with an empty species list and the given changes feed."""
    crafted.reset(states.a)
    crafted.handlers["/api/keys/me"] = json_reply(KEY_ME)
    crafted.handlers["/api/species"] = json_reply(
        {"collection": "species", "items": [], "total": 0, "limit": 200, "offset": 0,
         "next": None})
    crafted.handlers["/api/changes"] = feed


def feed_of(pages: Callable[[web.Request], dict[str, Any]]) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("since") == "1970-01-01T00:00:00Z":
            return web.json_response({"items": [], "next": None, "until": T0})
        return web.json_response(pages(request))
    return handler


def record_item(record_id: str, url: str) -> dict[str, Any]:
    return {"collection": "species", "id": record_id, "op": "upsert", "updated_at": T0,
            "url": url, "content_hash": "abc"}


@pytest.mark.parametrize("lure", ["item url", "next link", "redirect", "snapshot url"])
def test_the_key_never_leaves_the_given_origin(lure: str, states: States, crafted: Crafted,
                                               tmp_path: Path) -> None:
    with Crafted() as elsewhere:
        record_id = str(uuid.uuid4())
        key: str | None = "the-key"
        if lure == "item url":
            keyed_node(crafted, states, feed_of(lambda request: {
                "items": [record_item(record_id, f"{elsewhere.url}/api/species/{record_id}")],
                "next": None, "until": T0}))
        elif lure == "next link":
            keyed_node(crafted, states, feed_of(lambda request: {
                "items": [record_item(record_id, f"/api/species/{record_id}")],
                "next": f"{elsewhere.url}/api/changes?since={T0}&cursor=9", "until": T0}))
            crafted.files[f"/api/species/{record_id}"] = json.dumps({
                "id": record_id, "collection": "species", "content_hash": "abc",
                "updated_at": T0}).encode()
        elif lure == "redirect":
            keyed_node(crafted, states, feed_of(lambda request: {}))
            crafted.handlers["/api/keys/me"] = json_reply(
                {}, status=302, headers={"Location": f"{elsewhere.url}/api/keys/me"})
        else:
            manifest = manifest_of(states.a)
            manifest["sync"]["snapshots"][0]["url"] = f"{elsewhere.url}/api/sync/x/0.ndjson"
            crafted.reset(with_manifest(states.a, manifest))
            key = None
        message = sync_error(crafted.url, tmp_path / "hub.duckdb", key)
        assert elsewhere.url in message and "only follows links on the address" in message
        assert elsewhere.seen == []
        assert all(auth in (None, "Bearer the-key") for _, auth in crafted.seen)
        if lure in ("redirect", "snapshot url"):  # before the first load completed
            assert not (tmp_path / "hub.duckdb").exists()


BAD_IDS = st.one_of(st.just("ABCDEF01-2345-4678-9abc-def012345678"),
                    st.just("00000000-0000-4000-8000-000000000001\n"),
                    st.just("../../etc/passwd"), st.text(max_size=40),
                    st.integers(), st.none())
BAD_COLLECTIONS = st.one_of(st.sampled_from(["Species", "sync", "../species", "", "keys"]),
                            st.integers(), st.none(), st.lists(st.just("species")))
JUNK = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def _edit_line(body: bytes, n: int, edit: Callable[[dict[str, Any]], Any]) -> bytes:
    lines = body.split(b"\n")
    index = [i for i, line in enumerate(lines) if line.strip()][n % len(
        [line for line in lines if line.strip()])]
    lines[index] = json.dumps(edit(json.loads(lines[index]))).encode()
    return b"\n".join(lines)


def _pending_upserts(states: States) -> list[str]:
    """Paths of the records the hub at A fetches to reach B."""
    listing = states.b[URL(manifest_of(states.b)["sync"]["changes"]["url"]).path]
    a_seq = manifest_of(states.a)["sync"]["seq"]
    return [f"/api/{i['collection']}/{i['id']}" for i in map(json.loads, listing.splitlines())
            if i["seq"] > a_seq and i["op"] == "upsert"]


def _set(item: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    item[name] = value
    return item


mutations = st.one_of(
    st.tuples(st.just("manifest body"), st.binary(max_size=60) | JUNK.map(
        lambda v: json.dumps(v).encode())),
    st.tuples(st.just("manifest field"), st.sampled_from(
        ["node", "node.id", "sync", "sync.seq", "sync.snapshots", "sync.changes",
         "sync.changes.sha256", "collections"]),
        st.one_of(JUNK.filter(lambda v: not isinstance(v, (dict, list))), st.just("12"),
                  st.just(-1), st.just(1.5), st.just(True))),
    st.tuples(st.just("change item"), st.integers(0, 50), st.sampled_from(
        ["id", "collection", "op", "seq", "content_hash", "updated_at", "whole"]), JUNK),
    st.tuples(st.just("change id"), st.integers(0, 50), BAD_IDS),
    st.tuples(st.just("change collection"), st.integers(0, 50), BAD_COLLECTIONS),
    st.tuples(st.just("record"), st.integers(0, 50), st.sampled_from(
        ["id", "collection", "whole", "json", "content_hash"]), JUNK | BAD_IDS),
)


def token(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9._:-]{1,200}", value) is not None


def mutate(states: States, mutation: tuple[Any, ...]) -> dict[str, bytes] | None:
    """State B with one thing broken; None when the mutation happens to be harmless."""
    files = dict(states.b)
    kind = mutation[0]
    if kind == "manifest body":
        return {**files, "/api/manifest": mutation[1]}
    if kind == "manifest field":
        manifest = manifest_of(files)
        path, value = mutation[1].split("."), mutation[2]
        target = manifest
        for part in path[:-1]:
            target = target[part]
        if path[-1] == "seq" and isinstance(value, int) and not isinstance(value, bool) \
                and value >= 0:
            return None
        target[path[-1]] = value
        if path == ["collections"] and value is None:
            return None  # an absent collections list is allowed (no counts to check)
        return with_manifest(files, manifest)
    changes = URL(manifest_of(files)["sync"]["changes"]["url"]).path
    if kind.startswith("change"):
        if kind == "change item":
            name, value = mutation[2], mutation[3]
        else:
            name, value = ("id" if kind == "change id" else "collection"), mutation[2]
        if (name == "content_hash" and (value is None or token(value))) or (
                name == "seq" and isinstance(value, int) and not isinstance(value, bool)
                and value > 0):
            return None  # values the hub accepts (a hash is any token; seq any count)
        files[changes] = _edit_line(
            files[changes], 10_000,  # the last line: the newest change, always pending
            (lambda item: value) if name == "whole" else (lambda item: _set(item, name, value)))
        return rehashed(files)
    name, value = mutation[2], mutation[3]
    pending = _pending_upserts(states)
    path = pending[mutation[1] % len(pending)]
    record = json.loads(files[path])
    if record.get(name) == value or (name == "content_hash" and token(value)):
        return None  # unchanged, or a value the hub accepts
    if name == "whole":
        record = value
    elif name == "json":
        return {**files, path: b"{" + json.dumps(value).encode()}
    else:
        record[name] = value
    return {**files, path: json.dumps(record).encode()}


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutation=mutations)
@example(mutation=("manifest body", b""))
@example(mutation=("manifest field", "node", None))
@example(mutation=("manifest field", "sync.seq", "12"))
@example(mutation=("change id", 0, "ABCDEF01-2345-4678-9abc-def012345678"))
@example(mutation=("change collection", 0, "sync"))
@example(mutation=("record", 0, "id", str(uuid.UUID(int=7))))
@example(mutation=("record", 0, "collection", "team"))
@example(mutation=("record", 0, "whole", ["not", "an", "object"]))
def test_broken_node_gives_one_line_and_leaves_the_index(
        mutation: tuple[Any, ...], states: States, crafted: Crafted, baseline: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    files = mutate(states, mutation)
    assume(files is not None)
    assert files is not None
    into = hub_copy(baseline, tmp_path_factory.mktemp("hub"))
    before = rows(into)
    crafted.reset(files)
    sync_error(crafted.url, into)
    assert rows(into) == before


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(["node.id", "sync.seq", "sync.snapshots", "snapshot line",
                              "snapshot record"]), value=JUNK | BAD_IDS)
def test_broken_first_load_leaves_no_file(where: str, value: Any, states: States,
                                          crafted: Crafted,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    files = dict(states.a)
    manifest = manifest_of(files)
    snapshot = URL(manifest["sync"]["snapshots"][0]["url"]).path
    if where == "snapshot line":
        files[snapshot] = _edit_line(files[snapshot], 0, lambda item: value)
        files = rehashed(files)
    elif where == "snapshot record":
        files[snapshot] = _edit_line(files[snapshot], 0, lambda item: _set(item, "id", value))
        files = rehashed(files)
    else:
        section, name = where.split(".")
        if (name == "seq" and isinstance(value, int) and not isinstance(value, bool)
                and value >= 0) or (name == "id" and token(value)):
            value = -1
        manifest[section][name] = value
        files = with_manifest(files, manifest)
    crafted.reset(files)
    into = tmp_path_factory.mktemp("first") / "hub.duckdb"
    sync_error(crafted.url, into)
    assert not into.exists()


@pytest.mark.parametrize("broken", ["snapshot hash", "counts"])
def test_sync_files_that_disagree_are_said_to(broken: str, states: States, crafted: Crafted,
                                              tmp_path: Path) -> None:
    """A snapshot file whose SHA-256 is not the manifest's, or counts the snapshot files do
    not give, from a node that is not changing: said as such, not as "kept changing" (which
    sends the operator to wait and run it again, to the same end)."""
    manifest = manifest_of(states.a)
    if broken == "snapshot hash":
        manifest["sync"]["snapshots"][0]["sha256"] = "0" * 64
    else:
        manifest["collections"][0]["public_count"] += 1
    crafted.reset(with_manifest(states.a, manifest))
    message = sync_error(crafted.url, tmp_path / "hub.duckdb")
    assert "sync files disagree" in message and "kept changing" not in message, message
    assert ("SHA-256" if broken == "snapshot hash" else "record counts") in message


@pytest.mark.parametrize("where, says", [
    ("manifest name", "lone surrogate"), ("snapshot title", "lone surrogate"),
    ("snapshot id twice", "'id' appears twice"), ("record title", "lone surrogate"),
    ("record collection twice", "'collection' appears twice")])
def test_json_that_readers_could_read_two_ways_is_refused(
        where: str, says: str, states: States, crafted: Crafted, baseline: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Half a surrogate pair (no character: Python keeps it, then fails to write it; DuckDB
    refuses it) or a member named twice (Python keeps the last, DuckDB's ->> reads the
    first): one line naming what the node sent, and nothing stored."""
    first = where.startswith(("manifest", "snapshot"))
    files = dict(states.a if first else states.b)
    if where == "manifest name":
        manifest = manifest_of(files)
        manifest["node"]["name"] = "Node \ud800"
        files = with_manifest(files, manifest)
    elif where.startswith("snapshot"):
        snapshot = URL(manifest_of(files)["sync"]["snapshots"][0]["url"]).path
        files[snapshot] = files[snapshot].replace(b'"title":"', b'"title":"\\ud800', 1) \
            if where == "snapshot title" else \
            b'{"id":"' + str(uuid.UUID(int=99)).encode() + b'",' + files[snapshot][1:]
        files = rehashed(files)
    else:
        path = _pending_upserts(states)[0]
        files[path] = files[path].replace(b'"title":"', b'"title":"\\udc01', 1) \
            if where == "record title" else b'{"collection":"team",' + files[path][1:]
    crafted.reset(files)
    if first:
        into = tmp_path_factory.mktemp("first") / "hub.duckdb"
        assert says in sync_error(crafted.url, into)
        assert not into.exists()
    else:
        into = hub_copy(baseline, tmp_path_factory.mktemp("hub"))
        before = rows(into)
        assert says in sync_error(crafted.url, into)
        assert rows(into) == before


# --- numbers of any size -----------------------------------------------------------------


NUMBER = "@number@"  # a placeholder that the text of a JSON number replaces


def with_number(body: bytes, text: str) -> bytes:
    return body.replace(json.dumps(NUMBER).encode(), text.encode())


def number_in_manifest(files: dict[str, bytes], path: str, text: str) -> dict[str, bytes]:
    """The files with the manifest field at `path` ("sync.seq", "collections.public_count":
    the first item of a list) written as the number `text`."""
    manifest = manifest_of(files)
    *parents, name = path.split(".")
    target: Any = manifest
    for part in parents:
        target = target[part][0] if isinstance(target[part], list) else target[part]
    target[name] = NUMBER
    return {**files, "/api/manifest": with_number(json.dumps(manifest).encode(), text)}


def test_cli_a_number_too_long_to_read_is_one_line(states: States, crafted: Crafted,
                                                   tmp_path: Path) -> None:
    """A sync.seq of 5,000 digits (more than Python reads from text) from `fednode sync`
    and from `fednode hub sync`: one line naming the field, nothing written."""
    crafted.reset(number_in_manifest(states.a, "sync.seq", "9" * 5000))
    says = "sync: seq: a whole number of 5000 digits, past the largest a hub takes"
    assert_one_error_line(cli(crafted.url, "--into", str(tmp_path / "a.duckdb")), says)
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "hub.toml").write_text(
        f'[hub]\nname = "Hub"\n\n[[member]]\nname = "big"\nurl = "{crafted.url}"\n')
    result = CliRunner().invoke(main, ["hub", "sync", "--hub", str(folder)])
    assert result.exit_code == 1
    line = result.stdout.splitlines()[0]
    assert line.startswith("big: failed: ") and says in line, result.stdout
    assert "unexpected error" not in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub"]
    assert not (folder / "members" / "big.duckdb").exists()


def fits(text: str, low: int = 0) -> bool:
    """Whether the hub takes the JSON number `text` as a count or position: a whole number
    from `low` to the largest a DuckDB BIGINT holds."""
    return re.fullmatch(r"-?[0-9]{1,19}", text) is not None and low <= int(text) <= 2**63 - 1


# JSON numbers as a broken or hostile node writes them: about 2**63 and 2**64, negative, of
# more digits than Python reads from text (4,300) or than wire.decode reads (4,000), with a
# fraction or an exponent.
NUMBERS = st.one_of(
    st.integers(2**63 - 3, 2**64 + 3).map(str), st.integers(-2**64, -1).map(str),
    st.integers(16, 6000).flatmap(lambda n: st.sampled_from(
        ["9" * n, "-" + "9" * n, "1" + "0" * (n - 1)])),
    st.sampled_from(["1e400", "-1e400", "1E19", "9.2e18", "12.0", "-0", "0.5", "9" * 4000,
                     "9" * 4001, "9" * 4300, "9" * 4301, "-" + "9" * 4301]))
NUMBER_FIELDS = ("sync.seq", "sync.snapshots.records", "collections.public_count",
                 "change seq", "record field", "list total", "list record field")


def numbered_node(where: str, text: str, states: States, crafted: Crafted) -> None:
    """The crafted node serving `text` as the number at `where`: the manifest's (state A),
    the newest change's seq or a field of a record it names (state B), or the keyed list
    page's total or a field of its record."""
    if where.startswith(("sync.", "collections.")):
        crafted.reset(number_in_manifest(states.a, where, text))
    elif where == "change seq":
        files = dict(states.b)
        changes = URL(manifest_of(files)["sync"]["changes"]["url"]).path
        files[changes] = with_number(_edit_line(
            files[changes], 10_000, lambda item: _set(item, "seq", NUMBER)), text)
        crafted.reset(rehashed(files))
    elif where == "record field":
        path = _pending_upserts(states)[0]
        record = {**json.loads(states.b[path]), "height": NUMBER}
        crafted.reset({**states.b, path: with_number(json.dumps(record).encode(), text)})
    else:
        def edit(at: str, body: dict[str, Any]) -> None:
            if at == "list" and where == "list total":
                body["total"] = NUMBER
            elif at == "list":
                body["items"] = [{**body["items"][0], "height": NUMBER}]
        keyed_answers(states, crafted, edit)
        listing = crafted.handlers["/api/species"]

        async def numbered(request: web.Request) -> web.StreamResponse:
            response = await listing(request)
            assert isinstance(response, web.Response) and isinstance(response.body, bytes)
            return web.Response(body=with_number(response.body, text),
                                content_type="application/json")
        crafted.handlers["/api/species"] = numbered


def refused_at(where: str, text: str) -> str | None:
    """What the error names when the hub must refuse `text` at `where`, or None when it
    may take it (and the sync may still fail for another reason, in one line)."""
    long = re.fullmatch(r"-?[0-9]{4001,}", text) is not None
    if where.startswith(("record", "list")) and long:  # beside a record's own fields
        return "holds a whole number of"
    if where.endswith("record field"):
        return None
    name = where.split(".")[-1].removeprefix("change ").removeprefix("list ")
    return None if fits(text, low=1 if where == "change seq" else 0) else f"{name}: "


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(NUMBER_FIELDS), text=NUMBERS)
@example(where="sync.seq", text="9" * 5000)
@example(where="sync.seq", text="-" + "9" * 5000)
@example(where="sync.seq", text=str(2**63))
@example(where="sync.seq", text=str(2**63 - 1))
@example(where="sync.snapshots.records", text="9" * 30)
@example(where="collections.public_count", text="1e400")
@example(where="change seq", text="9" * 4200)
@example(where="record field", text="9" * 5000)
@example(where="record field", text="9" * 4001)
@example(where="list total", text="9" * 5000)
@example(where="list record field", text="9" * 5000)
def test_numbers_of_any_size_give_one_line(where: str, text: str, states: States,
                                           crafted: Crafted, baseline: Path,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """A count, position or record field of any size is taken or refused in one line
    naming it; a hub file being made is left out, an existing one unchanged."""
    numbered_node(where, text, states, crafted)
    first = where.startswith(("sync.", "collections.", "list"))
    folder = tmp_path_factory.mktemp("numbers")
    into = folder / "hub.duckdb" if first else hub_copy(baseline, folder)
    before = None if first else rows(into)
    key = "key" if where.startswith("list") else None
    says = refused_at(where, text)
    try:
        run_sync(crafted.url, into, key)
    except SyncError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 400, message
        assert says is None or says in message, message
        assert not into.exists() if first else rows(into) == before
    else:
        assert says is None, f"{where} = {text[:30]}… was taken"


def keyed_answers(states: States, crafted: Crafted,
                  edit: Callable[[str, dict[str, Any]], None] = lambda where, body: None
                  ) -> None:
    """A valid keyed node (species A in the list, C from the feed); `edit(where, body)`
    may break the key description, the list page, the probe, the feed page or its item."""
    a, c = str(uuid.UUID(int=10)), str(uuid.UUID(int=12))
    crafted.reset(states.a)
    for record_id in (a, c):
        crafted.files[f"/api/species/{record_id}"] = json.dumps({
            "id": record_id, "collection": "species", "content_hash": record_id[-2:],
            "updated_at": T0}).encode()

    def answer(where: str, body: dict[str, Any]) -> web.Response:
        edit(where, body)
        return web.json_response(body)

    async def key(request: web.Request) -> web.StreamResponse:
        return answer("key", dict(KEY_ME))

    async def listing(request: web.Request) -> web.StreamResponse:
        total = 1 if request.query.get("limit") == "200" else 2  # C came since
        return answer("list", {"collection": "species", "items": [
            json.loads(crafted.files[f"/api/species/{a}"])], "total": total, "limit": 200,
            "offset": 0, "next": None})

    async def feed(request: web.Request) -> web.StreamResponse:
        if request.query.get("since") == "1970-01-01T00:00:00Z":
            return answer("probe", {"items": [], "next": None, "until": T0})
        item = record_item(c, f"/api/species/{c}")
        item["content_hash"] = c[-2:]
        edit("item", item)
        return answer("feed", {"items": [item], "next": None, "until": T0})
    crafted.handlers.update({"/api/keys/me": key, "/api/species": listing,
                             "/api/changes": feed})


def test_the_crafted_keyed_node_is_valid(states: States, crafted: Crafted,
                                         tmp_path: Path) -> None:
    keyed_answers(states, crafted)
    report = run_sync(crafted.url, tmp_path / "hub.duckdb", "key")
    assert report.summary() == "added 2, updated 0, removed 0; 2 records in the index"


KEYED_FIELDS = {"key": {"id": "", "scopes": [], "collections": []},
                "list": {"items": [], "total": 0, "next": None},
                "probe": {"items": [], "until": "", "next": None},
                "feed": {"items": [], "until": "", "next": None},
                "item": {"collection": "", "id": "", "op": "", "updated_at": "",
                         "content_hash": ""}}


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(sorted(KEYED_FIELDS)), data=st.data())
def test_broken_keyed_answers_give_one_line(where: str, data: st.DataObject, states: States,
                                            crafted: Crafted,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    name = data.draw(st.sampled_from(sorted(KEYED_FIELDS[where])), label="field")
    valid = KEYED_FIELDS[where][name]
    value = data.draw(JUNK.filter(  # a value of another type than the field's
        lambda v: type(v) is not type(valid) and not (valid is None and isinstance(v, str))),
        label="value")

    def edit(at: str, body: dict[str, Any]) -> None:
        if at == where:
            body[name] = value
    keyed_answers(states, crafted, edit)
    into = tmp_path_factory.mktemp("keyed") / "hub.duckdb"
    sync_error(crafted.url, into, "key")
    if where in ("key", "list", "probe"):  # before the first load completed
        assert not into.exists()


# --- bounded loops, waits and bodies -----------------------------------------------------


def recording() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
    return waits, sleep


@pytest.mark.parametrize(("header", "low", "high"), [
    ("nan", 0.5, 2.0), ("-5", 0.5, 2.0), ("soon", 0.5, 2.0), ("1e3", 0.5, 2.0),
    ("7", 7.0, 7.0), ("HTTP-date", 3.0, 6.0)])
def test_retry_after_forms(header: str, low: float, high: float, states: States,
                           crafted: Crafted, tmp_path: Path) -> None:
    if header == "HTTP-date":
        header = format_datetime(datetime.now(UTC) + timedelta(seconds=6), usegmt=True)
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = once_then(
        json_reply({"error": {"code": "rate_limited", "message": "slow down"}}, status=429,
                   headers={"Retry-After": header}),
        json_reply(json.loads(states.a["/api/manifest"])))
    waits, sleep = recording()
    run_sync(crafted.url, tmp_path / "hub.duckdb", sleep=sleep)
    assert len(waits) == 1 and low <= waits[0] <= high, waits


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40))
@example("nan")
@example("inf")
@example("9" * 5000)
@example("Wed, 21 Oct 2015 07:28:00 GMT")
@example("Sun, 06 Nov 9999 08:49:37 GMT")
def test_retry_after_is_a_finite_wait_or_none(value: str) -> None:
    wait = retry_after(value, datetime(2026, 3, 1, tzinfo=UTC))
    assert wait is None or (wait >= 0 and not math.isnan(wait))


def test_a_long_retry_after_is_an_error_not_a_wait(states: States, crafted: Crafted,
                                                   tmp_path: Path) -> None:
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = json_reply({}, status=429,
                                                   headers={"Retry-After": "86400"})
    waits, sleep = recording()
    message = sync_error(crafted.url, tmp_path / "hub.duckdb", sleep=sleep)
    assert "86400" in message and "run the sync again later" in message and waits == []


def test_endless_rate_limiting_stops(states: States, crafted: Crafted, tmp_path: Path) -> None:
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = json_reply({}, status=429, headers={"Retry-After": "1"})
    waits, sleep = recording()
    message = sync_error(crafted.url, tmp_path / "hub.duckdb", sleep=sleep,
                         limits=Limits(rate_waits=5))
    assert "still rate limited (429) after 5 waits" in message and len(waits) == 5


def endless_list(request: web.Request) -> dict[str, Any]:
    offset = int(request.query.get("offset", "0"))
    record = {"id": str(uuid.UUID(int=offset + 1)), "collection": "species",
              "content_hash": "h", "updated_at": T0}
    return {"collection": "species", "items": [record], "total": 3, "limit": 200,
            "offset": offset, "next": f"/api/species?limit=200&offset={offset + 1}"}


@pytest.mark.parametrize("loop", ["endless list", "list back to itself", "endless feed",
                                  "feed back to itself", "empty feed page with next"])
def test_paging_loops_are_bounded(loop: str, states: States, crafted: Crafted,
                                  tmp_path: Path) -> None:
    def page(request: web.Request) -> dict[str, Any]:
        cursor = int(request.query.get("cursor", "0"))
        record_id = str(uuid.UUID(int=cursor + 1))
        crafted.files[f"/api/species/{record_id}"] = json.dumps(
            {"id": record_id, "collection": "species", "content_hash": "h",
             "updated_at": T0}).encode()
        following = cursor + 1 if loop == "endless feed" else cursor
        return {"items": [] if loop == "empty feed page with next" else [
                    record_item(record_id, f"/api/species/{record_id}")],
                "next": f"/api/changes?since={T0}&cursor={following}", "until": T0}
    keyed_node(crafted, states, feed_of(page))
    if "list" in loop:
        async def listing(request: web.Request) -> web.StreamResponse:
            body = endless_list(request)
            if loop == "list back to itself":
                body["next"] = "/api/species?limit=200"
            return web.json_response(body)
        crafted.handlers["/api/species"] = listing
    message = sync_error(crafted.url, tmp_path / "hub.duckdb", "key",
                         limits=Limits(pages=20))
    expected = {"endless list": "goes on past 10 pages", "endless feed": "past 20 pages",
                "empty feed page with next": "an empty page that links to another"}
    assert expected.get(loop, "links back to a page already read") in message
    assert len(crafted.seen) < 80


def test_a_list_that_shifts_while_paged_is_held_once(states: States, crafted: Crafted,
                                                     tmp_path: Path) -> None:
    a, b, c = (str(uuid.UUID(int=n)) for n in (1, 2, 3))

    def record(record_id: str, title: str) -> dict[str, Any]:
        return {"id": record_id, "collection": "species", "title": title,
                "content_hash": title, "updated_at": T0}

    async def listing(request: web.Request) -> web.StreamResponse:
        offset = int(request.query.get("offset", "0"))
        paged = request.query.get("limit") == "200"
        items = ([record(a, "a"), record(b, "b1")] if offset == 0 else
                 [record(b, "b2"), record(c, "c")]) if paged else [record(a, "a")]
        return web.json_response({
            "collection": "species", "items": items, "total": 3, "limit": 200,
            "offset": offset, "next": "/api/species?limit=200&offset=2"
            if paged and offset == 0 else None})
    keyed_node(crafted, states, feed_of(lambda request: {"items": [], "next": None,
                                                          "until": T0}))
    crafted.handlers["/api/species"] = listing
    report = run_sync(crafted.url, tmp_path / "hub.duckdb", "key")
    assert report.summary() == "added 3, updated 0, removed 0; 3 records in the index"
    held = {i: json.loads(j)["title"] for _, i, _, j in rows(tmp_path / "hub.duckdb")}
    assert held == {a: "a", b: "b2", c: "c"}


@pytest.mark.parametrize("spelling", ["host in capitals", "user name"])
def test_a_link_to_the_same_origin_written_otherwise_is_followed_or_refused(
        spelling: str, states: States, crafted: Crafted, tmp_path: Path) -> None:
    """A changes feed's `next` link on the node's origin but spelt otherwise: a host in
    capitals is fetched as the address writes it; one with a user name is refused in one
    line. Neither stops the sync with a traceback (an assertion in `Node.relative`)."""
    port = crafted.url.rsplit(":", 1)[1]
    address = f"http://localhost:{port}"
    following = {"host in capitals": f"http://LOCALHOST:{port}",
                 "user name": f"http://someone@localhost:{port}"}[spelling]

    def pages(request: web.Request) -> dict[str, Any]:
        if request.query.get("cursor") is None:
            gone = {"collection": "species", "id": str(uuid.UUID(int=9)), "op": "delete",
                    "updated_at": T0,
                    "url": f"{address}/api/species/{uuid.UUID(int=9)}",
                    "content_hash": None}
            return {"items": [gone], "next": f"{following}/api/changes?since={T0}&cursor=x",
                    "until": T0}
        return {"items": [], "next": None, "until": T0}
    keyed_node(crafted, states, feed_of(pages))
    manifest = manifest_of(crafted.files)
    crafted.files = with_manifest(crafted.files, json.loads(
        json.dumps(manifest).replace(crafted.url, address)))
    if spelling == "user name":
        assert "outside http://localhost" in sync_error(address, tmp_path / "hub.duckdb", "key")
        return
    report = run_sync(address, tmp_path / "hub.duckdb", "key")
    assert report.summary() == "added 0, updated 0, removed 0; 0 records in the index"
    assert any("cursor=x" in path for path, _ in crafted.seen)


def test_a_redirect_to_no_url_is_said_so(states: States, crafted: Crafted,
                                         tmp_path: Path) -> None:
    """A Location that is not a URL is one error saying so, not retried as a network error
    and reported as "more than 5 redirects"."""
    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=302, headers={"Location": "http://evil]/x"})
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = moved
    message = sync_error(crafted.url, tmp_path / "hub.duckdb")
    assert "302 to a location that is not a URL: 'http://evil]/x'" in message, message


def test_a_stalled_body_is_a_failure_not_a_hang(states: States, crafted: Crafted,
                                                tmp_path: Path) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 5000
        await response.prepare(request)
        await response.write(b'{"node": ')
        await asyncio.sleep(2)
        return response
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = stall
    begin = datetime.now(UTC)
    message = sync_error(crafted.url, tmp_path / "hub.duckdb")
    assert "no answer" in message and "tried 2 times" in message
    assert datetime.now(UTC) - begin < timedelta(seconds=10)


def test_a_node_that_trickles_each_try_ends_within_one_requests_time(
        states: States, crafted: Crafted, tmp_path: Path) -> None:
    """A body that comes a byte at a time, never stalling long enough for the read limit,
    ends one request after `request_timeout` in all, its tries included: each of six tries
    does not get the whole limit (which would be six times 900 s by default)."""
    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 5000
        await response.prepare(request)
        for _ in range(100):
            await response.write(b" ")
            await asyncio.sleep(0.1)
        return response
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = trickle
    limits = dataclasses.replace(QUICK, attempts=6, read_timeout=1.0, request_timeout=1.5,
                                 backoff=0.01)
    begin = datetime.now(UTC)
    message = sync_error(crafted.url, tmp_path / "hub.duckdb", limits=limits)
    assert "within 2 s" in message or "within 1 s" in message, message
    assert datetime.now(UTC) - begin < timedelta(seconds=4)


@pytest.mark.parametrize("size", ["declared", "streamed"])
def test_bodies_over_the_cap_are_refused(size: str, states: States, crafted: Crafted,
                                         tmp_path: Path) -> None:
    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if size == "declared":
            response.content_length = 10 * 2 ** 30  # 10 GiB announced, a few bytes sent
            await response.prepare(request)
            await response.write(b"{")
            await asyncio.sleep(1)
            return response
        await response.prepare(request)
        for _ in range(64):
            await response.write(b" " * 1024)
        await response.write_eof()
        return response
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = huge
    message = sync_error(crafted.url, tmp_path / "hub.duckdb",
                         limits=Limits(manifest_bytes=2 ** 15, attempts=2, backoff=0.01))
    assert ("announces a body of 10240 MiB" if size == "declared" else
            "over the hub's limit of 32768 bytes") in message
    assert not (tmp_path / "hub.duckdb").exists()


def test_unreachable_node_leaves_no_file_and_logs_its_retries(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    into = tmp_path / "hub.duckdb"
    caplog.set_level("INFO", logger="fednode.hub")
    message = sync_error(f"http://127.0.0.1:{free_port()}", into,
                         limits=Limits(attempts=3, backoff=0.01))
    assert "tried 3 times" in message and "check that the node runs" in message
    assert not into.exists()
    assert [r.getMessage() for r in caplog.records if "retry" in r.getMessage()][-1].endswith(
        "retry 2 of 2 in 0.0 s")


def test_a_first_load_that_fails_midway_leaves_no_file_and_a_resync_keeps_the_index(
        states: States, crafted: Crafted, baseline: Path, tmp_path: Path) -> None:
    crafted.reset(states.a)
    snapshots = manifest_of(states.a)["sync"]["snapshots"]
    assert len(snapshots) >= 2
    crafted.handlers[URL(snapshots[-1]["url"]).path] = json_reply({}, status=503)
    sync_error(crafted.url, tmp_path / "new.duckdb")
    assert not (tmp_path / "new.duckdb").exists()
    assert not (tmp_path / "new.duckdb.tmp").exists()
    # A folder of the user's with the name DuckDB spills into is the user's: kept.
    (tmp_path / "notes.tmp").mkdir()
    (tmp_path / "notes.tmp" / "keep.txt").write_text("mine")
    sync_error(crafted.url, tmp_path / "notes")
    assert not (tmp_path / "notes").exists()
    assert (tmp_path / "notes.tmp" / "keep.txt").read_text() == "mine"
    into = hub_copy(baseline, tmp_path / "old")
    before = rows(into)
    with duckdb.connect(str(into)) as db:  # the hub is ahead of the node: a full reload
        db.execute("UPDATE hub SET value = '999' WHERE name = 'position'")
    sync_error(crafted.url, into)
    assert rows(into) == before


# --- bounds and a node that went back, with the real sidecar; one node per file ----------


def test_a_node_that_went_back_is_reloaded_and_said_so(tmp_path: Path) -> None:
    world = World(tmp_path)
    for n in range(6):
        world.records[f"s{n}"] = ("species", species(f"Species {n}",
                                                      **({"access": "partners"} if n == 5
                                                         else {})))
        world.write(f"s{n}")
    world.export(1)
    backup = tmp_path / "backup"
    shutil.copytree(world.root / "content", backup / "content")
    shutil.copy(world.root / "ledger.jsonl", backup / "ledger.jsonl")
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        for n in range(6, 10):
            world.records[f"s{n}"] = ("species", species(f"Species {n}"))
            world.write(f"s{n}")
        world.export(1)
        world.sync_and_compare(server.url)
        shutil.rmtree(world.root / "content")  # restored from the backup, then two new ones
        shutil.copytree(backup / "content", world.root / "content")
        shutil.copy(backup / "ledger.jsonl", world.root / "ledger.jsonl")
        for n in (20, 21):
            world.records[f"s{n}"] = ("species", species(f"Species {n}"))
            world.write(f"s{n}")
        world.export(60)
        for name, key, reason in (
                ("open", None, "the node's sync position went back from 9 to 7 (restored "
                               "from a backup?): reloaded everything; "),
                ("partner", world.partner_key, "the index disagreed with the node's list "
                                               "totals: reloaded everything; ")):
            report = run_sync(server.url, world.hubs[name], key)
            assert hub_view(world.hubs[name]) == node_view(server.url, key), name
            assert report.summary().startswith(reason), report.summary()
        quiet = run_sync(server.url, world.hubs["open"])
        assert quiet.summary() == "added 0, updated 0, removed 0; 7 records in the index"


@pytest.mark.slow
def test_records_as_large_as_the_limits_allow_are_synced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of 16 MiB (the hub takes up to 64 MiB) and a change of 40 records of 1 MiB,
    first loaded and then changed, with and without a key: DuckDB's memory limit of
    128 MiB refused each (a value is parsed whole; a transaction is held until its commit and
    checkpointed after it), and the hub file could not be synced again. The batch of changes
    is written in runs of at most 4 MiB here (`apply.RUN_BYTES`): what a hub holds at once."""
    from hub import apply
    monkeypatch.setattr(apply, "RUN_BYTES", 4 * 2**20)
    world = World(tmp_path)
    world.records["big"] = ("species", species("Species big"))
    world.node.write("species", "big", world.records["big"][1], "x" * (16 * 2**20))
    world.export(1)
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        for into, key in ((world.hubs["open"], None), (world.hubs["partner"], world.partner_key)):
            run_sync(server.url, into, key)
        for n in range(40):
            world.records[f"m{n}"] = ("species", species(f"Species {n}"))
            world.node.write("species", f"m{n}", world.records[f"m{n}"][1], "y" * 2**20)
        world.node.write("species", "big", world.records["big"][1], "z" * (16 * 2**20))
        world.export(1)
        for into, key in ((world.hubs["open"], None), (world.hubs["partner"], world.partner_key)):
            report = run_sync(server.url, into, key)
            assert report.summary() == "added 40, updated 1, removed 0; 41 records in the index"
        held = {json.loads(j)["body"][:1] for _, _, _, j in rows(world.hubs["open"])}
        assert held == {"y", "z"}


def test_a_hub_file_follows_one_node(tmp_path: Path) -> None:
    other_id = "00000000-0000-4000-8000-0000000000b2"
    nodes = [Node(tmp_path / "a"), Node(tmp_path / "b", NODE_TOML.replace(
        "00000000-0000-4000-8000-000000000001", other_id).replace("Test Node", "Other Node"))]
    for n, node in enumerate(nodes):
        node.write("species", "one", species(f"Species of node {n}"))
        build(Project(node.root), now=datetime(2026, 3, 1, 8, 0, tzinfo=UTC))
    into = tmp_path / "hub.duckdb"
    with ServerThread(app_for(nodes[0].root)) as a, ServerThread(app_for(nodes[1].root)) as b:
        run_sync(a.url, into)
        before = rows(into)
        assert {r[2] for r in before} == {"00000000-0000-4000-8000-000000000001"}
        message = sync_error(b.url, into)
        assert "holds node 00000000-0000-4000-8000-000000000001 (Test Node)" in message
        assert f"not {other_id} (Other Node)" in message and "give another --into" in message
        assert rows(into) == before


HOSTILE_TEXT = "ok\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u202egnp.exe\u200b\x9b31m"


@pytest.mark.slow
def test_a_nodes_text_cannot_write_to_the_operators_terminal(
        states: States, crafted: Crafted, baseline: Path, tmp_path: Path) -> None:
    """What a node sends (an error's message, its name) reaches the operator's terminal,
    piped output and log with every control, direction override and zero-width mark
    written as its escape: a node must not clear the screen, set the clipboard (OSC 52) or
    turn a line around."""
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = json_reply(
        {"error": {"code": "unavailable", "message": HOSTILE_TEXT}}, status=404)
    result = cli(crafted.url, "--into", str(tmp_path / "first.duckdb"))
    assert_one_error_line(result, "ok\\x1b]52;c;", "\\u202egnp.exe\\u200b\\x9b31m")
    assert not any(c in result.stderr + result.stdout for c in "\x1b\x07\u202e\u200b\x9b")
    # A name stored by the first run, echoed when another node is refused.
    into = hub_copy(baseline, tmp_path / "held")
    with duckdb.connect(str(into)) as db:
        db.execute("UPDATE hub SET value = ? WHERE name = 'node_name'", [HOSTILE_TEXT])
    manifest = manifest_of(states.a)
    manifest["node"]["id"] = "00000000-0000-4000-8000-0000000000b2"
    crafted.reset(with_manifest(states.a, manifest))
    result = cli(crafted.url, "--into", str(into))
    assert_one_error_line(result, "holds node", "\\x1b[2J")
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr


def test_a_hub_file_is_its_owners_alone(tmp_path: Path) -> None:
    """Synced with a key that holds a group, a hub file holds restricted records: it, and
    what DuckDB writes beside it, are readable by their owner alone whatever the umask; a
    wider file (an older fednode's) is narrowed at the next sync."""
    node = Node(tmp_path / "node")
    node.write("species", "one", species("Species one"))
    node.write("species", "two", species("Species two", access="partners"))
    build(Project(node.root), now=datetime(2026, 3, 1, 8, 0, tzinfo=UTC))
    token, _ = issue_key(node.root, "partner", scopes=["read", "changes"], groups=["partners"])
    into = tmp_path / "hub.duckdb"
    umask = os.umask(0o022)
    try:
        with ServerThread(app_for(node.root)) as server:
            run_sync(server.url, into, token)
            made = sorted(tmp_path.glob("hub.duckdb*"))
            assert made and all(path.stat().st_mode & 0o777 == 0o600 for path in made), made
            with duckdb.connect(str(into), read_only=True) as db:
                assert db.execute("SELECT count(*) FROM records WHERE json->>'access' = "
                                  "'partners'").fetchone() == (1,)
            into.chmod(0o644)
            run_sync(server.url, into, token)
            assert into.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(umask)
    assert os.umask(umask) == umask  # the process's own is back


def test_a_key_without_the_sync_scopes_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    node.write("species", "one", species("Species one"))
    build(Project(node.root), now=datetime(2026, 3, 1, 8, 0, tzinfo=UTC))
    token, record = issue_key(node.root, "reader", scopes=["read", "search"])
    into = tmp_path / "hub.duckdb"
    with ServerThread(app_for(node.root)) as server:
        message = sync_error(server.url, into, token)
    assert f"the key {record.id} lacks the scope changes" in message
    assert "fednode keys create --scopes read,changes" in message
    assert not into.exists()


# --- the file's layout and views; progress and logs --------------------------------------


def test_views_and_the_documented_queries(sample_root: Path, tmp_path: Path) -> None:
    into = tmp_path / "hub.duckdb"
    with ServerThread(app_for(sample_root)) as server:
        run_sync(server.url, into)
    queries = re.findall(r"```sql\n(.*?)```", (REPO / "docs" / "hub-reference.md").read_text(),
                         re.S)
    assert len(queries) == 3
    with duckdb.connect(str(into), read_only=True) as db:
        for query in queries:
            assert db.execute(query).fetchall(), query
        family, name = db.execute(
            "SELECT json->>'family', json->>'scientificName' FROM records "
            "WHERE collection = 'species' ORDER BY 2 LIMIT 1").fetchone() or ("", "")
        assert family and name
        assert db.execute("SELECT typeof(json) FROM records LIMIT 1").fetchone() == ("JSON",)
        assert db.execute("SELECT DISTINCT node_id FROM records").fetchall() == [
            (load_node_config(Project(sample_root)).id,)]
        columns = {c for (c,) in db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'species'"
        ).fetchall()}
        assert {"scientificName", "vernacularName", "family", "category",
                "establishmentMeans", "tags", "node_id", "id"} <= columns
        (sown,) = db.execute("SELECT count(*) FROM germination WHERE seedsSown > 0"
                             ).fetchone() or (0,)
        assert sown > 0


def rate_limited_once(states: States, crafted: Crafted) -> None:
    crafted.reset(states.a)
    crafted.handlers["/api/manifest"] = once_then(
        json_reply({"error": {"code": "rate_limited", "message": "slow down"}}, status=429,
                   headers={"Retry-After": "1"}),
        json_reply(json.loads(states.a["/api/manifest"])))


@pytest.mark.slow
def test_piped_runs_are_quiet_and_the_log_gets_the_waits(states: States, crafted: Crafted,
                                                         tmp_path: Path) -> None:
    rate_limited_once(states, crafted)
    log = tmp_path / "sync.log"
    result = cli(crafted.url, "--into", str(tmp_path / "hub.duckdb"), "--log-file", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert re.fullmatch(r"added \d+, updated 0, removed 0; \d+ records in the index\n",
                        result.stdout)
    text = log.read_text()
    assert re.search(r"INFO waiting 1 s: http://127\.0\.0\.1:\d+/api/manifest answered 429",
                     text), text
    assert "loading species" in text


@pytest.mark.slow
def test_a_terminal_shows_what_the_sync_waits_for(states: States, crafted: Crafted,
                                                  tmp_path: Path) -> None:
    rate_limited_once(states, crafted)
    leader, follower = pty.openpty()
    process = subprocess.Popen([*FEDNODE, "sync", crafted.url, "--into",
                                str(tmp_path / "hub.duckdb")], env=ENV, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(60) == 0
    screen = shown.decode()
    assert "waiting 1 s:" in screen and "answered 429 (rate limited)" in screen
    assert "loading species" in screen
    assert screen.endswith("\r\x1b[K")  # the status line is cleared at the end
    assert process.stdout is not None and "records in the index" in process.stdout.read()


def test_index_refuses_a_layout_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "future.duckdb"
    Index.open(path).close()
    with duckdb.connect(str(path)) as db:
        db.execute("UPDATE hub SET value = '3' WHERE name = 'layout'")
    with pytest.raises(SyncError, match="layout 3, which a newer fednode made: upgrade"):
        Index.open(path)
    with duckdb.connect(str(path)) as db:
        db.execute("UPDATE hub SET value = '1' WHERE name = 'layout'")
    with pytest.raises(SyncError, match="layout 1, which this fednode does not read"):
        Index.open(path)
    with duckdb.connect(str(path)) as db:  # a damaged one: the records table is gone
        db.execute("UPDATE hub SET value = '2' WHERE name = 'layout'")
        db.execute("DROP VIEW species; DROP VIEW resources; DROP VIEW treatments; "
                   "DROP VIEW germination; DROP VIEW team; DROP TABLE records")
    with pytest.raises(SyncError, match="is not a usable hub index .*delete it and sync"):
        Index.open(path)
