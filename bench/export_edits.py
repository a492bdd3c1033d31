"""Time `fednode export` as a publisher runs it, one fresh process an export, on a large node
on disk: the first export, an export with nothing changed, after one paragraph edited, and
after 100 mixed edits (60 bodies, 20 titles renamed, 10 records added, 10 deleted); for each,
wall time, CPU time (the process and the processes it forked) and peak RSS, against the
issue's goals. `--check` then exports a copy of the final content and ledger from scratch and
compares the two `site_out/` trees byte for byte.

    .venv/bin/python bench/export_edits.py [--records 100000] [--rounds 1] [--check]
        [--folder DIR] [--keep] [--node DIR] [--seed 1]

The node is the bundled sample plus `--records` public Markdown records cloned from it
(tests/builders.py's `multiply`: fresh ids, distinct titles, spread over the collections like
the sample). It is made in a new folder in `--folder` (default: $TMPDIR, else /tmp; the file
system it is on is printed: /dev/shm only when asked for). `--keep` keeps it; `--node DIR`
reuses a node a previous run kept (already exported: no generation, no first export).

Each round (`--rounds`) runs the three edit scenarios in turn. The edits are deterministic
(`--seed` and the round's number): the paragraph is added to one cloned species; of the mixed
edits, the 60 bodies get a paragraph each, the 20 renames change the collection's title field
(its schema's `x-fednode.titleField`: `scientificName`, `title` or `name`), all on distinct
cloned records (`synthetic-*.md`, which no record links to), the 10 deleted files are cloned
records too, and the 10 added ones are clones of the sample's public Markdown records with a
fresh (seeded) UUID and a title of their own (`… added r<round>-<n>`). Every export starts in
a later second than the one before ended: the ledger stamps events to the second. Edits are
made before the timer starts.

How it is measured: each export runs as `/usr/bin/time -f '%e %U %S %M' fednode export`.
Wall time is the bench's clock around it (start-up included); CPU is the user + system time
of the export and every process it waited for (its forked readers and workers), as wait4
reports them; peak RSS is time's `%M`: the largest resident set of any one process of the
export (the export or one of its children), not a sum. It is not `timing.timed_command`'s
`ru_maxrss`: that process is started from the bench by vfork, whose exec records the bench's
own high-water RSS as the child's, so a figure below the bench's size cannot be seen;
`/usr/bin/time`, a small process, forks the export itself. Beside it, "tree" is the largest
sum of the resident sets of the export's processes at one time, sampled every 50 ms (pages
that forked processes share are counted in each: an upper bound). The pure-Python reference
loop (bench/timing.py) is printed before and after, to read the figures against how fast the
shared machine ran."""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply, same_key  # noqa: E402
from timing import FEDNODE, PAUSE, reference_loop  # noqa: E402

TIME = "/usr/bin/time"
SCHEMAS = REPO / "exporter" / "project" / "schemas"
MIB = 1024 * 1024
GIB_MIB = 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
# The goals (wall seconds or None, peak RSS in MiB) of each scenario.
GOALS: dict[str, tuple[float | None, float]] = {
    "first export": (None, 1.5 * GIB_MIB),
    "nothing changed": (1.0, 500),
    "one paragraph edited": (1.0, 500),
    "100 mixed edits": (3.0, 500),
}
ADDED = re.compile(r"bench-added-r(\d+)-\d+\.md$")


@dataclass
class Run:
    """One timed export: wall and CPU seconds, peak RSS of its largest process and the
    sampled peak of its processes' sum (MiB), its summary line."""

    wall: float
    cpu: float
    rss: float
    tree: float
    summary: str


@dataclass
class Scenario:
    name: str
    runs: list[Run] = field(default_factory=list)


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and its descendants now (0 once it has gone)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * PAGE
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return total


