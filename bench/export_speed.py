"""Time a full export of N synthetic records and an incremental export after one edit.

    .venv/bin/python bench/export_speed.py [--records 100000]

The records are cloned from the bundled sample (fresh ids, distinct titles), spread over the
collections like the sample. Each export runs as its own `fednode export` process, so the
wall time includes start-up and the peak memory (max RSS) is that process's alone."""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from builders import copy_sample, multiply  # noqa: E402


def timed_export(root: Path) -> tuple[float, float, str]:
    """Run one export; return wall seconds, peak RSS in MiB and its summary line."""
    command = [str(Path(sys.executable).parent / "fednode"), "export", "--project", str(root)]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    output = process.stdout.read().decode() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export failed: {output}")
    return seconds, usage.ru_maxrss / 1024, output.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as folder:
        root = copy_sample(Path(folder))
        started = time.perf_counter()
        multiply(root / "content", args.records)
        print(f"generated {args.records} synthetic records in "
              f"{time.perf_counter() - started:.1f}s")
        full, full_rss, summary = timed_export(root)
        print(f"full export:        {full:6.2f} s wall, peak RSS {full_rss:6.0f} MiB")
        print(f"  {summary}")
        target = next((root / "content" / "species").glob("synthetic-*.md"))
        text = target.read_text()
        target.write_text(re.sub(r'scientificName = "([^"]*)"', r'scientificName = "\1 edited"',
                                 text, count=1))
        incremental, inc_rss, summary = timed_export(root)
        print(f"incremental export: {incremental:6.2f} s wall, peak RSS {inc_rss:6.0f} MiB")
        print(f"  {summary}")
        files = sum(len(names) for _, _, names in os.walk(root / "site_out"))
        print(f"site_out files: {files}; self max RSS {resource.getrusage(0).ru_maxrss // 1024} "
              f"MiB")


if __name__ == "__main__":
    main()
