"""Search quality, measured: nDCG@10 and recall@10 of keyword, semantic and hybrid search,
and for hybrid search (what GET /api/search runs) hit@5 (a record the query looks for among
the first five) and MRR (the reciprocal rank of the first such record).

    .venv/bin/python bench/search_quality.py [--checklist PATH] [--taxa 50]

1. The judged set `bench/search_judged.json` over the bundled sample (a restoration
   practitioner's questions, names, vernacular names, typos, meaning-only questions; grades
   2 = what the query looks for, 1 = clearly related), asked as an anonymous caller; then
   `bench/search_people.json`, queries in people's words written from the records alone,
   by tuning and held-out part and by kind.
2. A real Darwin Core checklist as one species CSV: for `--taxa` of its taxa (every n-th),
   the scientific name as written, the name without authorship, and the name with one
   letter swapped; the relevant record is the taxon's own.

Each search goes through the service layer's search on an exported bundle (the same code
the sidecar runs for GET /api/search), per kind of query and overall."""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from builders import NODE_TOML, copy_sample  # noqa: E402

from exporter.contract.wire import COLLECTIONS  # noqa: E402
from exporter.pipeline.build import build  # noqa: E402
from exporter.project.config import Project  # noqa: E402
from sidecar import search  # noqa: E402
from sidecar.store import Snapshot  # noqa: E402

CHECKLIST = Path("/work/shared/data/alien-plants-belgium/taxon.csv")
MODES = ("keyword", "semantic", "hybrid")
K = 10


def ndcg(ranked: list[str], grades: dict[str, int]) -> float:
    gain = sum((2 ** grades.get(i, 0) - 1) / math.log2(n + 2) for n, i in enumerate(ranked[:K]))
    ideal = sorted(grades.values(), reverse=True)[:K]
    best = sum((2 ** g - 1) / math.log2(n + 2) for n, g in enumerate(ideal))
    return gain / best if best else 0.0


def recall(ranked: list[str], grades: dict[str, int]) -> float:
    relevant = {i for i, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:K])) / len(relevant) if relevant else 0.0


def answered(ranked: list[str], grades: dict[str, int]) -> tuple[float, float]:
    """Whether a record the query looks for (grade 2) is in the top 5, and the reciprocal
    of the first one's rank (0 when none is in the top K)."""
    first = next((n for n, i in enumerate(ranked[:K], start=1) if grades.get(i) == 2), None)
    return (1.0 if first is not None and first <= 5 else 0.0), (1 / first if first else 0.0)


def kinds_of(query: dict) -> list[str]:
    """The rows a query counts in: its kind (and its kind's tuning or held-out part, for the
    queries in users' words), and all."""
    kinds = [query["kind"]]
    if query["kind"] == "users" or "part" in query:
        kinds.append(f"{query['kind'].split(':')[0]}, {query.get('set', 'tuning')}")
    return [*kinds, "all"]


def people_queries() -> list[dict]:
    """bench/search_people.json: queries in people's words written from the public records
    alone (without sight of the code, the older set or any score), split into tuning and
    held-out parts before anything was tuned; each relevant record counts as what the
    query looks for."""
    data = json.loads((REPO / "bench" / "search_people.json").read_text())
    held_out = set(data["split"]["held_out"])
    return [{"q": q["query"], "kind": f"people: {q['kind']}", "part": True,
             "set": "held-out" if q["id"] in held_out else "tuning",
             "relevant": dict.fromkeys(q["relevant"], 2)} for q in data["queries"]]


def evaluate(snapshot: Snapshot, queries: list[dict]) -> dict[str, dict[str, list[float]]]:
    """mode -> kind -> [ndcg, recall, hit@5, reciprocal rank] sums, and counts."""
    scores: dict[str, dict[str, list[float]]] = {m: defaultdict(lambda: [0.0] * 5)
                                                 for m in MODES}
    for query in queries:
        for mode in MODES:
            found = search.run(snapshot, ["public"], list(COLLECTIONS), query["q"], mode, K)
            ranked = [item["id"] for item in found["items"]]
            hit, reciprocal = answered(ranked, query["relevant"])
            for kind in kinds_of(query):
                entry = scores[mode][kind]
                entry[0] += ndcg(ranked, query["relevant"])
                entry[1] += recall(ranked, query["relevant"])
                entry[2] += hit
                entry[3] += reciprocal
                entry[4] += 1
    return scores


