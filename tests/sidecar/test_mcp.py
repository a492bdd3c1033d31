"""POST /api/mcp with the real MCP client (`mcp` 2.3) in each of its modes, the seed's own
form, every JSON-RPC error the transport defines, and the promise that a tool sees exactly
what the same key sees over REST."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from builders import (
    ServerThread,
    app_for,
    exported_sample,
    http_get,
    http_post,
    issue_key,
    npm_tool,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from exporter.pipeline.build import build
from exporter.project.config import Project

SEEDS_TOOLS = ["node_info", "search", "get_species", "get_treatments", "get_resources",
               "get_germination", "get_team"]
TOOLS = [*SEEDS_TOOLS, "ask_library", "get_taxon"]
GETTERS = {f"get_{c}": c for c in ("species", "treatments", "resources", "germination", "team")}
KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"
PARTNER_SURVEY = "e312fd28-7dc8-45bb-bd5a-c64d8125e7de"  # resources, access: partners
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}


class Node:
    def __init__(self, root: Path) -> None:
        build(Project(root))
        self.keys = {
            "partners": issue_key(root, "partners", groups=["partners"])[0],
            "plain": issue_key(root, "plain")[0],
            "species only": issue_key(root, "species only", collections=["species"])[0],
            "no mcp": issue_key(root, "no mcp", scopes=["read", "search"])[0],
            "mcp alone": issue_key(root, "mcp alone", scopes=["mcp"])[0],
            "mcp and read": issue_key(root, "mcp and read", scopes=["mcp", "read"])[0],
        }
        self.server = ServerThread(app_for(root, anonymous_rate=0))
        self.url = self.server.__enter__().url
        self.mcp = self.url + "/api/mcp"

    def post(self, body: Any, key: str = "plain", headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(self.mcp, data=data, method="POST", headers={
            "Content-Type": "application/json", "X-API-Key": self.keys[key], **(headers or {})})
        try:
            with urllib.request.urlopen(request) as response:
                status, answer_headers, text = response.status, dict(response.headers), \
                    response.read()
        except urllib.error.HTTPError as error:
            status, answer_headers, text = error.code, dict(error.headers), error.read()
        return status, answer_headers, json.loads(text) if text else None

    def rest(self, path: str, key: str) -> Any:
        status, _, body = http_get(self.url + path, {"X-API-Key": self.keys[key]})
        return status, json.loads(body)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    node = Node(exported_sample(tmp_path_factory.mktemp("mcp")))
    yield node
    node.server.__exit__(None, None, None)


async def connect(node: Node, mode: str, key: str = "plain") -> tuple[Any, Any]:
    http = create_mcp_http_client(headers={"X-API-Key": node.keys[key]})
    client = Client(streamable_http_client(node.mcp, http_client=http), mode=mode)
    return http, client


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", MODERN, "auto"])
async def test_the_real_client_lists_and_calls_every_tool(node: Node, mode: str) -> None:
    http, client = await connect(node, mode, "partners")
    async with http, client:
        expected = {"legacy": "2025-11-25", MODERN: MODERN, "auto": MODERN}[mode]
        assert client.protocol_version == expected
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == TOOLS
        for tool in listed.tools:
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["required"] == {"search": ["query"],
                                                     "ask_library": ["question"],
                                                     "get_taxon": ["name"]}.get(
                tool.name, [])
            assert tool.output_schema and tool.annotations.read_only_hint is True
            assert len(tool.description or "") > 80
        search = next(t for t in listed.tools if t.name == "search").input_schema
        assert set(search["properties"]) == {"query", "collections", "nodes", "limit"}
        assert search["properties"]["limit"]["default"] == 10
        getter = next(t for t in listed.tools if t.name == "get_species").input_schema
        assert set(getter["properties"]) == {"id", "limit"}
        assert getter["properties"]["limit"]["default"] == 20
        info = await client.call_tool("node_info", {})
        assert not info.is_error and info.structured_content["node"]["id"]
        found = await client.call_tool("search", {"query": "Fallopia japnoica", "limit": 3})
        assert found.structured_content["items"][0]["id"] == KNOTWEED
        for name in GETTERS:
            page = await client.call_tool(name, {"limit": 2})
            assert not page.is_error and len(page.structured_content["items"]) == 2
            record_id = page.structured_content["items"][1]["id"]
            one = await client.call_tool(name, {"id": record_id})
            assert one.structured_content["items"] == [page.structured_content["items"][1]]
            assert json.loads(one.content[0].text) == one.structured_content
        taxon = await client.call_tool("get_taxon", {"name": "fallopia japonica Houtt."})
        assert not taxon.is_error and taxon.structured_content["canonical"] == \
            "Fallopia japonica"
        assert [r["id"] for r in taxon.structured_content["holders"][0]["species"]] == \
            [KNOTWEED]
        secret = await client.call_tool("get_resources", {"id": PARTNER_SURVEY})
        assert not secret.is_error  # this key holds partners
        missing = await client.call_tool("get_species", {"id": PARTNER_SURVEY})
        assert missing.is_error and "get_species without id" in missing.content[0].text


async def tool(node: Node, key: str, name: str, arguments: dict[str, Any]) -> Any:
    status, _, body = node.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                 "params": {"name": name, "arguments": arguments}}, key)
    assert status == 200 and body["id"] == 7, body
    return body["result"]


QUESTIONS = ["How deep should knotweed canes be injected?",
             "Is it OK to put dug-up knotweed in my garden compost?",
             "What does a giant hogweed seed cost?"]


@pytest.mark.parametrize("key", ["partners", "plain", "species only", "mcp and read"])
async def test_the_library_tool_answers_and_refuses_as_the_ask_endpoint(
        node: Node, key: str) -> None:
    """ask_library gives what POST /api/library/ask gives the same key: the same answer and
    citations, the same refusal; a key outside the resources, or without the library
    scope, is told so in the tool's result."""
    for question in QUESTIONS:
        result = await tool(node, key, "ask_library", {"question": question, "limit": 3})
        status, _, body = http_post(node.url + "/api/library/ask", json.dumps(
            {"question": question, "limit": 3}).encode(), {
            "Content-Type": "application/json", "X-API-Key": node.keys[key]})
        rest = json.loads(body)
        if status == 200:
            assert not result["isError"] and result["structuredContent"] == rest, question
        else:
            assert result["isError"] and rest["error"]["code"] == "insufficient_scope"
            assert "insufficient_scope" in result["content"][0]["text"]
    bad = await tool(node, "plain", "ask_library", {"question": "  "})
    assert bad["isError"] and "question may not be empty" in bad["content"][0]["text"]


