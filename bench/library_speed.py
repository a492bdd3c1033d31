"""Library speed: exporting a library of 1,000 PDF pages, exporting it again unchanged, and
`POST /api/library/ask` latency through the running sidecar.

    .venv/bin/python bench/library_speed.py [--pages 1000] [--requests 200] [--folder DIR]

The library is generated: 20 PDFs of `--pages / 20` pages, each page three paragraphs
of sentences drawn from the bundled sample's record bodies (so the words are the node's),
written with reportlab. Exports run as their own processes. Then `fednode serve` starts;
one key asks `--requests` questions (the judged questions of bench/library_judged.json when
present, else sample titles), one at a time on one kept-alive connection; an aiohttp server
answering a constant body of the same size runs in the same run as the reference.
`--folder DIR` keeps the node in DIR; a later run with the same folder asks again without
generating or exporting."""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # before tests/, whose exporter/ folder holds tests only
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from builders import copy_sample, make_pdf, record_text  # noqa: E402
from timing import FEDNODE, HUGE, REFERENCE, free_port, latencies, wait_for  # noqa: E402

DOCUMENTS = 20


def corpus() -> list[str]:
    sentences = []
    for path in sorted((REPO / "content").glob("*/*.md")):
        body = path.read_text("utf-8").split("+++")[-1]
        sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(body.split()))
                      if len(s.strip()) > 30]
    return sentences


def generate(root: Path, pages: int) -> None:
    library = root / "content" / "library"
    sentences = corpus()
    chance = random.Random(7)
    for n in range(DOCUMENTS):
        texts = ["\n\n".join(" ".join(chance.sample(sentences, 4)) for _ in range(3))
                 for _ in range(pages // DOCUMENTS)]
        make_pdf(library / f"generated-{n:02d}.pdf", texts)
        (library / f"generated-{n:02d}.md").write_text(record_text({
            "id": str(uuid.UUID(int=n + 1 << 72 | 0x4000 << 48 | 0x8000 << 32)),
            "title": f"Generated field manual {n}", "kind": "document",
            "summary": "A generated manual for measuring the library's speed."}))


def export(root: Path, label: str) -> None:
    started = time.perf_counter()
    subprocess.run([FEDNODE, "export", "--project", str(root)], check=True,
                   capture_output=True)
    print(f"{label:<34} {time.perf_counter() - started:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--folder", type=Path,
                        help="keep the node here; a node exported there already is asked "
                             "again without exporting")
    args = parser.parse_args()
    judged = REPO / "bench" / "library_judged.json"
    questions = ([q["q"] for q in json.loads(judged.read_text())["questions"]]
                 if judged.exists() else [s[:80] for s in corpus()[:50]])
    with tempfile.TemporaryDirectory(prefix="fednode-library-") as name:
        root = (args.folder or Path(name)) / "node"
        if not (root / ".fednode" / "current").exists():
            copy_sample(root)
            started = time.perf_counter()
            generate(root, args.pages)
            print(f"library: {DOCUMENTS} PDFs, {args.pages} pages in all, generated in "
                  f"{time.perf_counter() - started:.1f} s (plus the sample's own)")
            export(root, "export, library read and indexed")
            export(root, "export again, nothing changed")
        token = subprocess.run([FEDNODE, "keys", "create", "--project", str(root), "--name",
                                "bench", "--scopes", "library", "--rate", str(HUGE)],
                               check=True, capture_output=True, text=True).stdout.strip()
        port, reference_port = free_port(), free_port()
        server = subprocess.Popen([FEDNODE, "serve", "--project", str(root), "--port",
                                   str(port)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        reference = None
        try:
            wait_for(port)
            headers = {"X-API-Key": token, "Content-Type": "application/json"}
            bodies = [json.dumps({"question": questions[n % len(questions)]}).encode()
                      for n in range(args.requests)]
            asking = [("POST", "/api/library/ask", body, headers) for body in bodies]
            latencies(port, asking[:10])  # warm up
            asked = latencies(port, asking)
            connection = http.client.HTTPConnection("127.0.0.1", port)
            connection.request("POST", "/api/library/ask", body=bodies[0], headers=headers)
            size = len(connection.getresponse().read())
            constant = Path(name) / "constant.json"
            constant.write_bytes(b"x" * size)
            reference = subprocess.Popen([sys.executable, "-c", REFERENCE,
                                          str(reference_port), str(constant)])
            wait_for(reference_port)
            base = latencies(reference_port, [("GET", "/", None, {})] * len(bodies))
        finally:
            server.terminate()
            if reference is not None:
                reference.terminate()
    print(f"\n{args.requests} questions, sequential, one connection\n")
    print("| server | p50 | p95 |\n|---|---|---|")
    for label, values in ((f"aiohttp, constant {size} B body (reference)", base),
                          ("fednode, POST /api/library/ask", asked)):
        values.sort()
        print(f"| {label} | {statistics.median(values):.1f} ms | "
              f"{values[int(len(values) * 0.95) - 1]:.1f} ms |")


if __name__ == "__main__":
    main()
