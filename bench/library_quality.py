"""Library answer quality: evidence hit rate, citation hit rate, citation precision and
refusals, measured on the judged questions of bench/library_judged.json over the bundled
sample's library.

    .venv/bin/python bench/library_quality.py [--tuning] [--sweep]

- evidence: of the answerable questions that name the sentence stating their answer
  ("evidence"), the share whose answer quotes that sentence, on its page, within its first
  three citations;
- hit rate: of the answerable questions, the share answered with at least one citation of
  a page that answers it;
- precision: of all citations given to answerable questions, the share on such a page;
- refusals: of the questions the library cannot answer, the share refused (no answer, no
  citations, a message).
Each figure is given for the tuning set (on which the settings were chosen), for the
held-out questions (written after the method was designed, never used to choose it), and
for all of them. Questions answerable only from a restricted document count as
unanswerable for a caller without its group (the first row of each part), and as
answerable for one with it (the second).
`--sweep` tries sentence score weightings on a grid at answer thresholds from 0.45 to
0.99, and prints the best by the sum of the tuning set's evidence hit rates and refusals
for callers with and without the `sensitive` group (how WEIGHTS and ANSWER in
sidecar/library.py were chosen). `--tuning` measures and prints the tuning set alone: the
figures to work with while choosing settings, with nothing of the held-out part shown."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from builders import copy_sample  # noqa: E402

from exporter.pipeline.build import build  # noqa: E402
from exporter.project.config import Project  # noqa: E402
from sidecar import library  # noqa: E402
from sidecar.store import Snapshot  # noqa: E402

CITED = 3  # the evidence sentence counts within the first this many citations


class Figures(NamedTuple):
    evidence: float
    hit_rate: float
    precision: float
    refused: float
    with_evidence: int
    answerable: int
    unanswerable: int

    def counted(self) -> tuple[str, str, str]:
        """The evidence hit rate, hit rate and refusals with what they count
        ("0.897 (70/78)"): two decimals alone round 0.897 up to a goal of 0.9."""
        return (f"{self.evidence:.3f} ({round(self.evidence * self.with_evidence)}/"
                f"{self.with_evidence})",
                f"{self.hit_rate:.3f} ({round(self.hit_rate * self.answerable)}/"
                f"{self.answerable})",
                f"{self.refused:.3f} ({round(self.refused * self.unanswerable)}/"
                f"{self.unanswerable})")


def slugs(root: Path) -> dict[str, str]:
    """PDF slug -> the id of its record."""
    import tomllib
    found = {}
    for path in (root / "content" / "library").glob("*.md"):
        front = path.read_text("utf-8").split("+++")[1]
        found[path.stem] = tomllib.loads(front)["id"]
    return found


class Judged(NamedTuple):
    """One judged question as the library weighs it for one caller."""
    answerable: bool  # for this caller
    right: set[tuple[str, int]]  # (document id, page) that answer it
    evidence: str | None  # the sentence that states the answer, if judged
    unknown: bool  # refused at once: it names something the library never mentions
    weighed: library.Weighed


def _same(text: str) -> str:
    return " ".join(text.split())


def quotes_evidence(evidence: str, right: set[tuple[str, int]],
                    cited: list[tuple[str, int, str]]) -> bool:
    """Whether one of the first CITED citations (document id, page, quote) quotes the
    evidence sentence on a page that answers: the quote holds it, or is most of it (a
    quote leaves out a heading the extracted sentence may carry)."""
    said = _same(evidence)
    for document_id, page, quote in cited[:CITED]:
        quoted = _same(quote)
        if (document_id, page) in right and (
                said in quoted or (quoted in said and len(quoted) > len(said) / 2)):
            return True
    return False


def tally(outcomes: list[tuple[bool, set[tuple[str, int]], str | None, dict[str, Any] | None,
                               list[tuple[str, int, str]]]]) -> Figures:
    """The figures of (answerable, right pages, evidence, refusal or None, citations)."""
    evidence = with_evidence = hits = cited = good = refused = answerable = 0
    for can, right, said, refusal, citations in outcomes:
        if not can:
            refused += refusal is not None
            continue
        answerable += 1
        pages = [(document_id, page) for document_id, page, _ in citations]
        hits += any(page in right for page in pages)
        cited += len(pages)
        good += sum(page in right for page in pages)
        if said is not None:
            with_evidence += 1
            evidence += quotes_evidence(said, right, citations)
    unanswerable = len(outcomes) - answerable
    return Figures(evidence / max(with_evidence, 1), hits / max(answerable, 1),
                   good / max(cited, 1), refused / max(unanswerable, 1), with_evidence,
                   answerable, unanswerable)


def measure(snapshot: Snapshot, questions: list[dict[str, Any]], ids: dict[str, str],
            groups: list[str]) -> Figures:
    """The figures of the answers `library.answer` gives: what a caller gets. A refusal is
    no answer, no citations and a message."""
    outcomes = []
    for question in questions:
        can, right = _judged(question, ids, groups)
        found = library.answer(snapshot, groups, question["q"], 3)
        refusal = found if (found["answer"] is None and not found["citations"]
                            and found.get("message")) else None
        outcomes.append((can, right, question.get("evidence"), refusal,
                         [(c["document_id"], c["page"], c["quote"]) for c in found["citations"]]))
    return tally(outcomes)


def judge(snapshot: Snapshot, questions: list[dict[str, Any]], ids: dict[str, str],
          groups: list[str]) -> list[Judged]:
    """Each question weighed once, for the sweep to try settings on."""
    indexes = snapshot.passage_groups(groups)
    judged = []
    for question in questions:
        can, right = _judged(question, ids, groups)
        asked = library.search.as_asked(question["q"])
        judged.append(Judged(can, right, question.get("evidence"),
                             bool(library.unknown_names(asked, indexes)),
                             library.weigh(indexes, asked)))
    return judged


def figures(judged: list[Judged], weights: tuple[float, ...], threshold: float,
            ranked: list[library.Weighed] | None = None) -> Figures:
    """The figures `measure` would give with these weights and answer threshold (`ranked`:
    each question's quotes ranked with these weights already)."""
    outcomes = []
    ranked = ranked or [library.ranked(one.weighed.quotes, weights) for one in judged]
    for one, weighed in zip(judged, ranked, strict=True):
        chosen = [] if one.unknown or weighed.evidence < threshold else \
            library.choose(weighed.quotes, 3)
        outcomes.append((one.answerable, one.right, one.evidence, None if chosen else {},
                         [(str(q.passage[0]), int(q.passage[1]), q.sentence) for q in chosen]))
    return tally(outcomes)


# The sweep's grid: each part of `library.Score` (its closeness in meaning fixed at 0.5).
GRID = ((0.5,), (0.0, 0.1), (0.1,), (0.2, 0.3), (0.05, 0.1), (0.1, 0.2), (0.2, 0.4),
        (0.0, 0.1, 0.2), (0.0, 0.2))


def sweep(callers: list[list[Judged]]) -> list[tuple[tuple[float, ...], float, list[Figures]]]:
    """Each weighting of GRID at each answer threshold from 0.45 to 0.99, with each
    caller's figures; best first by the sum of the evidence hit rates and refusals of the
    callers (an answer found and a refusal kept count alike)."""
    found = []
    for weights in itertools.product(*GRID):
        ranks = [[library.ranked(one.weighed.quotes, weights) for one in judged]
                 for judged in callers]
        for step in range(45, 100):
            threshold = step / 100
            there = [figures(judged, weights, threshold, ranked)
                     for judged, ranked in zip(callers, ranks, strict=True)]
            found.append((weights, threshold, there))
    return sorted(found, key=lambda f: -sum(c.evidence + c.refused for c in f[2]))


def _judged(question: dict[str, Any], ids: dict[str, str], groups: list[str]
            ) -> tuple[bool, set[tuple[str, int]]]:
    can = question["answerable"] and question.get("access", "public") in groups
    return can, {(ids[p["document"]], p["page"]) for p in question["pages"]} if can else set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--tuning", action="store_true",
                        help="measure and print the tuning set alone")
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
        if args.tuning:
            sets = {"tuning": sets["tuning"]}
        print("| questions | caller | answerable | unanswerable | evidence quoted (first 3 "
              "citations) | page hit rate | precision | refused |")
        print("|---|---|---|---|---|---|---|---|")
        for name, chosen in sets.items():
            for label, groups in (("without groups", ["public"]),
                                  ("holding `sensitive`", ["public", "sensitive"])):
                got = measure(snapshot, chosen, ids, groups)
                # The sweep's arithmetic gives what a caller gets, at the settings in use.
                assert got == figures(judge(snapshot, chosen, ids, groups), library.WEIGHTS,
                                      library.ANSWER), name
                evidence, hit_rate, refused = got.counted()
                print(f"| {name} | {label} | {got.answerable} | {got.unanswerable} | "
                      f"{evidence} | {hit_rate} | {got.precision:.2f} | {refused} |")
        if args.sweep:  # settings are chosen on the tuning questions alone
            print("\n| weights (sense, before, words, window, kind, passage, static, rare, "
                  "counted) | "
                  "threshold | "
                  "evidence | refused | with `sensitive`: evidence | refused |\n"
                  "|---|---|---|---|---|---|")
            callers = [judge(snapshot, sets["tuning"], ids, groups)
                       for groups in (["public"], ["public", "sensitive"])]
            for weights, threshold, (one, two) in sweep(callers)[:12]:
                cells = " | ".join((one.counted()[0], one.counted()[2],
                                    two.counted()[0], two.counted()[2]))
                print(f"| {', '.join(f'{w:.2f}' for w in weights)} | {threshold:.2f} | "
                      f"{cells} |")


if __name__ == "__main__":
    main()
