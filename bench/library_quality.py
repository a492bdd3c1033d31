"""Library answer quality: citation hit rate, citation precision and refusals, measured on
the judged questions of bench/library_judged.json over the bundled sample's library.

    .venv/bin/python bench/library_quality.py [--sweep]

- hit rate: of the answerable questions, the share answered with at least one citation of
  a page that answers it;
- precision: of all citations given to answerable questions, the share on such a page;
- refusals: of the questions the library cannot answer, the share refused (no answer).
Each figure is given for the tuning set (on which the thresholds were chosen), for the
held-out questions (written after the method was designed, never used to choose it), and
for all of them.
Questions answerable only from a restricted document count as unanswerable for a caller
without its group (the first table), and as answerable for one with it (the second).
`--sweep` prints the three figures for a range of evidence thresholds and weights (how
EVIDENCE and EVIDENCE_WORDS in sidecar/library.py were chosen)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from builders import copy_sample  # noqa: E402

from exporter.build import build  # noqa: E402
from exporter.config import Project  # noqa: E402
from sidecar import library  # noqa: E402
from sidecar.store import Snapshot  # noqa: E402


def slugs(root: Path) -> dict[str, str]:
    """PDF slug -> the id of its record."""
    import tomllib
    found = {}
    for path in (root / "content" / "library").glob("*.md"):
        front = path.read_text("utf-8").split("+++")[1]
        found[path.stem] = tomllib.loads(front)["id"]
    return found


def measure(snapshot: Snapshot, questions: list[dict[str, Any]], ids: dict[str, str],
            groups: list[str]) -> tuple[float, float, float, int, int]:
    hits = cited = good = refused = 0
    answerable = unanswerable = 0
    for question in questions:
        can = question["answerable"] and question.get("access", "public") in groups
        found = library.answer(snapshot, groups, question["q"], 3)
        if not can:
            unanswerable += 1
            refused += not found["grounded"]
            continue
        answerable += 1
        right = {(ids[p["document"]], p["page"]) for p in question["pages"]}
        pages = [(c["document_id"], c["page"]) for c in found["citations"]]
        hits += any(page in right for page in pages)
        cited += len(pages)
        good += sum(page in right for page in pages)
    return (hits / max(answerable, 1), good / max(cited, 1), refused / max(unanswerable, 1),
            answerable, unanswerable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    questions = json.loads((REPO / "bench" / "library_judged.json").read_text())["questions"]
    with tempfile.TemporaryDirectory(prefix="fednode-library-") as name:
        root = copy_sample(Path(name) / "node")
        build(Project(root))
        snapshot = Snapshot(root / ".fednode" / "bundle")
        ids = slugs(root)
        sets = {"tuning": [q for q in questions if q.get("set") != "held-out"],
                "held-out": [q for q in questions if q.get("set") == "held-out"],
                "all": questions}
        print("| questions | caller | answerable | unanswerable | hit rate | precision | "
              "refused |")
        print("|---|---|---|---|---|---|---|")
        for name, chosen in sets.items():
            for label, groups in (("without groups", ["public"]),
                                  ("holding `sensitive`", ["public", "sensitive"])):
                hit, precision, refused, n_yes, n_no = measure(snapshot, chosen, ids, groups)
                print(f"| {name} | {label} | {n_yes} | {n_no} | {hit:.2f} | {precision:.2f} | "
                      f"{refused:.2f} |")
        questions = sets["tuning"]  # thresholds are chosen on these alone
        if args.sweep:
            print("\n| words' weight | evidence | hit rate | precision | refused |\n"
                  "|---|---|---|---|---|")
            for words in (0.15, 0.2, 0.3, 0.5, 0.7):
                for evidence in (0.35, 0.38, 0.40, 0.42, 0.43, 0.45, 0.50):
                    library.EVIDENCE_WORDS, library.EVIDENCE = words, evidence
                    hit, precision, refused, _, _ = measure(snapshot, questions, ids,
                                                            ["public"])
                    print(f"| {words:.2f} | {evidence:.2f} | {hit:.2f} | {precision:.2f} | "
                          f"{refused:.2f} |")


if __name__ == "__main__":
    main()
