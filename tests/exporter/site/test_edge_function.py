"""The Edge Function that sends keyed requests on open paths to the sidecar
(netlify/edge-functions/keyed.ts), tested alone with Deno (from npm) against the real
sidecar: `netlify dev` cannot load Edge Functions offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import REPO, ServerThread, app_for, exported_sample, issue_key, npm_tool

from exporter.contract.endpoints import ENDPOINTS
from exporter.pipeline.build import build
from exporter.project.config import Project

PARTNER_SURVEY = "e312fd28-7dc8-45bb-bd5a-c64d8125e7de"  # a resource for partners only
KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"  # a public species


@pytest.mark.slow
def test_the_edge_functions_folder_holds_functions_only() -> None:
    """Netlify bundles every file of netlify/edge-functions/ as a function, and fails the
    deploy on one without a default export: the function's test lives beside it instead
    (netlify/edge-tests/)."""
    folder = REPO / "netlify" / "edge-functions"
    for path in folder.iterdir():
        assert "export default" in path.read_text(), path.name


@pytest.fixture
def outside_dev() -> Iterator[Path]:
    """A folder in the system's temporary folder: Deno refuses to read any file under /dev/,
    where the suite's own folders may be (scripts/test puts them on /dev/shm)."""
    with tempfile.TemporaryDirectory(prefix="fednode-deno-") as name:
        yield Path(name)


@pytest.mark.slow
def test_the_edge_function_forwards_keyed_requests(outside_dev: Path) -> None:
    binary = npm_tool("deno", "2", "deno")
    tmp_path = outside_dev
    root = exported_sample(tmp_path / "node")
    build(Project(root))
    key, _ = issue_key(root, "edge", groups=["partners"], rate=10**6)
    with ServerThread(app_for(root, anonymous_rate=0)) as sidecar:
        result = subprocess.run(
            [str(binary), "test", "--allow-net=127.0.0.1", "--allow-env", "--no-remote",
             f"--allow-read={(root / 'site_out').resolve()}",
             str(REPO / "netlify" / "edge-tests" / "keyed_test.ts")],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "SIDECAR": sidecar.url, "KEY": key, "HIDDEN": PARTNER_SURVEY,
                 "SITE": str((root / "site_out").resolve()), "PUBLIC": KNOTWEED,
                 "DENO_DIR": str(tmp_path / "deno-cache"), "NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "7 passed" in result.stdout


def test_the_edge_function_runs_on_every_path_of_the_endpoint_table() -> None:
    """A key sent to any of the node's paths, open ones included (pages, downloads, the
    sitemap), reaches the sidecar, which checks it: a bad key is 401 on every endpoint, and a
    key limited to some collections gets 403 for another's download. Netlify runs the
    function only on the paths of its `config` (URLPattern: `*` anything, `:name` a
    segment): were it /api/*, /library/* and / alone, a keyed download would be the CDN's
    file, whatever the key."""
    source = (REPO / "netlify" / "edge-functions" / "keyed.ts").read_text()
    found = re.search(r"export const config = \{ path: (.*?) \};", source)
    assert found, "keyed.ts exports its config on one line"
    paths = json.loads(found.group(1))
    paths = paths if isinstance(paths, list) else [paths]

    def matches(pattern: str, path: str) -> bool:
        regex = "".join(".*" if part == "*" else "[^/]+" if part.startswith(":")
                        else re.escape(part) for part in re.split(r"(\*|:\w+)", pattern))
        return re.fullmatch(regex, path) is not None

    for endpoint in ENDPOINTS:
        example = re.sub(r"\{\w+\}", "x1", endpoint.path)
        assert any(matches(pattern, example) for pattern in paths), endpoint.path
