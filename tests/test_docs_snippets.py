"""The Python snippets of docs/mcp.md and docs/hub-reference.md run as written (bar the address)
against a real sidecar on the exported sample, in a process of their own, as a reader who
pastes them into a file runs them."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import REPO, ServerThread, app_for, exported_sample, issue_key

from hub.sync import sync


def python_blocks(doc: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO / "docs" / doc).read_text(), re.S)


def run_snippet(code: str, folder: Path, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    script = folder / "snippet.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.slow
def test_the_mcp_snippet_lists_the_tools_and_searches(tmp_path: Path) -> None:
    (code,) = python_blocks("mcp.md")
    assert "asyncio.run(main())" in code
    root = exported_sample(tmp_path / "node")
    key, _ = issue_key(root, "agent", scopes=["mcp", "read", "search"])
    assert key.count(".") == 2 and key.startswith("eyJ")  # a JWT, as the doc says
    with ServerThread(app_for(root)) as server:
        code = code.replace("https://api.example.org", server.url)
        done = run_snippet(code, tmp_path, env={"FEDNODE_KEY": key, "PATH": ""})
    assert done.returncode == 0, done.stderr
    tools, *found = done.stdout.splitlines()
    assert "'search'" in tools and "'node_info'" in tools
    assert found and all(line.split()[0] in ("species", "treatments", "resources",
                                             "germination", "team") for line in found)


@pytest.mark.slow
def test_the_hub_snippet_reads_a_synced_file(tmp_path: Path) -> None:
    (code,) = python_blocks("hub-reference.md")
    root = exported_sample(tmp_path / "node")
    with ServerThread(app_for(root)) as server:
        asyncio.run(asyncio.wait_for(sync(server.url, tmp_path / "hub.duckdb", None), 120))
    done = run_snippet(code, tmp_path)
    assert done.returncode == 0, done.stderr
    counts = dict(line.split() for line in done.stdout.splitlines())
    assert counts["species"] != "0" and set(counts) <= {"species", "treatments", "resources",
                                                       "germination", "team"}
