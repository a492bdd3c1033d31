"""Dry-run `fednode import dwc` over every GRIIS archive of the GRIIS compendium
(github.com/jhnwllr/griis-compendium, `data/zip/*.zip`): how many import, how many are
refused and why (grouped), and the rows left out by reason; the same with `--strict` (the
all-or-nothing import) for comparison.

    .venv/bin/python bench/griis_import.py --compendium /path/to/griis-compendium
    .venv/bin/python bench/griis_import.py --git-dir /work/.mirror/jhnwllr+griis-compendium/repo

The archives are unpacked (from a checkout, or from a bare git directory with `git
archive`) into a scratch folder under the system's temporary folder, imported into an
empty node there with nothing written, and the scratch folder is deleted."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from cli.main import main
from exporter.darwincore.importer import plan_import
from exporter.darwincore.source import read_checklist
from exporter.project.config import Project
from exporter.shared.errors import ContentError, Problem


def reason(problem: Problem) -> str:
    """A problem without its values, line and file: what groups it with its kind."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "…", problem.message)
    text = re.sub(r"\d[\d,.]*", "N", text)
    return f"{problem.field}: {text}" if problem.field else text


def archives(args: argparse.Namespace, scratch: Path) -> list[Path]:
    if args.compendium:
        return sorted((Path(args.compendium) / "data" / "zip").glob("*.zip"))
    tar = subprocess.run(["git", f"--git-dir={args.git_dir}", "archive", "HEAD", "data/zip"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "x", "-C", str(scratch)], input=tar, check=True)
    return sorted((scratch / "data" / "zip").glob("*.zip"))


def measure(paths: list[Path], project: Project, *, strict: bool) -> None:
    imported = 0
    refused: Counter[str] = Counter()
    left_rows: Counter[str] = Counter()
    rows = left = records = synonyms = 0
    for path in paths:
        dataset = f"urn:griis:{path.stem}"
        try:
            plan = plan_import(project, read_checklist(path), dataset=dataset, strict=strict)
        except ContentError as error:
            refused.update({reason(p) for p in error.problems})  # an archive once a reason
            refused["(archives refused)"] += 1
            continue
        imported += 1
        rows += plan.rows
        left += plan.rows_left_out
        records += len(plan.added)
        synonyms += plan.synonyms
        for gone in plan.left_out:
            for problem in gone.problems[:1]:
                left_rows[reason(problem)] += gone.rows
    mode = "--strict" if strict else "default"
    print(f"\n## {mode}: {imported} of {len(paths)} archives import; "
          f"{refused['(archives refused)']} refused")
    print(f"rows of the archives imported: {rows:,}; left out {left:,}; "
          f"records {records:,}; synonyms attached {synonyms:,}")
    print("archives refused, by reason (an archive may have several):")
    for text, count in refused.most_common():
        if text != "(archives refused)":
            print(f"  {count:4}  {text}")
    if not strict:
        print("rows left out, by reason (a taxon with its extension rows):")
        for text, count in left_rows.most_common():
            print(f"  {count:6,}  {text}")


def main_(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--compendium", help="a checkout of jhnwllr/griis-compendium")
    source.add_argument("--git-dir", help="a bare git directory of it")
    parser.add_argument("--limit", type=int, default=0, help="only the first N archives")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fednode-griis-") as folder:
        scratch = Path(folder)
        paths = archives(args, scratch)
        paths = paths[:args.limit] if args.limit else paths
        node = scratch / "node"
        result = CliRunner().invoke(main, ["init", str(node)])
        assert result.exit_code == 0, result.output
        project = Project(node)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent).stdout.strip()
        print(f"fednode {commit}: {len(paths)} GRIIS archives, dry run into an empty node")
        for strict in (False, True):
            measure(paths, project, strict=strict)


if __name__ == "__main__":
    main_(sys.argv[1:])
