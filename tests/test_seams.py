"""The seams: one endpoint table, a light contract, one error boundary per side."""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from builders import REPO, app_for, exported_sample, issue_key
from processes import ENV, FEDNODE, free_port

from exporter.contract.endpoints import ENDPOINTS, capabilities
from exporter.contract.wire import COLLECTIONS, NO_COLLECTION, NO_ENDPOINT, PUBLIC
from exporter.pipeline.build import load
from exporter.project.config import Project
from sidecar.app import ROUTER, NodeRunner, SidecarConfig, create_app, dispatch
from sidecar.handlers import HANDLERS
from sidecar.state import RUNNING


@pytest.fixture
def sample_copy(sample_root: Path, tmp_path: Path) -> Path:
    """The exported sample, copied so that a test may issue keys in it."""
    shutil.copytree(sample_root, tmp_path / "sample", symlinks=True)
    return tmp_path / "sample"


async def test_routes_are_exactly_the_endpoint_table(sample_root: Path) -> None:
    """The runner sends every request to the error boundary (as the application's one route
    does, for a plain runner); the router made from the table routes each row and nothing else
    (tests/sidecar/test_routing.py: as aiohttp's router would), and every offered row has a
    handler, every handler a row."""
    project = Project(sample_root)
    app = create_app(SidecarConfig(bundle=project.bundle, private=project.private))
    # (for a plain AppRunner: the same boundary, through one route)
    [route] = [route for route in app.router.routes() if route.resource is not None]
    assert (route.method, route.resource.canonical) == ("*", "/{path}")
    assert isinstance(route.handler, functools.partial) and route.handler.func is dispatch
    assert route.handler.args == (app[RUNNING],)
    runner = NodeRunner(app)
    await runner.setup()
    try:
        assert runner.server is not None
        handler = runner.server.request_handler
        assert isinstance(handler, functools.partial) and handler.func is dispatch
        assert handler.args == (app[RUNNING],)
    finally:
        await runner.cleanup()
    assert sorted(ROUTER.endpoints(), key=ENDPOINTS.index) == list(ENDPOINTS)
    assert set(HANDLERS) == {e.name for e in ENDPOINTS if e.offered}


def test_manifest_claims_exactly_what_the_table_offers(sample_root: Path) -> None:
    manifest = json.loads((sample_root / "site_out" / "api" / "manifest.json").read_bytes())
    offered = [e for e in ENDPOINTS if e.offered and not e.page]
    assert manifest["capabilities"] == capabilities()
    assert list(manifest["endpoints"]) == [e.name for e in offered]
    for e in offered:
        entry = manifest["endpoints"][e.name]
        assert (entry["method"], entry["path"], entry["access"]) == (e.method, e.path, e.access)
        assert entry.get("scope") == e.scope
    not_offered = {e.capability for e in ENDPOINTS if not e.offered}
    assert not not_offered & set(manifest["capabilities"])
    auth = manifest["authentication"]
    assert auth["keyed"] == [e.name for e in offered if e.access == "keyed"]