@pytest.mark.parametrize("key", ["partners", "plain", "species only"])
async def test_a_tool_sees_exactly_what_the_key_sees_over_rest(node: Node, key: str) -> None:
    manifest = await tool(node, key, "node_info", {})
    assert manifest["structuredContent"] == node.rest("/api/manifest", key)[1]
    for words in ("knotweed", "floating pennywort partner survey", "seed"):
        result = await tool(node, key, "search", {"query": words, "limit": 20})
        status, rest = node.rest(f"/api/search?q={words.replace(' ', '+')}&limit=20", key)
        assert status == 200 and result["structuredContent"] == rest
    for name, collection in GETTERS.items():
        for limit in (1, 20, 200):
            result = await tool(node, key, name, {"limit": limit})
            status, rest = node.rest(f"/api/{collection}?limit={limit}", key)
            if status == 200:
                assert result["structuredContent"] == rest and not result["isError"]
                for record in rest["items"][:3]:
                    one = await tool(node, key, name, {"id": record["id"]})
                    assert one["structuredContent"]["items"] == [record]
            else:  # outside the key's collections: the tool says so, as a tool result
                assert result["isError"] and rest["error"]["code"] == "insufficient_scope"
                assert "insufficient_scope" in result["content"][0]["text"]
        result = await tool(node, key, name, {"id": PARTNER_SURVEY})
        visible = key == "partners" and collection == "resources"
        assert result["isError"] is not visible, (key, name)
        if not visible:  # absent as from REST: unknown there, or outside the key's reach
            text = result["content"][0]["text"]
            assert f"no {collection} record" in text or "insufficient_scope" in text


@pytest.mark.parametrize("arguments, says", [
    ({"limit": 0}, "limit must be from 1 to 200"),
    ({"limit": "5"}, "limit must be a whole number"),
    ({"limit": True}, "limit must be a whole number"),
    ({"limit": 10 ** 30}, "limit must be from 1 to 200, got a whole number of 31 digits"),
    ({"limit": 1e308}, "limit must be from 1 to 200, got 1e+308"),
    ({"id": "knotweed"}, "id must be a record UUID"),
    ({"id": 5}, "id must be text"),
    ({"colour": "red"}, "unknown argument 'colour'"),
])
async def test_bad_arguments_are_tool_errors_saying_what_to_do(
        node: Node, arguments: dict[str, Any], says: str) -> None:
    result = await tool(node, "plain", "get_species", arguments)
    assert result["isError"] and says in result["content"][0]["text"]
    assert "structuredContent" not in result


