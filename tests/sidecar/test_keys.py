"""Keys, scopes, restricted grants and rate limits, through the real server."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp.test_utils import TestClient
from builders import NODE_ID, Node, app_for, issue_key, make_pdf, record_text, species, team
from click.testing import CliRunner

from cli.main import main
from exporter.contract.endpoints import ENDPOINTS, Endpoint
from exporter.contract.layout import shard
from exporter.contract.page_urls import href_of
from exporter.pipeline.build import BuildReport
from sidecar import keys as keyring
from sidecar.watch import FolderWatch

SECRET_TEXT = "WOMBAT-SECRET-PHONE-TREE"


@dataclass
class KeyedNode:
    root: Path
    hidden: dict[str, Any]
    public: dict[str, Any]
    plant: dict[str, Any]
    tokens: dict[str, str]
    ids: dict[str, str]


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.fixture
def keyed(node: Node, export: Callable[..., BuildReport]) -> KeyedNode:
    hidden = team("Hidden Person", access="partners")
    public = team("Open Person")
    plant = species("Fallopia japonica")
    node.write("team", "hidden", hidden, f"Reach them through the {SECRET_TEXT}.")
    node.write("team", "open", public)
    node.write("species", "knotweed", plant)
    make_pdf(node.root / "content" / "library" / "secret.pdf", [f"The {SECRET_TEXT}."])
    (node.root / "content" / "library" / "secret.md").write_text(record_text(
        {"id": LIBRARY_DOC, "title": "Partner notes", "kind": "document",
         "summary": "Notes for partner teams.", "access": "partners"}))
    export(node.root)
    tokens, ids = {}, {}
    for state, grants in {
        "granted": {"groups": ["partners"]},
        "ungranted": {},
        "scope_limited": {"scopes": ["search"], "groups": ["partners"]},
        "collection_limited": {"collections": ["species"], "groups": ["partners"]},
        "expired": {"expires": (datetime.now(UTC) + timedelta(seconds=2)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")},
        "revoked": {"groups": ["partners"]},
    }.items():
        tokens[state], record = issue_key(node.root, state, rate=1000, **grants)
        ids[state] = record.id
    registry = keyring.Registry.load(node.root / ".fednode" / "keys.json")
    registry.revoke(ids["revoked"], datetime.now(UTC))
    secret = (node.root / ".fednode" / "secret").read_text().strip().encode()
    now = int(datetime.now(UTC).timestamp())
    claims = {"iss": NODE_ID, "aud": NODE_ID, "jti": ids["granted"], "iat": now}
    tokens["malformed"] = "not.a.key"
    tokens["forged"] = jwt.encode(claims, "another-secret-of-at-least-32-bytes!", "HS256")
    tokens["alg_none"] = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}."
    other = dict(claims, iss="11111111-0000-4000-8000-000000000001",
                 aud="11111111-0000-4000-8000-000000000001")
    tokens["other_node"] = jwt.encode(other, secret, "HS256")
    tokens["unknown"] = jwt.encode(dict(claims, jti="k_000000000000"), secret, "HS256")
    return KeyedNode(node.root, hidden, public, plant, tokens, ids)


INVALID = ("malformed", "forged", "alg_none", "other_node", "unknown", "expired", "revoked")
# What each valid caller state holds (see the `keyed` fixture).
SCOPES_OF = {"granted": keyring.SCOPES, "ungranted": keyring.SCOPES,
             "scope_limited": ("search",), "collection_limited": keyring.SCOPES}
COLLECTIONS_OF = {"collection_limited": ("species",)}


LIBRARY_DOC = "44444444-4444-4444-8444-444444444444"  # a PDF in the partners group


def requests_for(endpoint: Endpoint, hidden_id: str) -> list[tuple[str, str]]:
    """Concrete requests for a row of the endpoint table: (collection it names, URL)."""
    if endpoint.name == "library_file":
        return [("resources", f"/library/{LIBRARY_DOC}.pdf")]
    if endpoint.name == "dwca":
        return [("species", endpoint.path)]
    if endpoint.path == "/api/{collection}":
        return [("team", "/api/team"), ("species", "/api/species")]
    if endpoint.page and endpoint.name != "index":  # the hidden record's page; page 2; the
        # public plant's taxon
        return [("", href_of(endpoint.name, {"collection": "team", "page": "2", "id": hidden_id,
                                             "shard": shard(hidden_id),
                                             "name": "Fallopia japonica"}))]
    url = endpoint.path.format(collection="team", id=hidden_id, offset="0",
                               name="Fallopia%20japonica")
    if endpoint.name == "search":  # names the collection in its query
        return [("team", url + "?q=knotweed&collections=team"), ("", url + "?q=knotweed")]
    extra = {"changes": "?since=2020-01-01T00:00:00Z"}
    return [("team" if "{collection}" in endpoint.path else "", url + extra.get(endpoint.name,
                                                                                ""))]


# What the seed and DESIGN.md promise of each endpoint, written out here rather than read
# from the endpoint table, so that a wrong row fails: whether a key is required, the scope a
# key needs, and how a key's collection limits apply (to the collection the request names,
# in its path or its query, or the answer covers every collection).
PROMISES: dict[str, tuple[bool, str | None, str | None]] = {
    "index": (False, None, None), "manifest": (False, None, None),
    "schema": (False, None, None), "openapi": (False, None, None), "key": (True, None, None),
    "changes": (True, "changes", None), "sync_changes": (False, "read", "all"),
    "sync_snapshot": (False, "read", "path"), "search": (False, "search", "path"),
    "mcp": (True, "mcp", None), "ask": (True, "library", "all"),
    "library_file": (False, "read", "path"),
    "dwca": (False, "read", "path"), "download": (False, "read", "path"),
    "list": (False, "read", "path"), "record": (False, "read", "path"),
    # A taxon's records: those of the collections the key may read, none named in the path.
    "taxon": (False, "read", None),
    # Pages for people show public records only, alike for every caller.
    **{name: (False, None, None) for name in ("sitemap", "sitemap_part", "robots", "stylesheet",
                                              "collection_page", "collection_page_n",
                                              "record_page", "search_page", "library_page",
                                              "taxa_page", "taxon_page")},
}
NOT_OFFERED_YET: set[str] = set()


def test_every_endpoint_has_a_promise() -> None:
    assert set(PROMISES) == {e.name for e in ENDPOINTS}


def expected(endpoint: Endpoint, collection: str, state: str) -> tuple[int, str | None]:
    """The status and error code each endpoint owes each kind of caller."""
    key_required, scope, limits_apply = PROMISES[endpoint.name]
    if state in INVALID:
        return 401, "invalid_api_key"
    if state == "none":
        if key_required:
            return 401, "api_key_required"
    else:
        if scope is not None and scope not in SCOPES_OF[state]:
            return 403, "insufficient_scope"
        limits = COLLECTIONS_OF.get(state)
        if limits and ((limits_apply == "path" and collection and collection not in limits)
                       or limits_apply == "all"):
            return 403, "insufficient_scope"
    if endpoint.name in NOT_OFFERED_YET:
        return 404, "not_found"
    if endpoint.name in ("record", "library_file") and state != "granted":
        return 404, "not_found"  # the hidden record: absent, exactly as an unknown id
    if endpoint.name in ("record_page", "collection_page_n", "sitemap_part"):
        return 404, "not_found"  # no page for a restricted record, even for its group
    if endpoint.name == "library_page":
        return 404, "not_found"  # the node's one document is restricted: no library page
    return 200, None


STATES = ("none", *INVALID, "granted", "ungranted", "scope_limited", "collection_limited")


async def test_matrix(keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    # The node's clock runs ten seconds ahead: the key that expires in two has expired.
    client: TestClient = await aiohttp_client(app_for(keyed.root, clock=lambda: time.time() + 10))
    cases = [(endpoint, collection, url) for endpoint in ENDPOINTS
             for collection, url in requests_for(endpoint, keyed.hidden["id"])]
    for (endpoint, collection, url), state, header in itertools.product(
            cases, STATES, ("Authorization", "X-API-Key")):
        if state == "none" and header == "X-API-Key":
            continue  # no key: one request is enough
        headers = {}
        if state != "none":
            token = keyed.tokens[state]
            headers[header] = f"Bearer {token}" if header == "Authorization" else token
        kwargs: dict[str, Any] = {"headers": headers}
        if endpoint.method == "POST":
            kwargs["json"] = {"method": "tools/list"} if endpoint.name == "mcp" else \
                {"question": "How do partners reach them?"}
        response = await client.request(endpoint.method, url, **kwargs)
        body = (await response.read()).decode(errors="replace")
        status, code = expected(endpoint, collection, state)
        where = f"{endpoint.method} {url} as {state} via {header}"
        assert response.status == status, (where, body)
        if code:
            assert json.loads(body)["error"]["code"] == code, where
        valid = state not in INVALID and state != "none"
        assert response.headers["X-Node-Access"] == (
            f"key:{keyed.ids[state]}" if valid else "open"), where
        if state != "granted":
            assert keyed.hidden["id"] not in body, where
            assert SECRET_TEXT not in body, where
        if valid:
            assert response.headers["Cache-Control"].startswith("private"), where
            assert "X-API-Key" in response.headers["Vary"], where
            assert int(response.headers["RateLimit-Remaining"]) >= 0, where


async def test_granted_key_sees_restricted_records_with_their_group(
        keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    granted = {"X-API-Key": keyed.tokens["granted"]}
    page = await (await client.get("/api/team", headers=granted)).json()
    assert page["total"] == 2
    assert {item["access"] for item in page["items"]} == {"public", "partners"}
    record = await (await client.get(f"/api/team/{keyed.hidden['id']}", headers=granted)).json()
    assert SECRET_TEXT in record["body"] and record["access"] == "partners"
    small = await (await client.get("/api/team?limit=1", headers=granted)).json()
    assert small["total"] == 2 and small["next"] is not None
    ungranted = {"X-API-Key": keyed.tokens["ungranted"]}
    page = await (await client.get("/api/team?limit=1", headers=ungranted)).json()
    assert page["total"] == 1 and page["next"] is None


async def test_keys_me(keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    headers = {"Authorization": f"Bearer {keyed.tokens['collection_limited']}"}
    me = await (await client.get("/api/keys/me", headers=headers)).json()
    assert me["id"] == keyed.ids["collection_limited"]
    assert me["collections"] == ["species"] and me["groups"] == ["partners"]
    assert me["rate"] == 1000 and me["remaining"] == 999
    assert me["expires_at"] is None
    assert keyed.tokens["collection_limited"] not in json.dumps(me)


async def test_wrong_header_forms(keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    for headers in ({"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer "},
                    {"X-API-Key": ""},
                    {"Authorization": f"Bearer {keyed.tokens['granted']}",
                     "X-API-Key": keyed.tokens["ungranted"]}):
        response = await client.get("/api/manifest", headers=headers)
        assert response.status == 401, headers
        assert (await response.json())["error"]["code"] == "invalid_api_key"


async def test_rate_limit_is_exact_under_concurrency(
        keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    token, record = issue_key(keyed.root, "tight", rate=7)
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    headers = {"X-API-Key": token}
    responses = await asyncio.gather(*(client.get("/api/species", headers=headers)
                                       for _ in range(40)))
    statuses = sorted(r.status for r in responses)
    assert statuses.count(200) == 7 and statuses.count(429) == 33
    limited = next(r for r in responses if r.status == 429)
    assert (await limited.json())["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert limited.headers["X-Node-Access"] == f"key:{record.id}"
    assert limited.headers["RateLimit-Remaining"] == "0"
    remaining = sorted(int(r.headers["RateLimit-Remaining"]) for r in responses
                       if r.status == 200)
    assert remaining == [0, 1, 2, 3, 4, 5, 6]


async def test_anonymous_requests_are_limited_per_address(
        keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(keyed.root, anonymous_rate=3))
    statuses = [(await client.get("/api/species")).status for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    keyed_response = await client.get("/api/species",
                                      headers={"X-API-Key": keyed.tokens["granted"]})
    assert keyed_response.status == 200


async def test_revocation_takes_effect_without_restart(
        keyed: KeyedNode, aiohttp_client: Callable[..., Any]) -> None:
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    headers = {"X-API-Key": keyed.tokens["granted"]}
    assert (await client.get("/api/keys/me", headers=headers)).status == 200
    result = CliRunner().invoke(main, ["keys", "revoke", keyed.ids["granted"],
                                       "--project", str(keyed.root)])
    assert result.exit_code == 0, result.output
    response = await client.get("/api/keys/me", headers=headers)
    assert response.status == 401
    assert "revoked" in (await response.json())["error"]["message"]


def _in_place(path: Path, text: str) -> None:
    """Rewrite a file's bytes without replacing it (the same inode), as an editor may."""
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(text)


