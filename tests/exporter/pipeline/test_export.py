"""The export: restricted records stay private, output is deterministic and atomic, the
ledger owns timestamps."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from builders import (
    NODE_TOML,
    REPO,
    Node,
    app_for,
    copy_sample,
    multiply,
    same_key,
    species,
    team,
)
from hypothesis import given
from hypothesis import strategies as st

from exporter.contract.layout import record_file
from exporter.contract.page_urls import record_href
from exporter.contract.wire import format_time, parse_time
from exporter.pipeline.build import BuildReport, build
from exporter.pipeline.ledger import Ledger
from exporter.project.config import Project
from exporter.shared.errors import ContentError, ExportError

Export = Callable[..., BuildReport]
Client = Callable[..., Awaitable[TestClient]]


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def read_json(path: Path) -> dict:
    return json.loads(path.read_bytes())


def test_static_layout_and_record_shape(node: Node, export: Export) -> None:
    fields = species("Heracleum mantegazzianum", vernacularName="Giant hogweed")
    node.write("species", "hogweed", fields, "Tall umbellifer.")
    report = export(node.root)
    site = node.root / "site_out"
    record = read_json(site / record_file("species", fields["id"]))
    assert list(record)[:8] == ["id", "collection", "title", "access", "created_at",
                                "updated_at", "url", "content_hash"]
    assert record["title"] == "Heracleum mantegazzianum"
    assert record["url"] == f"https://node.example.org/api/species/{fields['id']}"
    assert record["access"] == "public"
    assert record["created_at"] == record["updated_at"] == "2026-03-01T08:01:00Z"
    page = read_json(site / "api" / "species" / "index.json")
    assert page == {"collection": "species", "items": [record], "total": 1, "limit": 50,
                    "offset": 0, "next": None}
    assert (site / "api" / "species" / "offset" / "0.json").read_bytes() == \
        (site / "api" / "species" / "index.json").read_bytes()
    manifest = read_json(site / "api" / "manifest.json")
    assert manifest["node"]["name"] == "Test Node"
    assert [c["name"] for c in manifest["collections"]] == [
        "species", "resources", "treatments", "germination", "team"]
    assert manifest["collections"][0]["public_count"] == 1
    assert manifest["collections"][0]["tool"] == "get_species"
    schema = read_json(site / "api" / "schema.json")
    assert schema["collections"]["species"]["properties"]["scientificName"]["type"] == "string"
    assert report.public["species"] == 1


def test_pages_and_next_links(node: Node, export: Export) -> None:
    for n in range(120):
        node.write("species", f"s{n:03d}", species(f"Species number{n:03d}"))
    export(node.root)
    folder = node.root / "site_out" / "api" / "species"
    pages = sorted(int(p.stem) for p in (folder / "offset").glob("*.json"))
    assert pages == [0, 50, 100]
    first = read_json(folder / "offset" / "0.json")
    assert first["next"] == "https://node.example.org/api/species?offset=50"
    assert read_json(folder / "offset" / "50.json")["next"] == \
        "https://node.example.org/api/species?offset=100"
    last = read_json(folder / "offset" / "100.json")
    assert last["next"] is None and len(last["items"]) == 20 and last["total"] == 120
    ids = [i["id"] for o in pages for i in read_json(folder / "offset" / f"{o}.json")["items"]]
    assert len(set(ids)) == 120


def test_restricted_records_never_reach_site_out(node: Node, export: Export) -> None:
    secret = team("Hidden Person", access="partners", role="Phone tree QUOKKA-17")
    node.write("team", "hidden", secret, "Reachable at the QUOKKA-17 hut.")
    node.write("team", "open", team("Open Person"))
    report = export(node.root)
    assert report.restricted["team"] == 1
    for path in (node.root / "site_out").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret["id"].encode() not in data, path
            assert b"QUOKKA" not in data and b"Hidden Person" not in data, path
    assert read_json(node.root / "site_out" / "api" / "team" / "index.json")["total"] == 1
    manifest = read_json(node.root / "site_out" / "api" / "manifest.json")
    assert manifest["collections"][4]["public_count"] == 1


def test_sample_restricted_records_never_reach_site_out(sample_root: Path) -> None:
    """Every restricted record of the bundled sample: its id and its distinctive text."""
    restricted = []
    for path in sorted((sample_root / "content").rglob("*.md")):
        text = path.read_text()
        if "\naccess = " in text:
            restricted.append(text)
    rows = (sample_root / "content" / "germination").glob("*.csv")
    csv_restricted = [line for table in rows for line in table.read_text().splitlines()
                      if ",partners," in line or ",sensitive," in line]
    assert len(restricted) + len(csv_restricted) >= 6
    needles: list[bytes] = []
    for text in restricted:
        front, body = text.split("\n+++\n", 1)
        needles.append(front.split('id = "', 1)[1][:36].encode())
        # distinctive text: every long sentence of the body
        needles += [s.strip().encode() for s in body.split(".") if len(s.strip()) > 40]
    for line in csv_restricted:
        needles.append(line[:36].encode())
    files = [p for p in (sample_root / "site_out").rglob("*") if p.is_file()]
    assert len(files) > 100
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, (path, needle[:60])


def test_export_twice_is_byte_identical(node: Node, export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"), "Knotweed.")
    node.write("team", "b", team("Bea", access="sensitive"))
    export(node.root)
    site, bundle = tree(node.root / "site_out"), tree(node.root / ".fednode" / "bundle")
    ledger = (node.root / "ledger.jsonl").read_bytes()
    report = export(node.root)
    assert report.events == 0 and report.site is not None and report.site.written == 0
    assert tree(node.root / "site_out") == site
    assert tree(node.root / ".fednode" / "bundle") == bundle
    assert (node.root / "ledger.jsonl").read_bytes() == ledger


def test_same_content_and_ledger_give_same_bytes_elsewhere(node: Node, export: Export,
                                                          tmp_path: Path) -> None:
    node.write("species", "a", species("Fallopia japonica"), "Knotweed.")
    export(node.root)
    other = tmp_path / "elsewhere"
    other.mkdir()
    copy_sample_like = [("content", True), ("ledger.jsonl", False)]
    for name, is_dir in copy_sample_like:
        source = node.root / name
        if is_dir:
            subprocess.run(["cp", "-r", str(source), str(other / name)], check=True)
        else:
            (other / name).write_bytes(source.read_bytes())
    same_key(node.root, other)  # the node's signing key goes with it (the manifest's)
    export(other)  # a later clock: the ledger, not the clock, decides
    assert tree(other / "site_out") == tree(node.root / "site_out")


def test_a_record_added_or_removed_writes_only_the_files_it_changes(node: Node,
                                                                   export: Export) -> None:
    """The collections' counts show on the home page alone: a record added or removed
    renders no other record's page again, and writes no file whose bytes stay the same."""
    for n in range(60):
        node.write("species", f"s{n:03d}", species(f"Species number{n:03d}"))
        node.write("team", f"t{n:03d}", team(f"Person Number{n:03d}"))
    export(node.root)
    for change in (lambda: node.write("species", "added", species("Species added")),
                   lambda: node.remove("team", "t030")):
        before = tree(node.root / "site_out")
        change()
        report = export(node.root)
        after = tree(node.root / "site_out")
        changed = [path for path in after if after[path] != before.get(path)]
        assert report.site is not None and report.site.written == len(changed)
        assert not [path for path in changed if path in before and path.count("/") == 2
                    and path.startswith(("species/", "team/"))]  # no other record's page
        assert "index.html" in changed


