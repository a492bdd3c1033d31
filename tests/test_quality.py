"""One command checks everything: the linter and the type checker run as tests."""

from __future__ import annotations

import subprocess
import sys

from builders import REPO


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_ruff() -> None:
    result = run("ruff", "check", "cli", "exporter", "sidecar", "hub", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
