"""Compare two versions of fednode on the same export, alternating, in one run: the first
export of an imported Darwin Core checklist, and an export after one imported taxon is edited;
or (`--node sample`, `--node synthetic`) the first export of the bundled sample, or of the
bench's synthetic node (`bench/export_speed.py`'s: the sample grown to `--records`, a tenth
of them germination rows in one CSV).

    .venv/bin/python bench/compare_exports.py --before REV [--rounds 5]
        [--node checklist|sample|synthetic] [--records 100000]
        [--checklist /work/shared/data/alien-plants-belgium] [--folder /dev/shm]

The checked-out code is "after"; REV (a commit, e.g. HEAD~1) is checked out in a temporary
git worktree as "before". The checklist is imported once, by the checked-out code; each side
then exports fresh copies of that node, one side after the other in every round, so the
shared machine's drift over the run falls on both alike. One edit is timed on a copy of a node
the same side exported (its pages and cache are that side's own). Each export is
`python -m cli.main export` in a process of its own, its modules' bytecode kept, as
`bench/timing.py` runs commands. Prints every time (wall, and CPU: the export's process and
those it forked) and each side's median."""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import Node, copy_sample, multiply  # noqa: E402
from dwc_import import CHECKLIST, edit_one, machine_speed  # noqa: E402
from export_speed import germination_table  # noqa: E402
from timing import timed_command  # noqa: E402


def export(code: Path, root: Path) -> float:
    """Wall seconds of one export of `root` by the fednode whose source is `code`."""
    return timed_export(code, root)[0]


def timed_export(code: Path, root: Path) -> tuple[float, float]:
    """`export`'s wall seconds, and its CPU seconds (its own and its children's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cli.main", "export", "--project", str(root)],
                   cwd=root.parent, env={**os.environ, "PYTHONPATH": str(code)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def first_exports(source: Path, folder: Path, sides: dict[str, Path], rounds: int) -> None:
    """Each side's first export of fresh copies of `source`, alternating."""
    times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    for _ in range(rounds):
        for side, code in sides.items():
            times[side].append(timed_export(code, fresh(source, folder / "node")))
    print(f"first export of {source.name}")
    for side in sides:
        shown = ", ".join(f"{wall:.2f} s ({cpu:.1f} s CPU)" for wall, cpu in times[side])
        print(f"    {side:<6} {shown}; median "
              f"{statistics.median(w for w, _ in times[side]):.2f} s wall, "
              f"{statistics.median(c for _, c in times[side]):.1f} s CPU")


def synthetic_node(folder: Path, records: int) -> Path:
    """bench/export_speed.py's synthetic node: the sample grown to `records`, a tenth of
    them germination rows in one CSV table."""
    root = copy_sample(folder / "synthetic")
    rows = records // 10
    (root / "content" / "germination" / "bulk.csv").write_text(germination_table(
        root / "content" / "germination" / "results.csv", rows))
    multiply(root / "content", records - rows)
    return root


def fresh(source: Path, to: Path) -> Path:
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(source, to, symlinks=True)
    return to


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--node", choices=("checklist", "sample", "synthetic"),
                        default="checklist", help="what to export (default: the checklist)")
    parser.add_argument("--records", type=int, default=100_000,
                        help="the synthetic node's records")
    parser.add_argument("--checklist", type=Path, default=CHECKLIST)
    parser.add_argument("--folder", type=Path, default=None,
                        help="where to make the nodes (default: the system's temporary "
                             "folder); /dev/shm takes this disk's file creation out")
    args = parser.parse_args()
    print(f"reference: a pure Python loop, sum(range(3 * 10**7)), {machine_speed():.2f} s")
    with tempfile.TemporaryDirectory(dir=args.folder) as name:
        folder = Path(name)
        before = folder / "before-code"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q",
                        str(before), args.before], check=True)
        try:
            sides = {"before": before, "after": REPO}
            if args.node != "checklist":
                source = copy_sample(folder / "sample") if args.node == "sample" else \
                    synthetic_node(folder, args.records)
                first_exports(source, folder, sides, args.rounds)
                return
            imported = folder / "imported"
            Node(imported)
            timed_command("import", "dwc", str(args.checklist), "--project", str(imported))
            exported = {}
            for side, code in sides.items():
                exported[side] = fresh(imported, folder / f"exported-{side}")
                export(code, exported[side])
            firsts: dict[str, list[float]] = {side: [] for side in sides}
            edits: dict[str, list[float]] = {side: [] for side in sides}
            for n in range(args.rounds):
                for side, code in sides.items():
                    firsts[side].append(export(code, fresh(imported, folder / "node")))
                    edited = fresh(exported[side], folder / "node")
                    edit_one(edited, n)
                    edits[side].append(export(code, edited))
            for label, times in (("first export of the import", firsts),
                                 ("export after one taxon edited", edits)):
                print(label)
                for side in sides:
                    shown = ", ".join(f"{t:.2f}" for t in times[side])
                    print(f"    {side:<6} {shown} s (median {statistics.median(times[side]):.2f})")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(before)], check=False)
            print(f"before: {args.before}; reference again: {machine_speed():.2f} s")


if __name__ == "__main__":
    main()