def timed_export(root: Path, *options: str) -> Run:
    """One `fednode export` of `root` in a fresh process, under /usr/bin/time (see the
    module's docstring); a failed export stops the bench with its standard error."""
    with tempfile.TemporaryDirectory(prefix="fednode-time-") as scratch:
        report, errors = Path(scratch) / "time", Path(scratch) / "stderr"
        peak = [0]
        done = threading.Event()
        with open(errors, "wb") as stderr:
            started = time.perf_counter()
            process = subprocess.Popen(
                [TIME, "-f", "%e %U %S %M", "-o", str(report), FEDNODE, "export",
                 "--project", str(root), *options],
                stdout=subprocess.PIPE, stderr=stderr)

            def sample() -> None:
                while not done.wait(0.05):
                    peak[0] = max(peak[0], tree_rss(process.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            output = process.communicate()[0].decode()
            wall = time.perf_counter() - started
            done.set()
            sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"fednode export {' '.join(options)} of {root} failed "
                             f"({process.returncode}):\n{output}{errors.read_text()}")
        _, user, system, kib = report.read_text().split()[-4:]
    return Run(wall, float(user) + float(system), int(kib) / 1024, peak[0] / MIB,
               output.strip())


def file_system(folder: Path) -> str:
    """The type of the file system `folder` is on, from /proc/mounts."""
    best, kind = "", "?"
    target = str(folder.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount, fs = line.split()[:3]
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and \
                len(mount) >= len(best):
            best, kind = mount, fs
    return f"{kind} at {best}"


def title_fields() -> dict[str, str]:
    """Each collection's title field, as its schema names it."""
    return {path.name.removesuffix(".schema.json"):
            json.loads(path.read_text("utf-8"))["x-fednode"]["titleField"]
            for path in SCHEMAS.glob("*.schema.json")}


def cloned(content: Path) -> list[Path]:
    """The records `multiply` wrote (still there), in name order."""
    return sorted(content.glob("*/synthetic-*.md"))


def templates(content: Path) -> list[Path]:
    """The sample's public Markdown records, as `multiply` clones them."""
    return [path for path in sorted(content.glob("*/*.md"))
            if not path.name.startswith(("synthetic-", "bench-added-"))
            and path.parent.name != "library" and "access =" not in path.read_text("utf-8")]


def add_paragraph(path: Path, text: str) -> None:
    path.write_text(path.read_text("utf-8").rstrip("\n") + f"\n\n{text}\n", "utf-8")


def rename(path: Path, fields: dict[str, str], suffix: str) -> None:
    """Change the record's title field (its collection's), adding `suffix` to it."""
    key = fields[path.parent.name]
    text, count = re.subn(rf'^{key} = "(.*)"$', rf'{key} = "\1 {suffix}"',
                          path.read_text("utf-8"), count=1, flags=re.MULTILINE)
    assert count == 1, f"no {key} in {path}"
    path.write_text(text, "utf-8")


def clone(template: Path, target: Path, fields: dict[str, str], record_id: uuid.UUID,
          suffix: str) -> None:
    """A copy of `template` with another id and its title field ending in `suffix`."""
    key = fields[template.parent.name]
    text = re.sub(r'^id = ".*"$', f'id = "{record_id}"', template.read_text("utf-8"),
                  count=1, flags=re.MULTILINE)
    text = re.sub(rf'^{key} = "(.*)"$', rf'{key} = "\1 {suffix}"', text, count=1,
                  flags=re.MULTILINE)
    target.write_text(text, "utf-8")


def one_paragraph(content: Path, rng: random.Random, label: str) -> str:
    species = [path for path in cloned(content) if path.parent.name == "species"]
    target = rng.choice(species)
    add_paragraph(target, f"Another paragraph, {label}.")
    return f"paragraph added to {target.relative_to(content)}"


def mixed_edits(content: Path, rng: random.Random, round_number: int) -> str:
    """60 bodies, 20 renames, 10 additions, 10 deletions (see the module's docstring)."""
    fields = title_fields()
    chosen = rng.sample(cloned(content), 90)
    bodies, renamed, deleted = chosen[:60], chosen[60:80], chosen[80:]
    for n, path in enumerate(bodies):
        add_paragraph(path, f"Mixed edit r{round_number}-{n}: another paragraph.")
    for n, path in enumerate(renamed):
        rename(path, fields, f"renamed r{round_number}-{n}")
    sources = templates(content)
    for n in range(10):
        template = rng.choice(sources)
        record_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        clone(template, template.parent / f"bench-added-r{round_number}-{n}.md", fields,
              record_id, f"added r{round_number}-{n}")
    for path in deleted:
        path.unlink()
    return "60 bodies, 20 renamed, 10 added, 10 deleted"


def next_second(last_end: float) -> None:
    """Wait PAUSE seconds, and into a later second (of the clock the ledger stamps) than
    `last_end` (time.time() when the last export ended)."""
    time.sleep(PAUSE)
    while int(time.time()) <= int(last_end):
        time.sleep(0.05)


def tree_files(root: Path) -> dict[str, Path]:
    """Every file under `root` (a link to the build followed), by its relative path."""
    base = root.resolve()
    found = {}
    for folder, _, names in os.walk(base):
        for name in names:
            path = Path(folder) / name
            found[str(path.relative_to(base))] = path
    return found


def first_difference(one: Path, other: Path) -> str:
    a, b = one.read_bytes(), other.read_bytes()
    at = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a),
                                                                                      len(b)))
    return (f"{len(a)} vs {len(b)} bytes, first difference at byte {at}: "
            f"{a[max(0, at - 40):at + 40]!r} vs {b[max(0, at - 40):at + 40]!r}")