def test_editing_one_record_changes_only_what_must_change(node: Node, export: Export) -> None:
    records = {f"s{n:03d}": species(f"Species number{n:03d}") for n in range(120)}
    for slug, fields in records.items():
        node.write("species", slug, fields)
    export(node.root)
    before = tree(node.root / "site_out")
    edited = dict(records["s060"], habitat="Riverbanks")
    folder = node.root / "site_out" / "api" / "species"
    page = next(offset for offset in (0, 50, 100) if edited["id"] in
                [i["id"] for i in read_json(folder / "offset" / f"{offset}.json")["items"]])
    pages = [f"api/species/offset/{page}.json"] + (["api/species/index.json"] if page == 0
                                                    else [])
    node.write("species", "s060", edited)
    report = export(node.root)
    after = tree(node.root / "site_out")
    changed = sorted(path for path in after if after[path] != before.get(path))
    assert changed == sorted(["api/manifest.json", *pages, record_file("species", edited["id"]),
                              "api/sync/species/0.ndjson", "api/sync/changes.ndjson",
                              "download/species-dwca.zip", "download/species.csv",
                              record_href("species", edited["id"]).lstrip("/"),
                              "sitemap.xml"])
    assert report.site is not None and report.site.written == len(changed)
    record = read_json(node.root / "site_out" / record_file("species", edited["id"]))
    assert record["updated_at"] == "2026-03-01T08:02:00Z"
    assert record["created_at"] == "2026-03-01T08:01:00Z"


