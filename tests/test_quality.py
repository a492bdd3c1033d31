"""One command checks everything: the linter and the type checker run as tests."""

from __future__ import annotations

import hashlib
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


def checkout_cache(tmp_path: Path) -> Path:
    """A cache of this checkout's kept between runs, beside the tests' vectors
    (FEDNODE_CACHE_DIR, tests/conftest.py): mypy's incremental cache checks each module
    against its source and mypy's version, so a warm one reports what a cold one does.
    Without that folder, one of the test's own."""
    base = os.environ.get("FEDNODE_CACHE_DIR")
    if not base:
        return tmp_path
    return Path(base) / "checkers" / hashlib.sha256(str(REPO).encode()).hexdigest()[:12]


def test_ruff(tmp_path: Path) -> None:
    result = run("ruff", "check", "cli", "exporter", "sidecar", "hub", "tests", "bench",
                 cache=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy(tmp_path: Path) -> None:
    result = run("mypy", cache=checkout_cache(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
