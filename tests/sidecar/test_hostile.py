"""The sidecar against hostile and careless clients: never a 5xx, a traceback or a hang;
always the contract's JSON error with X-Node-Access; never a restricted record."""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from builders import ServerThread, app_for, examples, issue_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.contract.bundle import RECORDS, read_records, records_of
from exporter.contract.wire import decode
from sidecar.mcp import HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_VERSION

CODES = {400: "invalid_parameter", 401: {"api_key_required", "invalid_api_key"},
         403: "insufficient_scope", 404: "not_found", 405: "method_not_allowed",
         413: "payload_too_large", 415: "unsupported_media_type", 429: "rate_limited"}


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory, sample_root: Path) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "node"
    shutil.copytree(sample_root, root, symlinks=True)
    return root


@pytest.fixture(scope="module")
def restricted(hostile_root: Path) -> list[str]:
    """The ids of the sample's restricted records (their titles may be named by public
    records: a public germination trial of a restricted species names the species)."""
    table = records_of(read_records(hostile_root / ".fednode" / "bundle" / RECORDS))
    rows = [row["id"] for row in table.select(["id", "access"]).to_pylist()
            if row["access"] != "public"]
    assert len(rows) == 10
    return rows


@pytest.fixture(scope="module")
def server(hostile_root: Path) -> Iterator[ServerThread]:
    with ServerThread(app_for(hostile_root, anonymous_rate=0)) as running:
        yield running


@pytest.fixture(scope="module")
def ungranted(hostile_root: Path) -> str:
    token, _ = issue_key(hostile_root, "ungranted")
    return token


def request(server: ServerThread, method: str, target: str, headers: dict[str, str],
            body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    port = int(server.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value.encode("latin-1"))
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def raw(server: ServerThread, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are, reading the answer while sending (the server answers and
    closes before it reads a huge request to the end); parse the answer by hand."""
    port = int(server.url.rsplit(":", 1)[1])
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sender = threading.Thread(target=_send, args=(sock, data), daemon=True)
        sender.start()
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass  # the server closed with the rest of a huge request unread
        sender.join(30)
    head, _, body = received.partition(b"\r\n\r\n")
    status, headers = _head(head)
    return int(status.split()[1]), headers, body[:int(headers["Content-Length"])]


def _head(head: bytes) -> tuple[str, dict[str, str]]:
    """An answer's status line and headers, parsed by hand."""
    lines = head.decode("latin-1").split("\r\n")
    return lines[0], dict(line.split(": ", 1) for line in lines[1:])


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass


def follows_contract(status: int, headers: Any, body: bytes, where: str) -> None:
    assert status < 500, (where, body[:300])
    assert headers.get("X-Node-Access") is not None, where
    if status >= 400 and not where.startswith("HEAD"):
        error = json.loads(body)["error"]
        expected = CODES[status]
        assert error["code"] in (expected if isinstance(expected, set) else {expected}), where
        assert error["message"], where


PATHS = ["/api/manifest", "/api/schema", "/api/species", "/api/team", "/api/germination",
         "/api/species/{id}", "/api/changes", "/api/keys/me", "/api/search",
         "/api/sync/changes.ndjson", "/api/sync/species/{n}.ndjson", "/api/{word}",
         "/api/{word}/{word}", "/", "/api/mcp", "/api/library/ask", "/api/openapi.json",
         "/library/{file}", "/api/taxa/{word}", "/api/taxa/{id}",
         # pages for people and downloads
         "/{word}/", "/{word}/{n}.html", "/{word}/{word}/{id}.html", "/sitemap.xml",
         "/sitemaps/{n}.xml", "/robots.txt", "/site.css", "/download/species-dwca.zip",
         "/download/{word}.csv"]
PARAMS = ["limit", "offset", "updated_since", "since", "cursor", "q", "query", "collections",
          "mode", "nodes", "limt"]
odd_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
numbers = st.one_of(st.integers(-2**70, 2**70).map(str),
                    st.sampled_from(["1_0", "+5", " 5", "５", "٥", "1e3", "0x10", "", "¹"]))
times = st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
                         "9999-12-31T23:59:59.5Z", "2026-02-30T00:00:00Z", "2026-01-01",
                         "1970-01-01T00:00:00Z", "2026-01-01T00:00:00.999999999Z"])
values = st.one_of(numbers, times, odd_text)


@st.composite
def targets(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from(PATHS)).format(
        id=draw(st.sampled_from(["x", "00000000-0000-4000-8000-000000000000", "%C2%B2"])),
        n=draw(st.sampled_from(["0", "10000", "%C2%B2", str(2**64), "-1", "00"])),
        word=draw(st.sampled_from(["species", "Species", "%2e%2e", "%00", "..", "a%0Ab"])),
        file=draw(st.sampled_from(["x", "00000000-0000-4000-8000-000000000000.pdf", "%00.pdf",
                                   "..%2Fkeys.json", "E312FD28-7DC8-45BB-BD5A-C64D8125E7DE.pdf"])))
    pairs = draw(st.lists(st.tuples(st.sampled_from(PARAMS), values), max_size=4))
    from urllib.parse import quote
    query = "&".join(f"{name}={quote(value, safe='')}" for name, value in pairs)
    return path + ("?" + query if query else "")


