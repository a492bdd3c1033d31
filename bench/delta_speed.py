"""Time delta exports in process: `Session.export` after a paragraph is added to one
species file, as `fednode export --watch` runs it without the watch's own waiting (its
`QUIET` time and inotify), with the CPU each edit takes (the export's process, and the
processes it forks).

    TMPDIR=/dev/shm .venv/bin/python bench/delta_speed.py [--records 100000] [--edits 8]

The node is bench/export_speed.py's synthetic one. Its first export is whole (not timed);
then `--edits` edits, one a second (the ledger stamps events to the second), after two
not counted: the first is made whole (a node's first export leaves no build before it for
an edit to start from; `--watch` has its preparation make one, which this bench does not
call), the second loads what the process keeps. The pure Python reference
loop is printed before and after."""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from builders import copy_sample, multiply  # noqa: E402
from export_speed import edit_body, germination_table, synthetic_species  # noqa: E402
from timing import PAUSE, reference_loop  # noqa: E402

from exporter.pipeline.delta import Session  # noqa: E402
from exporter.project.config import Project  # noqa: E402


def cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--csv-rows", type=int, default=10_000)
    parser.add_argument("--edits", type=int, default=8)
    args = parser.parse_args()
    print(f"reference loop {reference_loop():.2f} s")
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as name:
        root = copy_sample(Path(name) / "node")
        table = root / "content" / "germination" / "bulk.csv"
        table.write_text(germination_table(root / "content" / "germination" / "results.csv",
                                           args.csv_rows))
        multiply(root / "content", args.records - args.csv_rows)
        session = Session(Project(root))
        session.export(None)
        synthetic_species(root)
        times, spent = [], []
        for n in range(1, args.edits + 3):
            time.sleep(PAUSE)
            edit_body(root, n)
            path, started, used = synthetic_species(root)[n], time.perf_counter(), cpu()
            session.export({path})
            if n == 2:
                deltas = session.deltas
            if n > 2:
                times.append(time.perf_counter() - started)
                spent.append(cpu() - used)
        assert session.deltas == deltas + args.edits and not session.failures, \
            (session.deltas, session.whole, session.failures)
    print(f"delta export after a paragraph is added, in process: {statistics.median(times):.3f} s "
          f"(median of {len(times)}; {min(times):.3f}-{max(times):.3f} s), "
          f"CPU {statistics.median(spent):.3f} s an edit (median)")
    print(f"reference loop {reference_loop():.2f} s")


if __name__ == "__main__":
    main()
