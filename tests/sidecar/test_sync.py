"""A hub that follows the node ends with exactly the records its caller can see."""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import (
    Records,
    ServerThread,
    app_for,
    examples,
    issue_key,
    species,
    team,
)
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from worlds import World, hub_view, node_view

from cli.main import main
from exporter.contract.wire import encode
from hub.sync import SyncError, sync
from sidecar import keys as keyring
from sidecar.changes import Change
from sidecar.service import changes_body, changes_page
from sidecar.store import Store

operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(["species", "team"]),
              st.sampled_from(["public", "public", "partners", "sensitive"])),
    st.tuples(st.just("edit"), st.integers(0, 50)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("restrict"), st.integers(0, 50), st.sampled_from(["partners",
                                                                         "sensitive"])),
    st.tuples(st.just("unrestrict"), st.integers(0, 50)),
    st.tuples(st.just("export"), st.integers(0, 1)),
    st.tuples(st.just("sync")),
    st.tuples(st.just("sync")),  # twice as likely: polls with nothing new come up often
)


@pytest.mark.slow
@settings(max_examples=examples(6, 60), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(operation, min_size=2, max_size=14))
@example([("edit", 0), ("delete", 0)])  # a delete in the very second of the last sync
@example([("restrict", 1, "partners"), ("export", 0), ("sync",), ("unrestrict", 1)])
# restricted and made public again between two syncs: same content_hash, new updated_at
@example([("sync",), ("delete", 0), ("restrict", 0, "partners"), ("delete", 34), ("edit", 33),
          ("edit", 3), ("export", 0), ("unrestrict", 0)])