@pytest.mark.parametrize("arguments, says", [
    ({}, "query is required"), ({"query": "  "}, "may not be empty"),
    ({"query": "x" * 501}, "at most 500"), ({"query": "x", "limit": 51}, "from 1 to 50"),
    ({"query": "x", "collections": ["plants"]}, "no collection 'plants'"),
    ({"query": "x", "collections": [" species "]}, "no collection ' species '"),
    ({"query": "x", "collections": ["species,team"]}, "no collection 'species,team'"),
    ({"query": "x", "collections": "species"}, "collections must be a list"),
])
async def test_bad_search_arguments(node: Node, arguments: dict[str, Any], says: str) -> None:
    result = await tool(node, "plain", "search", arguments)
    assert result["isError"] and says in result["content"][0]["text"], result


def test_the_seeds_form(node: Node) -> None:
    status, _, body = node.post({"method": "tools/list"})
    assert status == 200 and [t["name"] for t in body["result"]["tools"]] == TOOLS
    status, _, body = node.post({"method": "tools/call",
                                 "params": {"name": "get_species", "arguments": {"limit": 1}}})
    assert status == 200 and len(body["result"]["structuredContent"]["items"]) == 1
    status, _, body = node.post({"method": "tools/call", "params": {"name": "nope"}})
    assert status == 400 and body["error"]["code"] == "invalid_parameter"
    assert "unknown tool 'nope'" in body["error"]["message"]
    status, _, body = node.post({"method": "resources/list"})
    assert status == 404 and body["error"]["code"] == "not_found"


def modern(method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "a1", "method": method,
            "params": {**(params or {}), "_meta": META}, **extra}


def headers_for(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def test_the_2026_revision_checks_headers_against_the_body(node: Node) -> None:
    call = modern("tools/call", {"name": "get_team", "arguments": {"limit": 1}})
    status, _, body = node.post(call, headers=headers_for("tools/call", "get_team"))
    assert status == 200 and body["result"]["resultType"] == "complete"
    encoded = "=?base64?Z2V0X3RlYW0=?="  # get_team
    assert node.post(call, headers=headers_for("tools/call", encoded))[0] == 200
    for headers in ({}, headers_for("tools/call"), headers_for("tools/list", "get_team"),
                    headers_for("tools/call", "get_species"),
                    {**headers_for("tools/call", "get_team"), "MCP-Protocol-Version": "2025"},
                    headers_for("tools/call", "=?base64?not base64?=")):
        status, _, body = node.post(call, headers=headers)
        assert status == 400 and body["error"]["code"] == -32020, headers
        assert body["id"] == "a1"
    status, _, body = node.post(modern("tools/list"), headers=headers_for("tools/list"))
    result = body["result"]
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
    status, _, body = node.post(modern("server/discover"),
                                headers=headers_for("server/discover"))
    assert status == 200 and body["result"]["supportedVersions"] == [MODERN]
    assert {"capabilities", "ttlMs", "cacheScope", "resultType"} <= set(body["result"])


def post_raw(node: Node, body: Any, headers: list[tuple[str, str]]) -> tuple[int, Any]:
    """A POST whose headers may repeat (urllib's cannot)."""
    import http.client
    from urllib.parse import urlsplit
    where = urlsplit(node.mcp)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    connection.putrequest("POST", where.path)
    data = json.dumps(body).encode()
    for name, value in [("Content-Type", "application/json"),
                        ("X-API-Key", node.keys["plain"]),
                        ("Content-Length", str(len(data))), *headers]:
        connection.putheader(name, value)
    connection.endheaders(data)
    response = connection.getresponse()
    text = response.read()
    connection.close()
    return response.status, json.loads(text) if text else None


def test_what_a_gateway_routes_by_is_what_runs(node: Node) -> None:
    """The 2026 headers are what a gateway may route or authorise by: a header given twice
    (a proxy may keep the other copy), or given with a body in the seed's form (never checked
    against them), is a mismatch, not a call."""
    call = modern("tools/call", {"name": "search", "arguments": {"query": "knotweed"}})
    for twice in (("Mcp-Name", "search"), ("Mcp-Name", "get_team"),
                  ("Mcp-Method", "tools/call"), ("MCP-Protocol-Version", MODERN)):
        headers = [*headers_for("tools/call", "search").items(), twice]
        status, body = post_raw(node, call, headers)
        assert (status, body["error"]["code"]) == (400, -32020), twice
        assert "given 2 times" in body["error"]["message"]
    seed = {"method": "tools/call", "params": {"name": "search",
                                               "arguments": {"query": "knotweed"}}}
    for headers in (headers_for("tools/list"), {"Mcp-Name": "node_info"},
                    {"MCP-Protocol-Version": MODERN}):
        status, _, body = node.post(seed, headers=headers)
        assert (status, body["error"]["code"]) == (400, -32020), headers
    assert node.post(seed)[0] == 200  # the seed's form, without them: answered


def test_a_version_header_is_checked_on_every_message(node: Node) -> None:
    """An unknown MCP-Protocol-Version is a 400 on a notification and on initialize too,
    not a 202 and a 200 whatever the header says."""
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}):
        status, _, body = node.post(message, headers={"MCP-Protocol-Version": "garbage"})
        assert (status, body["error"]["code"]) == (400, -32600), message
    assert node.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                     headers={"MCP-Protocol-Version": "2025-06-18"})[0] == 202
    bad = dict(META, **{"io.modelcontextprotocol/clientCapabilities": 5})
    status, _, body = node.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                 "params": {"_meta": bad}}, headers=headers_for("tools/list"))
    assert (status, body["error"]["code"]) == (400, -32602)