def compare_sites(edited: Path, fresh: Path, shown: int = 10) -> bool:
    """Print how the two `site_out/` trees differ (paths, then bytes; the first `shown`
    differences of each); True when they are the same."""
    one, other = tree_files(edited), tree_files(fresh)
    only_one, only_other = sorted(one.keys() - other.keys()), sorted(other.keys() - one.keys())
    differing = []
    for name in sorted(one.keys() & other.keys()):
        if not filecmp.cmp(one[name], other[name], shallow=False):
            differing.append(name)
    print(f"check: {len(one)} files after the edits, {len(other)} from scratch; "
          f"{len(only_one)} only after the edits, {len(only_other)} only from scratch, "
          f"{len(differing)} differ")
    for name in only_one[:shown]:
        print(f"    only after the edits: {name}")
    for name in only_other[:shown]:
        print(f"    only from scratch:    {name}")
    for name in differing[:shown]:
        print(f"    differs: {name}: {first_difference(one[name], other[name])}")
    return not (only_one or only_other or differing)


def check(root: Path, folder: Path) -> tuple[Run, bool]:
    """Export a copy of the node's content and ledger (and its signing key, which the
    manifest's signature names) from scratch, `--frozen` (the ledger must already hold every
    event); compare its site with the node's."""
    fresh = folder / "from-scratch"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    shutil.copytree(root / "content", fresh / "content", symlinks=True)
    shutil.copy(root / "ledger.jsonl", fresh / "ledger.jsonl")
    same_key(root, fresh)
    run = timed_export(fresh, "--frozen")
    show("from scratch (check)", run)
    return run, compare_sites(root / "site_out", fresh / "site_out")


def show(label: str, run: Run) -> None:
    print(f"{label:<24} {run.wall:7.2f} s wall {run.cpu:7.2f} s CPU  peak RSS "
          f"{run.rss:6.0f} MiB (tree {run.tree:6.0f} MiB)\n    {run.summary}", flush=True)


