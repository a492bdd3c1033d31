"""Requests per second for open and keyed record reads on the running sidecar.

    .venv/bin/python bench/keyed_reads.py [--seconds 10] [--connections 16] [--rounds 3]

Needs `wrk` (Debian: apt-get install wrk). Exports the bundled sample into a temporary
folder, issues a key with a rate high enough never to trip, starts `fednode serve` on
127.0.0.1, and runs wrk against one public record: once without a key, once with it.
Both runs go through the same rate limiter (the anonymous per-address limit is set as
high as the key's), so the difference is the cost of verifying the key."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from builders import copy_sample  # noqa: E402

FEDNODE = str(Path(sys.executable).parent / "fednode")
HUGE = 1_000_000_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wrk(url: str, seconds: int, connections: int, header: str | None) -> float:
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if header:
        command[1:1] = ["-H", header]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", output)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if not found or non2xx:
        raise SystemExit(f"wrk run failed or got errors:\n{output}")
    return float(found.group(1))


REFERENCE = """
import sys
from aiohttp import web
body = open(sys.argv[2], "rb").read()
async def constant(request):
    return web.Response(body=body, content_type="application/json")
app = web.Application()
app.router.add_get("/{tail:.*}", constant)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk")
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as folder:
        root = copy_sample(Path(folder))
        run = {"check": True, "capture_output": True, "text": True}
        subprocess.run([FEDNODE, "export", "--project", str(root)], **run)  # type: ignore[call-overload]
        key = subprocess.run([FEDNODE, "keys", "create", "--project", str(root), "--name",
                              "bench", "--scopes", "read", "--groups", "partners", "--rate",
                              str(HUGE)], **run).stdout.strip()  # type: ignore[call-overload]
        port = free_port()
        server = subprocess.Popen([FEDNODE, "serve", "--project", str(root), "--port", str(port),
                                   "--anonymous-rate", str(HUGE)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        reference: subprocess.Popen[bytes] | None = None
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    with urllib.request.urlopen(f"{base}/api/species?limit=1") as answer:
                        record = json.load(answer)["items"][0]["id"]
                    break
                except OSError:
                    time.sleep(0.1)
            url = f"{base}/api/species/{record}"
            keyed = f"Authorization: Bearer {key}"
            # The reference: a bare aiohttp server answering the same bytes, no logic at all.
            body_file = Path(folder) / "body.json"
            with urllib.request.urlopen(url) as answer:
                body_file.write_bytes(answer.read())
            reference_port = free_port()
            reference = subprocess.Popen([sys.executable, "-c", REFERENCE, str(reference_port),
                                          str(body_file)])
            reference_url = f"http://127.0.0.1:{reference_port}/x"
            for _ in range(100):
                try:
                    urllib.request.urlopen(reference_url).close()
                    break
                except OSError:
                    time.sleep(0.1)
            wrk(url, 2, args.connections, None)  # warm up
            open_runs, keyed_runs, reference_runs = [], [], []
            for _ in range(args.rounds):  # alternate, so drift hits all alike
                reference_runs.append(wrk(reference_url, args.seconds, args.connections, None))
                open_runs.append(wrk(url, args.seconds, args.connections, None))
                keyed_runs.append(wrk(url, args.seconds, args.connections, keyed))
            open_rate = sum(open_runs) / len(open_runs)
            keyed_rate = sum(keyed_runs) / len(keyed_runs)
            reference_rate = sum(reference_runs) / len(reference_runs)
        finally:
            server.terminate()
            server.wait()
            if reference is not None:
                reference.terminate()
                reference.wait()
    print(f"record read, concurrency {args.connections}, {args.rounds} alternating rounds of "
          f"{args.seconds}s each (wrk -t2)")
    print(f"reference (aiohttp, constant body): {reference_rate:8.0f} requests/s")
    print(f"open:  {open_rate:8.0f} requests/s  ({open_rate / reference_rate:.0%} of the "
          f"reference)")
    print(f"keyed: {keyed_rate:8.0f} requests/s  ({keyed_rate / open_rate:.0%} of open)")


if __name__ == "__main__":
    main()
