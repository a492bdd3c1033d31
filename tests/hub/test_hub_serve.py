"""The hub as a node (`fednode hub export`, `fednode hub serve`): its members' public records
served by the node's own export and sidecar, each with its provenance.

Real member nodes (exported content, real sidecars on 127.0.0.1), a real `fednode hub sync`,
the real export of the hub's node and a real sidecar over it, and `fednode hub serve` as a
process. A real aiohttp server in front of one member takes the licence out of its
manifest; another member is synced with a key holding an access group, so privately."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from builders import (
    NODE_TOML,
    Node,
    Records,
    ServerThread,
    app_for,
    examples,
    http_get,
    http_post,
    issue_key,
    make_pdf,
    record_text,
    resigned,
    species,
    team,
)
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processes import ENV, FEDNODE, free_port, wait_for
from worlds import node_view

from cli.main import main
from exporter.contract.page_urls import record_href
from exporter.contract.wire import COLLECTIONS
from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.export import export_hub, hub_project
from hub.members import load_hub
from hub.network import sync_members
from hub.node import Limits
from hub.republish import hub_id

MARK = "quokkaweed"  # in every restricted record of every member, and in nothing public
EPOCH = "1970-01-01T00:00:00Z"
QUICK = Limits(attempts=2, backoff=0.01, connect_timeout=1.0)


def hub_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["hub", *args], env=env)


def treatment(title: str, target: str, **extra: Any) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "title": title, "method": "mechanical",
            "summary": f"{title}: cut, dig out and bag every part.", "targetSpecies": [target],
            **extra}


def resource(title: str, **extra: Any) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "title": title, "kind": "link",
            "summary": f"{title}, a page worth reading.", "link": "https://example.org/page",
            **extra}


def germination(title: str, **extra: Any) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "title": title, "species": "Primula veris",
            "program": "Seed bank", "setting": "nursery", "seedsSown": 100,
            "seedsGerminated": 40, "source": "Seed bank register", **extra}


@dataclass
class Member:
    """A member node: its project, its records (public and restricted) and its sidecar."""

    name: str
    node: Node
    node_id: str
    node_name: str
    licence: str | None  # as the hub sees it (None: its manifest names none)
    public: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    restricted: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    url: str = ""

    def add(self, slug: str, collection: str, fields: dict[str, Any], words: str) -> None:
        restricted = fields.get("access", "public") != "public"
        body = f"Field notes from the valley. {words}" + (f" {MARK.title()}." if restricted
                                                          else "")
        if slug.startswith("library/"):  # a document of the library, beside its PDF
            path = self.node.root / "content" / f"{slug}.md"
            path.write_text(record_text(fields, body), "utf-8")
        else:
            self.node.write(collection, slug, fields, body)
        (self.restricted if restricted else self.public)[slug] = (collection, fields)


def make_member(root: Path, n: int, name: str, licence: str) -> Member:
    node_id = f"00000000-0000-4000-8000-{n:012d}"
    toml = (NODE_TOML.replace("00000000-0000-4000-8000-000000000001", node_id)
            .replace("Test Node", f"Node {name}").replace("CC0-1.0", licence)
            .replace("https://node.example.org", f"https://{name}.example.org"))
    return Member(name, Node(root / name, toml), node_id, f"Node {name}", licence)


class Unlicensed:
    """A real aiohttp server in front of a node, answering as the node does but with the
    licence taken out of its manifest (a node that names none)."""

    def __init__(self, target: str, root: Path) -> None:
        self.target = target
        self.root = root
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.answer)
        self.server = ServerThread(app, runner=web.AppRunner)

    async def answer(self, request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(
                self.target + request.path, params=request.query) as answer:
            body, status, kind = await answer.read(), answer.status, answer.content_type
        if request.path == "/api/manifest":
            manifest = json.loads(body)
            del manifest["node"]["licence"]
            body = resigned(manifest, self.root)  # as a node naming no licence signs it
        return web.Response(body=body, status=status, content_type=kind)


@dataclass
class Network:
    folder: Path
    members: dict[str, Member]
    hub: str  # the hub's sidecar
    key: str  # a key of the hub's node: every scope, no groups
    synced: Result
    exported: Result


def members_of(root: Path) -> dict[str, Member]:
    alpha = make_member(root, 1, "alpha", "CC-BY-4.0")
    alpha.add("knotweed", "species", species("Fallopia japonica", vernacularName="Knotweed"),
              "Alphamarsh banks.")
    alpha.add("cutting", "treatments", treatment("Cutting knotweed", "Fallopia japonica"),
              "Alphamarsh method.")
    alpha.add("guide", "resources", resource("Knotweed guide"), "Alphamarsh guide.")
    alpha.add("secret", "species", species("Quokkaweed alpha", access="partners"), "Hidden.")
    alpha.add("secret-person", "team", team("Quokka Person", access="partners"), "Hidden.")
    library = alpha.node.root / "content" / "library"
    for slug, access, words in (("handbook", "public", "Alphamarsh handbook."),
                                ("secret-handbook", "partners", f"{MARK.title()} handbook.")):
        make_pdf(library / f"{slug}.pdf", [f"{words} Cut knotweed stems in June."])
        alpha.add(f"library/{slug}", "resources", {
            "id": str(uuid.uuid4()), "title": f"{slug.title()} of Alpha", "kind": "document",
            "summary": f"{words} How Alpha controls knotweed.", "access": access}, words)
    beta = make_member(root, 2, "beta", "CC0-1.0")
    beta.add("knotweed", "species", species("Fallopia japonica", vernacularName="Renouée"),
             "Betabrook banks.")
    beta.add("cowslip", "germination", germination("Cowslip in trays"), "Betabrook trays.")
    beta.add("secret", "treatments", treatment("Quokkaweed burning", "Fallopia japonica",
                                               access="sensitive"), "Hidden.")
    gamma = make_member(root, 3, "gamma", "CC0-1.0")
    gamma.licence = None  # served through `Unlicensed`
    gamma.add("lead", "team", team("Gamma Lead"), "Gammafen crew.")
    gamma.add("balsam", "species", species("Impatiens glandulifera"), "Gammafen balsam.")
    gamma.add("secret", "species", species("Quokkaweed gamma", access="partners"), "Hidden.")
    partner = make_member(root, 4, "partner", "CC0-1.0")
    partner.add("open", "species", species("Partnerwort publica"), "Partnerland open.")
    partner.add("secret", "species", species("Quokkaweed partner", access="partners"),
                "Hidden.")
    members = {m.name: m for m in (alpha, beta, gamma, partner)}
    for member in members.values():
        build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    return members


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("network")
    members = members_of(root)
    servers = {name: ServerThread(app_for(m.node.root, reload_interval=0))
               for name, m in members.items()}
    for server in servers.values():
        server.__enter__()
    proxy = Unlicensed(servers["gamma"].url, members["gamma"].node.root)
    proxy.server.__enter__()
    try:
        for name, member in members.items():
            member.url = proxy.server.url if name == "gamma" else servers[name].url
        key, _ = issue_key(members["partner"].node.root, "hub", scopes=["read", "changes"],
                           groups=["partners"])
        folder = root / "hub"
        assert hub_cli("init", str(folder), "--name", "Test hub").exit_code == 0
        for name, member in members.items():
            extra = ["--key-env", "PARTNER_KEY", "--private"] if name == "partner" else []
            added = hub_cli("add", member.url, "--hub", str(folder), "--name", name, *extra)
            assert added.exit_code == 0, added.stderr
        synced = hub_cli("sync", "--hub", str(folder), env={"PARTNER_KEY": key})
        assert synced.exit_code == 0, synced.output
        exported = hub_cli("export", "--hub", str(folder))
        assert exported.exit_code == 0, exported.output
        hub_key, _ = issue_key(hub_project(folder).root, "reader")
        with ServerThread(app_for(hub_project(folder).root, reload_interval=0)) as hub:
            yield Network(folder, members, hub.url, hub_key, synced, exported)
    finally:
        proxy.server.__exit__(None, None, None)
        for server in servers.values():
            server.__exit__(None, None, None)


def ids_of(network: Network) -> dict[str, str]:
    return {name: member.node_id for name, member in network.members.items()}


def get(network: Network, path: str, key: bool = False) -> tuple[int, Any]:
    status, _, body = http_get(network.hub + path, {"X-API-Key": network.key} if key else {})
    return status, json.loads(body) if body else None


def served(network: Network) -> dict[tuple[str, str], dict[str, Any]]:
    """Every record of every list of the hub, as served."""
    return {key: json.loads(data) for key, data in node_view(network.hub, None).items()}


def expected(members: list[Member]) -> dict[tuple[str, str], dict[str, Any]]:
    """What the hub should serve of these members' public records: by (collection, hub id),
    the provenance and the member's own fields."""
    found = {}
    for member in members:
        view = node_view(member.url, None)
        for (collection, record_id), data in view.items():
            record = json.loads(data)
            own: dict[str, Any] = {
                "source_node": member.node_id, "source_node_name": member.node_name,
                "source_url": record["url"], "title": record["title"],
                "body": record.get("body"), "tags": record.get("tags")}
            if member.licence is not None:
                own["license"] = member.licence
            found[(collection, hub_id(member.node_id, record_id))] = own
    return found


