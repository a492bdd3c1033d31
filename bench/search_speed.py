"""Search speed on a large node: the export's indexing cost, and search latency per mode
through the running sidecar, next to an aiohttp server answering a constant body.

    .venv/bin/python bench/search_speed.py [--records 100000] [--requests 300]
        [--node DIR [--searches-only]]

The node is the bundled sample plus Markdown records cloned from it (as bench/export_speed.py
makes it, without its CSV table). Exports run as their own processes, timed by phase:
- full export, embeddings included (nothing cached);
- the export after one Markdown edit: `indexing` is what search adds to it.
Then `fednode serve` starts, and each mode answers `--requests` searches, one at a time on
one kept-alive connection, cycling through the judged queries of bench/search_judged.json;
the reference server answers the same number of requests with the size of a typical
answer. Latencies are per request, client side."""

from __future__ import annotations

import argparse
import http.client
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply  # noqa: E402
from timing import FEDNODE, REFERENCE, free_port, latencies, wait_for  # noqa: E402

EXPORT = """
import json, sys, time, resource
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from exporter.pipeline.build import build
from exporter.project.config import Project
marks = []
def progress(phase, done, total):
    if done == 0:
        marks.append((phase, time.perf_counter()))
started = time.perf_counter()
build(Project(Path(sys.argv[1])), progress=progress)
ended = time.perf_counter()
phases = {}
for (phase, at), (_, after) in zip(marks, marks[1:] + [("end", ended)]):
    phases[phase] = round(after - at, 2)
print(json.dumps({"total": round(ended - started, 2), "phases": phases,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def export(root: Path, label: str) -> dict:
    result = subprocess.run([sys.executable, "-c", EXPORT, str(root), str(REPO)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    phases = ", ".join(f"{k} {v}s" for k, v in figures["phases"].items())
    print(f"{label:<24} {figures['total']:7.2f} s, peak {figures['peak_mib']} MiB  ({phases})")
    print(f"{'':<24} search's share: indexing {figures['phases'].get('indexing', 0)} s")
    return figures


def edit_markdown(root: Path) -> None:
    target = next((root / "content" / "species").glob("synthetic-*.md"))
    target.write_text(re.sub(r'scientificName = "([^"]*)"', r'scientificName = "\1 edited"',
                             target.read_text(), count=1))


def summary(label: str, values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1]
    return (f"| {label} | {statistics.median(values):.1f} ms | {p95:.1f} ms | "
            f"{max(values):.1f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--node", type=Path, help="make the node here and keep it; reuse it "
                                                   "if it is there")
    parser.add_argument("--searches-only", action="store_true",
                        help="with --node: keep its last export and only time the searches")
    args = parser.parse_args()
    judged = json.loads((REPO / "bench" / "search_judged.json").read_text())["queries"]
    with tempfile.TemporaryDirectory(prefix="fednode-search-") as name:
        root = args.node or Path(name) / "node"
        if not (root / "content").exists():
            copy_sample(root)
            multiply(root / "content", args.records)
        print(f"node: the sample + {args.records} Markdown records")
        if not (args.searches_only and args.node and (root / ".fednode").exists()):
            shutil.rmtree(root / ".fednode", ignore_errors=True)  # a full export: nothing reused
            export(root, "full export")
            edit_markdown(root)
            export(root, "one Markdown edit")
        port, reference_port = free_port(), free_port()
        server = subprocess.Popen([FEDNODE, "serve", "--project", str(root), "--port",
                                   str(port), "--anonymous-rate", "1000000000"],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            started = time.perf_counter()
            wait_for(port)
            print(f"sidecar answering after {time.perf_counter() - started:.1f} s")
            texts = [query["q"] for query in judged]
            rows = []
            sizes = []
            for mode in ("keyword", "semantic", "hybrid"):
                paths = [f"/api/search?q={quote(texts[n % len(texts)])}&mode={mode}"
                         for n in range(args.requests)]
                latencies(port, [("GET", p, None, {}) for p in paths[:20]])  # warm up
                rows.append(summary(f"fednode, {mode}",
                                    latencies(port, [("GET", p, None, {}) for p in paths])))
                connection = http.client.HTTPConnection("127.0.0.1", port)
                connection.request("GET", paths[0])
                sizes.append(len(connection.getresponse().read()))
            body = Path(name) / "constant.json"
            body.write_bytes(b"x" * int(statistics.median(sizes)))
            reference = subprocess.Popen([sys.executable, "-c", REFERENCE,
                                          str(reference_port), str(body)])
            try:
                wait_for(reference_port)
                constant = [("GET", "/api/search", None, {})] * args.requests
                latencies(reference_port, constant[:20])
                rows.insert(0, summary(f"aiohttp, constant {body.stat().st_size} B body",
                                       latencies(reference_port, constant)))
            finally:
                reference.terminate()
            rss = int(Path(f"/proc/{server.pid}/status").read_text().split("VmRSS:")[1]
                      .split()[0]) // 1024
        finally:
            server.terminate()
            server.wait()
        print(f"\n{args.requests} requests a mode, sequential, one connection; sidecar RSS "
              f"after: {rss} MiB\n")
        print("| server | p50 | p95 | max |\n|---|---|---|---|")
        for row in rows:
            print(row)
        lists_recall(root, texts)


def lists_recall(root: Path, texts: list[str]) -> None:
    """How a hybrid search's comparison by meaning through the inverted file
    (`sidecar.lists`, for a group of lists.FROM records or more) does against comparing
    every vector: of the 50 closest records, the share it finds (a record as close as the
    50th counts, so that equal vectors tie), over the judged queries."""
    from exporter.shared import search, word_vectors
    from sidecar import lists
    from sidecar.ranking import SEMANTIC_FLOOR
    from sidecar.store import Snapshot
    started = time.perf_counter()
    group = Snapshot(root / ".fednode" / "bundle").search["public"]
    if group.lists is None:
        print(f"\nno inverted file: {len(group.rows)} public records, under {lists.FROM}")
        return
    print(f"\nsnapshot opened, inverted file of {len(group.lists.bounds) - 1} lists made, in "
          f"{time.perf_counter() - started:.1f} s")
    from exporter.contract.wire import COLLECTIONS
    found = []
    for text in texts:
        vector = word_vectors.Embedder.embed([search.as_asked(text)], serving=True)[0]
        exact = np.sort(np.asarray(group.vectors @ vector))[-50]
        if exact < SEMANTIC_FLOOR:  # fewer than 50 records match by meaning at all
            continue
        hits, _ = group.semantic(vector, list(COLLECTIONS), 50, count=False)
        found.append(sum(hit.score >= exact - 1e-6 for hit in hits) / 50)
    print(f"lists against every vector, {len(found)} judged queries with 50 matches by "
          f"meaning (of {len(texts)}): the 50 closest found {statistics.mean(found):.3f} on "
          f"average, {min(found):.2f} at worst")


if __name__ == "__main__":
    main()
