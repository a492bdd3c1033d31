"""The CDN's routing, proven with the real Netlify CLI (netlify-cli 26.2.0 from npm) running
offline over an exported site_out/: each request of a table lands where the exported
site_out/_redirects says, on a static file or on the real sidecar, with its method, query,
headers and body.

`netlify dev` cannot load Edge Functions offline, and applies neither `[[headers]]`
Content-Type/Cache-Control nor custom headers to proxied answers: those are checked from the
config (test_cli_serve.py), not here."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from builders import REPO, ServerThread, app_for, exported_sample, issue_key, npm_tool
from processes import free_port

from exporter.contract.page_urls import record_href
from exporter.pipeline.build import build
from exporter.project.config import Project

KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"


def request(url: str, method: str = "GET", body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    sent = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.slow
def test_the_cdn_allows_the_preflight_the_sidecar_allows() -> None:
    """A browser's preflight of a keyed call carries no key, so the CDN answers it: its
    headers must allow what the sidecar's preflight allows (a keyed call from a page failed
    its preflight on the CDN)."""
    import tomllib

    from sidecar.app import PREFLIGHT
    config = tomllib.loads((REPO / "netlify.toml").read_text())
    every = next(rule["values"] for rule in config["headers"] if rule["for"] == "/*")
    for name, value in PREFLIGHT.items():
        assert every.get(name) == value, name


@pytest.mark.slow
def test_requests_land_where_the_exported_redirects_say(tmp_path: Path) -> None:
    cli = npm_tool("netlify-cli", "26.2.0", "netlify")
    root = exported_sample(tmp_path / "node")
    sidecar_port = free_port()
    node_toml = root / "content" / "node.toml"
    node_toml.write_text(node_toml.read_text().replace(
        "[node]\n", f'[node]\nsidecar_url = "http://127.0.0.1:{sidecar_port}"\n', 1))
    build(Project(root))
    assert f"http://127.0.0.1:{sidecar_port}/api/search" in (root / "site_out" / "_redirects"
                                                            ).read_text()
    key, _ = issue_key(root, "cdn", groups=["partners"], rate=10**6)
    with ServerThread(app_for(root, anonymous_rate=0), port=sidecar_port) as sidecar:
        site = tmp_path / "deploy"
        shutil.copytree(root / "site_out", site / "site_out", symlinks=False)
        config = (REPO / "netlify.toml").read_text()
        port = free_port()
        config = config.replace('framework = "#static"',
                                f'framework = "#static"\nport = {port}', 1)
        assert f"port = {port}" in config
        (site / "netlify.toml").write_text(config)
        log = open(tmp_path / "netlify-dev.log", "w")  # noqa: SIM115 - closed below
        dev = subprocess.Popen([str(cli), "dev", "--offline", "--internal-disable-edge-functions"],
                               cwd=site, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "NETLIFY_TELEMETRY_DISABLED": "1",
                                    "BROWSER": "none"})
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                if dev.poll() is not None:
                    pytest.fail("netlify dev stopped: " +
                                (tmp_path / "netlify-dev.log").read_text()[-2000:])
                try:
                    if request(base + "/api/manifest")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.5)
            else:
                pytest.fail("netlify dev did not answer within a minute: " +
                            (tmp_path / "netlify-dev.log").read_text()[-2000:])
            keyed = {"X-API-Key": key}
            table: list[tuple[str, str, Any, dict[str, str], str, int]] = [
                ("GET", "/api/manifest", None, {}, "static", 200),
                ("GET", "/api/schema", None, {}, "static", 200),
                ("GET", "/api/openapi.json", None, {}, "static", 200),
                ("GET", "/api/species", None, {}, "static", 200),
                ("GET", f"/api/species/{KNOTWEED}", None, {}, "static", 200),
                ("GET", "/api/sync/changes.ndjson", None, {}, "static", 200),
                ("GET", "/", None, {}, "static", 200),
                ("GET", "/species/", None, {}, "static", 200),
                ("GET", record_href("species", KNOTWEED), None, {}, "static", 200),
                ("GET", "/sitemap.xml", None, {}, "static", 200),
                ("GET", "/robots.txt", None, {}, "static", 200),
                ("GET", "/library/", None, {}, "static", 200),
                # a page's address without its final slash: the page (its folder's index on
                # the CDN; the sidecar sends it there)
                ("GET", "/library", None, {}, "static", 200),
                ("GET", "/search", None, {}, "static", 200),
                ("GET", "/species", None, {}, "static", 200),
                # A path under /api/ without an endpoint: the contract's JSON 404, not the
                # CDN's HTML page (Netlify's "Not Found" page).
                ("GET", "/api/no-such-collection", None, {}, "static", 404),
                ("GET", "/api/sync/a/b/c", None, {}, "static", 404),
                ("GET", "/api/a/b/c", None, {}, "static", 404),
                ("GET", "/api/404.json", None, {}, "static", 404),  # (not a file served with 200)
                ("GET", "/api/no-collection.json", None, {}, "static", 404),
                ("GET", "/api/sync", None, {}, "static", 404),
                ("GET", "/api/species?limit=2", None, {}, "sidecar", 200),
                ("GET", "/api/species?offset=10", None, {}, "sidecar", 200),
                ("GET", "/api/team?updated_since=2020-01-01T00:00:00Z", None, {}, "sidecar", 200),
                ("GET", "/api/search?q=knotweed&limit=3", None, {}, "sidecar", 200),
                ("GET", "/api/changes?since=2020-01-01T00:00:00Z", None, keyed, "sidecar", 200),
                ("GET", "/api/changes?since=2020-01-01T00:00:00Z", None, {}, "sidecar", 401),
                ("GET", "/api/keys/me", None, keyed, "sidecar", 200),
                ("POST", "/api/mcp", {"method": "tools/list"}, keyed, "sidecar", 200),
                ("POST", "/api/library/ask", {"question": "When is knotweed injected?"}, keyed,
                 "sidecar", 200),
            ]
            for method, path, body, headers, where, status in table:
                got, answer_headers, data = request(base + path, method, body, headers)
                server = {k.lower(): v for k, v in answer_headers.items()}.get("server", "")
                landed = "sidecar" if "aiohttp" in server else "static"
                assert (landed, got) == (where, status), (method, path, data[:200])
                if where == "sidecar" and status == 200 and path.startswith("/api/species?"):
                    assert json.loads(data)["limit"] == (2 if "limit" in path else 50)
            # A static answer is the sidecar's answer, byte for byte.
            for path in ("/api/manifest", f"/api/species/{KNOTWEED}", "/api/species", "/",
                         "/species/", record_href("species", KNOTWEED), "/sitemap.xml",
                         "/library/", "/library", "/search",
                         "/api/sync/a/b/c", "/api/a/b/c", "/api/no-such-collection",
                         "/api/sync", "/api/no-collection.json"):
                assert request(base + path)[2] == request(sidecar.url + path)[2], path
            # (the sidecar with a 301 to the page's address)
            for path in ("/search", "/library", "/germination"):
                connection = http.client.HTTPConnection(sidecar.url.removeprefix("http://"),
                                                        timeout=30)
                connection.request("GET", path)
                answer = connection.getresponse()
                assert (answer.status, answer.getheader("Location")) == (301, path + "/")
                connection.close()
            # The sidecar takes /api/404.json for a collection's name; the CDN for its file.
            for path in ("/api/404.json",):
                cdn, sidecar_says = (json.loads(request(url + path)[2])
                                     for url in (base, sidecar.url))
                assert cdn["error"]["code"] == sidecar_says["error"]["code"] == "not_found"
        finally:
            dev.terminate()
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                dev.kill()
            log.close()


def test_one_header_rule_types_each_api_path_as_the_sidecar_does(sample_root: Path) -> None:
    """netlify.toml's header rules as Netlify's own parser reads them (@netlify/headers-parser,
    which its build uses): every file under site_out/api/ and every open API path is matched
    by exactly one rule that sets Content-Type, and it sets the sidecar's type. Where two
    rules set one header, which wins in production is not documented; so none may. (The
    sync files were typed JSON: the /api/* rule set it, and no rule was theirs. `netlify
    dev` cannot show this: its static server's own type overrides the rules'.)"""
    cli = npm_tool("netlify-cli", "26.2.0", "netlify")
    parser = cli.parent.parent / "@netlify" / "headers-parser" / "lib" / "index.js"
    script = (f"import {{ parseAllHeaders }} from {json.dumps(parser.as_uri())};"
              f"const {{ headers, errors }} = await parseAllHeaders("
              f"{{ netlifyConfigPath: {json.dumps(str(REPO / 'netlify.toml'))}, minimal: false }});"
              "console.log(JSON.stringify({ errors: errors.map(String), rules: headers.map("
              "h => [h.for, h.forRegExp.source, h.forRegExp.flags, h.values]) }));")
    node = shutil.which("node")
    assert node is not None  # (npm_tool found npm, which comes with it)
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True,
                          text=True, timeout=60, check=True)
    parsed = json.loads(done.stdout)
    assert parsed["errors"] == []
    typing = [(rule, re.compile(source, re.IGNORECASE if "i" in flags else 0),
               values["Content-Type"]) for rule, source, flags, values in parsed["rules"]
              if "Content-Type" in values]
    site = sample_root / "site_out"
    files = ["/" + str(path.relative_to(site)) for path in (site / "api").rglob("*")
             if path.is_file()]
    assert any(f.endswith(".ndjson") for f in files) and len(files) > 100
    urls = ["/api/manifest", "/api/schema", "/api/openapi.json", "/api/species",
            f"/api/species/{KNOTWEED}", "/api/sync/changes.ndjson", "/api/sync/team/0.ndjson"]
    with ServerThread(app_for(sample_root, anonymous_rate=0)) as sidecar:
        served = {url: request(sidecar.url + url)[1]["Content-Type"] for url in urls}
    for path in [*files, *urls]:
        matched = [(rule, value) for rule, pattern, value in typing if pattern.match(path)]
        assert len(matched) == 1, (path, matched)
        expected = served.get(path) or served[
            "/api/sync/changes.ndjson" if path.endswith(".ndjson") else "/api/manifest"]
        assert matched[0][1] == expected, path