def provenance(record: dict[str, Any]) -> dict[str, Any]:
    kept = {name: record[name] for name in ("source_node", "source_node_name", "source_url",
                                            "license") if name in record}
    return {**kept, "title": record["title"], "body": record.get("body"),
            "tags": record.get("tags")}


# --- what the hub serves ---------------------------------------------------------------------


@pytest.mark.slow
def test_lists_and_reads_carry_each_records_provenance(network: Network) -> None:
    """The hub's lists are the public records of the members that are not private, each
    under the hub's id for it, with its member node's id and name, its licence (none for a
    node that names none) and its URL at the node; a read answers the same record."""
    members = [network.members[name] for name in ("alpha", "beta", "gamma")]
    hub = served(network)
    assert {key: provenance(record) for key, record in hub.items()} == expected(members)
    alpha_knotweed = network.members["alpha"].public["knotweed"][1]["id"]
    key = ("species", hub_id(network.members["alpha"].node_id, alpha_knotweed))
    status, record = get(network, f"/api/species/{key[1]}")
    assert status == 200 and record == hub[key]
    assert record["source_url"] == f"https://alpha.example.org/api/species/{alpha_knotweed}"
    assert record["license"] == "CC-BY-4.0" and record["scientificName"] == "Fallopia japonica"
    assert record["vernacularName"] == "Knotweed" and record["source_node_name"] == "Node alpha"
    # a treatment keeps the name of the species it targets: two members' records side by side
    (cutting,) = [r for (c, _), r in hub.items() if c == "treatments"]
    assert cutting["targetSpecies"] == ["Fallopia japonica"]
    assert sum(1 for (c, _), r in hub.items() if c == "species"
               and r["scientificName"] == "Fallopia japonica") == 2
    # a library document: its record, linking to its PDF at the member; no PDF on the hub
    handbook = network.members["alpha"].public["library/handbook"][1]["id"]
    at_member = json.loads(http_get(f"{network.members['alpha'].url}/api/resources/"
                                    f"{handbook}")[2])
    _, document = get(network, f"/api/resources/{hub_id(ids_of(network)['alpha'], handbook)}")
    assert document["link"] == at_member["document_url"] and "document_url" not in document
    assert at_member["document_url"].startswith("https://alpha.example.org/")
    assert http_get(f"{network.hub}/library/{document['id']}.pdf")[0] == 404
    page = http_get(network.hub + record_href("species", key[1]))
    assert page[0] == 200 and b"Node alpha" in page[2] and b"CC-BY-4.0" in page[2]


@pytest.mark.slow
def test_search_finds_the_records_of_every_member(network: Network) -> None:
    """Each hit carries its record's provenance and licence, as the record does (a node's
    own hits carry none)."""
    for word, member in (("alphamarsh", "alpha"), ("betabrook", "beta"),
                         ("gammafen", "gamma")):
        for mode in ("keyword", "hybrid"):
            status, found = get(network, f"/api/search?q={word}&mode={mode}")
            assert status == 200 and found["items"], (word, mode)
            for item in found["items"]:
                _, record = get(network, f"/api/{item['collection']}/{item['id']}")
                assert record["source_node_name"] == f"Node {member}"
                carried = {name: record[name] for name in ("source_node", "source_node_name",
                                                           "source_url", "license")
                           if name in record}
                assert {name: item[name] for name in carried} == carried
                assert item.get("license") == network.members[member].licence
        own = json.loads(http_get(f"{network.members[member].url}/api/search?q={word}")[2])
        assert own["items"] and not any("source_node" in item or "license" in item
                                        for item in own["items"])
    status, found = get(network, "/api/search?q=fallopia+japonica&mode=keyword&limit=50")
    assert {get(network, f"/api/species/{i['id']}")[1]["source_node_name"]
            for i in found["items"] if i["collection"] == "species"} == {"Node alpha",
                                                                           "Node beta"}