def test_hubs_hold_exactly_what_their_caller_sees(operations: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        world = World(Path(folder))
        for n, access in enumerate(["public", "public", "partners", "sensitive"]):
            world.records[f"base{n}"] = ("species" if n % 2 else "team",
                                         (species if n % 2 else team)(f"Base record {n}"))
            if access != "public":
                world.records[f"base{n}"][1]["access"] = access
            world.write(f"base{n}")
        world.export(1)
        with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
            world.sync_and_compare(server.url)
            records = Records(world.node)
            records.held = world.records
            for op in [*operations, ("export", 0), ("sync",)]:
                if op[0] == "create":
                    records.create(f"r{len(world.records)}-{uuid.uuid4().hex[:6]}", op[1], op[2])
                elif op[0] == "edit":
                    records.edit(op[1])
                elif op[0] == "delete":
                    records.delete(op[1])
                elif op[0] in ("restrict", "unrestrict"):
                    records.set_access(op[1], op[2] if op[0] == "restrict" else None)
                elif op[0] == "export":
                    world.export(op[1])
                    server.settle()  # one that changed only restricted records loads aside
                elif op[0] == "sync":
                    world.sync_and_compare(server.url)


def test_interrupted_sync_resumes_and_429_waits_are_honoured(tmp_path: Path) -> None:
    world = World(tmp_path)
    for n in range(12):
        slug = f"s{n}"
        world.records[slug] = ("species", species(f"Species {n}", access="partners")
                               if n % 3 == 0 else species(f"Species {n}"))
        world.write(slug)
    world.export(1)
    token, key = issue_key(world.root, "slow", groups=["partners"])
    key_id = key.id
    waits: list[float] = []

    def set_rate(rate: int) -> None:  # the sidecar re-reads the registry on change
        registry = keyring.Registry.load(world.root / ".fednode" / "keys.json")
        registry.keys[key_id] = replace(registry.keys[key_id], rate=rate)
        registry.save()

    async def interrupt(seconds: float) -> None:
        waits.append(seconds)
        raise SyncError("interrupted")

    hub = tmp_path / "slow.duckdb"
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        asyncio.run(sync(server.url, hub, token))  # first load: manifest, me, lists
        for n in range(12):  # every record changes: the hub needs many requests
            collection, fields = world.records[f"s{n}"]
            fields["habitat"] = "Edited"
            world.write(f"s{n}")
        world.export(1)
        set_rate(4)
        with pytest.raises(SyncError, match="interrupted"):
            asyncio.run(sync(server.url, hub, token, sleep=interrupt))
        assert len(waits) == 1 and 1 <= waits[0] <= 60  # the Retry-After it was given
        set_rate(10_000)
        report = asyncio.run(sync(server.url, hub, token))
        assert hub_view(hub) == node_view(server.url, token)
        assert report.removed == 0 and report.added == 0 and report.updated > 0


def test_cli_sync_reports_counts(tmp_path: Path) -> None:
    world = World(tmp_path)
    for n in range(3):
        world.records[f"s{n}"] = ("species", species(f"Species {n}"))
        world.write(f"s{n}")
    world.export(1)
    hub = tmp_path / "cli.duckdb"
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        runner = CliRunner()
        first = runner.invoke(main, ["sync", server.url, "--into", str(hub)])
        assert first.exit_code == 0, first.output
        assert first.stdout.strip() == "added 3, updated 0, removed 0; 3 records in the index"
        world.node.remove("species", "s1")
        world.export(1)
        second = runner.invoke(main, ["sync", server.url, "--into", str(hub)])
        assert second.stdout.strip() == "added 0, updated 0, removed 1; 2 records in the index"
        other = runner.invoke(main, ["sync", server.url, "--into", str(hub), "--key",
                                     world.partner_key])
        assert other.exit_code == 1 and "was synced as open" in other.output
        bad = runner.invoke(main, ["sync", server.url, "--into", str(tmp_path / "x.duckdb"),
                                   "--key", "nonsense"])
        assert bad.exit_code == 1 and "401" in bad.output


def test_changes_feed_pages_and_errors(tmp_path: Path) -> None:
    world = World(tmp_path)
    for n in range(7):
        world.records[f"s{n}"] = ("species", species(f"Species {n}"))
        world.write(f"s{n}")
    world.export(0)  # seven events at one instant
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        async def get(url: str, key: str | None) -> tuple[int, Any]:
            import aiohttp
            async with aiohttp.ClientSession() as session:
                headers = {"X-API-Key": key} if key else {}
                async with session.get(server.url + url, headers=headers) as response:
                    return response.status, await response.json()
        seen = []
        url: str | None = "/api/changes?since=2000-01-01T00:00:00Z&limit=3"
        while url:
            status, page = asyncio.run(get(url, world.partner_key))
            assert status == 200
            seen += [item["id"] for item in page["items"]]
            assert all(item["op"] == "upsert" for item in page["items"])
            url = page["next"].replace("https://node.example.org", "") if page["next"] else None
        assert len(seen) == len(set(seen)) == 7
        assert page["until"] == "2026-03-01T08:00:00Z"
        status, body = asyncio.run(get("/api/changes?since=yesterday", world.partner_key))
        assert status == 400 and body["error"]["code"] == "invalid_parameter"
        status, body = asyncio.run(get("/api/changes", world.partner_key))
        assert status == 400 and "since is required" in body["error"]["message"]
        status, body = asyncio.run(get("/api/changes?since=2000-01-01T00:00:00Z", None))
        assert status == 401 and body["error"]["code"] == "api_key_required"
        status, body = asyncio.run(get(f"/api/changes?since={page['until']}",
                                       world.partner_key))
        # `since` is exclusive: polling with the last `until` when nothing changed returns
        # nothing, and the same `until` again.
        assert (status, body) == (200, {"items": [], "next": None, "until": page["until"]})
        status, body = asyncio.run(get("/api/changes?since=2000-01-01T00:00:00Z&cursor=12",
                                       world.partner_key))
        assert status == 400 and "cursor is not one this node gave" in body["error"]["message"]


def test_a_burst_of_polls_makes_the_feed_once(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers of one kind asking for the feed of a fresh snapshot at the same time wait for
    one making of it (each making held the whole event table in DuckDB's memory): twelve
    polls at once, one query, and the same answer for each; later polls query nothing."""
    world = World(tmp_path)
    for n in range(5):
        world.records[f"s{n}"] = ("species", species(f"Species {n}"))
        world.write(f"s{n}")
    world.export(1)
    queries: list[str] = []
    query = Store.query

    async def slow_query(self: Store, fn: Any, **options: Any) -> Any:
        queries.append(fn.__qualname__)
        await asyncio.sleep(0.3)  # every poll of the burst arrives while this one runs
        return await query(self, fn, **options)

    monkeypatch.setattr(Store, "query", slow_query)
    with ServerThread(app_for(world.root, anonymous_rate=0)) as server:
        async def burst(count: int) -> list[tuple[int, bytes]]:
            import aiohttp
            async with aiohttp.ClientSession() as session:
                async def poll() -> tuple[int, bytes]:
                    async with session.get(f"{server.url}/api/changes?since=2000-01-01T00:00:00Z",
                                           headers={"X-API-Key": world.partner_key}) as response:
                        return response.status, await response.read()
                return await asyncio.gather(*(poll() for _ in range(count)))

        answers = asyncio.run(burst(12))
        assert queries == ["View.feed.<locals>.run"]
        assert {status for status, _ in answers} == {200}
        assert len({body for _, body in answers}) == 1
        assert len(json.loads(answers[0][1])["items"]) == 5
        assert asyncio.run(burst(3)) == answers[:3]
        assert len(queries) == 1


def test_updated_since_agrees_with_the_feed(tmp_path: Path) -> None:
    world = World(tmp_path)
    for n in range(6):
        world.records[f"s{n}"] = ("species", species(f"Species {n}",
                                                      **({"access": "partners"} if n % 2 else {})))
        world.write(f"s{n}")
    world.export(5)
    since = world.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    world.export(0)
    for n in (0, 1):
        world.records[f"s{n}"][1]["habitat"] = "Edited"
        world.write(f"s{n}")
    world.export(7)
    later = world.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
        async def read(url: str) -> Any:
            import aiohttp
            async with aiohttp.ClientSession() as session, session.get(
                    server.url + url, headers={"X-API-Key": world.partner_key}) as response:
                return await response.json()
        for moment in (since, later):
            # updated_since is inclusive, the feed's since exclusive: a second apart, they agree
            before = (datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ") - timedelta(seconds=1))
            listed = asyncio.run(read(f"/api/species?updated_since={moment}&limit=200"))
            feed = asyncio.run(read(f"/api/changes?since={before:%Y-%m-%dT%H:%M:%SZ}"))
            assert {i["id"] for i in listed["items"]} == {
                i["id"] for i in feed["items"] if i["op"] == "upsert"}
        assert len(listed["items"]) == 2


# Values as the feed holds them, and values no feed should hold (quotes, backslashes,
# control characters, non-ASCII, lone surrogates) that must still come out as `encode` writes.
_FEED_TEXT = st.one_of(st.sampled_from(["species", "team", str(uuid.UUID(int=7)),
                                        "2026-01-31T12:00:00Z", "ab" * 32,
                                        "https://node.example.org", 'a"b', "a\\b", "a\nb",
                                        "\x7f", "é\u202e", "\ud800"]),
                       st.text(max_size=12))


@settings(max_examples=400, deadline=None)
@given(base=_FEED_TEXT, next_url=st.none() | _FEED_TEXT, until=_FEED_TEXT,
       rows=st.lists(st.builds(Change, _FEED_TEXT, _FEED_TEXT, _FEED_TEXT, st.booleans(),
                               st.none() | _FEED_TEXT), max_size=4))
def test_a_changes_page_is_written_as_encode_writes_it(base: str, next_url: str | None,
                                                       until: str, rows: list[Change]) -> None:
    """The changes page joined from its values (`changes_body`) is byte for byte the
    canonical JSON of its data; a value JSON would escape falls back to `encode`."""
    try:
        expected = encode(changes_page(base, rows, next_url, until))
    except UnicodeEncodeError:  # a lone surrogate: no JSON bytes at all, either way
        with pytest.raises(UnicodeEncodeError):
            changes_body(base, rows, next_url, until)
        return
    assert changes_body(base, rows, next_url, until) == expected
    json.loads(expected)