@pytest.mark.parametrize("failure", ["engine", "bug"])
def test_a_tool_that_fails_is_a_json_rpc_error_with_its_id(
        node: Node, failure: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A failure of the node inside a tool (the search engine's panic, which the service
    layer turns into a 500; a bug) answers the request's id with -32603 and a message, in
    every revision, not a bare HTTP 500 in REST's shape."""
    from sidecar import service
    from sidecar.errors import APIError

    async def failing(*args: Any, **kwargs: Any) -> Any:
        if failure == "engine":
            raise APIError("the search engine failed on this query (PanicException); try "
                           "other words, and tell the node's operator")
        raise RuntimeError("a bug")
    monkeypatch.setattr(service, "search", failing)
    call = modern("tools/call", {"name": "search", "arguments": {"query": "knotweed"}})
    for body, headers in ((call, headers_for("tools/call", "search")),
                          ({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": "search", "arguments": {"query": "x"}}}, {})):
        status, _, answer = node.post(body, headers=headers)
        assert status == 500 and answer["id"] == body["id"], answer
        assert answer["error"]["code"] == -32603
        says = "try other words" if failure == "engine" else "the error is logged"
        assert says in answer["error"]["message"]
    assert (failure == "bug") == any("unhandled error in tools/call" in r.getMessage()
                                     for r in caplog.records)


def test_batches_in_the_revision_that_has_them(tmp_path: Path) -> None:
    """Revision 2025-03-26 (assumed without a version header) requires JSON-RPC batches:
    answered in order, notifications unanswered, each message counted toward the key's rate
    as a request of its own. Later revisions have none, and initialize is never batched."""
    root = exported_sample(tmp_path / "node")
    build(Project(root))
    key, _ = issue_key(root, "eight a minute", rate=8)
    with ServerThread(app_for(root, anonymous_rate=0)) as server:
        def post(body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
            status, _, text = http_post(server.url + "/api/mcp", json.dumps(body).encode(),
                                        {"Content-Type": "application/json",
                                         "X-API-Key": key, **(headers or {})})
            return status, json.loads(text) if text else None

        batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": "b", "method": "tools/call",
                  "params": {"name": "nope"}}]
        status, answer = post(batch)
        assert status == 200 and [item["id"] for item in answer] == [1, "b"]
        assert answer[0]["result"] == {} and answer[1]["error"]["code"] == -32602
        assert post([{"jsonrpc": "2.0", "method": "notifications/initialized"}])[0] == 202
        for refused, headers in (([], {}), (batch, {"MCP-Protocol-Version": "2025-06-18"}),
                                 ([{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                    "params": {}}], {})):
            status, answer = post(refused, headers)
            errors = answer if isinstance(answer, list) else [answer]
            assert all(e["error"]["code"] == -32600 for e in errors), (refused, answer)
        # 3 + 1 + 1 + 1 + 1 requests counted so far, of eight a minute: a batch of two is over
        status, answer = post(batch[:1] * 2)
        assert status == 429 and answer["error"]["code"] == "rate_limited"


def test_json_rpc_errors(node: Node) -> None:
    future = {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
              "io.modelcontextprotocol/clientCapabilities": {}}
    status, _, body = node.post(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": future}},
        headers={"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert (status, body["error"]["code"]) == (400, -32022)
    assert body["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    status, _, body = node.post(modern("prompts/list"), headers=headers_for("prompts/list"))
    assert (status, body["error"]["code"]) == (404, -32601)
    status, _, body = node.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                raw=b'{"jsonrpc": "2.0", "id": 1,')
    assert (status, body["error"]["code"], body["id"]) == (400, -32700, None)
    for bad in ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": True, "method": "tools/list"}):
        status, _, body = node.post(bad)
        assert (status, body["error"]["code"]) == (400, -32600), bad
    for params in ({"name": "nope"}, {"name": "search", "arguments": [1]}, 5):
        status, _, body = node.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": params})
        assert (status, body["error"]["code"]) == (400, -32602), params
    status, _, body = node.post(modern("tools/list", _meta=None) | {"params": {"_meta": {}}},
                                headers=headers_for("tools/list"))
    assert (status, body["error"]["code"]) == (400, -32602)


def test_the_handshake_revision(node: Node) -> None:
    status, _, body = node.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    assert status == 200 and body["result"]["protocolVersion"] == "2025-06-18"
    assert body["result"]["serverInfo"]["name"] == "fednode"
    status, _, body = node.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                 "params": {"protocolVersion": "1999-01-01"}})
    assert body["result"]["protocolVersion"] == "2025-11-25"  # ours, for the client to judge
    for note in ("notifications/initialized", "notifications/cancelled", "notifications/x"):
        status, headers, body = node.post({"jsonrpc": "2.0", "method": note})
        assert (status, body) == (202, None)
    status, _, body = node.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    assert status == 200 and body["result"]["tools"]  # no header: 2025-03-26 assumed
    status, _, body = node.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                                headers={"MCP-Protocol-Version": "2023-01-01"})
    assert status == 400 and body["error"]["code"] == -32600
    assert "unsupported MCP-Protocol-Version" in body["error"]["message"]


def test_transport_rules(node: Node) -> None:
    for method in ("GET", "DELETE"):
        request = urllib.request.Request(node.mcp, method=method,
                                         headers={"X-API-Key": node.keys["plain"]})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        assert caught.value.code == 405
        assert json.loads(caught.value.read())["error"]["code"] == "method_not_allowed"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    status, _, body = node.post(listing, headers={"Origin": "https://evil.example.com"})
    assert status == 403 and body["error"]["code"] == "origin_not_allowed"
    own = node.rest("/api/manifest", "plain")[1]["node"]["base_url"]
    assert node.post(listing, headers={"Origin": own})[0] == 200
    status, _, body = node.post(None, raw=b'{"a": "' + b"x" * (1024 * 1024) + b'"}')
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    padded = json.dumps({**listing, "pad": "x" * 1_000_000}).encode()
    assert node.post(None, raw=padded)[0] == 200  # just under 1 MiB
    status, _, body = node.post(listing, key="no mcp")
    assert status == 403 and body["error"]["code"] == "insufficient_scope"


async def test_a_modern_client_is_refused_a_tool_outside_its_collections(node: Node) -> None:
    http, client = await connect(node, MODERN, "species only")
    async with http, client:
        result = await client.call_tool("get_team", {})
        assert result.is_error and "insufficient_scope" in result.content[0].text
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no_such_tool", {})
        assert caught.value.code == -32602


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4), max_leaves=12)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
     "method": st.sampled_from(["tools/list", "tools/call", "initialize", "server/discover",
                                "ping", "notifications/initialized"]) | st.text(max_size=12)},
    optional={"id": st.integers() | st.text(max_size=5) | st.none(),
              "params": st.fixed_dictionaries({}, optional={
                  "name": st.sampled_from(TOOLS) | st.text(max_size=8),
                  "arguments": st.dictionaries(
                      st.sampled_from(["id", "limit", "query", "collections", "x"]),
                      json_values, max_size=3) | json_values,
                  "_meta": st.just(META) | json_values}) | json_values})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=messages | json_values, seed_form=st.booleans(),
       headers=st.fixed_dictionaries({}, optional={
           "MCP-Protocol-Version": st.sampled_from([MODERN, "2025-11-25", "x"]),
           "Mcp-Method": st.sampled_from(["tools/list", "tools/call"]),
           "Mcp-Name": st.sampled_from(TOOLS + ["=?base64?!!?="])}))
