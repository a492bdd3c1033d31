"""Time exports of a large node: full, after one Markdown edit, after one CSV-row edit and
after a base_url change, then Markdown edits under `fednode export --watch` (from saving
the file to the export reported done: a species renamed, a paragraph added; each brought up
to date from the last export, `exporter.pipeline.delta`), then `fednode --help`, `check` and
`new` on it; then a real checklist as one CSV, fresh and after a base_url change.

    .venv/bin/python bench/export_speed.py [--records 100000] [--csv-rows 10000]
        [--checklist /work/shared/data/alien-plants-belgium/taxon.csv]

The synthetic node is the bundled sample plus Markdown records cloned from it (fresh ids,
distinct titles, spread over the collections like the sample), with `--csv-rows` germination
results in one CSV table. The checklist node holds the taxa of a Darwin Core checklist as
one species CSV. Each export runs as its own `fednode export` process: wall time includes
start-up; CPU is the process's user + system time (on a shared machine, the steadier
figure); peak memory is its maximum RSS."""

from __future__ import annotations

import argparse
import csv
import functools
import io
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import NODE_TOML, copy_sample, multiply  # noqa: E402
from timing import reference_loop, timed_command, watched_edits  # noqa: E402

CHECKLIST = Path("/work/shared/data/alien-plants-belgium/taxon.csv")
RANKS = ("species", "subspecies", "variety", "form", "hybrid", "genus")


def timed_export(root: Path, *options: str) -> tuple[float, float, float, str]:
    """Run one export; return wall seconds, CPU seconds, peak RSS in MiB and its summary."""
    return timed_command("export", "--project", str(root), *options)


def report(label: str, root: Path, *options: str) -> None:
    wall, cpu, rss, summary = timed_export(root, *options)
    print(f"{label:<28} {wall:7.2f} s wall {cpu:7.2f} s CPU  peak RSS {rss:6.0f} MiB")
    print(f"    {summary}")


def publisher_commands(root: Path, name: str) -> None:
    """The commands a publisher runs besides the export, on an exported node: `--help`,
    `check` (which finds duplicate names through the export's cache) and `new species`
    with `name` (which looks for the name's other users the same way; its file is
    removed again)."""
    project = ("--project", str(root))
    for label, args in (("fednode --help", ("--help",)), ("fednode check", ("check", *project)),
                        (f"fednode new species {name!r}", ("new", "species", name, *project))):
        # (no peak RSS: a small command's is that of the bench process it was forked from)
        wall, cpu, _, output = timed_command(*args)
        print(f"{label:<34} {wall:7.2f} s wall {cpu:7.2f} s CPU")
        if args[0] == "new":
            Path(output.splitlines()[-1]).unlink()


def germination_table(sample: Path, rows: int) -> str:
    """`rows` germination results cloned from the sample's table, fresh ids and titles."""
    with open(sample, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        templates = [row for row in reader if not row.get("access")]
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, lineterminator="\n")
    writer.writeheader()
    for n in range(rows):
        row = dict(templates[n % len(templates)])
        row["id"] = str(uuid.UUID(int=(n + 1) << 80 | 0x4000 << 48 | 2))
        row["title"] = f"{row['title']} #{n}"
        writer.writerow(row)
    return out.getvalue()


@functools.cache
def synthetic_species(root: Path) -> list[Path]:
    """The synthetic species files, in name order: listed once, so that the times of edits
    under `--watch` (from the save on) do not include finding the file (0.13 s at 100,000
    records)."""
    return sorted((root / "content" / "species").glob("synthetic-*.md"))


def edit_markdown(root: Path, n: int = 0) -> None:
    """Rename the species of the n-th synthetic species file."""
    target = synthetic_species(root)[n]
    target.write_text(re.sub(r'scientificName = "([^"]*)"', rf'scientificName = "\1 edited{n}"',
                             target.read_text(), count=1))


