"""GET /api/taxa/{name} and the get_taxon tool on a node: the sample's records that name a
taxon, grouped by the canonical name from GBIF's name parser (authorship and case aside),
read through the caller's view, over a real sidecar and the real MCP transport."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from builders import ServerThread, app_for, exported_sample, http_get, http_post, issue_key

from exporter.project.config import Project
from exporter.site.pages import NAMES_SPECIES
from sidecar import service, taxa
from sidecar.store import Snapshot

KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"
ARNICA = "63a0c899-c7e8-4941-87d6-f7a814e184b9"  # species, access: sensitive
PLANE = "0a239e94-b3d8-4aa8-86c4-725357d2ea06"  # Platanus × hispanica
STEM_INJECTION = "stem-injection-of-japanese-knotweed-under-derogation"  # sensitive
NAMING = {"treatments": "targetSpecies", "resources": "relatedSpecies",
          "germination": "species"}


class Sample:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.keys = {"anonymous": "",
                     "plain": issue_key(root, "plain")[0],
                     "sensitive": issue_key(root, "sensitive", groups=["sensitive"])[0],
                     "species only": issue_key(root, "species only",
                                               collections=["species"])[0],
                     "search only": issue_key(root, "search only", scopes=["search"])[0]}
        self.server = ServerThread(app_for(root, anonymous_rate=0))
        self.url = self.server.__enter__().url

    def get(self, path: str, key: str = "anonymous") -> tuple[int, Any]:
        headers = {"X-API-Key": self.keys[key]} if self.keys[key] else {}
        status, _, body = http_get(self.url + path, headers)
        return status, json.loads(body)

    def taxon(self, name: str, key: str = "anonymous") -> tuple[int, Any]:
        return self.get(f"/api/taxa/{quote(name, safe='')}", key)

    def tool(self, name: str, key: str) -> dict[str, Any]:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "get_taxon", "arguments": {"name": name}}})
        status, _, answer = http_post(self.url + "/api/mcp", body.encode(), {
            "Content-Type": "application/json", "X-API-Key": self.keys[key]})
        assert status == 200, answer
        return json.loads(answer)["result"]  # type: ignore[no-any-return]

    def every(self, collection: str, key: str = "anonymous") -> list[dict[str, Any]]:
        status, page = self.get(f"/api/{collection}?limit=200", key)
        assert status == 200 and page["next"] is None
        return page["items"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    sample = Sample(exported_sample(tmp_path_factory.mktemp("taxa")))
    yield sample
    sample.server.__exit__(None, None, None)


def naming(sample: Sample, collection: str, name: str, key: str = "anonymous"
           ) -> list[dict[str, Any]]:
    """The records of a collection whose naming field holds `name` exactly, in list order,
    found from the lists alone."""
    field = NAMING[collection]
    return [record for record in sample.every(collection, key)
            if name in ([record.get(field)] if isinstance(record.get(field), str)
                        else record.get(field) or [])]


def test_a_taxon_is_its_species_with_the_records_that_name_it(sample: Sample) -> None:
    status, answer = sample.taxon("Fallopia japonica")
    assert status == 200
    _, manifest = sample.get("/api/manifest")
    assert answer["name"] == "Fallopia japonica" and answer["canonical"] == "Fallopia japonica"
    [holder] = answer["holders"]
    assert holder["node"] == {"id": manifest["node"]["id"], "name": manifest["node"]["name"]}
    assert holder["license"] == manifest["node"]["licence"]
    assert [record["id"] for record in holder["species"]] == [KNOTWEED]
    assert holder["species"][0] == sample.get(f"/api/species/{KNOTWEED}")[1]
    for collection in NAMING:
        assert holder[collection] == naming(sample, collection, "Fallopia japonica"), collection
    assert len(holder["treatments"]) == 3 and len(holder["resources"]) == 4
    assert answer["counts"] == {"species": 1, "treatments": 3, "resources": 4, "germination": 0}
    assert set(answer) == {"name", "canonical", "holders", "counts"}


@pytest.mark.parametrize("name", ["fallopia japonica (Houtt.) Ronse Decr.", "FALLOPIA JAPONICA",
                                  "Fallopia japonica (Houtt.) Ronse Decr.",
                                  "  Fallopia   japonica Houtt."])
def test_authorship_case_and_blanks_name_the_same_taxon(sample: Sample, name: str) -> None:
    status, answer = sample.taxon(name)
    _, plain = sample.taxon("Fallopia japonica")
    assert status == 200 and answer["canonical"] == "Fallopia japonica"
    assert answer["name"] == " ".join(name.split())  # as asked, its runs of blanks one space
    assert {**answer, "name": plain["name"]} == plain


def test_a_hybrid_is_named_with_its_sign_or_an_x(sample: Sample) -> None:
    answers = [sample.taxon(name) for name in (
        "Platanus × hispanica", "Platanus x hispanica", "platanus ×hispanica Mill. ex Münchh.")]
    for status, answer in answers:
        assert status == 200 and answer["canonical"] == "Platanus × hispanica"
        assert [r["id"] for h in answer["holders"] for r in h["species"]] == [PLANE]
        assert answer["holders"] == answers[0][1]["holders"]
    assert sample.taxon("Platanus hispanica")[0] == 404  # the hybrid sign is part of the name
    # a hybrid no species record holds, named by a public resource of the library
    status, bohemica = sample.taxon("Fallopia x bohemica")
    assert status == 200 and bohemica["canonical"] == "Fallopia × bohemica"
    assert bohemica["holders"][0]["resources"] == naming(sample, "resources",
                                                         "Fallopia × bohemica")
    assert bohemica["counts"]["species"] == 0


def test_an_unknown_or_restricted_name_is_not_found_alike(sample: Sample) -> None:
    """A name only a restricted record holds is answered as one nothing holds, to a caller
    without its group: the same status and body (the name is not echoed)."""
    status, unknown = sample.taxon("Nonexistus fakeus")
    assert status == 404 and unknown["error"]["code"] == "not_found"
    for key in ("anonymous", "plain"):
        for name in ("Arnica montana", "Arnica montana L.", "Nonexistus imaginarius"):
            assert sample.taxon(name, key) == (404, unknown), (name, key)
        for name in (" ", "x" * 501):  # a name its field refuses names nothing either
            assert sample.taxon(name, key) == (404, unknown), (name, key)
    status, arnica = sample.taxon("arnica montana", "sensitive")
    assert status == 200 and [r["id"] for r in arnica["holders"][0]["species"]] == [ARNICA]
    assert arnica["holders"][0]["species"][0]["access"] == "sensitive"
    # a restricted species named by a public record: the public record alone, for the others
    status, pasque = sample.taxon("Pulsatilla vulgaris")
    assert status == 200 and pasque["holders"][0]["species"] == []
    assert pasque["holders"][0]["germination"] == naming(sample, "germination",
                                                         "Pulsatilla vulgaris") != []
    status, pasque = sample.taxon("Pulsatilla vulgaris", "sensitive")
    assert [r["access"] for r in pasque["holders"][0]["species"]] == ["sensitive"]


def test_restricted_records_appear_only_for_their_group(sample: Sample) -> None:
    _, anonymous = sample.taxon("Fallopia japonica")
    _, plain = sample.taxon("Fallopia japonica", "plain")
    _, sensitive = sample.taxon("Fallopia japonica", "sensitive")
    assert plain == anonymous
    shown = {r["id"] for h in anonymous["holders"] for c in NAMING for r in h[c]}
    hidden = [r for h in sensitive["holders"] for c in NAMING for r in h[c]
              if r["id"] not in shown]
    assert hidden and all(record["access"] == "sensitive" for record in hidden)
    assert all(record["access"] == "public" for h in anonymous["holders"]
               for c in taxa.NAMING for record in h[c])
    for collection in NAMING:
        assert sensitive["holders"][0][collection] == naming(
            sample, collection, "Fallopia japonica", "sensitive")
    assert any(STEM_INJECTION in r["url"] or "derogation" in r["title"].lower()
               for r in sensitive["holders"][0]["treatments"])


def test_a_key_limited_to_collections_reads_only_those(sample: Sample) -> None:
    status, answer = sample.taxon("Fallopia japonica", "species only")
    assert status == 200 and answer["counts"] == {"species": 1}
    assert set(answer["holders"][0]) == {"node", "license", "species"}
    # a name only other collections' records hold is unknown to it
    _, unknown = sample.taxon("Nonexistus fakeus")
    assert sample.taxon("Fallopia × bohemica", "species only") == (404, unknown)
    status, refused = sample.taxon("Fallopia japonica", "search only")
    assert status == 403 and refused["error"]["code"] == "insufficient_scope"


@pytest.mark.parametrize("key", ["plain", "sensitive", "species only"])
def test_the_tool_answers_as_rest_for_the_same_key(sample: Sample, key: str) -> None:
    for name in ("Fallopia japonica", "fallopia japonica (Houtt.) Ronse Decr.",
                 "Platanus x hispanica", "Arnica montana", "Nonexistus fakeus"):
        status, rest = sample.taxon(name, key)
        result = sample.tool(name, key)
        if status == 200:
            assert not result["isError"] and result["structuredContent"] == rest
            assert json.loads(result["content"][0]["text"]) == rest
        else:
            assert result["isError"]
            assert result["content"][0]["text"] == f"not_found: {rest['error']['message']}"
    blank = sample.tool("  ", key)
    assert blank["isError"] and "name may not be empty" in blank["content"][0]["text"]


def test_the_tool_needs_the_read_scope(sample: Sample) -> None:
    root = sample.root
    sample.keys["mcp alone"] = issue_key(root, "mcp alone", scopes=["mcp"])[0]
    result = sample.tool("Fallopia japonica", "mcp alone")
    assert result["isError"] and result["content"][0]["text"].startswith("insufficient_scope")


def test_records_name_species_by_the_fields_pages_link_them_by() -> None:
    assert {name: field for name, (field, _) in NAMES_SPECIES.items()} == NAMING
    assert taxa.NAMING == {"species": "scientificName", **NAMING}


def test_the_taxa_are_made_once_a_snapshot(sample: Sample) -> None:
    project = Project(sample.root)
    first, second = Snapshot(project.bundle), Snapshot(project.bundle)
    made = taxa.taxa_of(first)
    assert taxa.made(first) and not taxa.made(second)
    assert taxa.taxa_of(first) is made and taxa.taxa_of(second) is not made
    assert [n.id for n in made.naming("Fallopia japonica") if n.collection == "species"] == \
        [KNOTWEED]
    assert made.nodes[first.meta.node_id].name == "Meuse Valley Restoration Network"
    # a reloaded snapshot makes its own ahead when the one it replaces had them
    third, unasked = Snapshot(project.bundle), Snapshot(project.bundle)
    service.prepare(third, unasked)
    assert not taxa.made(third)
    service.prepare(third, first)
    assert taxa.made(third) and taxa.taxa_of(third) is not made