def test_ledger_times_move_only_on_content_change(node: Node, export: Export) -> None:
    fields = species("Fallopia japonica")
    path = node.write("species", "a", fields, "Knotweed.")
    export(node.root)
    path.write_text(path.read_text().replace('scientificName = ', 'scientificName  = '))
    os.utime(path)
    export(node.root)  # reformatted, same content: no event
    ledger = Ledger.load(node.root / "ledger.jsonl")
    assert [e.op for e in ledger.events] == ["create"]
    node.write("species", "a", dict(fields, access="partners"), "Knotweed.")
    export(node.root)
    node.write("species", "a", dict(fields, access="partners"), "Knotweed, edited.")
    export(node.root)
    node.remove("species", "a")
    export(node.root)
    ledger = Ledger.load(node.root / "ledger.jsonl")
    assert [(e.seq, e.op, e.access) for e in ledger.events] == [
        (1, "create", "public"), (2, "access", "partners"), (3, "update", "partners"),
        (4, "delete", "partners")]
    assert ledger.entries[fields["id"]].deleted
    assert ledger.events[-1].at == "2026-03-01T08:05:00Z"


def test_frozen_export_refuses_to_extend_the_ledger(node: Node, export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    with pytest.raises(ExportError, match="ledger is behind"):
        export(node.root, frozen=True)
    assert not (node.root / "site_out").exists()
    export(node.root)
    export(node.root, frozen=True)


def test_torn_ledger_line_is_ignored_and_repaired(node: Node, export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    ledger = node.root / "ledger.jsonl"
    with open(ledger, "ab") as handle:
        handle.write(b'{"seq":2,"at":"2026-')  # an export killed while appending
    node.write("species", "b", species("Fallopia sachalinensis"))
    export(node.root)
    lines = ledger.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]


def test_damaged_ledger_is_an_error_naming_the_line(node: Node, export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    ledger = node.root / "ledger.jsonl"
    ledger.write_text(ledger.read_text() + "<<<<<<< HEAD\n")
    with pytest.raises(ExportError, match=r"ledger.jsonl:2: not a ledger event"):
        export(node.root)


def test_bad_content_leaves_previous_output_intact(node: Node, export: Export) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    site, bundle = tree(node.root / "site_out"), tree(node.root / ".fednode" / "bundle")
    node.write("species", "b", dict(species("Fallopia sachalinensis"), family="nope"))
    with pytest.raises(ContentError):
        export(node.root)
    assert tree(node.root / "site_out") == site
    assert tree(node.root / ".fednode" / "bundle") == bundle


@pytest.mark.slow
def test_killed_export_leaves_previous_output_intact(tmp_path: Path) -> None:
    root = copy_sample(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "cli.main", "export", "--project", str(root)]
    subprocess.run(command, check=True, env=env, capture_output=True)
    site = tree(root / "site_out")
    multiply(root / "content", 3000)
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    spare = root / ".fednode" / "builds" / "b" / "site"  # the first export built "a"
    while not spare.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "the export ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert tree(root / "site_out") == site
    # the next export cleans up and completes
    subprocess.run(command, check=True, env=env, capture_output=True)
    assert not list(root.glob("site_out.*"))
    assert sorted(p.name for p in (root / ".fednode" / "builds").iterdir()) == ["a", "b"]
    assert len(tree(root / "site_out")) > len(site)


def test_cached_records_rerender_from_their_files(node: Node, export: Export) -> None:
    fields = species("Fallopia japonica", habitat="Riverbanks")
    node.write("species", "a", fields, "Knotweed body.")
    export(node.root)
    export(node.root, base_url="https://mirror.example.net")  # every rendering changes
    record = read_json(node.root / "site_out" / record_file("species", fields["id"]))
    assert record["url"] == f"https://mirror.example.net/api/species/{fields['id']}"
    assert record["habitat"] == "Riverbanks" and record["body"] == "Knotweed body.\n"


def test_an_edit_that_keeps_the_files_time_and_size_is_seen(node: Node, export: Export
                                                             ) -> None:
    """A file made restricted by an edit of the same size whose time was put back (`cp -p`,
    `tar`, `touch -r` do; so may a coarse clock) is read again: its change time and inode
    say it changed. The export does not take it from its cache as it was and keep
    publishing it (nor does an export after a base_url change fail on it every time)."""
    fields = species("Fallopia japonica", access="public")
    path = node.write("species", "a", fields)
    export(node.root)
    assert (node.root / "site_out" / record_file("species", fields["id"])).exists()
    before = path.stat()
    restricted = path.read_text().replace('access = "public"', 'access = "secret"')
    assert len(restricted.encode()) == before.st_size
    path.write_text(restricted)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    report = export(node.root)
    assert report.restricted["species"] == 1 and report.public["species"] == 0
    assert not (node.root / "site_out" / record_file("species", fields["id"])).exists()
    export(node.root, base_url="https://mirror.example.net")  # reads every record's fields


def test_sync_files_hold_public_records_only(node: Node, export: Export) -> None:
    public = species("Fallopia japonica")
    hidden = species("Arnica montana", access="sensitive", category="native",
                     establishmentMeans="native", family="Asteraceae")
    never = team("Hidden Person", access="partners")
    node.write("species", "a", public)
    node.write("species", "b", hidden)
    node.write("team", "c", never)
    export(node.root)
    site = node.root / "site_out" / "api" / "sync"
    snapshot = [json.loads(line) for line in (site / "species" / "0.ndjson").read_text()
                .splitlines()]
    assert [r["id"] for r in snapshot] == [public["id"]]
    assert not (site / "team" / "0.ndjson").exists()
    changes = [json.loads(line) for line in (site / "changes.ndjson").read_text().splitlines()]
    assert [(c["id"], c["op"]) for c in changes] == [(public["id"], "upsert")]
    node.write("species", "a", dict(public, access="partners"))
    export(node.root)
    changes = [json.loads(line) for line in (site / "changes.ndjson").read_text().splitlines()]
    assert [(c["id"], c["op"], c["content_hash"]) for c in changes] == [
        (public["id"], "delete", None)]
    manifest = read_json(node.root / "site_out" / "api" / "manifest.json")
    assert manifest["sync"]["changes"]["sha256"] == hashlib.sha256(
        (site / "changes.ndjson").read_bytes()).hexdigest()
    assert manifest["sync"]["snapshots"] == []
    for path in site.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert hidden["id"] not in text and never["id"] not in text


def test_back_to_back_exports_stamp_seconds_of_their_own(node: Node) -> None:
    """Each export stamps the second in which it began (a time that has come); one that
    begins in the second the last one stamped waits for the next: each export gets a second
    of its own, whatever happened before (restricted edits included)."""
    hidden = team("Hidden", access="partners")
    node.write("team", "hidden", hidden)
    started = datetime.now(UTC)
    build(Project(node.root))
    first = Ledger.load(node.root / "ledger.jsonl").last_at
    assert first is not None and format_time(datetime.now(UTC)) >= first  # not in the future
    assert first in (format_time(started.replace(microsecond=0) + timedelta(seconds=n))
                     for n in (0, 1))
    node.write("species", "a", species("Fallopia japonica"))
    started = datetime.now(UTC)
    build(Project(node.root))
    second = Ledger.load(node.root / "ledger.jsonl").last_at
    assert second is not None and second > first
    assert format_time(datetime.now(UTC)) >= second
    assert second in (format_time(started.replace(microsecond=0) + timedelta(seconds=n))
                      for n in (0, 1, 2))  # the clock's second, not the ledger's last plus one


def test_an_export_in_the_second_the_last_one_stamped_waits_for_the_next(node: Node) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    build(Project(node.root))
    first = Ledger.load(node.root / "ledger.jsonl").last_at
    assert first is not None
    node.write("species", "b", species("Impatiens glandulifera"))
    # The same second, however quick the machine: make the ledger's last time this second.
    ledger = node.root / "ledger.jsonl"
    now = format_time(datetime.now(UTC))
    ledger.write_text(ledger.read_text().replace(first, now))
    build(Project(node.root))
    assert Ledger.load(ledger).last_at == format_time(parse_time(now) + timedelta(seconds=1))


@pytest.mark.slow
def test_the_second_stamped_does_not_tell_whether_restricted_records_changed(
        node: Node) -> None:
    """A public edit exported in the second of an export that changed only restricted
    records, and in the second of one that changed nothing, is stamped alike: the second
    after (each export claims the second it began in, with events or without). Were the
    first stamped a second later than the second, that would tell that something restricted
    had changed."""
    node.write("species", "a", species("Fallopia japonica"))
    build(Project(node.root))
    for n, restricted in enumerate((True, False, True, False)):
        time.sleep(1.05 - datetime.now(UTC).microsecond / 1e6)  # just after a second begins
        began = datetime.now(UTC)
        if restricted:
            node.write("team", f"hidden{n}", team(f"Hidden {n}", access="partners"))
        build(Project(node.root))
        node.write("species", f"s{n}", species(f"Impatiens glandulifera {n}"))
        next_began = datetime.now(UTC)
        build(Project(node.root))
        expected = max(began.replace(microsecond=0) + timedelta(seconds=1),
                       next_began.replace(microsecond=0))
        assert Ledger.load(node.root / "ledger.jsonl").last_at == format_time(expected), \
            (restricted, began, next_began)


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.just(UTC)))
def test_times_are_always_four_digit_years(moment: datetime) -> None:
    text = format_time(moment)
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", text)
    assert parse_time(text) == moment.replace(microsecond=0)


