"""/api/openapi.json: a valid OpenAPI 3.1 document, made from the endpoint table, that
describes exactly the routes the sidecar serves; and schemathesis, run against the real
sidecar with a key, finds nothing it does not say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import ServerThread, app_for, examples, exported_sample, issue_key
from openapi_spec_validator import validate

from exporter.pipeline.build import build
from exporter.project.config import Project
from sidecar.app import ROUTER


def test_the_document_is_valid_openapi_3_1(sample_root: Path) -> None:
    document = json.loads((sample_root / "site_out" / "api" / "openapi.json").read_bytes())
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert set(document["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    search = document["paths"]["/api/search"]["get"]
    assert [p["name"] for p in search["parameters"]] == ["q", "collections", "limit", "mode",
                                                         "nodes"]
    changes = document["paths"]["/api/changes"]["get"]
    assert changes["security"] == [{"bearer": []}, {"apiKey": []}]
    assert {"401", "403", "429"} <= set(changes["responses"])


def test_it_describes_exactly_the_routes_served(sample_root: Path) -> None:
    document = json.loads((sample_root / "site_out" / "api" / "openapi.json").read_bytes())
    served = {(endpoint.method.lower(), endpoint.path) for endpoint in ROUTER.endpoints()}
    described = {(method, path) for path, item in document["paths"].items() for method in item}
    assert served == described


@pytest.mark.slow
def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    """Every check of schemathesis, positive and negative data, stateful links, with a key
    holding every scope and a group: 100 examples an operation (300 in the thorough
    profile)."""
    root = exported_sample(tmp_path / "node")
    build(Project(root))
    key, _ = issue_key(root, "schemathesis", groups=["partners"], rate=10**9)
    with ServerThread(app_for(root, anonymous_rate=0)) as server:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "schemathesis"), "run",
             f"{server.url}/api/openapi.json", "--url", server.url, "-H", f"X-API-Key: {key}",
             "--max-examples", str(examples(60, 300)), "--seed", "1", "--no-color"],
            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:]