def _revoked(root: Path, key_id: str) -> str:
    registry = json.loads((root / ".fednode" / "keys.json").read_text())
    for key in registry["keys"]:
        if key["id"] == key_id:
            key["revoked_at"] = "2026-03-01T00:00:00Z"
    return json.dumps(registry)


@pytest.mark.parametrize("change", ["in place", "moved away", "replaced", "secret in place",
                                    "damaged, then mended in place"])
async def test_every_change_to_the_key_files_counts_at_the_next_request(
        keyed: KeyedNode, aiohttp_client: Callable[..., Any], change: str) -> None:
    """The sidecar looks at keys.json and the secret only when their folder may have changed
    (`sidecar.watch`); whichever way they change, the very next request sees it."""
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    headers = {"X-API-Key": keyed.tokens["granted"]}
    for _ in range(3):  # past the first look, when the watch is made
        assert (await client.get("/api/keys/me", headers=headers)).status == 200
    private = keyed.root / ".fednode"
    registry = private / "keys.json"
    if change == "in place":
        _in_place(registry, _revoked(keyed.root, keyed.ids["granted"]))
        expected = 401, "revoked"
    elif change == "moved away":
        registry.rename(private / "keys.json.bak")
        expected = 401, "unknown key"
    elif change == "replaced":
        replacement = private / "keys.new"
        replacement.write_text(_revoked(keyed.root, keyed.ids["granted"]))
        replacement.replace(registry)
        expected = 401, "revoked"
    elif change == "secret in place":
        _in_place(private / "secret", "a-new-secret-" + "x" * 40)
        expected = 401, "not a key of this node"
    else:
        good = registry.read_text()
        _in_place(registry, "{ not json")
        for _ in range(2):  # refused until mended, whether or not the folder changes
            response = await client.get("/api/keys/me", headers=headers)
            assert response.status == 503
        _in_place(registry, good)
        expected = 200, ""
    response = await client.get("/api/keys/me", headers=headers)
    assert response.status == expected[0]
    assert expected[1] in await response.text()