def test_redirects_send_every_dynamic_endpoint_to_the_sidecar(sample_root: Path) -> None:
    """The exported site_out/_redirects: every endpoint the CDN cannot answer from site_out/
    has a forced rule to the sidecar, ahead of the first static rule; every open endpoint is
    a file at its URL or has a rule to the file that answers it."""
    node = tomllib.loads((sample_root / "content" / "node.toml").read_text())["node"]
    sidecar = node.get("sidecar_url", node["base_url"])
    rules = [line.split() for line in (sample_root / "site_out" / "_redirects").read_text()
             .splitlines() if line and not line.startswith("#")]
    first_static = next(i for i, rule in enumerate(rules) if not rule[-1].endswith("!"))
    # Last: any other path under /api/ gets the contract's JSON 404, not the CDN's page:
    # one segment that names no collection, the sidecar's words for that.
    assert rules[-2:] == [["/api/:collection", "/api/no-collection.json", "404"],
                          ["/api/*", "/api/404.json", "404"]]
    assert json.loads((sample_root / "site_out" / "api" / "404.json").read_bytes()) == \
        {"error": {"code": "not_found", "message": NO_ENDPOINT}}
    assert json.loads((sample_root / "site_out" / "api" / "no-collection.json").read_bytes()) \
        == {"error": {"code": "not_found", "message": NO_COLLECTION}}
    site = sample_root / "site_out"
    for endpoint in ENDPOINTS:
        path = re.sub(r"\{(\w+)\}", r":\1", endpoint.path)
        if not endpoint.public:
            index = rules.index([path, sidecar + path, "200!"])
            assert index < first_static, endpoint.name
        elif endpoint.static and "{shard}" in endpoint.static:
            # A record's file is in a shard folder: a rule per public record, then the
            # sidecar for any other id (docs/operations.md, At scale).
            fallback = rules.index([path, sidecar + path, "200"])
            named = [rule for rule in rules[first_static:fallback] if rule[0].count("/") == 3
                     and ":" not in rule[0]]
            public = {(r.collection, r.id) for r in load(Project(sample_root)).records
                      if r.access == PUBLIC}
            assert {tuple(rule[0].split("/")[2:]) for rule in named} == public
            for _, target, status in named:
                assert status == "200" and (site / target.lstrip("/")).is_file(), target
        elif endpoint.static:
            # one rule per collection (a placeholder's missing file is the CDN's own 404)
            for name in COLLECTIONS if "{collection}" in endpoint.path else ("",):
                static = re.sub(r"\{(\w+)\}", r":\1",
                                endpoint.static.replace("{collection}", name))
                assert rules.index([path.replace(":collection", name), static, "200"]) \
                    >= first_static
            for param in endpoint.params:  # a bare target forwards the whole query string
                assert rules.index([path, f"{param.name}=:{param.name}", sidecar + path,
                                    "200!"]) < first_static
        elif ":" not in path and endpoint.page:
            assert (site / (path.lstrip("/") or "index.html")).is_file(), path


def test_netlify_toml_leaves_the_routing_to_the_export() -> None:
    config = tomllib.loads((REPO / "netlify.toml").read_text())
    assert "redirects" not in config
    assert config["build"]["publish"] == "site_out"


@pytest.mark.parametrize("module, allowed", [
    # The sidecar maps the bundle's Arrow file; the hub loads records in bulk through Arrow.
    ("sidecar.app", ("pyarrow",)), ("sidecar.serve", ("pyarrow",)),
    ("hub.sync", ("pyarrow",)),
])
def test_the_sidecar_and_hub_import_no_exporter_machinery(module: str,
                                                           allowed: tuple[str, ...]) -> None:
    heavy = ["jinja2", "jsonschema", "fastjsonschema", "pyarrow", "exporter.site.served",
             "exporter.pipeline.build", "exporter.pipeline.bundle_files",
             "exporter.project.content", "rtoml"]
    code = (f"import sys, {module}; "
            f"print([m for m in {heavy!r} if m in sys.modules and m not in {allowed!r}])")
    found = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert found == "[]"


HEAVY = ["jinja2", "jsonschema", "fastjsonschema", "pyarrow", "numpy", "duckdb", "jwt",
         "aiohttp", "exporter.pipeline.build"]