def test_any_body_gets_an_answer_never_a_failure(node: Node, body: Any, seed_form: bool,
                                                 headers: dict[str, str]) -> None:
    if seed_form and isinstance(body, dict):
        body.pop("jsonrpc", None)
    status, _, answer = node.post(body, headers=headers)
    assert status in (200, 202, 400, 404), (status, answer)
    if status == 202:
        assert answer is None
    elif isinstance(answer, list):  # a batch (revision 2025-03-26): one answer a request
        assert isinstance(body, list) and 0 < len(answer) <= len(body)
        assert all(item["jsonrpc"] == "2.0" and ("result" in item) != ("error" in item)
                   for item in answer), answer
    elif "jsonrpc" in (answer or {}):
        assert ("result" in answer) != ("error" in answer)
    else:
        assert set(answer) in ({"result"}, {"error"}), answer


def test_origins_allowed_in_node_toml(tmp_path: Path) -> None:
    root = exported_sample(tmp_path / "node")
    node_toml = root / "content" / "node.toml"
    text = node_toml.read_text()
    node_toml.write_text(text.replace("[node]\n", '[node]\nmcp_origins = ["https://x.y/"]\n', 1))
    from exporter.shared.errors import ContentError
    with pytest.raises(ContentError) as caught:
        build(Project(root))
    assert "node.mcp_origins" in str(caught.value.problems[0])
    node_toml.write_text(text.replace(
        "[node]\n", '[node]\nmcp_origins = ["https://agents.example.org"]\n', 1))
    build(Project(root))
    token, _ = issue_key(root, "agent", scopes=["mcp"])
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    with ServerThread(app_for(root)) as server:
        for origin, status in (("https://agents.example.org", 200), ("https://x.y", 403)):
            request = urllib.request.Request(server.url + "/api/mcp", data=listing, headers={
                "Content-Type": "application/json", "X-API-Key": token, "Origin": origin})
            try:
                with urllib.request.urlopen(request) as response:
                    assert response.status == status
            except urllib.error.HTTPError as error:
                assert error.code == status