header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xff,
                                      blacklist_characters="\x7f"), max_size=40)


@settings(max_examples=examples(100, 300), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(["GET", "GET", "POST", "HEAD", "OPTIONS", "PUT"]),
       target=targets(),
       key=st.sampled_from(["none", "ungranted", "garbage", "twice"]),
       extra=st.dictionaries(st.sampled_from(["Authorization", "X-API-Key", "Content-Type",
                                               "If-None-Match", "Accept", "Mcp-Method"]),
                             header_values, max_size=2),
       body=st.one_of(st.none(), st.binary(max_size=64),
                      st.recursive(st.none() | st.booleans() | st.integers() | odd_text,
                                   lambda inner: st.lists(inner) | st.dictionaries(odd_text,
                                                                                   inner),
                                   max_leaves=10).map(lambda v: json.dumps(v).encode())))
def test_fuzz_never_5xx_always_the_contract_never_restricted(
        server: ServerThread, ungranted: str, restricted: list[str], method: str, target: str,
        key: str, extra: dict[str, str], body: bytes | None) -> None:
    headers = dict(extra)
    if key == "ungranted":
        headers["X-API-Key"] = ungranted
    elif key == "garbage":
        headers["Authorization"] = "Bearer tok\xe9n"
    status, answer_headers, answer = request(server, method, target, headers,
                                             body if method == "POST" else None)
    where = f"{method} {target} {headers}"
    follows_contract(status, answer_headers, answer, where)
    text = answer.decode("utf-8", "replace")
    for needle in restricted:
        assert needle not in text, where


# Text that may hold halves of surrogate pairs: JSON can escape them (\\ud800), though they
# are no characters and UTF-8 cannot hold them.
halves = st.lists(st.one_of(odd_text, st.integers(0xD800, 0xDFFF).map(chr)), min_size=1,
                  max_size=4).map("".join).filter(lambda text: not text.isprintable()
                                                  or any("\ud800" <= c <= "\udfff"
                                                         for c in text))


@settings(max_examples=examples(50, 150), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(text=halves, where=st.sampled_from(["question", "seed query", "rpc query", "rpc id",
                                           "member name"]))
def test_a_body_holding_half_a_surrogate_pair_is_refused_whole(
        server: ServerThread, ungranted: str, text: str, where: str) -> None:
    """Never a 500: a string the body escapes as half a surrogate pair, wherever it stands,
    is 400 invalid_parameter (for JSON-RPC, a parse error), as is a member named twice."""
    path, body = {
        "question": ("/api/library/ask", {"question": f"knotweed {text}"}),
        "seed query": ("/api/mcp", {"method": "tools/call", "params": {
            "name": "search", "arguments": {"query": f"knotweed {text}"}}}),
        "rpc query": ("/api/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": f"knotweed {text}"}}}),
        "rpc id": ("/api/mcp", {"jsonrpc": "2.0", "id": text, "method": "ping"}),
        "member name": ("/api/library/ask", {"question": "knotweed", text: 1}),
    }[where]
    raw_body = json.dumps(body).encode()  # ASCII: every half escaped as \\udxxx
    headers = {"X-API-Key": ungranted, "Content-Type": "application/json"}
    status, answer_headers, answer = request(server, "POST", path, headers, raw_body)
    # (a high half then a low one is escaped as a pair: one character, read as such)
    has_half = any("\ud800" <= c <= "\udfff" for c in json.loads(json.dumps(text)))
    if path == "/api/mcp":  # JSON-RPC's errors, in its own form
        assert status < 500 and answer_headers.get("X-Node-Access"), answer
        if has_half:
            assert status == 400 and json.loads(answer)["error"]["code"] == -32700, answer
        else:
            assert status == 200, answer
    else:
        follows_contract(status, answer_headers, answer, f"POST {path} {raw_body!r}")
        if has_half:
            assert status == 400 and b"lone surrogate" in answer, answer
    twice = raw_body.replace(b'{"question"', b'{"question": "x", "question"', 1)
    if where == "question":
        status, _, answer = request(server, "POST", path, headers, twice)
        assert status == 400 and b"appears twice" in answer, answer


@pytest.mark.parametrize("data, refused", [
    (b'{"a":"\\ud800"}', True), ('{"a":"\\udfff"}', True),
    (b'{"a":"\xed\xa0\x80"}', True),  # encoded as UTF-8 bytes, no escape
    ('{"a":"\ud800"}', True),  # already in the text
    (b'{"a":"ok\xc3\xa9"}', False), (b'\xef\xbb\xbf{"a":"x"}', False),
    ('{"a":"\\ud83d\\ude00"}', False), ('{"a":"\\\\ud800"}', False)])