def table(scenarios: list[Scenario]) -> None:
    print(f"\n{'scenario':<22} {'wall s':>7} {'CPU s':>7} {'RSS MiB':>8} {'tree MiB':>9}  "
          f"{'goal':<22} goal met")
    for scenario in scenarios:
        if not scenario.runs:
            continue
        runs = scenario.runs
        wall = statistics.median(run.wall for run in runs)
        cpu = statistics.median(run.cpu for run in runs)
        rss = max(run.rss for run in runs)
        tree = max(run.tree for run in runs)
        seconds, memory = GOALS.get(scenario.name, (None, float("inf")))
        goal = "-" if memory == float("inf") else \
            (f"<= {seconds:g} s, " if seconds is not None else "") + (
                f"<= {memory / GIB_MIB:g} GiB" if memory >= GIB_MIB else f"<= {memory:g} MiB")
        met = "-" if memory == float("inf") else "met" if (
            (seconds is None or max(run.wall for run in runs) <= seconds) and rss <= memory
        ) else "NOT met"
        spread = f" ({min(r.wall for r in runs):.2f}-{max(r.wall for r in runs):.2f})" \
            if len(runs) > 1 else ""
        print(f"{scenario.name:<22} {wall:7.2f} {cpu:7.2f} {rss:8.0f} {tree:9.0f}  "
              f"{goal:<22} {met}{spread}")
    if any(len(scenario.runs) > 1 for scenario in scenarios):
        print("(wall and CPU: median of the rounds, wall range in brackets; RSS: the largest; "
              "a goal is met when every round meets it)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000,
                        help="cloned Markdown records added to the sample")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the node's folder is made (default $TMPDIR, else /tmp)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the edit scenarios")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", action="store_true",
                        help="compare the final site with a from-scratch export")
    parser.add_argument("--keep", action="store_true", help="keep the node's folder")
    parser.add_argument("--node", type=Path,
                        help="reuse this node (a previous run's, exported): no first export")
    args = parser.parse_args()
    if not Path(TIME).exists():
        raise SystemExit(f"{TIME} is needed (Debian's package `time`)")
    before = reference_loop()
    print(f"reference loop {before:.2f} s", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="fednode-edits-", dir=args.folder))
    scenarios = [Scenario(name) for name in GOALS]
    first, unchanged, paragraph, mixed = scenarios
    try:
        if args.node:
            root = args.node.resolve()
            if not (root / "site_out").exists():
                raise SystemExit(f"{root} has not been exported")
            print(f"node: {root} ({len(cloned(root / 'content'))} cloned records), on "
                  f"{file_system(root)}")
        else:
            root = copy_sample(folder / "node")
            started = time.perf_counter()
            multiply(root / "content", args.records)
            print(f"node: {root}, the sample + {args.records} cloned Markdown records, made "
                  f"in {time.perf_counter() - started:.1f} s, on {file_system(root)}",
                  flush=True)
            run = timed_export(root)
            first.runs.append(run)
            show(first.name, run)
        last_end = time.time()
        content = root / "content"
        done = [int(m.group(1)) for p in content.glob("*/bench-added-*")
                if (m := ADDED.search(p.name))]
        start = max(done, default=0) + 1  # a reused node: rounds after its earlier ones
        for number in range(start, start + args.rounds):
            rng = random.Random(args.seed * 1_000_003 + number)
            next_second(last_end)
            run = timed_export(root)
            last_end = time.time()
            unchanged.runs.append(run)
            show(f"{unchanged.name} (r{number})", run)
            next_second(last_end)
            said = one_paragraph(content, rng, f"r{number}")
            run = timed_export(root)
            last_end = time.time()
            paragraph.runs.append(run)
            show(f"{paragraph.name} (r{number})", run)
            print(f"    ({said})")
            next_second(last_end)
            said = mixed_edits(content, rng, number)
            run = timed_export(root)
            last_end = time.time()
            mixed.runs.append(run)
            show(f"{mixed.name} (r{number})", run)
            print(f"    ({said})")
        same = None
        if args.check:
            run, same = check(root, folder)
            scenarios.append(Scenario("from scratch (check)", [run]))
        table(scenarios)
        if same is not None:
            print(f"site after the edits == from-scratch export: "
                  f"{'yes, byte for byte' if same else 'NO (see above)'}")
        if args.keep and not args.node:
            print(f"kept: {root} (reuse with --node {root})")
    finally:
        if args.keep and not args.node:
            shutil.rmtree(folder / "from-scratch", ignore_errors=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"reference loop {before:.2f} s before, {reference_loop():.2f} s after")


if __name__ == "__main__":
    main()
