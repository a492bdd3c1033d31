"""One input schema per endpoint (`exporter/contract/inputs.py`): REST and the MCP tools read
an input by the same field of the endpoint table, so they refuse and accept the same
values, with the same words; the OpenAPI document and the tools' input schemas print it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from builders import ServerThread, app_for, examples, exported_sample, http_get, http_post
from builders import issue_key as make_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import MultiDict

from exporter.contract.endpoints import BY_NAME, ENDPOINTS
from exporter.contract.inputs import InputError, from_json, from_query, json_schema
from exporter.contract.wire import COLLECTIONS
from sidecar.tools import TOOLS

KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"
PARTNER_SURVEY = "e312fd28-7dc8-45bb-bd5a-c64d8125e7de"  # resources, access: partners


class Agent:
    """A node of the sample and a key that may read, search and call tools."""

    def __init__(self, root: Path) -> None:
        self.key = make_key(root, "agent", scopes=["read", "search", "mcp"])[0]
        self.server = ServerThread(app_for(root, anonymous_rate=0))
        self.url = self.server.__enter__().url

    def rest(self, path: str) -> tuple[int, Any]:
        status, _, body = http_get(self.url + path, {"X-API-Key": self.key})
        return status, json.loads(body)

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}}).encode()
        status, _, answer = http_post(self.url + "/api/mcp", body, {
            "Content-Type": "application/json", "X-API-Key": self.key,
            "MCP-Protocol-Version": "2025-11-25"})
        assert status == 200, answer
        return json.loads(answer)["result"]


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Any:
    agent = Agent(exported_sample(tmp_path_factory.mktemp("inputs")))
    yield agent
    agent.server.__exit__(None, None, None)


def _said(message: str, names: tuple[str, ...]) -> str:
    """A refusal's words without the field's own name and example (REST says `q` and
    `?q=knotweed` where the tool says `query` and `{"query": "knotweed"}`)."""
    for name in names:
        message = message.removeprefix(f"{name} ").removeprefix(f"{name}: ")
    return re.split(r", e\.g\. ", message)[0]


def _agree(rest: tuple[int, Any], tool: dict[str, Any], names: tuple[str, ...] = ()) -> None:
    status, body = rest
    if status == 200:
        assert not tool["isError"], (body, tool)
        return
    assert tool["isError"], (status, body, tool)
    if status == 400:  # the same mistake, the same words
        assert body["error"]["code"] == "invalid_parameter"
        assert _said(tool["content"][0]["text"], names) == \
            _said(body["error"]["message"], names)


TEXTS = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\t\n", "knotweed",
                                                          "Fallopia japonica"]),
                  st.integers(495, 505).map(lambda n: "ab " * (n // 3) + "x" * (n % 3)))
NAMES = st.lists(st.sampled_from([*COLLECTIONS, "plants", "", " species", "species team",
                                  "Species"]), max_size=3)
LIMITS = st.one_of(st.integers(-3, 60), st.integers(10**14, 10**22))


@pytest.mark.slow
@given(text=st.none() | TEXTS, collections=st.none() | NAMES, limit=st.none() | LIMITS)
@settings(max_examples=examples(60, 600), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_search_refuses_and_accepts_alike_over_rest_and_mcp(
        agent: Agent, text: str | None, collections: list[str] | None,
        limit: int | None) -> None:
    query: dict[str, str] = {}
    arguments: dict[str, Any] = {}
    if text is not None:
        query["q"], arguments["query"] = text, text
    if collections is not None:
        arguments["collections"] = collections
        if collections:  # an empty list is all collections, as leaving it out is
            query["collections"] = ",".join(collections)
    if limit is not None:
        query["limit"], arguments["limit"] = str(limit), limit
    rest = agent.rest("/api/search?" + urlencode(query))
    tool = agent.tool("search", arguments)
    _agree(rest, tool, ("q", "query"))
    if rest[0] == 200:
        assert tool["structuredContent"]["items"] == rest[1]["items"]


IDS = st.one_of(st.sampled_from([KNOTWEED, KNOTWEED.upper(), PARTNER_SURVEY,
                                 "33333333-3333-4333-8333-333333333333", "knotweed", ""]),
                st.text(alphabet="0123456789abcdef-", max_size=40))


@pytest.mark.slow
@given(record_id=st.none() | IDS, limit=st.none() | LIMITS)
@settings(max_examples=examples(60, 600), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_reads_refuse_and_accept_alike_over_rest_and_mcp(
        agent: Agent, record_id: str | None, limit: int | None) -> None:
    arguments: dict[str, Any] = {}
    if limit is not None:
        arguments["limit"] = limit
    if record_id is not None:
        arguments["id"] = record_id
    tool = agent.tool("get_species", arguments)
    if record_id is not None and not tool["isError"]:
        rest = agent.rest(f"/api/species/{quote(record_id, safe='')}")
        assert tool["structuredContent"]["items"] == [rest[1]]
    if record_id is None or limit is None:  # REST reads one record, or a page, not both
        path = "/api/species" + (f"?limit={limit}" if limit is not None else "") \
            if record_id is None else f"/api/species/{quote(record_id, safe='')}"
        _agree(agent.rest(path), tool)


@given(value=st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.text(),
                       st.none(), st.lists(st.integers(), max_size=2)))
def test_a_json_value_is_refused_or_kept_as_its_schema_says(value: Any) -> None:
    """A field takes a JSON value exactly when its JSON Schema does (3.0 is an integer)."""
    limit = next(f for f in BY_NAME["ask"].body_fields if f.name == "limit")
    schema = json_schema(limit)
    valid = (isinstance(value, (int, float)) and not isinstance(value, bool)
             and float(value).is_integer() and schema["minimum"] <= value <= schema["maximum"])
    try:
        taken = from_json((limit,), {"limit": value})["limit"]
    except InputError as exc:
        assert not valid and str(exc).startswith("limit must be"), exc
    else:
        assert valid and taken == value and type(taken) is int


def test_an_empty_cursor_is_refused_as_the_document_says() -> None:
    """The cursor's schema has a pattern; an empty value does not match it, so it is 400."""
    changes = BY_NAME["changes"]
    with pytest.raises(InputError, match="cursor is not one this node gave"):
        from_query(changes.params, MultiDict(since="2026-01-01T00:00:00Z", cursor=""))


def test_every_path_segment_and_tool_argument_is_a_field_of_the_table() -> None:
    """Each row names the segments of its path, in order; each tool's arguments are fields
    of a row, printed as that row's JSON Schema."""
    for endpoint in ENDPOINTS:
        assert re.findall(r"\{(\w+)\}", endpoint.path) == [f.name for f in endpoint.segments]
    for tool in TOOLS.values():
        listed = tool.listing()["inputSchema"]
        for field in tool.arguments:
            printed = dict(listed["properties"][field.name])
            printed.pop("description")
            assert printed == json_schema(field)


def test_the_openapi_document_prints_the_same_fields(agent: Agent) -> None:
    status, document = agent.rest("/api/openapi.json")
    assert status == 200
    for endpoint in ENDPOINTS:
        operation = document["paths"][endpoint.path][endpoint.method.lower()]
        printed = {p["name"]: p["schema"] for p in operation["parameters"]}
        for field in endpoint.fields:
            if field.where != "body" and field.synonym_of is None:
                assert printed[field.name] == json_schema(field, "query"), field
        if endpoint.body_fields:
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            assert body["properties"] == {f.name: json_schema(f) for f in endpoint.body_fields}