@pytest.mark.slow
def test_the_command_line_starts_without_what_its_commands_need(sample_copy: Path) -> None:
    """`fednode --help` and the small commands start in a fifth of a second: each command
    imports its own machinery. An export whose records all come from the cache validates
    none, and does not import the validators; one that reads a valid file imports the
    compiled validator, not jsonschema (which only explains invalid records)."""
    code = (f"import sys, cli.main; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    found = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert found == "[]"
    export = (f"import sys; from cli.main import main\n"
              f"try:\n    main(['export', '--project', {str(sample_copy)!r}])\n"
              f"except SystemExit as exit:\n    assert not exit.code, exit.code\n"
              f"print([m for m in ('jsonschema', 'fastjsonschema') if m in sys.modules])")
    # (a copied file is a new inode: the copy's first export reads every file again)
    subprocess.run([sys.executable, "-c", export], env=ENV, capture_output=True, check=True)
    found = subprocess.run([sys.executable, "-c", export], env=ENV, capture_output=True,
                           text=True, check=True).stdout.strip().splitlines()
    assert found[-1] == "[]", found
    edited = next((sample_copy / "content" / "species").glob("*.md"))
    edited.write_text(edited.read_text() + "\nEdited.\n")
    found = subprocess.run([sys.executable, "-c", export], env=ENV, capture_output=True,
                           text=True, check=True).stdout.strip().splitlines()
    assert "1 ledger events" in found[-2] and found[-1] == "['fastjsonschema']", found


@pytest.mark.slow
def test_the_export_command_ends_at_once_and_says_all_first(sample_copy: Path) -> None:
    """`fednode export` (`cli.main.run`) ends as soon as its export succeeded, without
    Python's own teardown (no exit handler runs), its summary flushed to a pipe first; a
    failed export ends as Python ends, with its error and exit code 1; and `main` invoked
    in a process that goes on (as the tests do) leaves that process as it was, its garbage
    collector included."""
    marked = ("import atexit, sys; atexit.register(print, 'teardown', flush=True); "
              "from cli.main import run; sys.argv = ['fednode', *sys.argv[1:]]; run()")
    done = subprocess.run([sys.executable, "-c", marked, "export", "--project",
                           str(sample_copy)], env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exported species ") and "teardown" not in done.stdout
    node_toml = sample_copy / "content" / "node.toml"
    kept = node_toml.read_text()
    node_toml.write_text("id = [\n")
    failed = subprocess.run([sys.executable, "-c", marked, "export", "--project",
                             str(sample_copy)], env=ENV, capture_output=True, text=True)
    assert failed.returncode == 1 and "node.toml" in failed.stderr
    assert failed.stdout == "teardown\n"
    in_process = ("import gc, sys; from cli.main import main\n"
                  "try:\n    main(['export', '--project', sys.argv[1]])\n"
                  "except SystemExit as ending:\n    print('ended', ending.code)\n"
                  "print('still here', gc.isenabled())")
    node_toml.write_text(kept)
    went_on = subprocess.run([sys.executable, "-c", in_process, str(sample_copy)], env=ENV,
                             capture_output=True, text=True)
    assert went_on.stdout.splitlines()[-2:] == ["ended 0", "still here True"], went_on.stderr


@pytest.mark.parametrize("headers, data, status, code, says", [
    ({"Content-Type": "text/plain"}, b"{}", 415, "unsupported_media_type", "application/json"),
    ({"Content-Type": "application/json"}, b"{", 400, "invalid_parameter", "not valid JSON"),
    ({"Content-Type": "application/json"}, b"[1, 2]", 400, "invalid_parameter",
     "must be a JSON object"),
    ({"Content-Type": "application/json"}, b'{"a": "' + b"x" * (1024 * 1024) + b'"}', 413,
     "payload_too_large", "limit"),
])
async def test_post_bodies_are_checked_before_anything_else(
        sample_copy: Path, aiohttp_client: Callable[..., Any], headers: dict[str, str],
        data: bytes, status: int, code: str, says: str) -> None:
    """The node's POST endpoints but the tool interface, which answers in JSON-RPC's terms
    (tests/sidecar/test_mcp.py)."""
    token, _ = issue_key(sample_copy, "poster", scopes=["mcp", "library"])
    client: TestClient = await aiohttp_client(app_for(sample_copy))
    for path in ("/api/library/ask",):
        response = await client.post(path, data=data, headers={**headers, "X-API-Key": token})
        body = await response.json()
        assert (response.status, body["error"]["code"]) == (status, code), path
        assert says in body["error"]["message"]
        assert response.headers["X-Node-Access"].startswith("key:")


@pytest.mark.parametrize("path, chunks", [("/api/library/ask", 130), ("/api/mcp", 130)])
async def test_a_chunked_body_over_the_limit_is_413(
        sample_copy: Path, aiohttp_client: Callable[..., Any], path: str, chunks: int) -> None:
    """No Content-Length to go by: the limit of 1 MiB still holds."""
    token, _ = issue_key(sample_copy, "chunky", scopes=["mcp", "library"])
    client: TestClient = await aiohttp_client(app_for(sample_copy))

    async def body() -> Any:
        for _ in range(chunks):
            yield b" " * 8192

    response = await client.post(path, data=body(), headers={
        "Content-Type": "application/json", "X-API-Key": token})
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "payload_too_large"


async def test_every_response_carries_the_contract_headers(sample_client: TestClient) -> None:
    # (the tests' client serves the application as `fednode serve` does: conftest.py)
    assert isinstance(sample_client.server.runner, NodeRunner)
    for method, path in (("GET", "/api/manifest"), ("GET", "/nowhere"), ("DELETE", "/api/team"),
                         ("OPTIONS", "/api/changes"), ("HEAD", "/api/species"),
                         ("GET", "/api/species?limit=0")):
        response = await sample_client.request(method, path)
        assert response.headers["X-Node-Access"] == "open", path
        assert response.headers["Access-Control-Allow-Origin"] == "*", path
        if response.status >= 400 and method != "HEAD":
            body = await response.json()
            assert set(body["error"]) == {"code", "message"}


@pytest.mark.slow
def test_serve_on_a_taken_port_says_so_in_one_line(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, check=True,
                   capture_output=True, timeout=120)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*FEDNODE, "serve", "--project", str(root), "--port",
                                 str(port)], env=ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: cannot listen on 127.0.0.1:{port}: Address already in use; "
                      f"stop what uses that port or choose another with --port"]