def test_lists_follow_the_schema_order_everywhere(node: Node, export: Export) -> None:
    """species by scientificName, casefolded, then id; germination by species, sowingDate,
    title. Static pages, snapshots and the sidecar agree, and an export from the cache keeps
    the order without reading the files again."""
    names = ["beta vulgaris", "Alnus glutinosa", "alnus incana", "Zea mays", "Acer campestre"]
    for n, name in enumerate(names):  # created in this order
        node.write("species", f"s{n}", species(name))
    twins = [species("Salix alba"), species("salix alba")]
    for n, fields in enumerate(twins):
        node.write("species", f"t{n}", fields)
    table = node.root / "content" / "germination" / "results.csv"
    table.parent.mkdir(parents=True)
    rows = [("Primula veris", "2025-02-10", "b"), ("Centaurea jacea", "", "a"),
            ("primula veris", "2024-10-15", "c"), ("Centaurea jacea", "2024-01-01", "d")]
    table.write_text("id,title,species,program,setting,seedsSown,seedsGerminated,source,"
                     "sowingDate\n" + "".join(
                         f"{uuid.uuid4()},{title} trial,{kind},Bank,nursery,10,5,Log,{date}\n"
                         for kind, date, title in rows))
    export(node.root)
    site = node.root / "site_out" / "api"
    listed = [i["title"] for i in read_json(site / "species" / "index.json")["items"]]
    by_id = sorted(twins, key=lambda f: f["id"])
    assert listed == ["Acer campestre", "Alnus glutinosa", "alnus incana", "beta vulgaris",
                      by_id[0]["scientificName"], by_id[1]["scientificName"], "Zea mays"]
    germination = [i["title"] for i in read_json(site / "germination" / "index.json")["items"]]
    assert germination == ["a trial", "d trial", "c trial", "b trial"]
    snapshot = [json.loads(line)["title"]
                for line in (site / "sync" / "species" / "0.ndjson").read_text().splitlines()]
    assert snapshot == listed
    export(node.root, base_url="https://mirror.example.net")  # from the cache
    assert [i["title"] for i in read_json(site / "species" / "index.json")["items"]] == listed


