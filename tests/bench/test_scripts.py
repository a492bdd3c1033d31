"""The benchmarks under bench/ start as their docstrings say: run from anywhere, each finds
fednode's own packages (not the test folders of the same names) and answers --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from builders import REPO


def test_every_bench_script_starts_from_another_folder(tmp_path: Path) -> None:
    scripts = sorted(path for path in (REPO / "bench").glob("*.py") if path.stem != "timing")
    assert len(scripts) >= 15
    running = {path.name: subprocess.Popen([sys.executable, str(path), "--help"], cwd=tmp_path,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True)
               for path in scripts}
    failed = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=120)
        if process.returncode != 0 or "usage:" not in out:
            failed[name] = err.strip().splitlines()[-1:] or out[:200]
    assert not failed, failed
