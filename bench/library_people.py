"""The library in people's words: `POST /api/library/ask`'s passages and grounded answers,
measured on questions written from the PDFs alone (bench/library_people.json: written
without sight of the code, the older sets or any score, and split into a tuning and a
held-out part before anything was tuned), beside the older set written with the code
(bench/library_judged.json), over the bundled sample's library.

    .venv/bin/python bench/library_people.py [--tuning] [--show N]

For each part, as a caller without access groups:

- page in 3: of the answerable questions, the share with a passage on the evidence page
  among the first three passages;
- sentence quoted: the share whose evidence sentence is inside one of those passages'
  quotes;
- grounded: the share given an answer (`grounded: true`);
- precision: of those answers to questions with an evidence sentence, the share that
  state it (the answer holds the evidence sentence, or a quote of it that is most of it);
- unanswerable grounded: of the on-topic questions the library does not answer, the share
  given an answer (goal: at most 0.1);
- off-topic empty: of the off-topic questions, the share with no passages (goal: 0.9).

`--tuning` prints the tuning part alone (the figures to work with while choosing
settings); `--show N` prints the first N questions of the tuning part that miss, with what
they got. The held-out part is printed only without `--tuning`."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable
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

SHOWN = 3  # passages the evidence must be among
GROUPS = ["public"]


class Case(NamedTuple):
    """One question: its kind, and for an answerable one its document, page and evidence."""

    id: str
    question: str
    kind: str  # answerable, unanswerable or offtopic
    document: str | None = None  # the PDF's slug
    page: int | None = None
    evidence: str | None = None


def same(text: str) -> str:
    """Text compared as a reader sees it: spaces folded, hyphens at line ends joined."""
    return " ".join(text.replace("-\n", "").split()).replace("’", "'")


def holds(quote: str, evidence: str) -> bool:
    """Whether a quote states the evidence: it holds it, or it is most of it (an extracted
    sentence may carry a heading the quote leaves out)."""
    quoted, said = same(quote), same(evidence)
    return said in quoted or (len(quoted) > len(said) / 2 and quoted in said)


def people_cases(part: str) -> list[Case]:
    data = json.loads((REPO / "bench" / "library_people.json").read_text())
    wanted = set(data["split"][part])
    return [Case(q["id"], q["question"], q["kind"], (q.get("document") or "")
                 .removesuffix(".pdf") or None, q.get("page"), q.get("evidence"))
            for q in data["questions"] if q["id"] in wanted]


def older_cases() -> list[Case]:
    """The older set, as a caller without groups reads it: a question answerable only from
    a restricted document is one the library does not answer."""
    data = json.loads((REPO / "bench" / "library_judged.json").read_text())
    out = []
    for n, q in enumerate(data["questions"]):
        public = q.get("answerable") and q.get("access", "public") == "public"
        pages = q.get("pages") or [{}]
        out.append(Case(f"old{n}", q["q"], "answerable" if public else "unanswerable",
                        pages[0].get("document"), pages[0].get("page"),
                        q.get("evidence")))
    return out


class Outcome(NamedTuple):
    case: Case
    got: dict[str, Any]

    def page_hit(self, ids: dict[str, str]) -> bool:
        want = (ids.get(self.case.document or ""), self.case.page)
        return any((p["document_id"], p["page"]) == want
                   for p in self.got["passages"][:SHOWN])

    def quoted(self) -> bool:
        return self.case.evidence is not None and any(
            holds(p["quote"], self.case.evidence) for p in self.got["passages"][:SHOWN])

    def right_answer(self) -> bool:
        answer = self.got.get("answer") or ""
        if self.case.evidence is None:
            return False
        cited = [c["quote"] for c in self.got.get("citations", [])]
        return holds(answer, self.case.evidence) or any(
            holds(quote, self.case.evidence) for quote in cited[:1])


def rate(hits: int, total: int) -> str:
    return f"{hits / total:.2f} ({hits}/{total})" if total else "-"


def figures(outcomes: list[Outcome], ids: dict[str, str]) -> dict[str, str]:
    answerable = [o for o in outcomes if o.case.kind == "answerable"]
    with_evidence = [o for o in answerable if o.case.evidence]
    grounded = [o for o in answerable if o.got["grounded"]]
    unanswerable = [o for o in outcomes if o.case.kind == "unanswerable"]
    offtopic = [o for o in outcomes if o.case.kind == "offtopic"]
    return {
        "page in 3": rate(sum(o.page_hit(ids) for o in answerable), len(answerable)),
        "sentence quoted": rate(sum(o.quoted() for o in with_evidence), len(with_evidence)),
        "grounded": rate(len(grounded), len(answerable)),
        "precision": rate(sum(o.right_answer() for o in grounded if o.case.evidence),
                          sum(1 for o in grounded if o.case.evidence)),
        "unanswerable grounded": rate(sum(o.got["grounded"] for o in unanswerable),
                                      len(unanswerable)),
        "off-topic empty": rate(sum(not o.got["passages"] for o in offtopic), len(offtopic)),
    }


def slugs(root: Path) -> dict[str, str]:
    """PDF slug -> the id of its record."""
    import tomllib
    found = {}
    for path in (root / "content" / "library").glob("*.md"):
        found[path.stem] = tomllib.loads(path.read_text("utf-8").split("+++")[1])["id"]
    return found


def ask(snapshot: Snapshot, cases: Iterable[Case]) -> list[Outcome]:
    return [Outcome(case, library.answer(snapshot, GROUPS, case.question, SHOWN))
            for case in cases]


def show(outcomes: list[Outcome], ids: dict[str, str], count: int) -> None:
    shown = 0
    for o in outcomes:
        miss = (o.case.kind == "answerable" and (not o.page_hit(ids) or not o.quoted()
                                                 or (o.got["grounded"] and not o.right_answer())))
        miss = miss or (o.case.kind == "unanswerable" and o.got["grounded"])
        miss = miss or (o.case.kind == "offtopic" and bool(o.got["passages"]))
        if not miss or shown >= count:
            continue
        shown += 1
        print(f"\n[{o.case.id} {o.case.kind}] {o.case.question}")
        if o.case.evidence:
            print(f"  want p{o.case.page} {o.case.document}: {o.case.evidence[:140]}")
        print(f"  grounded={o.got['grounded']} answer={str(o.got.get('answer'))[:140]}")
        for p in o.got["passages"][:SHOWN]:
            print(f"  {p['score']:.3f} p{p['page']} {p['quote'][:140]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuning", action="store_true", help="the tuning part alone")
    parser.add_argument("--show", type=int, default=0, help="tuning questions that miss")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        root = copy_sample(Path(where) / "node")
        build(Project(root))
        ids = slugs(root)
        snapshot = Snapshot(Project(root).bundle)
        parts = [("tuning", people_cases("tuning"))]
        if not args.tuning:
            parts += [("held-out", people_cases("held_out")), ("older set", older_cases())]
        rows = []
        for name, cases in parts:
            outcomes = ask(snapshot, cases)
            rows.append((name, figures(outcomes, ids)))
            if name == "tuning" and args.show:
                show(outcomes, ids, args.show)
        header = ["part", *rows[0][1]]
        print("\n| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for name, row in rows:
            print(f"| {name} | " + " | ".join(row.values()) + " |")


if __name__ == "__main__":
    main()