@pytest.mark.slow
def test_the_manifest_lists_members_and_licences(network: Network) -> None:
    status, manifest = get(network, "/api/manifest")
    assert status == 200
    members = manifest["network"]["members"]
    assert [m["name"] for m in members] == ["alpha", "beta", "gamma"]  # not the private one
    by_name = {m["name"]: m for m in members}
    assert by_name["alpha"]["licence"] == "CC-BY-4.0" and "licence" not in by_name["gamma"]
    assert by_name["alpha"]["counts"] == {"species": 1, "resources": 2, "treatments": 1,
                                          "germination": 0, "team": 0}
    assert by_name["beta"]["records"] == 2 and by_name["gamma"]["records"] == 2
    for member in members:
        assert member["ok"] is True and member["stale"] is False
        assert member["last_success"] and member["node_id"] == \
            network.members[member["name"]].node_id
    assert manifest["network"]["licences"] == [{"licence": "CC-BY-4.0", "records": 4},
                                               {"licence": "CC0-1.0", "records": 2}]
    assert manifest["network"]["unlicensed_records"] == 2
    [warning] = manifest["network"]["warnings"]
    assert warning.startswith("gamma: its node (Node gamma) names no licence")
    assert manifest["node"]["licence"] == ("the licence of each record (its license field): "
                                           "CC-BY-4.0, CC0-1.0; some records name none")
    assert [c["public_count"] for c in manifest["collections"]] == [3, 2, 1, 1, 1]
    # ... and the operator read the same warning when the hub was exported
    assert "Warning: gamma: its node (Node gamma) names no licence" in network.exported.stderr
    lines = network.exported.stderr.splitlines()
    assert "alpha: 4 records (CC-BY-4.0); synced " in "\n".join(lines)
    assert not any(line.startswith("partner") for line in lines)
    assert network.exported.stdout.startswith("exported species 3, resources 2, treatments 1, "
                                              "germination 1, team 1; 0 restricted")


@pytest.mark.slow
def test_no_restricted_record_of_any_member_reaches_the_hub(network: Network) -> None:
    """Not in any list, read (by the member's id or the hub's id for it), search result or
    count (every mode, and over REST and the tools), changes feed, sync file, page or file
    of the hub's node; nor any record of the member kept privately."""
    hidden = [(collection, fields["id"], member) for member in network.members.values()
              for collection, fields in member.restricted.values()]
    hidden += [(collection, fields["id"], network.members["partner"])
               for collection, fields in network.members["partner"].public.values()]
    ids = {record_id for _, record_id, _ in hidden} | {
        hub_id(member.node_id, record_id) for _, record_id, member in hidden}
    words = [MARK, "partnerwort", "partnerland"]

    def clean(data: bytes, where: str) -> None:
        text = data.decode("utf-8", "replace").lower()
        assert not any(word in text for word in words), where
        assert not any(record_id in text for record_id in ids), where

    for collection, record_id, member in hidden:
        for guessed in (record_id, hub_id(member.node_id, record_id)):
            status, body = get(network, f"/api/{collection}/{guessed}")
            never = get(network, f"/api/{collection}/{uuid.uuid4()}")[1]
            assert status == 404 and body == never
    for collection in COLLECTIONS:
        clean(http_get(network.hub + f"/api/{collection}?limit=200")[2], collection)
    _, public = get(network, "/api/search?q=valley&mode=keyword&limit=50")
    for word in (MARK, "partnerwort", "valley"):
        for mode in ("keyword", "semantic", "hybrid"):
            status, found = get(network, f"/api/search?q={word}&mode={mode}&limit=50")
            assert status == 200
            clean(json.dumps([found["items"], found["counts"]]).encode(),
                  f"search {word} {mode}")
            if word != "valley" and mode == "keyword":
                assert found["items"] == [] and set(found["counts"].values()) == {0}
    assert public["counts"] == {"species": 3, "resources": 2, "treatments": 1,
                                "germination": 1, "team": 1}
    _changes(network, clean)
    status, _, body = http_post(network.hub + "/api/library/ask", json.dumps(
        {"question": f"How is {MARK} handled?"}).encode(),
        {"Content-Type": "application/json", "X-API-Key": network.key})
    assert status == 200 and json.loads(body)["citations"] == []
    clean(json.dumps(json.loads(body)["citations"]).encode(), "library")
    _, manifest = get(network, "/api/manifest")
    for chunk in manifest["sync"]["snapshots"]:
        path = urllib.parse.urlsplit(chunk["url"]).path
        clean(http_get(network.hub + path)[2], path)
    clean(http_get(network.hub + "/api/sync/changes.ndjson")[2], "change list")
    for path in ("/", "/species/", "/team/", "/sitemap.xml", "/api/manifest"):
        clean(http_get(network.hub + path)[2], path)
    project = hub_project(network.folder)
    for tree in (project.site_out, project.content):
        for path in tree.rglob("*"):
            if path.is_file():
                clean(path.read_bytes(), str(path))
    clean(project.ledger.read_bytes(), "ledger")
    assert not (network.folder / "members" / "partner.duckdb").exists()


def _changes(network: Network, clean: Any) -> None:
    """The keyed changes feed from the start, and the search tool, say nothing hidden."""
    url: str | None = f"/api/changes?since={EPOCH}&limit=2"
    seen = 0
    while url:
        status, page = get(network, url, key=True)
        assert status == 200
        clean(json.dumps(page).encode(), "changes")
        seen += len(page["items"])
        url = page["next"] and urllib.parse.urlsplit(page["next"])._replace(
            scheme="", netloc="").geturl()
    assert seen == 8
    for query in (MARK, "partnerwort"):
        status, _, body = http_post(network.hub + "/api/mcp", json.dumps({
            "method": "tools/call", "params": {"name": "search", "arguments": {
                "query": query}}}).encode(), {"Content-Type": "application/json",
                                              "X-API-Key": network.key})
        assert status == 200
        items = json.loads(body)["result"]["structuredContent"]["items"]
        clean(json.dumps(items).encode(), f"search tool {query}")
        assert items == []