def table(title: str, scores: dict[str, dict[str, list[float]]]) -> None:
    kinds = sorted(scores["hybrid"], key=lambda k: (k == "all", k))
    print(f"\n{title}\n")
    print("| queries | n | " + " | ".join(f"{m} nDCG@10 | {m} recall@10" for m in MODES)
          + " | hybrid hit@5 | hybrid MRR |")
    print("|---|---|" + "---|---|" * len(MODES) + "---|---|")
    for kind in kinds:
        n = int(scores["hybrid"][kind][4])
        cells = []
        for mode in MODES:
            total_ndcg, total_recall, _, _, count = scores[mode][kind]
            cells += [f"{total_ndcg / count:.3f}", f"{total_recall / count:.3f}"]
        _, _, hits, reciprocal, count = scores["hybrid"][kind]
        cells += [f"{hits / count:.3f}", f"{reciprocal / count:.3f}"]
        print(f"| {kind} | {n} | " + " | ".join(cells) + " |")


def exported(root: Path) -> Snapshot:
    build(Project(root))
    return Snapshot(root / ".fednode" / "bundle")


def swap_letters(name: str, seed: int) -> str:
    """The name with two neighbouring letters of its longest word swapped."""
    words = name.split()
    longest = max(range(len(words)), key=lambda n: len(words[n]))
    word = words[longest]
    at = 1 + seed % max(1, len(word) - 3)
    words[longest] = word[:at] + word[at + 1] + word[at] + word[at + 2:]
    return " ".join(words)


def checklist_queries(root: Path, source: Path, taxa: int) -> list[dict]:
    """The checklist as one species CSV under `root`, and name queries for `taxa` taxa."""
    (root / "content" / "species").mkdir(parents=True)
    (root / "content" / "node.toml").write_text(NODE_TOML)
    rows = []
    with open(source, newline="") as handle:
        for row in csv.DictReader(handle):
            if re.fullmatch(r"[A-Z][a-z]+aceae", row["family"]) and row["taxonRank"] in (
                    "species", "subspecies", "variety", "form", "hybrid"):
                rows.append(row)
    with open(root / "content" / "species" / "checklist.csv", "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "scientificName", "family", "kingdom", "taxonRank", "category",
                         "establishmentMeans", "taxonID"])
        for row in rows:
            writer.writerow([uuid.uuid5(uuid.NAMESPACE_URL, row["taxonID"]),
                             row["scientificName"], row["family"], row["kingdom"],
                             row["taxonRank"], "introduced", "introduced", row["taxonID"]])
    queries = []
    step = max(1, len(rows) // taxa)
    for n, row in enumerate(rows[::step][:taxa]):
        record = str(uuid.uuid5(uuid.NAMESPACE_URL, row["taxonID"]))
        name = row["scientificName"]
        bare = " ".join(w for w in name.split()[:3] if w[:1].islower() or w == name.split()[0])
        for kind, text in (("name as written", name), ("name without authorship", bare),
                           ("two letters swapped", swap_letters(bare, n))):
            queries.append({"q": text, "kind": kind, "relevant": {record: 2}})
    print(f"checklist: {len(rows)} taxa; {len(queries)} queries for {taxa} of them")
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checklist", type=Path, default=CHECKLIST)
    parser.add_argument("--taxa", type=int, default=50)
    args = parser.parse_args()
    judged = json.loads((REPO / "bench" / "search_judged.json").read_text())["queries"]
    with tempfile.TemporaryDirectory(prefix="fednode-quality-") as name:
        folder = Path(name)
        sample = exported(copy_sample(folder / "sample"))
        table(f"Sample node, {len(judged)} judged queries (anonymous caller)",
              evaluate(sample, judged))
        people = people_queries()
        table(f"Sample node, {len(people)} queries in people's words (bench/search_people.json)",
              evaluate(sample, people))
        if args.checklist.exists() and args.taxa > 0:
            queries = checklist_queries(folder / "checklist", args.checklist, args.taxa)
            checklist = exported(folder / "checklist")
            table("Darwin Core checklist as one CSV, name queries", evaluate(checklist, queries))


if __name__ == "__main__":
    main()