def test_half_a_surrogate_pair_is_refused_however_it_is_written(data: bytes | str,
                                                                 refused: bool) -> None:
    """wire.decode, which every request body and every message a hub reads goes through."""
    if refused:
        with pytest.raises(ValueError, match="lone surrogate"):
            decode(data)
    else:
        decode(data)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_json_not_in_utf8_is_refused(encoding: str) -> None:
    """I-JSON is UTF-8: a body or a message in UTF-16 or UTF-32, which Python's reader would
    take, is refused, saying so."""
    with pytest.raises(ValueError, match="not UTF-8: send it as UTF-8"):
        decode('{"question":"knotweed"}'.encode(encoding))


@pytest.mark.parametrize("target, status", [
    ("/api/species?offset=18446744073709551616", 400),
    ("/api/species?offset=9223372036854775807", 200),
    ("/api/species?limit=99999999999999999999999", 400),
    ("/api/species?updated_since=0001-01-01T00:00:00%2B01:00", 400),
    ("/api/species?updated_since=9999-12-31T23:59:59-01:00", 400),
    # within the last second there is: rounded up, after every record (an empty page)
    ("/api/species?updated_since=9999-12-31T23:59:59.5Z", 200),
    # RFC 3339 only: not ISO 8601's other forms, nor spaces or a line break around it
    ("/api/species?updated_since=2026-01-01T00:00:00%2B0100", 400),
    ("/api/species?updated_since=2026-01-01T00:00:00%2B01", 400),
    ("/api/species?updated_since=2026-01-01T00:00:00,5Z", 400),
    ("/api/species?updated_since=%202026-01-01T00:00:00Z", 400),
    ("/api/species?updated_since=2026-01-01T00:00:00Z%0A", 400),
    ("/api/species?updated_since=2026-01-01T00:00:00%2B01:00:30", 400),
    ("/api/species?updated_since=2026-01-01T00:00:00.1234567891Z", 200),
    ("/api/species?updated_since=2026-01-01t00:00:00%2B01:00", 200),
    ("/api/sync/species/%C2%B2.ndjson", 404),
    ("/api/sync/species/18446744073709551616.ndjson", 404),
    ("/api/sync/species/90000000000000000000.ndjson", 404),
    ("/api/species?limit=1_0", 400), ("/api/species?limit=%2B5", 400),
    ("/api/species?limit=%205", 400), ("/api/species?limit=%EF%BC%95", 400),
    ("/api/species?limit=%D9%A5", 400),
])
def test_numbers_and_times_at_the_edges(server: ServerThread, target: str, status: int) -> None:
    got, headers, body = request(server, "GET", target, {})
    assert got == status, body
    follows_contract(got, headers, body, target)


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00%2B01:00", "9999-12-31T23:59:59-01:00",
                                   "10000-01-01T00:00:00Z"])
def test_changes_since_at_the_edges(server: ServerThread, ungranted: str, since: str) -> None:
    got, headers, body = request(server, "GET", f"/api/changes?since={since}",
                                 {"X-API-Key": ungranted})
    assert got == 400 and json.loads(body)["error"]["code"] == "invalid_parameter"
    for cursor in ("18446744073709551616", "%E2%80%8B", "MjAyNi0wMS0wMVQwMDowMDowMFp8c3B8eA"):
        got, headers, body = request(
            server, "GET", f"/api/changes?since=2020-01-01T00:00:00Z&cursor={cursor}",
            {"X-API-Key": ungranted})
        assert got == 400, body


def test_a_key_that_is_not_ascii_is_invalid(server: ServerThread) -> None:
    got, headers, body = request(server, "GET", "/api/manifest", {"X-API-Key": "tok\xe9n"})
    assert got == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"


