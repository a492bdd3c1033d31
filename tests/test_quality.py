"""One command checks everything: the linter and the type checker run as tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import REPO


def run(*command: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """A checker over the checkout, its cache kept outside it (`cache`)."""
    env = dict(os.environ, RUFF_CACHE_DIR=str(cache / "ruff"), MYPY_CACHE_DIR=str(cache / "mypy"))
    return subprocess.run([sys.executable, "-m", *command], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env)


def test_ruff(tmp_path: Path) -> None:
    result = run("ruff", "check", "cli", "exporter", "sidecar", "hub", "tests", "bench",
                 cache=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy(tmp_path: Path) -> None:
    result = run("mypy", cache=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
