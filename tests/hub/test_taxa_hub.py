"""GET /api/taxa/{name} and the get_taxon tool on a hub: two members hold the same taxon
under other authorship and case, and the hub answers with both, side by side, each record
whole with its provenance; never one merged record. Real member nodes with real sidecars,
a real `fednode hub sync` and `hub export`, and a real sidecar over the hub's node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from builders import ServerThread, app_for, http_get, http_post, issue_key, species
from test_hub_serve import Member, hub_cli, make_member, resource, treatment

from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.export import hub_project
from hub.republish import hub_id


@dataclass
class Network:
    members: dict[str, Member]
    hub: str
    key: str  # a key of the hub's node: every scope, no groups


def members_of(root: Path) -> dict[str, Member]:
    alpha = make_member(root, 1, "alpha", "CC-BY-4.0")
    alpha.add("knotweed", "species", species(
        "Fallopia japonica", scientificNameAuthorship="(Houtt.) Ronse Decr.",
        vernacularName="Knotweed"), "Alphamarsh banks.")
    alpha.add("cutting", "treatments", treatment("Cutting knotweed", "Fallopia japonica"),
              "Alphamarsh method.")
    alpha.add("balsam", "species", species("Impatiens glandulifera"), "Alphamarsh balsam.")
    beta = make_member(root, 2, "beta", "CC0-1.0")
    beta.add("knotweed", "species", species("FALLOPIA JAPONICA Houtt.",
                                            vernacularName="Renouée"), "Betabrook banks.")
    beta.add("guide", "resources", resource(
        "Knotweed guide", relatedSpecies=["fallopia japonica (Houtt.) Ronse Decr."]),
        "Betabrook guide.")
    beta.add("secret", "treatments", treatment("Burning knotweed", "Fallopia japonica",
                                               access="partners"), "Hidden.")
    gamma = make_member(root, 3, "gamma", "CC0-1.0")
    gamma.add("hogweed", "species", species("Heracleum mantegazzianum"), "Gammafen hogweed.")
    members = {m.name: m for m in (alpha, beta, gamma)}
    for member in members.values():
        build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    return members


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("taxa-network")
    members = members_of(root)
    servers = {name: ServerThread(app_for(m.node.root, reload_interval=0))
               for name, m in members.items()}
    try:
        for name, server in servers.items():
            members[name].url = server.__enter__().url
        folder = root / "hub"
        assert hub_cli("init", str(folder), "--name", "Taxa hub").exit_code == 0
        for name, member in members.items():
            added = hub_cli("add", member.url, "--hub", str(folder), "--name", name)
            assert added.exit_code == 0, added.stderr
        synced = hub_cli("sync", "--hub", str(folder))
        assert synced.exit_code == 0, synced.output
        exported = hub_cli("export", "--hub", str(folder))
        assert exported.exit_code == 0, exported.output
        key, _ = issue_key(hub_project(folder).root, "reader")
        with ServerThread(app_for(hub_project(folder).root, reload_interval=0)) as hub:
            yield Network(members, hub.url, key)
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)


def get(url: str, key: str = "") -> tuple[int, Any]:
    status, _, body = http_get(url, {"X-API-Key": key} if key else {})
    return status, json.loads(body)


def taxon(base: str, name: str) -> tuple[int, Any]:
    return get(f"{base}/api/taxa/{quote(name, safe='')}")


def by_node(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {holder["node"]["id"]: holder for holder in answer["holders"]}


@pytest.mark.slow
def test_two_members_of_one_taxon_stand_side_by_side(network: Network) -> None:
    alpha, beta = network.members["alpha"], network.members["beta"]
    status, answer = taxon(network.hub, "Fallopia japonica")
    assert status == 200 and answer["canonical"] == "Fallopia japonica"
    holders = by_node(answer)
    assert list(holders) == [alpha.node_id, beta.node_id]  # by node name; gamma holds none
    for member in (alpha, beta):
        holder = holders[member.node_id]
        assert holder["node"] == {"id": member.node_id, "name": member.node_name}
        assert holder["license"] == member.licence
        [record] = holder["species"]  # each member's own record, not one merged record
        own = member.public["knotweed"][1]
        assert record["id"] == hub_id(member.node_id, own["id"])
        assert record["scientificName"] == own["scientificName"]
        assert record["source_node"] == member.node_id
        assert record["source_node_name"] == member.node_name
        assert record["license"] == member.licence
        assert record["source_url"] == (f"https://{member.name}.example.org/api/species/"
                                        f"{own['id']}")
        assert record == get(f"{network.hub}/api/species/{record['id']}")[1]
    assert holders[alpha.node_id]["species"][0]["vernacularName"] == "Knotweed"
    assert holders[beta.node_id]["species"][0]["vernacularName"] == "Renouée"
    assert [t["title"] for t in holders[alpha.node_id]["treatments"]] == ["Cutting knotweed"]
    assert holders[beta.node_id]["treatments"] == []  # its treatment is not public
    assert [r["title"] for r in holders[beta.node_id]["resources"]] == ["Knotweed guide"]
    assert holders[beta.node_id]["resources"][0]["source_node"] == beta.node_id
    assert answer["counts"] == {"species": 2, "treatments": 1, "resources": 1,
                                "germination": 0}


@pytest.mark.slow
def test_every_spelling_of_the_taxon_finds_both(network: Network) -> None:
    _, plain = taxon(network.hub, "Fallopia japonica")
    for name in ("FALLOPIA JAPONICA Houtt.", "fallopia japonica (Houtt.) Ronse Decr."):
        status, answer = taxon(network.hub, name)
        assert status == 200 and answer["name"] == name
        assert {**answer, "name": plain["name"]} == plain
    status, hogweed = taxon(network.hub, "heracleum mantegazzianum Sommier & Levier")
    assert status == 200
    assert [h["node"]["name"] for h in hogweed["holders"]] == ["Node gamma"]
    assert taxon(network.hub, "Nonexistus fakeus")[0] == 404


@pytest.mark.slow
def test_a_member_answers_for_its_own_records_alone(network: Network) -> None:
    """The same endpoint on a member node: one holder, the node itself, its records without
    provenance fields."""
    for member in network.members.values():
        status, answer = taxon(member.url, "fallopia japonica")
        if member.name == "gamma":
            assert status == 404
            continue
        assert status == 200
        [holder] = answer["holders"]
        assert holder["node"] == {"id": member.node_id, "name": member.node_name}
        assert holder["license"] == member.licence
        [record] = holder["species"]
        assert record["id"] == member.public["knotweed"][1]["id"]
        assert "source_node" not in record


@pytest.mark.slow
def test_the_tool_gives_the_hub_answer(network: Network) -> None:
    status, rest = get(f"{network.hub}/api/taxa/{quote('Fallopia japonica')}", network.key)
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "get_taxon", "arguments": {"name": "Fallopia japonica"}}}).encode()
    answered, _, result = http_post(f"{network.hub}/api/mcp", body, {
        "Content-Type": "application/json", "X-API-Key": network.key})
    assert status == answered == 200
    outcome = json.loads(result)["result"]
    assert not outcome["isError"] and outcome["structuredContent"] == rest
    assert len(rest["holders"]) == 2


@pytest.mark.slow
def test_a_member_that_renames_its_taxon_is_found_under_the_new_name(tmp_path: Path) -> None:
    """A member moves its knotweed to Reynoutria japonica, its treatment with it: after the
    next `hub sync` (which exports the served hub) the old name has no holder, and the new
    one holds the same records, by the same hub ids."""
    member = make_member(tmp_path, 50, "solo", "CC0-1.0")
    fields = species("Fallopia japonica", vernacularName="Knotweed")
    method = treatment("Cutting knotweed", "Fallopia japonica")
    member.add("knotweed", "species", fields, "Solofield banks.")
    member.add("cutting", "treatments", method, "Solofield method.")
    build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    folder = tmp_path / "hub"
    with ServerThread(app_for(member.node.root, reload_interval=0)) as node:
        assert hub_cli("init", str(folder)).exit_code == 0
        assert hub_cli("add", node.url, "--hub", str(folder), "--name", "solo").exit_code == 0
        assert hub_cli("sync", "--hub", str(folder)).exit_code == 0
        assert hub_cli("export", "--hub", str(folder)).exit_code == 0
        with ServerThread(app_for(hub_project(folder).root, reload_interval=0)) as hub:
            before = by_node(taxon(hub.url, "Fallopia japonica")[1])[member.node_id]
            assert [t["title"] for t in before["treatments"]] == ["Cutting knotweed"]
            member.add("knotweed", "species", dict(fields, scientificName="Reynoutria japonica"),
                       "Solofield banks.")
            member.add("cutting", "treatments", dict(method, targetSpecies=[
                "Reynoutria japonica"]), "Solofield method.")
            build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
            node.settle()
            synced = hub_cli("sync", "--hub", str(folder))
            assert synced.exit_code == 0, synced.output
            assert "hub export: exported" in synced.stdout
            hub.settle()
            assert taxon(hub.url, "Fallopia japonica")[0] == 404
            status, answer = taxon(hub.url, "Reynoutria japonica")
            assert status == 200
            after = by_node(answer)[member.node_id]
            [record] = after["species"]
            assert record["id"] == before["species"][0]["id"]
            assert record["scientificName"] == "Reynoutria japonica"
            assert [t["id"] for t in after["treatments"]] == [
                t["id"] for t in before["treatments"]]
