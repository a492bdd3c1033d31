"""Time a Darwin Core checklist through fednode: the import, the first export of the imported
taxa, an export with nothing changed, an export after one imported taxon is edited, and a
re-import of the same source (which writes nothing), and seven edits under `fednode export
--watch` (from saving the file to the export reported done), then `fednode --help`, `check`
and `new species` on the imported node. Then the import, and the re-import, of a generated
checklist of `--generated` taxa (50,000 by default: names made up, nine in ten plants, one
distribution row each) into an empty node. A pure Python loop is timed before and after, as
a reference for the machine's speed during the run.

    .venv/bin/python bench/dwc_import.py [--checklist /work/shared/data/alien-plants-belgium]
        [--sample] [--folder /dev/shm] [--generated 50000] [--import-only]

The node is empty but for node.toml (with --sample: the bundled sample, whose 22 species
that the Belgian checklist also holds are reported and not imported). Each command runs as
its own process, as a publisher runs it: wall time includes start-up."""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
import exporter  # noqa: E402,F401  (the package, before tests/exporter, its tests, is on the path)

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import Node, copy_sample  # noqa: E402
from export_speed import publisher_commands, timed_export  # noqa: E402
from timing import reference_loop, timed_command, watched_edits  # noqa: E402

CHECKLIST = Path("/work/shared/data/alien-plants-belgium")


def timed(*args: str) -> tuple[float, float, str]:
    """Run one fednode command; return wall seconds, CPU seconds and its last line."""
    wall, cpu, _, output = timed_command(*args)
    return wall, cpu, output.splitlines()[-1]


def line(label: str, wall: float, cpu: float, summary: str) -> None:
    print(f"{label:<34} {wall:6.2f} s wall {cpu:6.2f} s CPU")
    print(f"    {summary}")


def edit_one(root: Path, n: int = 0) -> Path:
    """Give one imported taxon (the n-th of those whose file name starts with "a") a field
    of the publisher's own (tags), by hand: a re-import keeps it."""
    path = sorted((root / "content" / "species").glob("a*.md"))[n]
    text = path.read_text()
    edited = re.sub(r'^(id = .*)$', r'\1\ntags = ["edited"]', text, count=1, flags=re.M)
    assert edited != text, path
    path.write_text(edited)
    return path


def machine_speed() -> float:
    """Seconds this machine takes now for a pure Python loop, `sum(range(3 * 10**7))`, in a
    process of its own: the goals are in seconds, and this shared machine's speed moves by
    a factor of two from one run to another (docs/darwin-core.md gives figures of several
    runs)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "sum(range(3 * 10**7))"], check=True)
    return time.perf_counter() - started


def generated_checklist(folder: Path, taxa: int) -> Path:
    """A CSV checklist of `taxa` made-up taxa (`Generatus abcd L.`, every name its own),
    one in ten of them Animalia, each with one distribution row."""
    folder.mkdir(parents=True)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def epithet(n: int) -> str:
        word = ""
        for _ in range(5):
            n, rest = divmod(n, 26)
            word += letters[rest]
        return word

    with open(folder / "taxon.csv", "w", newline="", encoding="utf-8") as core, \
            open(folder / "distribution.csv", "w", newline="", encoding="utf-8") as regions:
        taxon = csv.writer(core, lineterminator="\n")
        region = csv.writer(regions, lineterminator="\n")
        taxon.writerow(["taxonID", "scientificName", "kingdom", "family", "taxonRank",
                        "institutionCode", "datasetID"])
        region.writerow(["taxonID", "locationID", "locality", "occurrenceStatus",
                         "establishmentMeans", "pathway"])
        for n in range(taxa):
            animal = n % 10 == 9
            taxon.writerow([f"gen:{n}", f"Generatus {epithet(n)} L.",
                            "Animalia" if animal else "Plantae",
                            "Generidae" if animal else "Rosaceae", "species", "BENCH",
                            "urn:bench:generated"])
            region.writerow([f"gen:{n}", "ISO_3166-2:BE", "Belgium", "present", "introduced",
                             "horticulture"])
    return folder


def time_generated(base: Path | None, taxa: int) -> None:
    print(f"reference loop in process: {reference_loop():.2f} s")
    with tempfile.TemporaryDirectory(dir=base) as folder:
        source = generated_checklist(Path(folder) / "generated", taxa)
        root = Path(folder) / "node"
        Node(root)
        line(f"import of {taxa:,} generated taxa", *timed("import", "dwc", str(source),
                                                          "--project", str(root)))
        line("re-import of the same source", *timed("import", "dwc", str(source),
                                                     "--project", str(root)))
    print(f"reference loop in process: {reference_loop():.2f} s")


def time_exports(root: Path, checklist: Path) -> None:
    """The exports and edits after an import, each its own process."""
    wall, cpu, _, summary = timed_export(root)
    line("first export of the import", wall, cpu, summary)
    wall, cpu, _, summary = timed_export(root)
    line("export, nothing changed", wall, cpu, summary)
    edited = edit_one(root)
    wall, cpu, _, summary = timed_export(root)
    line(f"export after editing {edited.name}", wall, cpu, summary)
    line("re-import after that edit", *timed("import", "dwc", str(checklist), "--project",
                                             str(root)))
    times = sorted(watched_edits(root, 7, edit_one))
    print(f"export --watch, one taxon edited: saved to exported in {times[3]:.2f} s "
          f"(median of 7; {times[0]:.2f}-{times[-1]:.2f} s)")
    publisher_commands(root, "Abies alba")
    archive = root / "site_out" / "download" / "species-dwca.zip"
    table = root / "site_out" / "download" / "species.csv"
    print(f"archive {archive.stat().st_size / 1e6:.2f} MB; species.csv "
          f"{table.stat().st_size / 1e6:.2f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checklist", type=Path, default=CHECKLIST)
    parser.add_argument("--sample", action="store_true",
                        help="import into the bundled sample instead of an empty node")
    parser.add_argument("--folder", type=Path, default=None,
                        help="where to make the node (default: the system's temporary "
                             "folder); /dev/shm takes this disk's file creation out")
    parser.add_argument("--generated", type=int, default=50_000,
                        help="taxa of the generated checklist (0: none)")
    parser.add_argument("--import-only", action="store_true",
                        help="time the imports only, not the exports and edits after them")
    args = parser.parse_args()
    print(f"reference: a pure Python loop, sum(range(3 * 10**7)), {machine_speed():.2f} s")
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        root = Path(folder) / "node"
        if args.sample:
            copy_sample(root)
        else:
            Node(root)
        project = ("--project", str(root))
        line("import", *timed("import", "dwc", str(args.checklist), *project))
        files = len(list((root / "content" / "species").glob("*.md")))
        print(f"    {files} species files in content/species/")
        line("re-import of the same source", *timed("import", "dwc", str(args.checklist),
                                                     *project))
        if not args.import_only:
            time_exports(root, args.checklist)
    if args.generated:
        time_generated(args.folder, args.generated)
    print(f"reference again: {machine_speed():.2f} s")


if __name__ == "__main__":
    main()