def edit_body(root: Path, n: int = 0) -> None:
    """Add a paragraph to the n-th synthetic species file: the edit `--watch` brings up to
    date without a whole export (docs/architecture.md, "Delta exports")."""
    target = synthetic_species(root)[n]
    target.write_text(target.read_text() + f"\nAnother paragraph, {n}.\n")


def edit_csv_row(table: Path) -> None:
    """Move one row, half-way down the table, from the nursery to the field."""
    lines = table.read_text().split("\n")
    row = next(n for n in range(len(lines) // 2, len(lines)) if ",nursery," in lines[n])
    lines[row] = lines[row].replace(",nursery,", ",field,", 1)
    table.write_text("\n".join(lines))


def synthetic(folder: Path, records: int, csv_rows: int) -> None:
    root = copy_sample(folder / "synthetic")
    started = time.perf_counter()
    sample_table = root / "content" / "germination" / "results.csv"
    table = root / "content" / "germination" / "bulk.csv"
    table.write_text(germination_table(sample_table, csv_rows))
    markdown = records - csv_rows
    multiply(root / "content", markdown)
    print(f"node: {markdown} Markdown records + {csv_rows} rows in one CSV (+ the sample); "
          f"generated in {time.perf_counter() - started:.1f}s")
    report("full export", root)
    report("export, nothing changed", root)
    edit_markdown(root)
    report("one Markdown edit", root)
    edit_csv_row(table)
    report("one CSV-row edit", root)
    report("base_url change", root, "--base-url", "https://bench.example.org")
    synthetic_species(root)  # listed before the edits' times start
    for label, edit in (("a species renamed", edit_markdown), ("a paragraph added", edit_body)):
        peak: list[float] = []
        times = sorted(watched_edits(root, 5, edit, peak))
        print(f"one Markdown edit under --watch ({label}): saved to exported in "
              f"{times[2]:.2f} s (median of 5; {times[0]:.2f}-{times[-1]:.2f} s); "
              f"peak RSS of the watching process {peak[0]:.0f} MiB")
    publisher_commands(root, "Impatiens glandulifera")
    files = sum(len(names) for _, _, names in os.walk(root / "site_out"))
    print(f"site_out files: {files}")


def checklist(folder: Path, source: Path) -> None:
    """A Darwin Core checklist as one species CSV, exported again after a `base_url` change."""
    root = folder / "checklist"
    (root / "content" / "species").mkdir(parents=True)
    (root / "content" / "node.toml").write_text(NODE_TOML)
    rows = 0
    with open(source, newline="") as handle, \
            open(root / "content" / "species" / "checklist.csv", "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "scientificName", "family", "kingdom", "taxonRank", "category",
                         "establishmentMeans", "taxonID"])
        for row in csv.DictReader(handle):
            if not re.fullmatch(r"[A-Z][a-z]+aceae", row["family"]) or \
                    row["taxonRank"] not in RANKS:
                continue
            writer.writerow([uuid.uuid5(uuid.NAMESPACE_URL, row["taxonID"]),
                             row["scientificName"], row["family"], row["kingdom"],
                             row["taxonRank"], "introduced", "introduced", row["taxonID"]])
            rows += 1
    print(f"checklist: {rows} taxa of {source} in one CSV")
    report("fresh export", root)
    shutil.rmtree(root / ".fednode" / "cache")
    report("export, cache deleted", root, "--base-url", "https://cache.example.org")
    report("base_url change", root, "--base-url", "https://bench.example.org")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--csv-rows", type=int, default=10_000)
    parser.add_argument("--checklist", type=Path, default=CHECKLIST)
    args = parser.parse_args()
    print(f"reference loop {reference_loop():.2f} s")  # (bench/RESULTS.md)
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as name:
        folder = Path(name)
        if args.checklist.exists():
            checklist(folder, args.checklist)
        synthetic(folder, args.records, args.csv_rows)
    print(f"reference loop {reference_loop():.2f} s")


if __name__ == "__main__":
    main()