@pytest.mark.slow
def test_search_reads_the_nodes_asked_for_and_counts_matches_by_node(network: Network) -> None:
    """`nodes` keeps a search to those members' records, over REST and the search tool
    alike, and a hub counts matches by member node (`node_counts`); a node takes its own
    id, and counts nothing by node."""
    ids = {name: member.node_id for name, member in network.members.items()}
    _, whole = get(network, "/api/search?q=valley&mode=keyword&limit=50")
    assert whole["node_counts"] == {ids["alpha"]: 4, ids["beta"]: 2, ids["gamma"]: 2}
    two = f"{ids['alpha']},{ids['gamma']}"
    for mode in ("keyword", "semantic", "hybrid"):
        _, whole = get(network, f"/api/search?q=valley&mode={mode}&limit=50")
        assert sum(whole["node_counts"].values()) == sum(whole["counts"].values())
        _, some = get(network, f"/api/search?q=valley&mode={mode}&limit=50&nodes={two}")
        assert some["items"] and {item["source_node"] for item in some["items"]} <= {
            ids["alpha"], ids["gamma"]}
        assert some["node_counts"] == {node: whole["node_counts"][node]
                                       for node in (ids["alpha"], ids["gamma"])}
        assert sum(some["counts"].values()) == sum(some["node_counts"].values())
        if mode == "keyword":
            assert [item["id"] for item in some["items"]] == [
                item["id"] for item in whole["items"]
                if item["source_node"] in (ids["alpha"], ids["gamma"])]
    _, none = get(network, "/api/search?q=valley&nodes=elsewhere")
    assert none["items"] == [] and set(none["counts"].values()) == {0}
    assert none["node_counts"] == {"elsewhere": 0}
    _, rest = get(network, f"/api/search?q=knotweed&nodes={ids['beta']}")
    tool = _tool(network, {"query": "knotweed", "nodes": [ids["beta"]]})
    assert tool["structuredContent"] == rest
    status, refused = get(network, "/api/search?q=valley&nodes=not%20an%20id")
    assert status == 400 and refused["error"]["code"] == "invalid_parameter"
    said = "nodes: 'not an id' is not a node id (letters, digits and . _ : - only, at most 200)"
    assert refused["error"]["message"] == said
    tool = _tool(network, {"query": "valley", "nodes": ["not an id"]})
    assert tool["isError"] and tool["content"][0]["text"] == said
    tool = _tool(network, {"query": "valley", "nodes": ids["beta"]})
    assert tool["isError"] and "nodes must be a list" in tool["content"][0]["text"]
    alpha = network.members["alpha"].url
    own = json.loads(http_get(f"{alpha}/api/search?q=alphamarsh")[2])
    assert own["items"] and "node_counts" not in own
    assert json.loads(http_get(f"{alpha}/api/search?q=alphamarsh&nodes={ids['alpha']}")[2]) \
        == own
    other = json.loads(http_get(f"{alpha}/api/search?q=alphamarsh&nodes={ids['beta']}")[2])
    assert other["items"] == [] and set(other["counts"].values()) == {0}


def _tool(network: Network, arguments: dict[str, Any]) -> dict[str, Any]:
    """The search tool's result, called in the seed's form."""
    status, _, body = http_post(network.hub + "/api/mcp", json.dumps({
        "method": "tools/call", "params": {"name": "search", "arguments": arguments}}).encode(),
        {"Content-Type": "application/json", "X-API-Key": network.key})
    assert status == 200
    result: dict[str, Any] = json.loads(body)["result"]
    return result


@pytest.mark.slow
def test_a_hub_is_a_member_of_a_larger_hub(network: Network, tmp_path: Path) -> None:
    """A hub follows another hub as it follows a node (its sync files and manifest): each
    record names the hub it was read from, links to it there, and keeps the licence it
    carries (none for a record whose node names none)."""
    _, inner = get(network, "/api/manifest")
    folder = tmp_path / "larger"
    assert hub_cli("init", str(folder)).exit_code == 0
    assert hub_cli("add", network.hub, "--hub", str(folder), "--name", "inner").exit_code == 0
    synced = hub_cli("sync", "--hub", str(folder))
    assert synced.exit_code == 0, synced.output
    assert export_hub(folder, now=datetime(2026, 3, 2, tzinfo=UTC)).exported
    larger = json.loads((hub_project(folder).site_out / "api" / "manifest.json").read_bytes())
    assert larger["network"]["members"][0]["node_id"] == inner["node"]["id"]
    held = {urllib.parse.urlsplit(record["url"]).path: record for record in
            (json.loads(data) for data in node_view(network.hub, None).values())}
    with ServerThread(app_for(hub_project(folder).root)) as server:
        top = [json.loads(data) for data in node_view(server.url, None).values()]
    assert len(top) == len(held) == 8
    for record in top:
        assert record["source_node"] == inner["node"]["id"]
        assert record["source_node_name"] == "Test hub"
        mine = held[urllib.parse.urlsplit(record["source_url"]).path]
        assert record.get("license") == mine.get("license")
        assert record["title"] == mine["title"] and record.get("body") == mine.get("body")


# --- the hub follows its members -------------------------------------------------------------


class Moving:
    """Two members whose records a test edits at random, exported, synced and served."""

    def __init__(self, root: Path) -> None:
        self.now = datetime(2026, 3, 1, 8, tzinfo=UTC)
        self.members = [make_member(root, 10 + n, f"m{n}", "CC0-1.0") for n in range(2)]
        self.records = [Records(member.node) for member in self.members]
        for n, records in enumerate(self.records):
            records.create(f"first{n}", "species")
        self.folder = root / "hub"
        self.count = 0
        self.servers: list[ServerThread] = []
        self.hub: ServerThread | None = None

    def export(self) -> None:
        for member in self.members:
            self.now += timedelta(minutes=1)
            build(Project(member.node.root), now=self.now)

    def apply(self, op: str, which: int, number: int) -> None:
        records = self.records[which]
        if op == "create":
            self.count += 1
            records.create(f"r{self.count}", ("species", "team")[number % 2],
                           "partners" if number % 3 == 0 else "public")
        elif op == "edit":
            records.edit(number)
        elif op == "delete":
            records.delete(number)
        else:
            records.set_access(number, "partners" if op == "restrict" else None)

    def sync_and_export(self) -> None:
        for server in self.servers:
            server.settle()
        statuses = asyncio.run(sync_members(load_hub(self.folder), limits=QUICK))
        assert all(status.ok for status in statuses), [s.line() for s in statuses]
        self.now += timedelta(minutes=1)
        export_hub(self.folder, now=self.now)
        assert self.hub is not None
        self.hub.settle()


