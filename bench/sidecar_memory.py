"""Where a running sidecar's resident memory goes on a large node, as it serves.

    .venv/bin/python bench/sidecar_memory.py --node DIR [--reads 50000] [--searches 300]
        [--reloads 2]

DIR is a node already exported (bench/search_speed.py --records 500000 --node DIR makes
one). `fednode serve` starts on it, then answers, one at a time: `--searches` searches in
each mode (the judged queries of bench/search_judged.json), `--reads` records by id picked
at random among every public record, and a list page at a random offset of each collection
for every 100 reads; then `--reloads` times the node's `current` link is switched to its
other build, as an export's switch does (a node exported twice has two; bench/search_speed.py
exports twice), each followed by a search of each mode. After each step the process's
resident memory is printed, split by what it maps (from /proc/PID/smaps): anonymous memory,
the records' files, the search vectors, the search index's other files, and the rest. The
reference, in the same run: an aiohttp server answering a constant body, after as many
requests."""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages

from read_speed import fetch, resident_mib  # noqa: E402
from timing import FEDNODE, REFERENCE, free_port, latencies, reference_loop, wait_for  # noqa: E402

KINDS = ((r"/records/", "records' files"), (r"/vectors\.npy$", "search vectors"),
         (r"/search/", "search index, other files"), (r"/passages/", "library passages"))


def breakdown(pid: int) -> str:
    """The process's resident memory by kind of mapping, in MiB."""
    found: Counter[str] = Counter()
    kind = "anonymous"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split(maxsplit=5)
            path = parts[5] if len(parts) > 5 else ""
            kind = "anonymous" if not path.startswith("/") else next(
                (name for pattern, name in KINDS if re.search(pattern, path)), "other files")
        elif line.startswith("Rss:"):
            found[kind] += int(line.split()[1])
    total = sum(found.values())
    parts = ", ".join(f"{name} {kb / 1024:.0f}" for name, kb in found.most_common())
    peak = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text()
                .splitlines() if line.startswith("VmHWM:"))
    return f"{total / 1024:.0f} MiB ({parts}); peak so far {peak / 1024:.0f} MiB"


def public_ids(root: Path) -> list[tuple[str, str]]:
    """(collection, id) of every public record of the node's current bundle."""
    from exporter.contract.bundle import RECORDS, read_records, records_of
    table = records_of(read_records(root / ".fednode" / "bundle" / RECORDS))
    return [(c, i) for c, i, a in zip(table.column("collection").to_pylist(),
                                      table.column("id").to_pylist(),
                                      table.column("access").to_pylist(), strict=True)
            if a == "public"]


def switch(root: Path, port: int) -> float:
    """Point the node's `current` link at its other build; return once the sidecar serves
    it (its manifest changed), with the seconds that took: the wait of the requests that
    meet a build whose public part changed (the sidecar loads it before answering)."""
    current = root / ".fednode" / "current"
    builds = sorted(os.listdir(root / ".fednode" / "builds"))
    other = next(name for name in builds if name != os.readlink(current).rpartition("/")[2])
    before = fetch(f"http://127.0.0.1:{port}/api/manifest")
    link = current.with_name(".current.bench")
    os.symlink(f"builds/{other}", link)
    os.replace(link, current)
    started = time.perf_counter()
    for _ in range(1200):
        if fetch(f"http://127.0.0.1:{port}/api/manifest") != before:
            return time.perf_counter() - started
        time.sleep(0.1)
    raise SystemExit("the sidecar did not load the other build")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", type=Path, required=True, help="an exported node")
    parser.add_argument("--reads", type=int, default=50_000)
    parser.add_argument("--searches", type=int, default=300, help="a mode")
    parser.add_argument("--reloads", type=int, default=2)
    args = parser.parse_args()
    import json
    texts = [one["q"] for one in json.loads((REPO / "bench" / "search_judged.json")
                                            .read_text("utf-8"))["queries"]]
    records = public_ids(args.node)
    counts = Counter(collection for collection, _ in records)
    rng = random.Random(0)
    print(f"reference loop {reference_loop():.2f} s; {len(records)} public records")
    port = free_port()
    server = subprocess.Popen([FEDNODE, "serve", "--project", str(args.node), "--port",
                               str(port), "--anonymous-rate", "1000000000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        print(f"answering: {breakdown(server.pid)}")
        for mode in ("keyword", "hybrid", "semantic"):
            latencies(port, [("GET", f"/api/search?q={quote(texts[n % len(texts)])}"
                              f"&mode={mode}", None, {}) for n in range(args.searches)])
            print(f"after {args.searches} {mode} searches: {breakdown(server.pid)}")
        reads = [("GET", f"/api/{collection}/{record}", None, {})
                 for collection, record in rng.choices(records, k=args.reads)]
        latencies(port, reads)
        print(f"after {args.reads} records by id: {breakdown(server.pid)}")
        pages = [("GET", f"/api/{collection}?limit=200&offset="
                  f"{rng.randrange(max(counts[collection] - 200, 1))}", None, {})
                 for collection in counts for _ in range(args.reads // 100)]
        latencies(port, pages)
        print(f"after {len(pages)} list pages of 200: {breakdown(server.pid)}")
        for n in range(args.reloads):
            waited = switch(args.node, port)
            for mode in ("keyword", "hybrid", "semantic"):
                latencies(port, [("GET", f"/api/search?q={quote(texts[0])}&mode={mode}", None,
                                  {})])
            print(f"after reload {n + 1} (served {waited:.2f} s after the switch): "
                  f"{breakdown(server.pid)}")
            time.sleep(3)  # (the sidecar gives memory back once the old build is let go)
            print(f"  3 s later: {breakdown(server.pid)}")
    finally:
        server.terminate()
        server.wait()
    with tempfile.TemporaryDirectory() as folder:
        body = Path(folder) / "body.json"
        body.write_bytes(b"x" * 2000)
        reference_port = free_port()
        reference = subprocess.Popen([sys.executable, "-c", REFERENCE, str(reference_port),
                                      str(body)])
        try:
            wait_for(reference_port)
            latencies(reference_port, [("GET", "/", None, {})] * args.reads)
            print(f"reference, aiohttp constant 2,000 B body after {args.reads} requests: "
                  f"{resident_mib(reference.pid):.0f} MiB")
        finally:
            reference.terminate()
            reference.wait()
    print(f"reference loop {reference_loop():.2f} s")


if __name__ == "__main__":
    main()