async def test_the_sidecar_lists_in_the_same_order(node: Node, export: Export,
                                                   aiohttp_client: Client
                                                   ) -> None:
    for n, name in enumerate(["Mentha aquatica", "achillea millefolium", "Lotus corniculatus"]):
        node.write("species", f"s{n}", species(name))
    export(node.root)
    client = await aiohttp_client(app_for(node.root))
    answer = await client.get("/api/species?limit=2&offset=1")
    items = (await answer.json())["items"]
    assert [i["scientificName"] for i in items] == ["Lotus corniculatus", "Mentha aquatica"]


@pytest.mark.parametrize(("configured", "expected"), [
    ("", "https://cdn.example.org"),  # no sidecar_url: it is base_url, and follows the flag
    ('sidecar_url = "https://node.example.org"\n', "https://cdn.example.org"),  # the same
    ('sidecar_url = "https://api.example.org/"\n', "https://api.example.org"),  # apart
])
def test_base_url_flag_moves_the_sidecar_url_unless_set_apart(tmp_path: Path, export: Export,
                                                              configured: str,
                                                              expected: str) -> None:
    node = Node(tmp_path / "node", NODE_TOML + configured)
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root, base_url="https://cdn.example.org")
    manifest = read_json(node.root / "site_out" / "api" / "manifest.json")
    assert manifest["node"]["base_url"] == "https://cdn.example.org"
    assert manifest["node"]["sidecar_url"] == expected
    meta = read_json(node.root / ".fednode" / "bundle" / "meta.json")
    assert (meta["base_url"], meta["sidecar_url"]) == ("https://cdn.example.org", expected)
    export(node.root)  # without the flag, node.toml decides again
    manifest = read_json(node.root / "site_out" / "api" / "manifest.json")
    assert manifest["node"]["sidecar_url"] == (
        "https://node.example.org" if expected == "https://cdn.example.org" else expected)


