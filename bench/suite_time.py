"""How long the test suite takes from a clean clone, as CI runs it: the whole suite,
`./scripts/test`, and the developer's loop, `./scripts/test -m "not slow"`, with the
reference loop before and after.

    .venv/bin/python bench/suite_time.py [--commit REV] [--loop-only]

Clones the repository at REV (default HEAD) into a temporary folder and runs, there, with
CI=true: `./scripts/test --collect-only` (the install: venv, pip, the tools tests drive,
from the machine's package caches), then the developer's loop, then the whole suite, each
timed from the command's start (its install step included, which then finds everything
installed). Prints each wall time, pytest's summary line and the slowest tests."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import reference_loop  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, CI="true"))
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--loop-only", action="store_true",
                        help="time the developer's loop only")
    args = parser.parse_args()
    print(f"reference loop {reference_loop():.2f} s")
    with tempfile.TemporaryDirectory(prefix="fednode-suite-") as folder:
        clone = Path(folder) / "fednode"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", args.commit], cwd=clone, check=True)
        runs = [("install", ["./scripts/test", "--collect-only", "-q"]),
                ("developer's loop", ["./scripts/test", "-m", "not slow"])]
        if not args.loop_only:
            runs.append(("whole suite", ["./scripts/test"]))
        for name, command in runs:
            seconds, output = timed(command, clone)
            lines = output.strip().splitlines()
            summary = lines[-1] if lines else ""
            print(f"{name}: {seconds:.0f} s wall ({' '.join(command)}): {summary}")
            slowest = [line for line in lines if line[:1].isdigit() and "s call" in line]
            for line in slowest[:15]:
                print(f"    {line}")
    print(f"reference loop {reference_loop():.2f} s")


if __name__ == "__main__":
    main()
