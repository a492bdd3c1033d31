"""Restricted means absent: creating, editing, re-grouping or deleting only restricted
records changes no byte that a caller without their group can read — not in site_out/, and
not in any answer to an anonymous or ungranted caller (counters, times, cursors, ETags)."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import (
    Node,
    Records,
    ServerThread,
    app_for,
    exported_sample,
    http_get,
    issue_key,
    species,
    team,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.contract.bundle import RECORDS, read_records, records_of, segments
from exporter.contract.wire import COLLECTIONS, PUBLIC
from exporter.pipeline.build import build
from exporter.project.config import Project
from sidecar.records import Records as StoredRecords

EPOCH = "1970-01-01T00:00:00Z"


class World:
    def __init__(self, root: Path) -> None:
        self.node = Node(root)
        self.root = root
        self.now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
        self.hidden = Records(self.node)  # only restricted records, from here on
        for n in range(3):
            self.node.write("species", f"pub{n}", species(f"Public species {n}"))
            self.node.write("team", f"pubteam{n}", team(f"Public person {n}"))
        self.hidden.create("once", "species")  # public first, restricted ever after
        self.export()
        self.hidden.set_access(0, "partners")
        for n in range(2):
            self.hidden.create(f"h{n}", "team", "partners")
        self.export()
        self.key, _ = issue_key(root, "ungranted")

    def export(self) -> None:
        self.now += timedelta(minutes=7)
        build(Project(self.root), now=self.now)

    def public_view(self, base: str) -> dict[str, Any]:
        """Every byte an anonymous or ungranted caller can read, with status and ETag."""
        seen: dict[str, Any] = {}
        site = self.root / "site_out"
        for path in sorted(site.rglob("*")):
            if path.is_file():
                seen[f"file:{path.relative_to(site)}"] = path.read_bytes()
        urls = ["/", "/api/manifest", "/api/schema", "/api/sync/changes.ndjson",
                "/api/sync/species/0.ndjson", "/api/sync/team/0.ndjson"]
        # Words of the restricted records ("Record new0", "Notes on new0.") and the public
        # ones, in every mode: results, scores, snippets and counts must not move.
        for words in ("record", "notes on once", "public species", "person t0", "recrod"):
            for mode in ("keyword", "semantic", "hybrid"):
                urls.append(f"/api/search?q={words.replace(' ', '+')}&mode={mode}")
        urls.append("/api/search?q=record+person&collections=team&limit=50")
        for collection in ("species", "team", "resources"):
            urls += [f"/api/{collection}", f"/api/{collection}?limit=1",
                     f"/api/{collection}?limit=2&offset=1",
                     f"/api/{collection}?updated_since=2026-03-01T08:07:00Z",
                     f"/api/{collection}?updated_since=2026-03-01T08:30:00Z"]
        for who, headers in (("anonymous", {}), ("ungranted", {"X-API-Key": self.key})):
            pages = list(urls)
            if who == "ungranted":
                pages += [f"/api/changes?since={since}&limit={limit}"
                          for since in (EPOCH, "2026-03-01T08:07:00Z", "2026-03-01T08:14:00Z")
                          for limit in (1, 200)]
            while pages:
                url = pages.pop(0)
                status, answer_headers, body = http_get(base + url, headers)
                seen[f"{who}:{url}"] = (status, answer_headers.get("ETag"), body)
                if url.startswith("/api/changes") and status == 200:
                    import json
                    following = json.loads(body)["next"]
                    if following:
                        pages.append(following.replace("https://node.example.org", ""))
        for name, arguments in (("node_info", {}), ("search", {"query": "record notes"}),
                                ("search", {"query": "recrod", "limit": 50}),
                                ("get_team", {"limit": 200}), ("get_species", {"limit": 200})):
            seen[f"mcp:{name}:{arguments}"] = post_json(base + "/api/mcp", {
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}, {"X-API-Key": self.key})
        return seen


def post_json(url: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
    import json
    import urllib.request
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request) as response:
        return response.status, response.read()


operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(["species", "team"]),
              st.sampled_from(["partners", "sensitive"])),
    st.tuples(st.just("edit"), st.integers(0, 20)),
    st.tuples(st.just("regroup"), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("export")),
)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(operation, min_size=1, max_size=8))
def test_restricted_only_edits_change_nothing_public(operations: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        world = World(Path(folder) / "node")
        with ServerThread(app_for(world.root, reload_interval=0, anonymous_rate=0)) as server:
            before = world.public_view(server.url)
            for op in operations:
                if op[0] == "create":
                    world.hidden.create(f"new{len(world.hidden.held)}", op[1], op[2])
                elif op[0] == "export":
                    world.export()
                    server.settle()  # the new bundle, loaded aside: compared below
                elif op[0] == "edit":
                    world.hidden.edit(op[1])
                elif op[0] == "delete":
                    world.hidden.delete(op[1])
                else:
                    slug = world.hidden.pick(op[1])
                    group = slug and world.hidden.held[slug][1]["access"]
                    world.hidden.set_access(op[1], "sensitive" if group == "partners"
                                            else "partners")
            world.export()
            server.settle()
            after = world.public_view(server.url)
        assert after.keys() == before.keys()
        for name in before:
            assert after[name] == before[name], name


def test_a_restricted_record_moved_into_a_public_collection_keeps_its_past(
        tmp_path: Path) -> None:
    """A restricted team record becomes a public species record (same id): callers
    without the group learn of a new public species, never of a team record."""
    node = Node(tmp_path / "node")
    hidden = team("Secret person", access="partners")
    node.write("species", "pub", species("Public one"))
    node.write("team", "secret", hidden)
    now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    build(Project(node.root), now=now)
    node.remove("team", "secret")
    node.write("species", "moved", species("Now public", id=hidden["id"]))
    build(Project(node.root), now=now + timedelta(minutes=5))
    key, _ = issue_key(node.root, "ungranted")
    public = (node.root / "site_out" / "api" / "sync" / "changes.ndjson").read_text()
    with ServerThread(app_for(node.root, reload_interval=0, anonymous_rate=0)) as server:
        feed = http_get(server.url + "/api/changes?since=1970-01-01T00:00:00Z",
                        {"X-API-Key": key})[2].decode()
    for text in (public, feed):
        assert '"collection":"team"' not in text
        assert f'"collection":"species","id":"{hidden["id"]}","op":"upsert"' in text
    ledger = node.root / "ledger.jsonl"
    before = ledger.read_bytes()
    build(Project(node.root), now=now + timedelta(minutes=10))
    assert ledger.read_bytes() == before  # the ledger knows the record as live


def test_an_anonymous_page_is_cut_alike_whatever_restricted_records_sit_between(
        sample_root: Path) -> None:
    """In the sample, restricted species sort between public ones (Arnica montana between
    Alnus and Baccharis). The bundle keeps each access group's rows together, so every page
    of an anonymous list is one slice of the map: what it costs cannot tell where a
    restricted record sits (a page that straddled one was cut in three, measurably slower)."""
    path = Project(sample_root).bundle / RECORDS
    table = records_of(read_records(path)).to_pylist()
    access = [row["access"] for row in sorted(table, key=lambda row: row["position"])
              if row["collection"] == "species"]
    first, last = access.index(PUBLIC), len(access) - 1 - access[::-1].index(PUBLIC)
    assert any(group != PUBLIC for group in access[first:last])  # restricted in between
    records = StoredRecords(path)
    assert records.grouped
    for collection in COLLECTIONS:
        listing = records.listed(collection, [PUBLIC])
        assert len(set(listing.runs.tolist())) <= 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(COLLECTIONS[:2]),
                          st.sampled_from([PUBLIC, "partners", "sensitive"]),
                          st.integers(1, 9)), max_size=8),
       st.integers(1, 4))
def test_where_a_group_is_cut_into_segments_depends_on_its_rows_alone(
        groups: list[tuple[str, str, int]], size: int) -> None:
    """The records table's segments (`contract.bundle.segments`) decide where a page's runs
    end: a group's rows are cut at the same places, counted from its first row, whatever
    other groups hold and however many of them sit before it."""
    stored = sorted({(name, access): rows for name, access, rows in groups}.items())
    collections = [name for (name, _), rows in stored for _ in range(rows)]
    access = [group for (_, group), rows in stored for _ in range(rows)]
    cuts = segments(collections, access, size)
    assert [row for cut in cuts for row in range(*cut)] == list(range(len(collections)))
    first = 0
    for (name, group), rows in stored:
        alone = segments([name] * rows, [group] * rows, size)
        assert [(a - first, b - first) for a, b in cuts if first <= a < first + rows] == alone
        first += rows


@pytest.mark.slow
def test_a_list_page_is_not_made_faster_for_another_kind_of_caller(tmp_path: Path) -> None:
    """The sidecar remembers the envelope of the list pages it answers (`service._envelope`),
    in a cache for each kind of caller: a page a partner's key asked for is made afresh for
    an anonymous caller, whose answer's time cannot tell that it was asked, nor how many
    pages the key asked for. Here the key holds a group no record is in, so both get the very
    same bytes."""
    from sidecar import service

    root = exported_sample(tmp_path / "node")
    build(Project(root), now=datetime(2026, 3, 1, tzinfo=UTC))
    key, _ = issue_key(root, "grouped", groups=["nobody"])
    service._envelopes.clear()
    with ServerThread(app_for(root, reload_interval=0, anonymous_rate=0)) as server:
        url = server.url + "/api/species?limit=2&offset=1"
        keyed = http_get(url, {"X-API-Key": key})
        anonymous = http_get(url)
        assert anonymous[0] == keyed[0] == 200 and anonymous[2] == keyed[2]
        kinds = {groups: made.cache_info() for groups, made in service._envelopes.items()}
        assert kinds.keys() == {(PUBLIC,), (PUBLIC, "nobody")}
        assert all(info.hits == 0 and info.currsize == 1 for info in kinds.values())
        assert http_get(url)[2] == anonymous[2]
        assert service._envelopes[(PUBLIC,)].cache_info().hits == 1  # its own kind's
        for offset in range(3, 3 + service.ENVELOPES_KEPT):  # the key's pages, many
            http_get(f"{server.url}/api/species?limit=1&offset={offset}", {"X-API-Key": key})
        assert service._envelopes[(PUBLIC,)].cache_info().currsize == 1  # not pushed out


def test_another_copy_of_the_sample_leaves_a_sidecars_build_alone(tmp_path: Path) -> None:
    """The tests below count a sidecar's reloads and the feeds each snapshot keeps. Copies of
    the sample share their builds' files by hard links, and each link changes a shared
    file's change time: were the bundle's meta.json shared, another test process copying the
    sample would change the build a sidecar sees (`contract.builds.identity`) and make it
    load its bundle again, in the middle of a test."""
    from exporter.contract import builds

    root = exported_sample(tmp_path / "one")
    before = builds.identity(root / ".fednode" / "bundle")
    exported_sample(tmp_path / "two")
    assert builds.identity(root / ".fednode" / "bundle") == before


def test_a_changes_feed_is_not_pushed_out_by_another_kind_of_caller(tmp_path: Path) -> None:
    """Each kind of caller's changes feed is kept for the snapshot's life: were they one
    cache of four shared by every kind, a key's poll would be made afresh (slower) once
    keys of four other kinds (partners', say) had polled, which the key could time."""
    from sidecar.state import RUNNING

    root = exported_sample(tmp_path / "node")
    build(Project(root), now=datetime(2026, 3, 1, tzinfo=UTC))
    plain, _ = issue_key(root, "plain", scopes=["read", "changes"])
    others = [issue_key(root, f"kind {n}", scopes=["read", "changes"], groups=[f"g{n}"])[0]
              for n in range(6)]
    app = app_for(root, reload_interval=0, anonymous_rate=0)
    with ServerThread(app) as server:
        url = server.url + "/api/changes?since=2000-01-01T00:00:00Z"
        first = http_get(url, {"X-API-Key": plain})
        assert first[0] == 200
        feeds = app[RUNNING].store.snapshot.feeds
        mine = feeds.get(((PUBLIC,), tuple(COLLECTIONS)))
        assert mine is not None
        for key in others:
            assert http_get(url, {"X-API-Key": key})[0] == 200
        assert feeds.get(((PUBLIC,), tuple(COLLECTIONS))) is mine  # still its own
        assert http_get(url, {"X-API-Key": plain})[2] == first[2]
        # After an export, each kind's feed is made before the new snapshot answers: the
        # first poll makes nothing, so its time does not grow with events it may not see.
        (root / "content" / "team" / "extra.md").write_text(
            '+++\nid = "0b7a4a52-41a8-4f43-9a43-3f9e6f0f6b11"\nname = "Extra"\n'
            'role = "Field lead"\naffiliation = "Test"\naccess = "partners"\n+++\n')
        build(Project(root), now=datetime(2026, 3, 2, tzinfo=UTC))
        server.settle()
        fresh = app[RUNNING].store.snapshot.feeds
        assert fresh is not feeds
        assert set(fresh.kinds()) == set(feeds.kinds()) and len(fresh.kinds()) == 7


def test_an_export_that_changed_nothing_public_is_loaded_aside(tmp_path: Path) -> None:
    """The request that meets an export which changed only restricted records is answered
    from the snapshot the sidecar had, and the new one loads aside: were it loaded first,
    that request would be slower, and any caller could time that something restricted had
    changed. An export that changed what everyone reads is loaded before answering."""
    node = Node(tmp_path / "node")
    hidden = species("Hidden name", access="partners")
    node.write("species", "hidden", hidden)
    opened = species("Open name")
    node.write("species", "open", opened)
    build(Project(node.root), now=datetime(2026, 3, 1, tzinfo=UTC))
    key, _ = issue_key(node.root, "partner", groups=["partners"])
    with ServerThread(app_for(node.root, reload_interval=0, anonymous_rate=0)) as server:
        def hidden_habitat() -> str | None:
            answer = http_get(f"{server.url}/api/species/{hidden['id']}", {"X-API-Key": key})
            assert answer[0] == 200
            return json.loads(answer[2]).get("habitat")

        assert hidden_habitat() is None
        node.write("species", "hidden", dict(hidden, habitat="Edited"))
        build(Project(node.root), now=datetime(2026, 3, 2, tzinfo=UTC))
        assert hidden_habitat() is None  # the snapshot it had; the new one loads aside
        server.settle()
        assert hidden_habitat() == "Edited"
        node.write("species", "open", dict(opened, habitat="Edited"))
        build(Project(node.root), now=datetime(2026, 3, 3, tzinfo=UTC))
        records = json.loads(http_get(f"{server.url}/api/species")[2])["items"]
        assert [r.get("habitat") for r in records] == ["Edited"]  # loaded before answering
