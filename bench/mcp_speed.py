"""What the tool interface adds to a read: `tools/call get_species {id}` against
`GET /api/species/{id}`, the same record, the same key, through the running sidecar.

    .venv/bin/python bench/mcp_speed.py [--requests 2000] [--rounds 3]

Exports the bundled sample into a temporary folder, issues a key, starts `fednode serve`
on 127.0.0.1 and an aiohttp server answering a constant body of the record's size (the
reference, in the same run). Each round sends `--requests` requests of each kind, one at a
time on one kept-alive connection, kinds alternating round by round; latencies are client
side. Prints p50 and p95 of each kind, and the difference of the medians."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample  # noqa: E402
from timing import FEDNODE, HUGE, REFERENCE, free_port, latencies, wait_for  # noqa: E402

KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fednode-mcp-") as name:
        root = copy_sample(Path(name) / "node")
        run = {"check": True, "capture_output": True, "text": True}
        subprocess.run([FEDNODE, "export", "--project", str(root)], **run)  # type: ignore[call-overload]
        token = subprocess.run([FEDNODE, "keys", "create", "--project", str(root), "--name",
                                "bench", "--scopes", "read,mcp", "--rate", str(HUGE)],
                               **run).stdout.strip()  # type: ignore[call-overload]
        port, reference_port = free_port(), free_port()
        record = (root / "site_out" / "api" / "species" / f"{KNOTWEED}.json").read_bytes()
        constant = Path(name) / "record.json"
        constant.write_bytes(record)
        servers = [
            subprocess.Popen([FEDNODE, "serve", "--project", str(root), "--port", str(port),
                              "--anonymous-rate", str(HUGE)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, "-c", REFERENCE, str(reference_port),
                              str(constant)]),
        ]
        try:
            wait_for(port)
            wait_for(reference_port)
            call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "get_species", "arguments": {"id": KNOTWEED}}}).encode()
            headers = {"X-API-Key": token}
            kinds = {
                "aiohttp, constant body (reference)": (reference_port, "GET", "/", None, {}),
                "REST GET /api/species/{id}": (port, "GET", f"/api/species/{KNOTWEED}", None,
                                                headers),
                "MCP tools/call get_species {id}": (
                    port, "POST", "/api/mcp", call,
                    {**headers, "Content-Type": "application/json"}),
            }
            found: dict[str, list[float]] = {kind: [] for kind in kinds}
            for port_of, *request in kinds.values():  # warm up
                latencies(port_of, [tuple(request)] * 100)  # type: ignore[list-item]
            for round_ in range(args.rounds):
                order = list(kinds) if round_ % 2 == 0 else list(reversed(kinds))
                for kind in order:
                    port_of, *request = kinds[kind]
                    found[kind] += latencies(port_of, [tuple(request)] * args.requests)  # type: ignore[list-item]
        finally:
            for server in servers:
                server.terminate()
                server.wait()
    print(f"{args.rounds} rounds × {args.requests} requests a kind, sequential, one "
          f"connection, the knotweed record ({len(record)} B)\n")
    print("| request | p50 | p95 |\n|---|---|---|")
    medians = {}
    for kind, values in found.items():
        values.sort()
        medians[kind] = statistics.median(values)
        print(f"| {kind} | {medians[kind]:.2f} ms | {values[int(len(values) * 0.95)]:.2f} ms |")
    rest, tool = list(medians.values())[1:]
    print(f"\nthe tool interface adds {tool - rest:.2f} ms at p50 (goal: at most 2 ms)")


if __name__ == "__main__":
    main()