@pytest.fixture(scope="module")
def moving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moving]:
    world = Moving(tmp_path_factory.mktemp("moving"))
    world.export()
    world.servers = [ServerThread(app_for(m.node.root, reload_interval=0))
                     for m in world.members]
    for server, member in zip(world.servers, world.members, strict=True):
        server.__enter__()
        member.url = server.url
    try:
        lines = ["[hub]", 'name = "Moving hub"']
        for member in world.members:
            lines += ["", "[[member]]", f'name = "{member.name}"', f'url = "{member.url}"']
        world.folder.mkdir()
        (world.folder / "hub.toml").write_text("\n".join(lines) + "\n")
        asyncio.run(sync_members(load_hub(world.folder), limits=QUICK))
        export_hub(world.folder, now=world.now)
        with ServerThread(app_for(hub_project(world.folder).root,
                                  reload_interval=0)) as hub:
            world.hub = hub
            yield world
    finally:
        for server in world.servers:
            server.__exit__(None, None, None)


OPS = st.lists(st.tuples(st.sampled_from(["create", "edit", "delete", "restrict", "open"]),
                         st.integers(0, 1), st.integers(0, 30)), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=examples(8, 40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
def test_the_hub_serves_the_union_of_its_members_public_records(
        moving: Moving, ops: list[tuple[str, int, int]]) -> None:
    """After any run of creations, edits, deletions and access changes across members (each
    example goes on from the last), then `hub sync` and `hub export`: the hub's records are
    exactly the members' public ones, each with its provenance."""
    for op, which, number in ops:
        moving.apply(op, which, number)
    moving.export()
    moving.sync_and_export()
    assert moving.hub is not None
    hub = {key: provenance(json.loads(data))
           for key, data in node_view(moving.hub.url, None).items()}
    assert hub == expected(moving.members)


# --- `fednode hub serve` ---------------------------------------------------------------------


@pytest.mark.slow
def test_hub_serve_serves_the_network_and_picks_up_each_sync(tmp_path: Path) -> None:
    """`fednode hub serve` as a process: it exports the hub, serves it, and a later `hub
    sync` (which exports what changed) is served without a restart."""
    member = make_member(tmp_path, 20, "solo", "CC-BY-4.0")
    member.add("one", "species", species("Heracleum mantegazzianum"), "Solofield.")
    build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    folder = tmp_path / "hub"
    port = free_port()
    with contextlib.ExitStack() as running:
        node = running.enter_context(ServerThread(app_for(member.node.root,
                                                          reload_interval=0)))
        assert hub_cli("init", str(folder)).exit_code == 0
        assert hub_cli("add", node.url, "--hub", str(folder), "--name", "solo").exit_code == 0
        settings = folder / "hub.toml"  # a member down is given up after 3 s, not 15
        settings.write_text(settings.read_text().replace("timeout = 300", "timeout = 3"))
        first = hub_cli("sync", "--hub", str(folder))
        assert first.exit_code == 0 and "hub export:" not in first.stdout  # not served yet
        log = (tmp_path / "serve.log").open("w")
        process = subprocess.Popen([*FEDNODE, "hub", "serve", "--hub", str(folder), "--port",
                                    str(port)], env=ENV, stdout=log, stderr=log)
        try:
            base = f"http://127.0.0.1:{port}"
            _, _, body = wait_for(base + "/api/manifest", process, 90)
            assert json.loads(body)["network"]["members"][0]["records"] == 1
            # node.toml's base URL is this machine's on port 8000: the links follow --port
            assert json.loads(body)["node"]["base_url"] == base
            assert json.loads(http_get(base + "/api/species")[2])["items"][0][
                "url"].startswith(f"{base}/api/species/")
            member.add("two", "species", species("Impatiens glandulifera"), "Solofield.")
            build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
            node.settle()
            again = hub_cli("sync", "--hub", str(folder))
            assert again.exit_code == 0, again.output
            assert again.stdout.splitlines()[-1].startswith("hub export: exported species 2")
            deadline = time.monotonic() + 20
            while json.loads(http_get(base + "/api/species")[2])["total"] != 2:
                assert time.monotonic() < deadline, "the served hub did not pick up the sync"
                time.sleep(0.2)
            names = {item["scientificName"]: item["source_node_name"] for item in
                     json.loads(http_get(base + "/api/species")[2])["items"]}
            assert names == {"Heracleum mantegazzianum": "Node solo",
                             "Impatiens glandulifera": "Node solo"}
            # Nothing new: the sync reads no copy and exports nothing.
            current = os.readlink(hub_project(folder).private / "current")
            unchanged = hub_cli("sync", "--hub", str(folder))
            assert unchanged.exit_code == 0, unchanged.output
            assert unchanged.stdout.splitlines()[-1] == (
                "hub export: no member changed since the last export: nothing to export")
            assert os.readlink(hub_project(folder).private / "current") == current
            running.close()  # the member is down: its copy is served, marked stale
            down = hub_cli("sync", "--hub", str(folder))
            assert down.exit_code == 1
            assert down.stdout.splitlines()[-1].startswith("hub export: exported species 2")
            deadline = time.monotonic() + 20
            while not json.loads(http_get(base + "/api/manifest")[2])["network"]["members"][
                    0].get("stale"):
                assert time.monotonic() < deadline, "the served hub did not say it is stale"
                time.sleep(0.2)
            still = hub_cli("sync", "--hub", str(folder))  # down again: nothing new to say
            assert still.exit_code == 1
            assert still.stdout.splitlines()[-1] == (
                "hub export: no member changed since the last export: nothing to export")
        finally:
            process.terminate()
            process.wait(30)
            log.close()
    said = (tmp_path / "serve.log").read_text()
    assert "solo: 1 records (CC-BY-4.0)" in said and "hub export: exported" in said
    assert "not to this server" not in said and "fednode export" not in said


def test_hub_serve_warns_with_a_command_that_works_in_a_hub_folder() -> None:
    """A hub served on another port than its links is told to export the hub again, with
    `fednode hub export` (`fednode export` refuses a hub's folder)."""
    from sidecar.serve import address_warnings

    [line] = address_warnings("http://127.0.0.1:8200", "http://127.0.0.1:8000",
                              "http://127.0.0.1:8000", "fednode hub export --hub /srv/hub")
    assert line.endswith("run `fednode hub export --hub /srv/hub --base-url "
                         "http://127.0.0.1:8200` to match it")


def solo(root: Path, number: int, fields: dict[str, Any]) -> Member:
    """A member, "solo", holding one public species record of these fields, exported."""
    member = make_member(root, number, "solo", "CC0-1.0")
    member.add("one", "species", fields, "Solofield.")
    build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    return member


@contextlib.contextmanager
def solo_hub(member: Member, folder: Path, *, exported: bool = False) -> Iterator[ServerThread]:
    """The member served by its sidecar, and a hub in `folder` with it as its member
    "solo", synced (and exported, if asked)."""
    with ServerThread(app_for(member.node.root, reload_interval=0)) as node:
        assert hub_cli("init", str(folder)).exit_code == 0
        assert hub_cli("add", node.url, "--hub", str(folder), "--name", "solo").exit_code == 0
        assert hub_cli("sync", "--hub", str(folder)).exit_code == 0
        if exported:
            assert hub_cli("export", "--hub", str(folder)).exit_code == 0
        yield node


@pytest.mark.slow
def test_a_restricted_record_in_a_members_copy_is_never_served(tmp_path: Path) -> None:
    """The hub's export takes from a member's copy only the records whose JSON says public:
    a restricted record in members/ (which `hub sync` never keeps there: a file written by
    hand, or by another tool) is not served, while the member's public records are."""
    import duckdb

    folder = tmp_path / "hub"
    with solo_hub(solo(tmp_path, 30, species("Heracleum mantegazzianum")), folder):
        pass
    copy = folder / "members" / "solo.duckdb"
    with duckdb.connect(str(copy)) as db:
        (text,) = db.execute("SELECT json::VARCHAR FROM records").fetchone() or ("",)
        hidden = dict(json.loads(text), id=str(uuid.uuid4()), access="partners",
                      body=f"{MARK.title()} notes.")
        for access in ("partners", None):  # marked for a group, and not marked at all
            record = dict(hidden, id=str(uuid.uuid4()), access=access)
            if access is None:
                del record["access"]
            db.execute("INSERT INTO records SELECT collection, ?, node_id, content_hash, "
                       "updated_at, ?::JSON FROM records LIMIT 1",
                       [record["id"], json.dumps(record)])
    report = export_hub(folder, now=datetime(2026, 3, 1, 9, tzinfo=UTC))
    assert report.members[0].startswith("solo: 1 records (CC0-1.0); synced ")
    project = hub_project(folder)
    texts = [path.read_text() for path in project.content.rglob("*.md")]
    assert len(texts) == 1 and "Heracleum" in texts[0] and MARK not in texts[0].lower()
    for path in project.site_out.rglob("*"):
        if path.is_file():
            assert MARK not in path.read_bytes().decode("utf-8", "replace").lower(), path


def test_a_quick_export_reads_a_copy_written_by_anything_but_the_hub(tmp_path: Path) -> None:
    """`hub serve` starts with the export that ends a sync (`quick`): told by the status
    files alone that nothing changed, it reads no copy; a copy written by hand since its
    last sync (here a restricted record put in it) is read, and its record not served."""
    import duckdb

    folder = tmp_path / "hub"
    with solo_hub(solo(tmp_path, 90, species("Heracleum mantegazzianum")), folder,
                  exported=True):
        pass
    quick = export_hub(folder, quick=True)
    assert not quick.members and quick.summary.startswith("no member changed")
    with duckdb.connect(str(folder / "members" / "solo.duckdb")) as db:
        (text,) = db.execute("SELECT json::VARCHAR FROM records").fetchone() or ("",)
        record = dict(json.loads(text), id=str(uuid.uuid4()), access="partners",
                      body=f"{MARK.title()} notes.")
        db.execute("INSERT INTO records SELECT collection, ?, node_id, content_hash, "
                   "updated_at, ?::JSON FROM records LIMIT 1",
                   [record["id"], json.dumps(record)])
    report = export_hub(folder, quick=True)
    assert report.members[0].startswith("solo: 1 records (CC0-1.0); synced "), report
    for path in hub_project(folder).site_out.rglob("*"):
        if path.is_file():
            assert MARK not in path.read_bytes().decode("utf-8", "replace").lower(), path


@pytest.mark.slow
def test_a_record_its_member_restricts_leaves_the_served_hub(tmp_path: Path) -> None:
    """A member restricts its only public record: after `hub sync`, which exports the hub,
    the running hub serves nothing of it (no list item, read, search hit or snapshot; a
    delete in the changes feed and the change list), though it then holds no record."""
    fields = species("Heracleum mantegazzianum")
    member = solo(tmp_path, 40, fields)
    folder = tmp_path / "hub"
    with solo_hub(member, folder, exported=True) as node:
        served = hub_id(member.node_id, fields["id"])
        key, _ = issue_key(hub_project(folder).root, "reader")
        with ServerThread(app_for(hub_project(folder).root, reload_interval=0)) as hub:
            assert http_get(f"{hub.url}/api/species/{served}")[0] == 200
            member.node.write("species", "one", dict(fields, access="partners"), MARK)
            build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
            node.settle()
            again = hub_cli("sync", "--hub", str(folder))
            assert again.exit_code == 0 and again.stdout.splitlines()[-1].startswith(
                "hub export: exported species 0"), again.output
            hub.settle()
            assert http_get(f"{hub.url}/api/species/{served}")[0] == 404
            assert json.loads(http_get(f"{hub.url}/api/species")[2])["total"] == 0
            found = json.loads(http_get(f"{hub.url}/api/search?q=heracleum")[2])
            assert found["items"] == [] and set(found["counts"].values()) == {0}
            manifest = json.loads(http_get(f"{hub.url}/api/manifest")[2])
            assert manifest["sync"]["snapshots"] == []
            listed = http_get(f"{hub.url}/api/sync/changes.ndjson")[2]
            assert served in listed.decode() and MARK not in listed.decode().lower()
            changes = json.loads(http_get(f"{hub.url}/api/changes?since={EPOCH}",
                                          {"X-API-Key": key})[2])
            assert [(item["id"], item["op"]) for item in changes["items"]] == [
                (served, "delete")]


@pytest.mark.slow
def test_a_change_in_the_same_second_as_the_last_is_exported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two syncs that change a member within one second of the clock: the second is
    exported all the same (what tells a changed member is a count of the runs that
    changed it, not their times)."""
    import hub.network

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls(2026, 3, 1, 10, tzinfo=UTC)

    monkeypatch.setattr(hub.network, "datetime", Frozen)
    fields = species("Heracleum mantegazzianum")
    member = solo(tmp_path, 60, fields)
    folder = tmp_path / "hub"
    with solo_hub(member, folder, exported=True) as node:
        member.add("one", "species", dict(fields, vernacularName="Giant hogweed"),
                   "Solofield.")  # the same record, one more field: as many records
        build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
        node.settle()
        synced = hub_cli("sync", "--hub", str(folder))
    assert synced.exit_code == 0, synced.output
    assert "updated 1" in synced.stdout
    assert synced.stdout.splitlines()[-1].startswith("hub export: exported species 1")
    served = (hub_project(folder).content / "species").glob("*.md")
    assert "Giant hogweed" in next(served).read_text()


@pytest.mark.slow
def test_an_export_makes_again_only_the_records_that_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an export, the next makes and checks only the records whose JSON changed in
    the member's copy, and a record file missing from the hub's content/ (deleted by hand);
    what it writes is what an export from nothing writes."""
    import hub.republish

    names = ("Heracleum mantegazzianum", "Impatiens glandulifera", "Fallopia japonica")
    fields = [species(name) for name in names]
    member = make_member(tmp_path, 70, "solo", "CC0-1.0")
    for n, one in enumerate(fields):
        member.add(f"s{n}", "species", one, "Solofield.")
    build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    folder = tmp_path / "hub"
    made: list[str] = []
    making = hub.republish._made

    def counted(source: Any, collection: Any, data: dict[str, Any], *rest: Any) -> Any:
        made.append(str(data["id"]))
        return making(source, collection, data, *rest)

    monkeypatch.setattr(hub.republish, "_made", counted)
    content = hub_project(folder).content
    with solo_hub(member, folder, exported=True) as node:
        assert len(made) == 3
        member.add("s1", "species", dict(fields[1], vernacularName="Himalayan balsam"),
                   "Solofield.")
        build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
        node.settle()
        made.clear()
        assert hub_cli("sync", "--hub", str(folder)).exit_code == 0
        assert made == [fields[1]["id"]]
        gone = sorted((content / "species").glob("*.md"))[0]
        gone.unlink()
        made.clear()
        assert hub_cli("export", "--hub", str(folder)).exit_code == 0
        assert len(made) == 1 and gone.exists()
        files = {p.relative_to(content): p.read_bytes() for p in content.rglob("*.md")}
        shutil.rmtree(content)
        shutil.rmtree(hub_project(folder).private / "hub-records")
        assert hub_cli("export", "--hub", str(folder)).exit_code == 0
    assert {p.relative_to(content): p.read_bytes() for p in content.rglob("*.md")} == files
    assert any(b"Himalayan balsam" in text for text in files.values())


@pytest.mark.slow
def test_rows_a_copy_should_not_hold_are_left_out_and_said(tmp_path: Path) -> None:
    """A member's copy written by hand: an id in two collections, and a row whose JSON is
    another record's. The record is made from its own row's JSON, the others are left out
    with a reason, at the first export and at the next, which takes them from its memo."""
    import duckdb

    fields = species("Heracleum mantegazzianum")
    folder = tmp_path / "hub"
    with solo_hub(solo(tmp_path, 80, fields), folder):
        pass
    with duckdb.connect(str(folder / "members" / "solo.duckdb")) as db:
        (text,) = db.execute("SELECT json::VARCHAR FROM records").fetchone() or ("",)
        twin = dict(json.loads(text), title="A treatment under the species' id")
        db.execute("INSERT INTO records SELECT 'treatments', id, node_id, content_hash, "
                   "updated_at, ?::JSON FROM records", [json.dumps(twin)])
        db.execute("INSERT INTO records SELECT collection, ?, node_id, content_hash, "
                   "updated_at, json FROM records WHERE collection = 'species'",
                   [str(uuid.uuid4())])
    for _ in range(2):
        report = export_hub(folder, now=datetime(2026, 3, 1, 9, tzinfo=UTC))
        assert report.members[0].startswith("solo: 1 records (CC0-1.0); synced ")
        assert "2 left out" in report.members[0]
        [path] = (hub_project(folder).content / "species").glob("*.md")
        assert "Heracleum mantegazzianum" in path.read_text()
        assert not list((hub_project(folder).content / "treatments").glob("*.md"))


# --- what a member sends is bounded: licences, and each record's own times -------------------


def filled(root: Path, number: int, name: str, licence: str,
           own: list[str | None]) -> Member:
    """A member of as many species records as `own`, each with that licence of its own
    (None: none), exported."""
    member = make_member(root, number, name, licence)
    for n, one in enumerate(own):
        extra = {} if one is None else {"license": one}
        member.add(f"s{n:03d}", "species", species(f"Planta {n:03d}", **extra), "Fieldnotes.")
    build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    return member


def hub_of(folder: Path, members: list[Member]) -> Result:
    """A hub in `folder` following the members (served), synced and exported."""
    with contextlib.ExitStack() as stack:
        assert hub_cli("init", str(folder)).exit_code == 0
        for member in members:
            server = stack.enter_context(ServerThread(app_for(member.node.root,
                                                              reload_interval=0)))
            added = hub_cli("add", server.url, "--hub", str(folder), "--name", member.name)
            assert added.exit_code == 0, added.output
        synced = hub_cli("sync", "--hub", str(folder))
        assert synced.exit_code == 0, synced.output
    exported = hub_cli("export", "--hub", str(folder))
    assert exported.exit_code == 0, exported.output
    return exported


def site_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in hub_project(folder).site_out.rglob("*")
               if path.is_file())


def footer(page: bytes) -> str:
    text = page.decode("utf-8")
    return text[text.index("<footer>"):text.index("</footer>")]


@pytest.mark.slow
def test_a_members_licences_cannot_fill_the_hub(tmp_path: Path) -> None:
    """A member whose 300 records each name a licence of 1,000 characters of its own, and
    whose manifest names one of 5,000: the hub is about the size of one whose member's
    records name none. A record's licence is one the hub knows, as its id, or none where
    it names another (never its node's in its place); a node's licence is cut to
    LICENCE_MAX characters; a known licence's URL is its id; the hub's licence on every page
    names known licences only; the member's line says once how many of its records named a
    licence the hub does not know."""
    words = "Terms of reuse drafted by the node's own lawyers, clause "
    hostile = [f"{n:04d} " + (words * 20)[:995] for n in range(300)]
    terms = "Terms: " + "y" * 5000
    other = make_member(tmp_path, 1, "other", "https://creativecommons.org/publicdomain/zero/1.0/")
    other.add("a", "species", species("Fallopia japonica"), "Otherfield.")
    other.add("b", "species", species("Impatiens glandulifera", license=(
        "http://creativecommons.org/licenses/by/4.0/legalcode")), "Otherfield.")
    build(Project(other.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    bad = hub_of(tmp_path / "bad", [filled(tmp_path, 2, "hostile", terms, list(hostile)),
                                    other])
    good = hub_of(tmp_path / "good", [filled(tmp_path, 3, "honest", "CC-BY-4.0", [None] * 300),
                                      other])
    assert site_bytes(tmp_path / "bad") <= 1.5 * site_bytes(tmp_path / "good")
    assert "does not know" not in good.stderr
    line = next(line for line in bad.stderr.splitlines() if line.startswith("hostile:"))
    assert "300 records name a licence the hub does not know, served without one (their " \
           "terms are at their source)" in line and line.count("300 records") == 2
    project = hub_project(tmp_path / "bad")
    manifest = json.loads((project.site_out / "api" / "manifest.json").read_bytes())
    kept = "Terms: " + "y" * 192 + "…"
    assert [m.get("licence") for m in manifest["network"]["members"]] == [kept, "CC0-1.0"]
    assert manifest["network"]["licences"] == [
        {"licence": "CC-BY-4.0", "records": 1}, {"licence": "CC0-1.0", "records": 1}]
    assert manifest["network"]["unlicensed_records"] == 300
    assert manifest["node"]["licence"] == ("the licence of each record (its license field): "
                                           "CC-BY-4.0, CC0-1.0; some records name none")
    records = [json.loads(path.read_bytes()) for path in
               (project.site_out / "api" / "species").rglob("*.json") if len(path.stem) == 36]
    by_name = {record["scientificName"]: record for record in records}
    assert by_name["Impatiens glandulifera"]["license"] == "CC-BY-4.0"
    assert by_name["Fallopia japonica"]["license"] == "CC0-1.0"
    assert "license" not in by_name["Planta 007"]  # its own terms, never its node's
    page = (project.site_out / record_href("species", by_name["Fallopia japonica"]["id"])
            .lstrip("/")).read_bytes()
    assert footer(page) == ("<footer><p>Published by bad under the licence of each record "
                            "(its license field): CC-BY-4.0, CC0-1.0; some records name none. "
                            "Contact: hub@example.org.</p>")
    for path in project.site_out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "manifest.json":  # each member's signed manifest, republished as
                data = json.dumps(without_members_manifests(json.loads(data))).encode()
            assert words.encode() not in data and b"y" * 200 not in data, path


def without_members_manifests(manifest: dict[str, Any]) -> dict[str, Any]:
    """The hub's manifest without the members' signed manifests it republishes (each the
    member's own words, as it signed them, for clients to verify: docs/hub.md, Trust)."""
    members = [{name: value for name, value in member.items() if name != "manifest"}
               for member in manifest["network"]["members"]]
    return {**manifest, "network": {**manifest["network"], "members": members}}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*")
            if path.is_file()}


@pytest.mark.slow
def test_a_record_keeps_its_members_times(tmp_path: Path) -> None:
    """A member's record created at T1 and edited at T2, exported by the hub at T3: the
    hub serves it with the member's created_at (T1) and updated_at (T2), in its JSON and
    on its page; the hub's changes feed says when the hub's record changed (T3). An export
    that makes another record and takes this one from the last export (T4), and one of the
    same copies again (T5), keep them: the second writes the same bytes."""
    fields = species("Heracleum mantegazzianum")
    member = solo(tmp_path, 95, fields)  # T1: 2026-03-01T08:00:00Z
    member.add("one", "species", dict(fields, vernacularName="Giant hogweed"), "Solofield.")
    build(Project(member.node.root), now=datetime(2026, 3, 2, 9, tzinfo=UTC))
    folder = tmp_path / "hub"
    with solo_hub(member, folder) as node:
        at_member = json.loads(http_get(f"{node.url}/api/species/{fields['id']}")[2])
        assert (at_member["created_at"], at_member["updated_at"]) == (
            "2026-03-01T08:00:00Z", "2026-03-02T09:00:00Z")
        export_hub(folder, now=datetime(2026, 3, 5, 10, tzinfo=UTC))
        _served_with_times(hub_project(folder), member, fields["id"], at_member)
        member.add("two", "species", species("Impatiens glandulifera"), "Solofield.")
        build(Project(member.node.root), now=datetime(2026, 3, 7, 9, tzinfo=UTC))
        node.settle()
        synced = hub_cli("sync", "--hub", str(folder))
        assert synced.exit_code == 0 and "exported species 2" in synced.stdout, synced.output
    project = hub_project(folder)
    times = {record["title"]: (record["created_at"], record["updated_at"]) for record in (
        json.loads(path.read_bytes()) for path in
        (project.site_out / "api" / "species").rglob("*.json") if len(path.stem) == 36)}
    assert times == {"Heracleum mantegazzianum": (at_member["created_at"],
                                                  at_member["updated_at"]),
                     "Impatiens glandulifera": ("2026-03-07T09:00:00Z",) * 2}
    before = tree(project.site_out)
    build(project, now=datetime(2026, 3, 8, 10, tzinfo=UTC))
    assert tree(project.site_out) == before


def _served_with_times(project: Project, member: Member, record_id: str,
                       at_member: dict[str, Any]) -> None:
    """The hub's record of the member's record, read, listed and shown with the member's
    times; its event in the changes feed at the hub's export (T3)."""
    served = hub_id(member.node_id, record_id)
    key, _ = issue_key(project.root, "reader")
    with ServerThread(app_for(project.root, reload_interval=0)) as hub:
        record = json.loads(http_get(f"{hub.url}/api/species/{served}")[2])
        listed = json.loads(http_get(f"{hub.url}/api/species")[2])["items"]
        changes = json.loads(http_get(f"{hub.url}/api/changes?since={EPOCH}",
                                      {"X-API-Key": key})[2])
    assert (record["created_at"], record["updated_at"]) == (
        at_member["created_at"], at_member["updated_at"])
    assert listed == [record] and record["vernacularName"] == "Giant hogweed"
    assert [(item["id"], item["updated_at"]) for item in changes["items"]] == [
        (served, "2026-03-05T10:00:00Z")]
    page = (project.site_out / record_href("species", served).lstrip("/")).read_bytes()
    assert b"2026-03-02T09:00:00Z" in page and b"2026-03-05T10:00:00Z" not in page