@pytest.mark.slow
def test_serve_warns_when_links_point_elsewhere(tmp_path: Path) -> None:
    root = exported_sample(tmp_path)
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, check=True,
                   capture_output=True, timeout=120)
    port = free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert server.stderr is not None
        lines = [server.stderr.readline() for _ in range(2)]
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert lines[1].startswith("warning: links in responses point to http://127.0.0.1:8000")
    assert f"fednode export --base-url http://127.0.0.1:{port}" in lines[1]


# What the sidecar may import of the exporter: the contract, the shared part (pipeline-free)
# and the package's version. Nothing of the pipeline, the site, the project's content, the
# index writer, the library's reading or Darwin Core.
SIDECAR_MAY_IMPORT = ("exporter", "exporter.contract", "exporter.shared")


def test_the_sidecar_imports_only_the_contract_and_the_shared_part() -> None:
    """Read in the source, every `exporter` import of sidecar/ is of the allowed parts; and
    importing every sidecar module loads no other part of the exporter."""
    found = []
    for path in sorted((REPO / "sidecar").glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            named = re.match(r"\s*(?:from|import) (exporter[\w.]*)", line)
            if named and not any(named.group(1) == allowed or
                                 named.group(1).startswith(allowed + ".")
                                 for allowed in SIDECAR_MAY_IMPORT[1:]) and \
                    named.group(1) != "exporter":
                found.append(f"sidecar/{path.name}:{number}: {line.strip()}")
    assert found == []
    code = ("import importlib, pkgutil, sys, sidecar\n"
            "for m in pkgutil.iter_modules(sidecar.__path__):\n"
            "    importlib.import_module('sidecar.' + m.name)\n"
            "print(sorted(m for m in sys.modules if m.startswith('exporter')))")
    loaded = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                            text=True, check=True).stdout
    others = [name for name in ast.literal_eval(loaded) if name != "exporter" and not any(
        name == allowed or name.startswith(allowed + ".") for allowed in SIDECAR_MAY_IMPORT[1:])]
    assert others == []


MODULE_LINES = 500  # at most, in a module of the code


def test_no_module_is_over_500_lines() -> None:
    """No module of the code is over MODULE_LINES lines: a longer one holds several parts,
    each easier to read, test and change in a module named for what it owns."""
    over = [f"{path.relative_to(REPO)}: {count} lines"
            for folder in ("cli", "exporter", "sidecar", "hub")
            for path in sorted((REPO / folder).rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES]
    assert not over, (f"modules over {MODULE_LINES} lines (split each where its parts meet):\n"
                      + "\n".join(over))


BODY_LINES = 60  # at most, in the body of a function of the code (its docstring aside)


def test_no_function_body_is_over_60_lines() -> None:
    """A function reads at once: no body of the code is over BODY_LINES lines (its
    docstring aside); a longer one is steps that are functions of their own."""
    over = []
    for folder in ("cli", "exporter", "sidecar", "hub"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                body = node.body
                if len(body) > 1 and isinstance(body[0], ast.Expr) and \
                        isinstance(body[0].value, ast.Constant):
                    body = body[1:]  # the docstring
                lines = (node.end_lineno or 0) - body[0].lineno + 1
                if lines > BODY_LINES:
                    over.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines}")
    assert not over, "function bodies over 60 lines:\n" + "\n".join(over)