async def test_a_tool_needs_the_scope_its_rest_read_needs(node: Node) -> None:
    """mcp opens the interface; each tool also needs the scope of the same read over REST."""
    assert not (await tool(node, "mcp alone", "node_info", {}))["isError"]
    for key, name, arguments, allowed in (
            ("mcp alone", "search", {"query": "knotweed"}, False),
            ("mcp alone", "get_species", {}, False),
            ("mcp and read", "get_species", {}, True),
            ("mcp and read", "search", {"query": "knotweed"}, False)):
        result = await tool(node, key, name, arguments)
        assert result["isError"] is not allowed, (key, name)
        if not allowed:
            assert "insufficient_scope" in result["content"][0]["text"]
    assert node.rest("/api/search?q=knotweed", "mcp and read")[0] == 403


@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_official_inspector_lists_every_tool_as_portable(tmp_path: Path, era: str) -> None:
    """The official MCP Inspector's CLI (2.12), in each protocol era, lists every tool
    with `--strict`: no schema portability problem, error or warning (a `type` given as a
    list of types is one: clients that map tool schemas onto a single-type dialect refuse
    it)."""
    import subprocess

    inspector = npm_tool("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")
    root = exported_sample(tmp_path / "node")
    key, _ = issue_key(root, "inspector")
    with ServerThread(app_for(root, anonymous_rate=0)) as server:
        result = subprocess.run(
            [str(inspector), "--cli", f"{server.url}/api/mcp", "--transport", "http",
             "--header", f"X-API-Key: {key}", "--method", "tools/list", "--strict",
             "--protocol-era", era],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={**os.environ, "MCP_CATALOG_PATH": str(tmp_path / "catalog.json"),
                 "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.strip() == "", result.stderr[-4000:]
    assert sorted(tool["name"] for tool in json.loads(result.stdout)["tools"]) == sorted(TOOLS)