def test_two_different_keys_in_one_header_name_are_refused(server: ServerThread,
                                                           ungranted: str) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    for name in ("Authorization", "X-API-Key"):
        prefix = "Bearer " if name == "Authorization" else ""
        data = (f"GET /api/species HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"{name}: {prefix}{ungranted}\r\n{name}: {prefix}other.key.here\r\n"
                f"Connection: close\r\n\r\n").encode()
        status, headers, body = raw(server, data)
        assert status == 401
        assert "different" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize("data, status", [
    (b"GET /api/species?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET /api/species HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 400),
    (b"GET /api/species HTTP/1.1\r\nHost: x\r\nX-API-Key: " + b"k" * 1_000_000 + b"\r\n\r\n",
     400),
    (b"get /api/species HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"BREW /api/species HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n", 405),  # not a method token
    (b"GET /api/species HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 405),  # TLS to the HTTP port
])
def test_unparseable_requests_get_the_contract(server: ServerThread, data: bytes,
                                               status: int) -> None:
    got, headers, body = raw(server, data)
    assert got == status, body
    assert headers["X-Node-Access"] == "open"
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]["code"] in ("invalid_parameter", "method_not_allowed")


async def test_bad_keys_count_against_the_address(hostile_root: Path,
                                                  aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(hostile_root, anonymous_rate=3))
    statuses = [(await client.get("/api/species", headers={"X-API-Key": f"bad.key.{n}"})).status
                for n in range(5)]
    assert statuses == [401, 401, 401, 429, 429]
    limited = await client.get("/api/species", headers={"X-API-Key": "bad.key.x"})
    assert (await limited.json())["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


async def test_rotating_the_secret_revokes_every_key_at_the_next_request(
        tmp_path: Path, hostile_root: Path, aiohttp_client: Callable[..., Any]) -> None:
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    token, _ = issue_key(root, "soon-gone")
    client: TestClient = await aiohttp_client(app_for(root))
    assert (await client.get("/api/keys/me", headers={"X-API-Key": token})).status == 200
    secret = root / ".fednode" / "secret"
    replacement = root / ".fednode" / "secret.new"
    replacement.write_text(os.urandom(32).hex() + "\n")
    os.replace(replacement, secret)  # the operator's rotation: a new secret file
    response = await client.get("/api/keys/me", headers={"X-API-Key": token})
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid_api_key"


async def test_a_damaged_key_registry_refuses_keys_and_says_so(
        tmp_path: Path, hostile_root: Path, aiohttp_client: Callable[..., Any],
        caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    token, _ = issue_key(root, "registry")
    client: TestClient = await aiohttp_client(app_for(root))
    (root / ".fednode" / "keys.json").write_text('{"keys": [{"id": 3}]}')
    response = await client.get("/api/species", headers={"X-API-Key": token})
    assert response.status == 503
    assert "key registry" in (await response.json())["error"]["message"]
    assert "keys.json: damaged" in caplog.text
    assert (await client.get("/api/species")).status == 200  # open reads go on


@pytest.mark.parametrize("edit", [{"rate": 0}, {"rate": -1}, {"rate": True},
                                  {"scopes": [1]}, {"groups": [None]}, {"collections": [1]},
                                  {"expires_at": "next week"}])
async def test_a_hand_edited_key_of_the_wrong_form_is_a_damaged_registry(
        edit: dict[str, Any], tmp_path: Path, hostile_root: Path,
        aiohttp_client: Callable[..., Any]) -> None:
    """A key in keys.json of a form `fednode keys create` never makes is a damaged registry
    (503, every key refused, the log says why): a rate of 0 lifted the key's limit, and
    the others failed each request with a 500."""
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    token, _ = issue_key(root, "edited")
    registry = root / ".fednode" / "keys.json"
    data = json.loads(registry.read_text())
    data["keys"][-1].update(edit)
    registry.write_text(json.dumps(data))
    client: TestClient = await aiohttp_client(app_for(root))
    response = await client.get("/api/species", headers={"X-API-Key": token})
    assert response.status == 503, edit
    assert (await response.json())["error"]["code"] == "unavailable"


async def test_a_revocation_through_a_linked_registry_takes_effect(
        tmp_path: Path, hostile_root: Path, aiohttp_client: Callable[..., Any]) -> None:
    """keys.json kept elsewhere and linked into .fednode/: a revocation written at the
    link's target is seen at the next request (the folder's watch sees no change there, so
    a link is looked at on every request), so the revoked key stops working."""
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    token, record = issue_key(root, "linked")
    registry = root / ".fednode" / "keys.json"
    elsewhere = tmp_path / "shared" / "keys.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(registry.read_text())
    registry.unlink()
    registry.symlink_to(elsewhere)
    client: TestClient = await aiohttp_client(app_for(root))
    assert (await client.get("/api/keys/me", headers={"X-API-Key": token})).status == 200
    data = json.loads(elsewhere.read_text())
    for key in data["keys"]:
        if key["id"] == record.id:
            key["revoked_at"] = "2026-01-01T00:00:00Z"
    elsewhere.write_text(json.dumps(data))
    response = await client.get("/api/keys/me", headers={"X-API-Key": token})
    assert response.status == 401


async def test_a_key_from_a_clock_ahead_is_refused_saying_so(
        tmp_path: Path, hostile_root: Path, aiohttp_client: Callable[..., Any]) -> None:
    """A key issued on a machine whose clock runs ahead: a minute's difference is allowed;
    beyond it, the refusal says that the clocks disagree (it said the key was forged)."""
    from datetime import UTC, datetime, timedelta

    from exporter.project.config import Project, load_node_config
    from sidecar import keys as keyring
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    issue_key(root, "first")  # the secret
    project = Project(root)
    secret, _ = keyring.load_secret(project.private)
    registry = keyring.Registry.load(project.private / "keys.json")
    node_id = load_node_config(project).id
    client: TestClient = await aiohttp_client(app_for(root))
    for ahead, status in ((timedelta(seconds=30), 200), (timedelta(minutes=10), 401)):
        assert secret is not None
        token, _ = keyring.issue(registry, secret, node_id, name=f"ahead {ahead}",
                                 scopes=list(keyring.SCOPES), collections=[], groups=[],
                                 rate=1000, expires=None, now=datetime.now(UTC) + ahead)
        response = await client.get("/api/keys/me", headers={"X-API-Key": token})
        assert response.status == status, ahead
        if status == 401:
            assert "dated after this node's clock" in (await response.json())["error"]["message"]


async def test_a_short_secret_file_refuses_every_key(
        tmp_path: Path, hostile_root: Path, aiohttp_client: Callable[..., Any]) -> None:
    root = tmp_path / "node"
    shutil.copytree(hostile_root, root, symlinks=True)
    token, _ = issue_key(root, "short")
    (root / ".fednode" / "secret").write_text("abc\n")
    client: TestClient = await aiohttp_client(app_for(root))
    response = await client.get("/api/keys/me", headers={"X-API-Key": token})
    assert response.status == 503


async def test_the_access_log_writes_the_raw_path_escaped(
        hostile_root: Path, aiohttp_client: Callable[..., Any],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fednode.access")
    client: TestClient = await aiohttp_client(app_for(hostile_root))
    await client.get("/api/species%0A127.0.0.1%20GET%20/forged%20200")
    lines = [r.getMessage() for r in caplog.records if r.name == "fednode.access"]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("GET /api/species%0A127.0.0.1%20GET%20/forged%20200 404 open")


def test_a_group_name_cannot_widen_what_a_key_sees(hostile_root: Path, server: ServerThread,
                                                   restricted: list[str]) -> None:
    """Groups go into the visibility rule as quoted SQL literals."""
    token, _ = issue_key(hostile_root, "sly", groups=["x'] OR true OR list_contains(['",
                                                      "a'), ('b"])
    for collection in ("species", "resources", "treatments", "germination", "team"):
        status, _, body = request(server, "GET", f"/api/{collection}?limit=200",
                                  {"X-API-Key": token})
        assert status == 200
        assert not any(needle in body.decode() for needle in restricted)
    status, _, body = request(server, "GET", "/api/changes?since=1970-01-01T00:00:00Z&limit=1000",
                              {"X-API-Key": token})
    assert status == 200 and not any(needle in body.decode() for needle in restricted)


class Connection:
    """One raw HTTP/1.1 connection, read answer by answer: bytes after an answer are kept
    for the next, so a second `100 Continue` sent with the first is not lost."""

    def __init__(self, server: ServerThread) -> None:
        port = int(server.url.rsplit(":", 1)[1])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buffer = b""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> tuple[str, dict[str, str], bytes]:
        """The next answer: status line, headers and body (by Content-Length)."""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status, headers = _head(head)
        size = int(headers.get("Content-Length", 0))
        while len(self.buffer) < size:
            self.buffer += self._recv()
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return status, headers, body

    def nothing_more(self, seconds: float = 0.3) -> bool:
        """Whether nothing else arrives within `seconds`."""
        if self.buffer:
            return False
        self.sock.settimeout(seconds)
        try:
            return not self.sock.recv(65536)  # closed: nothing more either
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(30)

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk


@pytest.fixture(scope="module")
def plain_server(hostile_root: Path) -> Iterator[ServerThread]:
    """The same application served by aiohttp's plain AppRunner (as `web.run_app` or
    gunicorn's aiohttp worker would), through its one catch-all route."""
    with ServerThread(app_for(hostile_root, anonymous_rate=0), runner=web.AppRunner) as running:
        yield running


def test_a_plain_runner_answers_as_the_node_runner_does(
        server: ServerThread, plain_server: ServerThread, ungranted: str,
        restricted: list[str]) -> None:
    for target, headers in (("/api/manifest", {}), (f"/api/species/{restricted[0]}", {}),
                            (f"/api/species/{restricted[0]}",
                             {"Authorization": f"Bearer {ungranted}"}),
                            ("/api/species?limit=2", {"Authorization": "Bearer nope"}),
                            ("/api/nowhere", {}), ("/api/search?q=knotweed&limit=99", {})):
        ours = request(server, "GET", target, headers)
        plain = request(plain_server, "GET", target, headers)
        assert (ours[0], ours[2]) == (plain[0], plain[2]), target
        for name in ("Content-Type", "X-Node-Access", "ETag", "Cache-Control", "Vary"):
            assert ours[1].get(name) == plain[1].get(name), (target, name)
    for method in ("DELETE", "PATCH"):
        assert request(server, method, "/api/manifest", {})[:1] == \
            request(plain_server, method, "/api/manifest", {})[:1] == (405,)


@pytest.fixture(params=["server", "plain_server"])
def either_server(request: pytest.FixtureRequest) -> ServerThread:
    """The application served by NodeRunner, then by a plain AppRunner."""
    served: ServerThread = request.getfixturevalue(request.param)
    return served


def test_expect_100_continue_is_met_once_the_caller_is_admitted(
        either_server: ServerThread, ungranted: str) -> None:
    """A client that waits for `100 Continue` before sending its body gets it once, when the
    body is about to be read (its key good, its path an endpoint, its type and declared size
    acceptable), and then the answer. A request refused before that is answered at once,
    with no 100 first: no key, no endpoint, the wrong type. A GET has no body to wait for.
    Any other expectation is 400 `invalid_parameter` (HTTP/1.0 ignores Expect). The same
    whichever runner serves the application."""
    body = json.dumps({"question": "How deep should knotweed be dug out?"}).encode()
    key = f"Authorization: Bearer {ungranted}\r\n"

    def post(path: str, expect: str, *headers: str, kind: str = "application/json") -> bytes:
        return (f"POST {path} HTTP/1.1\r\nHost: node\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nExpect: {expect}\r\n"
                + "".join(headers) + "\r\n").encode()

    for expect in ("100-continue", "100-Continue"):
        with Connection(either_server) as connection:
            connection.send(post("/api/library/ask", expect, key))
            status, _, interim = connection.answer()
            assert (status, interim) == ("HTTP/1.1 100 Continue", b"")
            assert connection.nothing_more()  # one 100, and nothing until the body comes
            connection.send(body)
            status, headers, answer = connection.answer()
            assert status.startswith("HTTP/1.1 200"), answer[:300]
            assert json.loads(answer)["question"] == "How deep should knotweed be dug out?"
            assert headers["X-Node-Access"] != "open"
    for path, headers, code in (("/api/library/ask", (), "api_key_required"),
                                ("/api/library/nowhere/x", (key,), "not_found"),
                                ("/api/nowhere", (key,), "method_not_allowed"),
                                ("/api/library/ask", (key,), "unsupported_media_type")):
        kind = "text/plain" if code == "unsupported_media_type" else "application/json"
        with Connection(either_server) as connection:
            connection.send(post(path, "100-continue", *headers, kind=kind))
            status, _, answer = connection.answer()  # at once: no 100 first
            assert json.loads(answer)["error"]["code"] == code, (path, status)
            connection.send(body)  # as a client that stopped waiting would: read and dropped
    with Connection(either_server) as connection:
        connection.send(b"GET /api/manifest HTTP/1.1\r\nHost: node\r\n"
                        b"Expect: 100-continue\r\n\r\n")
        assert connection.answer()[0].startswith("HTTP/1.1 200")
        assert connection.nothing_more()
    with Connection(either_server) as connection:
        connection.send(post("/api/library/ask", "a-pony", key, "Connection: close\r\n") + body)
        status, headers, answer = connection.answer()
        assert status.startswith("HTTP/1.1 400") and headers["X-Node-Access"] != "open"
        error = json.loads(answer)["error"]
        assert error["code"] == "invalid_parameter" and "100-continue" in error["message"]
    with Connection(either_server) as connection:
        connection.send(b"GET /api/manifest HTTP/1.0\r\nExpect: a-pony\r\n\r\n")
        assert connection.answer()[0].split()[1] == "200"


def test_a_client_gone_while_waiting_to_continue_is_not_an_error(
        server: ServerThread, ungranted: str, caplog: pytest.LogCaptureFixture) -> None:
    """Clients that reset the connection right after asking for `100 Continue` leave no
    error or traceback in the log: a client going away is not the node failing. (As
    `fednode serve` runs: a plain AppRunner's connections log as aiohttp's do.)"""
    body = b'{"question": "How deep should knotweed be dug out?"}'
    caplog.set_level(logging.DEBUG)
    for _ in range(20):
        with Connection(server) as connection:
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))  # close with a reset
            connection.send((f"POST /api/library/ask HTTP/1.1\r\nHost: node\r\n"
                             f"Authorization: Bearer {ungranted}\r\nContent-Type: "
                             f"application/json\r\nContent-Length: {len(body)}\r\n"
                             f"Expect: 100-continue\r\n\r\n").encode())
    with Connection(server) as connection:  # and the node still answers
        connection.send(b"GET /api/manifest HTTP/1.1\r\nHost: node\r\n\r\n")
        assert connection.answer()[0].startswith("HTTP/1.1 200")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_compressed_body_is_refused_never_inflated(server: ServerThread,
                                                     ungranted: str) -> None:
    """A body is read as it was sent: one with a Content-Encoding is refused (415), never
    inflated. aiohttp inflated it on the event loop, whatever its size: 2 MB of gzip made
    2 GiB, stalling every caller for seconds, on any path and with no key."""
    import gzip
    body = gzip.compress(json.dumps({"question": "When is balsam pulled?"}).encode())
    for target in ("/api/library/ask", "/api/mcp"):
        status, _, answer = request(server, "POST", target, {
            "X-API-Key": ungranted, "Content-Type": "application/json",
            "Content-Encoding": "gzip"}, body)
        assert status == 415, (target, answer)
        assert json.loads(answer)["error"]["code"] == "unsupported_media_type"
        assert "without Content-Encoding" in json.loads(answer)["error"]["message"]
    # A body on a GET is never read, inflated or not: the answer is the plain one.
    bomb = gzip.compress(b"\0" * (64 * 2**20), compresslevel=1)
    status, _, answer = request(server, "GET", "/api/manifest",
                                {"Content-Encoding": "gzip"}, bomb)
    assert status == 200 and json.loads(answer)["node"]


@pytest.mark.slow
def test_a_body_that_stops_coming_is_a_400_not_a_wait(
        hostile_root: Path, ungranted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyed POST whose body stops arriving (a partial body; broken chunk framing sent
    after the headers) is answered 400 once the body's time is up: the handler does not
    wait for ever, with no answer and no log line."""
    from sidecar import params
    monkeypatch.setattr(params, "BODY_SECONDS", 1.0)
    with ServerThread(app_for(hostile_root, anonymous_rate=0)) as running:
        head = (f"POST /api/library/ask HTTP/1.1\r\nHost: x\r\nX-API-Key: {ungranted}\r\n"
                f"Content-Type: application/json\r\n").encode()
        for rest in (b"Content-Length: 100\r\n\r\n{", b"Transfer-Encoding: chunked\r\n\r\n"):
            with Connection(running) as connection:
                connection.send(head + rest)
                if b"chunked" in rest:
                    time.sleep(0.3)  # the handler is reading the body by now
                    connection.send(b"zz\r\nnot a chunk\r\n")
                status, _, body = connection.answer()
                assert status.split()[1] == "400", (status, body)
                assert "did not arrive within 1 s" in json.loads(body)["error"]["message"]


@pytest.mark.slow
def test_a_connection_without_a_whole_request_is_closed(
        hostile_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that sends nothing, or headers a byte at a time, is closed after the
    keep-alive time: aiohttp's default holds each for an hour, and a few hundred would use
    up the server's sockets."""
    from sidecar import app as sidecar_app
    monkeypatch.setattr(sidecar_app, "KEEPALIVE", 1.0)
    with ServerThread(app_for(hostile_root, anonymous_rate=0)) as running:
        for sent in (b"", b"GET /api/manifest HTTP/1.1\r\nHost: x\r\n"):
            with Connection(running) as connection:
                connection.send(sent)
                started = time.monotonic()
                connection.sock.settimeout(10)
                assert connection.sock.recv(65536) == b""  # closed by the server
                assert time.monotonic() - started < 5


def raw_request(server: ServerThread, method: str, target: str,
                headers: list[tuple[str, str]], body: bytes | None = None
                ) -> tuple[int, bytes]:
    """A request whose headers may repeat a name."""
    port = int(server.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def test_two_origin_headers_are_refused(server: ServerThread, ungranted: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    base = [("Content-Type", "application/json"), ("X-API-Key", ungranted)]
    own = "http://127.0.0.1:8000"
    assert raw_request(server, "POST", "/api/mcp", base, body)[0] == 200
    for origins in ([own, "https://evil.example.com"], ["https://evil.example.com", own],
                    [own, own]):
        status, answer = raw_request(server, "POST", "/api/mcp",
                                     base + [("Origin", o) for o in origins], body)
        assert status == 403, origins
        assert decode(answer)["error"]["code"] == "origin_not_allowed"
        assert "given 2 times" in decode(answer)["error"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize(("headers", "meta", "expected"), [
    ({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "notifications/cancelled"},
     MODERN_META, 202),
    ({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, MODERN_META, 400),
    ({"MCP-Protocol-Version": "2026-07-28"}, MODERN_META, 400),
    ({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "notifications/cancelled"},
     {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}, 400),
    ({"Mcp-Method": "notifications/cancelled"},
     {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}, 400),
    ({}, None, 202),  # a notification of the handshake revisions
])
def test_a_notification_passes_the_checks_a_request_of_its_revision_does(
        server: ServerThread, ungranted: str, headers: dict[str, str],
        meta: dict[str, Any] | None, expected: int) -> None:
    params: dict[str, Any] = {"requestId": 7}
    if meta is not None:
        params["_meta"] = meta
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": params}).encode()
    status, answer = raw_request(server, "POST", "/api/mcp", [
        ("Content-Type", "application/json"), ("X-API-Key", ungranted),
        *headers.items()], body)
    assert status == expected, answer
    if expected != 202:
        assert decode(answer)["error"]["code"] in (
            HEADER_MISMATCH, INVALID_REQUEST, INVALID_PARAMS, UNSUPPORTED_VERSION)


def test_a_key_is_taken_only_as_issued(server: ServerThread, ungranted: str) -> None:
    assert raw_request(server, "GET", "/api/changes?since=2026-01-01T00:00:00Z",
                       [("X-API-Key", ungranted)])[0] == 200
    head, payload, signature = ungranted.split(".")
    last = signature[-1]
    # The same bytes spelled another way: a letter whose unused low bits differ.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    spare = 6 - (len(signature) * 6 % 8) if len(signature) * 6 % 8 else 0
    twin = alphabet[alphabet.index(last) ^ 1] if spare else None
    variants = [ungranted + "=", ungranted + "==", f"{head}=.{payload}.{signature}",
                f"{head}.{payload}=.{signature}"]
    if twin is not None:
        variants.append(f"{head}.{payload}.{signature[:-1]}{twin}")
    for variant in variants:
        for header in ("X-API-Key", "Authorization"):
            value = variant if header == "X-API-Key" else f"Bearer {variant}"
            status, answer = raw_request(
                server, "GET", "/api/changes?since=2026-01-01T00:00:00Z", [(header, value)])
            assert status == 401, variant
            assert decode(answer)["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("digits", [4301, 5000, 20000])
def test_a_number_too_long_to_read_gets_the_fields_own_message(
        server: ServerThread, ungranted: str, digits: int) -> None:
    body = b'{"question": "How deep is the cane injected?", "limit": ' + b"9" * digits + b"}"
    status, answer = raw_request(server, "POST", "/api/library/ask", [
        ("Content-Type", "application/json"), ("X-API-Key", ungranted)], body)
    assert status == 400
    error = decode(answer)["error"]
    assert error["code"] == "invalid_parameter"
    assert error["message"] == (f"limit must be from 1 to 10, got a whole number of {digits} "
                                f"digits")
    assert "sys." not in error["message"]
    rpc = (b'{"jsonrpc": "2.0", "id": ' + b"1" * digits + b', "method": "tools/list"}')
    status, answer = raw_request(server, "POST", "/api/mcp", [
        ("Content-Type", "application/json"), ("X-API-Key", ungranted)], rpc)
    assert status == 400 and decode(answer)["error"]["code"] == -32600


def test_sync_paths_are_the_static_files_names(server: ServerThread,
                                               hostile_root: Path) -> None:
    assert (hostile_root / "site_out/api/sync/species/0.ndjson").is_file()
    assert raw_request(server, "GET", "/api/sync/species/0.ndjson", [])[0] == 200
    for other in ("00", "000", "+0", "0x0", "050"):
        assert not (hostile_root / f"site_out/api/sync/species/{other}.ndjson").exists()
        status, answer = raw_request(server, "GET", f"/api/sync/species/{other}.ndjson", [])
        assert status == 404, other
        assert decode(answer)["error"]["code"] == "not_found"


def test_updated_since_in_the_last_second_there_is(server: ServerThread) -> None:
    for since in ("9999-12-31T23:59:59.5Z", "9999-12-31T23:59:59.000001Z"):
        status, answer = raw_request(server, "GET",
                                     f"/api/species?updated_since={since}", [])
        assert status == 200, answer
        page = decode(answer)
        assert page["items"] == [] and page["total"] == 0 and page["next"] is None
    status, answer = raw_request(server, "GET",
                                 "/api/species?updated_since=9999-12-31T23:59:59Z", [])
    assert status == 200 and decode(answer)["total"] == 0


@pytest.mark.parametrize("charset", ["latin-1", "iso-8859-1", "utf-16", "ascii"])
def test_a_body_in_another_charset_is_refused(server: ServerThread, ungranted: str,
                                              charset: str) -> None:
    body = json.dumps({"question": "Wie lange kühlen?"}).encode("utf-8")
    status, answer = raw_request(server, "POST", "/api/library/ask", [
        ("Content-Type", f"application/json; charset={charset}"), ("X-API-Key", ungranted)],
        body)
    assert status == 415, charset
    error = decode(answer)["error"]
    assert error["code"] == "unsupported_media_type" and "UTF-8" in error["message"]
    for declared in ("application/json; charset=utf-8", "application/json; charset=UTF-8",
                     "application/json"):
        status, _ = raw_request(server, "POST", "/api/library/ask", [
            ("Content-Type", declared), ("X-API-Key", ungranted)], body)
        assert status == 200, declared


@pytest.mark.parametrize("cursor", ["", "%20", "x"])
def test_a_cursor_must_be_one_the_node_gave(server: ServerThread, ungranted: str,
                                            cursor: str) -> None:
    """As the OpenAPI document's pattern for `cursor` says: an empty one is no cursor of the
    node's, not the same as none (schemathesis found it answered 200)."""
    status, answer = raw_request(server, "GET",
                                 f"/api/changes?since=2026-01-01T00:00:00Z&cursor={cursor}",
                                 [("X-API-Key", ungranted)])
    assert status == 400, answer
    error = decode(answer)["error"]
    assert error["code"] == "invalid_parameter" and "cursor" in error["message"]


@pytest.fixture(scope="module")
def sample_records(sample_root: Path) -> Any:
    from sidecar.store import Snapshot
    return Snapshot(sample_root / ".fednode" / "bundle").records


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(noise=st.text(max_size=50), cut=st.integers(0, 36))
def test_an_id_is_found_exactly_or_not_at_all(sample_records: Any, noise: str,
                                              cut: int) -> None:
    """Each record's id finds its row; a piece of one, one with more after it (a NUL, a
    lone surrogate, anything) or any other text finds none."""
    known = dict(sample_records.ids())
    assert known and all(sample_records.row(i) == row for i, row in known.items())
    some = sorted(known)[cut % len(known)]
    for text in (some[:cut], some + noise, noise, some + "\0", some + "\ud800"):
        assert sample_records.row(text) == known.get(text)
