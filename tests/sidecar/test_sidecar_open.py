"""The sidecar's open endpoints, through the real aiohttp server and the real DuckDB."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from builders import Node, app_for, species, team

from exporter.contract.wire import NO_COLLECTION_FILE, NO_ENDPOINT_FILE
from exporter.pipeline.build import BuildReport


def static_url(relative: str) -> str | None:
    """The open URL a static file answers, as site_out/_redirects maps it."""
    parts = relative.split("/")
    if relative == "library/index.html":  # the library's page, among its PDFs
        return "/library/"
    if relative.startswith(("api/sync/", "library/", "download/")) or \
            relative == "api/openapi.json":
        return "/" + relative
    if not relative.startswith("api/"):  # a page for people (exporter/site/pages.py)
        return "/" + relative.removesuffix("index.html")
    if relative in ("api/manifest.json", "api/schema.json"):
        return "/" + relative[:-5]
    if len(parts) == 3 and parts[2] == "index.json":
        return f"/api/{parts[1]}"
    if len(parts) == 4 and parts[2] == "offset":
        offset = int(parts[3][:-5])
        return f"/api/{parts[1]}" + (f"?offset={offset}" if offset else "")
    if len(parts) == 4:  # api/{collection}/{shard}/{id}.json
        return f"/api/{parts[1]}/{parts[3][:-5]}"
    return None


async def test_every_static_file_equals_the_sidecar_answer(sample_root: Path,
                                                           sample_client: TestClient) -> None:
    site = sample_root / "site_out"
    files = sorted(p for p in site.rglob("*") if p.is_file())
    assert len(files) > 100
    for path in files:
        relative = str(path.relative_to(site))
        if relative == "_redirects":  # the CDN's rules: not served (tests/test_seams.py)
            continue
        if relative == NO_ENDPOINT_FILE:  # the CDN's answer for a path without an endpoint
            response = await sample_client.get("/api/no/such/endpoint")
            assert response.status == 404
            assert await response.read() == path.read_bytes()
            continue
        if relative == NO_COLLECTION_FILE:  # and for one segment that names no collection
            for url in ("/api/plants", "/api/sync", "/api/no-collection.json"):
                response = await sample_client.get(url)
                assert response.status == 404
                assert await response.read() == path.read_bytes(), url
            continue
        url = static_url(relative)
        assert url is not None, f"no open URL serves {relative}"
        response = await sample_client.get(url)
        assert response.status == 200, url
        assert await response.read() == path.read_bytes(), url
        assert response.headers["X-Node-Access"] == "open"


async def test_all_five_collections_list_and_read(sample_client: TestClient) -> None:
    manifest = await (await sample_client.get("/api/manifest")).json()
    for entry in manifest["collections"]:
        response = await sample_client.get(f"/api/{entry['name']}?limit=200")
        page = await response.json()
        assert page["total"] == entry["public_count"] > 0
        assert all(item["access"] == "public" for item in page["items"])
        first = page["items"][0]
        one = await sample_client.get(f"/api/{entry['name']}/{first['id']}")
        assert await one.json() == first


async def test_paging_with_custom_limit_walks_every_record(sample_client: TestClient) -> None:
    seen: list[str] = []
    url: str | None = "/api/species?limit=7"
    while url:
        page = await (await sample_client.get(url)).json()
        assert page["limit"] == 7
        seen += [item["id"] for item in page["items"]]
        url = page["next"].replace("http://127.0.0.1:8000", "") if page["next"] else None
    total = (await (await sample_client.get("/api/species")).json())["total"]
    assert len(seen) == len(set(seen)) == total
    beyond = await (await sample_client.get(f"/api/species?offset={total + 10}")).json()
    assert beyond["items"] == [] and beyond["next"] is None and beyond["total"] == total


@pytest.mark.parametrize("query, message", [
    ("limit=0", "limit must be from 1 to 200, got 0"),
    ("limit=201", "limit must be from 1 to 200, got 201"),
    ("limit=ten", "limit must be a whole number, got 'ten'"),
    ("offset=-1", "offset must be at least 0, got -1"),
    ("offset=1.5", "offset must be a whole number, got '1.5'"),
    # too long to read: said by its length, not echoed as forty digits that look like a number
    ("limit=" + "9" * 60, "limit must be from 1 to 200, got a whole number of 60 digits"),
    ("offset=" + "1" * 41, "offset must be at least 0, got a whole number of 41 digits"),
    ("limit=" + "1" * 20, "limit must be from 1 to 200, got a whole number of 20 digits"),
    ("limit=x" + "y" * 50, "limit must be a whole number, got 'x" + "y" * 39 + "'…"),
    ("updated_since=yesterday", "updated_since: expected an RFC 3339 timestamp"),
    ("updated_since=2026-01-01T00:00:00", "updated_since: the timestamp needs a time zone"),
    ("limt=5", "unknown parameter 'limt'; this endpoint takes: limit, offset, updated_since"),
    ("limit=5&limit=6", "parameter 'limit' is given more than once"),
])
async def test_bad_list_parameters(sample_client: TestClient, query: str, message: str) -> None:
    response = await sample_client.get(f"/api/species?{query}")
    assert response.status == 400
    body = await response.json()
    assert body["error"]["code"] == "invalid_parameter"
    assert body["error"]["message"].startswith(message)
    assert response.headers["X-Node-Access"] == "open"


async def test_updated_since_filters_inclusively(node: Node, export: Callable[..., BuildReport],
                                                 aiohttp_client: Callable[..., object]) -> None:
    old = species("Fallopia japonica")
    node.write("species", "old", old)
    export(node.root)  # 08:01
    new = species("Fallopia sachalinensis")
    node.write("species", "new", new)
    export(node.root)  # 08:02
    client: TestClient = await aiohttp_client(  # type: ignore[operator]
        app_for(node.root))
    async def ids(query: str) -> list[str]:
        page = await (await client.get(f"/api/species?{query}")).json()
        return [item["id"] for item in page["items"]]
    assert await ids("updated_since=2026-03-01T08:02:00Z") == [new["id"]]
    assert await ids("updated_since=2026-03-01T08:01:00Z") == [old["id"], new["id"]]
    assert await ids("updated_since=2026-03-01T08:01:00.5Z") == [new["id"]]
    assert await ids("updated_since=2026-03-01T09:01:00%2B01:00") == [old["id"], new["id"]]
    page = await (await client.get("/api/species?updated_since=2026-03-01T08:01:00Z&limit=1"))\
        .json()
    assert page["next"] == ("https://node.example.org/api/species?limit=1&offset=1"
                            "&updated_since=2026-03-01T08:01:00Z")


async def test_restricted_record_is_indistinguishable_from_missing(
        node: Node, export: Callable[..., BuildReport],
        aiohttp_client: Callable[..., object]) -> None:
    hidden = team("Hidden", access="partners")
    node.write("team", "hidden", hidden, "Internal phone tree WOMBAT-3.")
    node.write("team", "open", team("Open"))
    export(node.root)
    client: TestClient = await aiohttp_client(  # type: ignore[operator]
        app_for(node.root))
    missing_id = "00000000-0000-4000-8000-00000000abcd"
    restricted = await client.get(f"/api/team/{hidden['id']}")
    missing = await client.get(f"/api/team/{missing_id}")
    assert restricted.status == missing.status == 404
    body = await restricted.text()
    assert body == await missing.text()
    assert json.loads(body)["error"]["code"] == "not_found"
    page = await client.get("/api/team")
    text = await page.text()
    assert hidden["id"] not in text and "WOMBAT" not in text
    assert json.loads(text)["total"] == 1


async def test_not_found_and_method_errors(sample_client: TestClient) -> None:
    for url in ("/api/plants", "/api/plants/x", "/api/species/not-a-uuid", "/nowhere",
                "/api/species/00000000-0000-4000-8000-000000000000"):
        response = await sample_client.get(url)
        assert response.status == 404, url
        assert (await response.json())["error"]["code"] == "not_found"
        assert response.headers["X-Node-Access"] == "open"
    response = await sample_client.post("/api/species", data=b"{}")
    assert response.status == 405
    assert (await response.json())["error"]["code"] == "method_not_allowed"
    assert "GET" in response.headers["Allow"]
    assert response.headers["X-Node-Access"] == "open"


async def test_preflight_and_headers(sample_client: TestClient) -> None:
    response = await sample_client.options("/api/species", headers={
        "Origin": "https://hub.example", "Access-Control-Request-Method": "GET"})
    assert response.status == 204
    assert response.headers["X-Node-Access"] == "open"
    assert "X-API-Key" in response.headers["Access-Control-Allow-Headers"]
    ok = await sample_client.get("/api/manifest")
    assert ok.headers["Content-Type"] == "application/json; charset=utf-8"
    assert ok.headers["Cache-Control"].startswith("public")
    assert "X-API-Key" in ok.headers["Vary"]
    tag = ok.headers["ETag"]
    again = await sample_client.get("/api/manifest", headers={"If-None-Match": tag})
    assert again.status == 304
    assert (await sample_client.get("/api/manifest", headers={"If-None-Match": "*"})).status \
        == 304  # any version of it
    assert again.headers["X-Node-Access"] == "open"


async def test_new_export_is_served_without_restart(
        node: Node, export: Callable[..., BuildReport],
        aiohttp_client: Callable[..., object]) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    export(node.root)
    client: TestClient = await aiohttp_client(  # type: ignore[operator]
        app_for(node.root, reload_interval=0))
    assert (await (await client.get("/api/species")).json())["total"] == 1
    node.write("species", "b", species("Fallopia sachalinensis"))
    export(node.root)
    assert (await (await client.get("/api/species")).json())["total"] == 2


async def test_list_and_record_etags_are_strong_validators(
        node: Node, export: Callable[..., BuildReport],
        aiohttp_client: Callable[..., object]) -> None:
    """ETags of lists and records are made from each record's digest and the page's own
    values, not by hashing the bytes: equal bytes have equal tags and different bytes
    different tags, across pages, limits, filters and exports; If-None-Match gives 304."""
    slugs = [f"s{n}" for n in range(12)]
    for n, slug in enumerate(slugs):
        node.write("species", slug, species(f"Genus{n:02} species"))
    node.write("team", "t", team("Ana"))
    export(node.root)
    client: TestClient = await aiohttp_client(  # type: ignore[operator]
        app_for(node.root, reload_interval=0))
    urls = [f"/api/species?limit={limit}&offset={offset}" for limit in (1, 5, 50)
            for offset in (0, 1, 5, 11, 12)]
    urls += ["/api/team", "/api/species?updated_since=2000-01-01T00:00:00Z",
             "/api/species?updated_since=2999-01-01T00:00:00Z", "/api/treatments"]

    async def seen() -> dict[str, tuple[bytes, str]]:
        answers = {}
        for url in urls:
            response = await client.get(url)
            assert response.status == 200
            answers[url] = (await response.read(), response.headers["ETag"])
        first = json.loads(answers[urls[0]][0])["items"][0]
        response = await client.get(f"/api/species/{first['id']}")
        answers["record"] = (await response.read(), response.headers["ETag"])
        return answers

    before = await seen()
    node.write("species", slugs[0], species("Genus00 species", habitat="Edited"))
    export(node.root)
    after = await seen()
    pairs = [*before.values(), *after.values()]
    assert len({body for body, _ in pairs}) == len({tag for _, tag in pairs})
    assert len({(body, tag) for body, tag in pairs}) == len({tag for _, tag in pairs})
    assert before["record"][1] != after["record"][1]
    assert before["/api/team"] == after["/api/team"]
    for url, (_, tag) in after.items():
        again = await client.get(url if url != "record" else
                                 f"/api/species/{json.loads(after['record'][0])['id']}",
                                 headers={"If-None-Match": tag})
        assert again.status == 304, url