def test_a_folder_watch_sees_each_change_once_and_a_fork_watches_on_its_own(
        tmp_path: Path) -> None:
    folder = tmp_path / "private"
    folder.mkdir()
    watch = FolderWatch(folder)
    assert watch.changed()  # the first look
    assert not watch.changed()
    (folder / "keys.json").write_text("{}")
    assert watch.changed() and not watch.changed()
    with open(folder / "keys.json", "a") as handle:
        handle.write(" ")
    assert watch.changed() and not watch.changed()
    (folder / "other").write_text("x")
    (folder / "other").replace(folder / "keys.json")
    assert watch.changed() and not watch.changed()
    (folder / "keys.json").write_text("{} ")  # queued for the parent while a child looks
    child = os.fork()
    if child == 0:  # the child's first look makes its own watch; it reads nothing of ours
        os._exit(0 if FolderWatch.changed(watch) and not watch.changed() else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert watch.changed() and not watch.changed()
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()  # the watch goes with the folder: "maybe" until it can be made again
    assert watch.changed() and watch.changed()
    folder.mkdir()
    assert watch.changed() and not watch.changed()
    watch.close()


def test_cli_create_prints_the_key_alone(node: Node, export: Callable[..., BuildReport]) -> None:
    node.write("species", "a", species("Fallopia japonica"))
    runner = CliRunner()
    result = runner.invoke(main, [
        "keys", "create", "--project", str(node.root), "--name", "Hub A", "--scopes",
        "read,search,changes,mcp,library", "--collections", "species,resources", "--groups",
        "partners", "--rate", "120", "--expires", "2099-06-30"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert "\n" not in token and token.count(".") == 2
    assert "created now" in result.stderr and ".fednode/secret" in result.stderr
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["iss"] == claims["aud"] == NODE_ID
    assert claims["exp"] == int(datetime(2099, 7, 1, tzinfo=UTC).timestamp())
    secret_file = node.root / ".fednode" / "secret"
    assert secret_file.stat().st_mode & 0o077 == 0
    registry_text = (node.root / ".fednode" / "keys.json").read_text()
    assert token not in registry_text and secret_file.read_text().strip() not in registry_text
    listed = runner.invoke(main, ["keys", "list", "--project", str(node.root)])
    assert claims["jti"] in listed.stdout and "Hub A" in listed.stdout
    assert "species,resources" in listed.stdout and "120/min" in listed.stdout
    assert token not in listed.output
    shown = json.loads(runner.invoke(main, ["keys", "show", claims["jti"], "--project",
                                            str(node.root)]).stdout)
    assert shown["scopes"] == ["read", "search", "changes", "mcp", "library"]
    bad = runner.invoke(main, ["keys", "create", "--project", str(node.root), "--name", "x",
                               "--scopes", "read,admin"])
    assert bad.exit_code == 1 and "unknown scope admin" in bad.output
    for name in ("", "  ", "tab\tname"):
        nameless = runner.invoke(main, ["keys", "create", "--project", str(node.root),
                                        "--name", name])
        assert nameless.exit_code == 1 and "--name must say whose key it is" in \
            nameless.output, name
    missing = runner.invoke(main, ["keys", "revoke", "k_nope", "--project", str(node.root)])
    assert missing.exit_code == 1 and "no key with id 'k_nope'" in missing.output


async def test_secrets_never_reach_the_logs(keyed: KeyedNode, aiohttp_client: Callable[..., Any],
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client: TestClient = await aiohttp_client(app_for(keyed.root))
    for token in keyed.tokens.values():
        await client.get(f"/api/team/{keyed.hidden['id']}", headers={"X-API-Key": token})
        await client.get("/api/team", headers={"Authorization": f"Bearer {token}"})
    secret = (keyed.root / ".fednode" / "secret").read_text().strip()
    text = caplog.text
    assert "fednode.access" in text and f"key:{keyed.ids['granted']}" in text
    for token in keyed.tokens.values():
        assert token not in text
        signature = token.rsplit(".", 1)[-1]
        assert len(signature) < 20 or signature not in text
    assert secret not in text and SECRET_TEXT not in text


def test_cli_keys_list_has_a_header_and_create_warns_of_unknown_groups(
        keyed: KeyedNode) -> None:
    runner = CliRunner()
    listed = runner.invoke(main, ["keys", "list", "--project", str(keyed.root)])
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "SCOPES", "COLLECTIONS", "GROUPS", "RATE",
                                "EXPIRES", "STATE"]
    assert len(lines) == 1 + len(keyed.ids)
    assert lines[1].index(keyed.ids["granted"]) == 0
    assert lines[0].index("NAME") == lines[1].index("granted")  # columns line up
    made = runner.invoke(main, ["keys", "create", "--project", str(keyed.root), "--name", "typo",
                                "--groups", "Partners,partners"])
    assert made.exit_code == 0
    assert ("warning: no record is in the group 'Partners'; the groups in use are partners "
            "(names are case-sensitive)") in made.stderr
    assert "'partners'" not in made.stderr


@pytest.mark.parametrize("registry, says", [
    ("{not json", "keys.json: damaged (JSONDecodeError"),
    ('{"keys": [{"id": "k_1"}]}', "keys.json: damaged (KeyError"),
    ('{"keys": "none"}', "keys.json: damaged"),
])
def test_cli_damaged_registry_is_one_line(keyed: KeyedNode, registry: str, says: str) -> None:
    (keyed.root / ".fednode" / "keys.json").write_text(registry)
    for command in (["keys", "list"], ["keys", "revoke", "k_1"], ["keys", "create", "--name", "x"]):
        result = CliRunner().invoke(main, [*command, "--project", str(keyed.root)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), command
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and says in errors[0] and "restore it" in errors[0], command


def test_cli_expiry_at_the_end_of_the_calendar(keyed: KeyedNode) -> None:
    result = CliRunner().invoke(main, ["keys", "create", "--project", str(keyed.root),
                                       "--name", "forever", "--expires", "9999-12-31"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.strip() == ("Error: --expires '9999-12-31': give a date like "
                                     "2027-06-30 (9999-12-30 at the latest) or an RFC 3339 time")


def test_the_key_registry_is_readable_by_its_owner_only(keyed: KeyedNode) -> None:
    registry = keyed.root / ".fednode" / "keys.json"
    assert registry.stat().st_mode & 0o077 == 0


async def test_a_folder_watch_on_the_loop_reads_each_change_as_it_comes(tmp_path: Path) -> None:
    """Attached to a loop (as the server does), the events are read by the loop; a change is
    seen once the loop has run, once; after close the loop reads nothing more."""
    folder = tmp_path / "private"
    folder.mkdir()
    watch = FolderWatch(folder)
    loop = asyncio.get_running_loop()
    watch.attach(loop)
    assert watch.changed()  # the first look
    assert not watch.changed()
    (folder / "keys.json").write_text("{}")
    await asyncio.sleep(0.05)  # the loop reads the event
    assert watch.changed() and not watch.changed()
    (folder / "keys.json").rename(folder / "moved")
    await asyncio.sleep(0.05)
    assert watch.changed() and not watch.changed()
    folder_moved = tmp_path / "elsewhere"
    folder.rename(folder_moved)  # the watch no longer holds: every call looks again
    await asyncio.sleep(0.05)
    assert watch.changed() and watch.changed()
    folder_moved.rename(folder)
    assert watch.changed()  # watched afresh
    assert not watch.changed()
    fd = watch._inotify.fd if watch._inotify else None
    watch.close()
    assert fd is not None and not loop._selector.get_map().get(fd)  # type: ignore[attr-defined]