@pytest.mark.parametrize("value", ['5', '"api.example.org"', '["https://a.example.org"]'])
def test_sidecar_url_must_be_an_http_address(tmp_path: Path, export: Export,
                                             value: str) -> None:
    node = Node(tmp_path / "node", NODE_TOML + f"sidecar_url = {value}\n")
    with pytest.raises(ContentError) as caught:
        export(node.root)
    assert [str(p) for p in caught.value.problems] == [
        "content/node.toml:10: node.sidecar_url: must be a URL starting with http:// or "
        "https://, then a host, or left out when the sidecar answers at base_url"
        if value.startswith('"')
        else 'content/node.toml:10: node.sidecar_url: must be text in quotes, e.g. '
             'sidecar_url = "https://api.example.org"']


def test_a_clock_behind_the_ledger_stops_the_export(node: Node) -> None:
    """Events must come after the last one; stamping last+1s would let earlier (perhaps
    restricted) events show through the times of these, so the export stops instead."""
    node.write("team", "hidden", team("Hidden", access="partners"))
    build(Project(node.root), now=datetime(2099, 1, 1, tzinfo=UTC))  # another, faster clock
    ledger = (node.root / "ledger.jsonl").read_bytes()
    site = tree(node.root / "site_out")
    node.write("species", "a", species("Fallopia japonica"))
    with pytest.raises(ExportError, match=r"clock \(.*\) is behind the last event in "
                                          r"ledger.jsonl \(2099-01-01T00:00:00Z\)"):
        build(Project(node.root))
    assert (node.root / "ledger.jsonl").read_bytes() == ledger
    assert tree(node.root / "site_out") == site
    build(Project(node.root), now=datetime(2099, 1, 1, 0, 5, tzinfo=UTC))  # a clock set right


def test_an_export_after_one_killed_before_its_second_waits_for_it(node: Node) -> None:
    """A killed export may leave events stamped with a second that has not come yet; the
    next export waits for it to pass rather than stop."""
    node.write("species", "a", species("Fallopia japonica"))
    ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    build(Project(node.root), now=ahead)  # as a killed export left the ledger
    node.write("species", "b", species("Arnica montana"))
    build(Project(node.root))
    last = Ledger.load(node.root / "ledger.jsonl").last_at
    assert last is not None and last > format_time(ahead)
