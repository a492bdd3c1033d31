"""Reads through the running sidecar, against what the machine can do, in one run.

    .venv/bin/python bench/read_speed.py [--node DIR | --records 100000] [--seconds 5]
        [--launches 3] [--rounds 2] [--connections 16] [--nginx] [--datasette] [--reload]

Starts `fednode serve` on a node (an exported one with --node, or the sample grown to
--records), and beside it the references: an aiohttp server answering a constant body of
each request's own size (the framework's ceiling here), and optionally nginx over
`site_out/` (what a CDN edge does) and Datasette over the same records in SQLite, one row by
primary key. wrk (-t2) runs every request in rounds, each request right beside its
reference (before it, then after it in the next round); its ratio is the median of those
pairs' ratios, so the machine's drift over a run cancels out. The sidecar and its references
are started afresh for each of --launches, as pyperf runs several processes: on this shared
2-core machine one process of the same code ran a fifth faster or slower than the next for
its whole life, so a single launch measures its luck. The table gives each one's
median requests/s, p99, the ratio to the constant body of its size with the lowest and
highest pair's, and the CPU time the answering process spent a request. Also printed: the
sidecar's start time and resident memory, once loaded and after the run.
Needs wrk (apt-get install wrk); --nginx installs nginx with apt-get and --datasette
installs Datasette into .cache/bench-venv where missing."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply  # noqa: E402
from timing import FEDNODE, HUGE, REFERENCE, free_port, wait_for  # noqa: E402

from exporter.contract.layout import record_file  # noqa: E402

SINCE = "2000-01-01T00:00:00Z"
SETTLE = 3.0  # seconds after the first answer at which "once loaded" memory is read


@dataclass
class Case:
    label: str
    url: str
    header: str | None = None
    reference: str = ""  # the constant-body server's URL for a body of this size
    rates: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    pid: int | None = None  # the process answering, whose CPU time is counted
    cpus: list[float] = field(default_factory=list)  # its CPU microseconds a request
    ratios: list[float] = field(default_factory=list)  # requests/s over its reference's, a pair
    cpu_ratios: list[float] = field(default_factory=list)  # reference's CPU over its own


def wrk(url: str, seconds: int, connections: int, header: str | None,
        pid: int | None = None) -> tuple[float, float, float]:
    """Requests a second, p99 in ms, and the CPU microseconds process `pid` spent a request
    (NaN without a pid); any non-2xx answer stops the run."""
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if header:
        command[1:1] = ["-H", header]
    before = cpu_seconds(pid)
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    spent = cpu_seconds(pid) - before
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", output)
    count = re.search(r"(\d+) requests in", output)
    if not rate or not p99 or not count or "Non-2xx" in output:
        raise SystemExit(f"wrk against {url} failed or got errors:\n{output}")
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    return float(rate.group(1)), float(p99.group(1)) * scale, spent * 1e6 / int(count.group(1))


def cpu_seconds(pid: int | None) -> float:
    """User and system time of a process (all its threads), from /proc; NaN without one."""
    if pid is None:
        return math.nan
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch(url: str, header: str | None = None) -> bytes:
    request = urllib.request.Request(url)
    if header:
        name, value = header.split(": ", 1)
        request.add_header(name, value)
    with urllib.request.urlopen(request) as answer:
        return answer.read()  # type: ignore[no-any-return]


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def node(folder: Path, records: int) -> Path:
    root = copy_sample(folder / "node")
    multiply(root / "content", max(records - 100, 0))
    subprocess.run([FEDNODE, "export", "--project", str(root)], check=True,
                   stdout=subprocess.DEVNULL)
    return root


def start(command: list[str], port: int, **options: object) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               **options)  # type: ignore[call-overload]
    wait_for(port)
    return process  # type: ignore[no-any-return]


def nginx(site: Path, folder: Path, port: int) -> subprocess.Popen[bytes]:
    if not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "nginx-light"], check=True,
                       stdout=subprocess.DEVNULL)
    config = folder / "nginx.conf"
    config.write_text(f"""daemon off; worker_processes 2; pid {folder}/nginx.pid;
error_log {folder}/nginx.log; events {{ worker_connections 1024; }}
http {{ access_log off; default_type application/json;
  server {{ listen 127.0.0.1:{port}; root {site.resolve()};
    location = /api/manifest {{ try_files /api/manifest.json =404; }} }} }}
""")
    return start(["/usr/sbin/nginx", "-c", str(config)], port)


def datasette(root: Path, folder: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    venv = REPO / ".cache" / "bench-venv"
    if not (venv / "bin" / "datasette").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "datasette"], check=True)
    from exporter.contract.bundle import RECORDS, read_records, records_of

    # the bundle's records, the same rows the sidecar serves
    table = records_of(read_records(root / ".fednode" / "bundle" / RECORDS))
    database = folder / "records.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE records (id TEXT PRIMARY KEY, collection TEXT, access TEXT, "
                   "position INTEGER, json TEXT)")
        db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", (
            (r["id"], r["collection"], r["access"], r["position"], r["item"][:-1].decode())
            for r in table.select(["id", "collection", "access", "position", "item"])
            .to_pylist()))
    process = subprocess.Popen([str(venv / "bin" / "datasette"), "serve", str(database),
                                "--port", str(port), "--host", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            fetch(f"http://127.0.0.1:{port}/-/versions.json")
            break
        except OSError:
            time.sleep(0.1)
    return process, f"http://127.0.0.1:{port}/records/records/"


def follow_reload(root: Path, pid: int, base: str) -> str:
    """Edit one species file, export, and sample the sidecar's memory until it serves the
    new build and for 10 s after: the peak, and where it settles."""
    target = next(path for path in sorted((root / "content" / "species").glob("*.md"))
                  if "access =" not in path.read_text())
    target.write_text(target.read_text() + f"\nEdited by the benchmark at {time.time()}.\n")
    before = fetch(f"{base}/api/manifest")
    subprocess.run([FEDNODE, "export", "--project", str(root)], check=True,
                   stdout=subprocess.DEVNULL)
    samples = [resident_mib(pid)]
    deadline = time.monotonic() + 60
    while fetch(f"{base}/api/manifest") == before and time.monotonic() < deadline:
        samples.append(resident_mib(pid))
        time.sleep(0.1)
    swapped = time.monotonic()
    while time.monotonic() < swapped + 10:
        fetch(f"{base}/api/species?limit=1")
        samples.append(resident_mib(pid))
        time.sleep(0.2)
    return (f"reload after an export: resident {samples[0]:.0f} MiB before, peak "
            f"{max(samples):.0f} MiB, {samples[-1]:.0f} MiB 10 s after the swap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--node", type=Path, help="an exported node (default: build one)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="pairs per launch")
    parser.add_argument("--launches", type=int, default=3,
                        help="times the sidecar and its references are started afresh")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--nginx", action="store_true")
    parser.add_argument("--datasette", action="store_true")
    parser.add_argument("--reload", action="store_true",
                        help="then edit one species file of the node, export, and follow the "
                             "sidecar's memory through its reload (edits --node's content)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk")
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as name:
        folder = Path(name)
        root = args.node or node(folder, args.records)
        key = subprocess.run(
            [FEDNODE, "keys", "create", "--project", str(root), "--name", "bench", "--scopes",
             "read,changes", "--groups", "partners,sensitive", "--rate", str(HUGE)],
            check=True, capture_output=True, text=True).stdout.strip()
        keyed = f"Authorization: Bearer {key}"
        cases: dict[str, Case] = {}  # by label, over every launch
        constants: dict[int, Case] = {}  # by body size
        extra: list[Case] = []
        readies: list[float] = []
        loads: list[float] = []
        try:
            if args.nginx:
                nginx_port = free_port()
                processes.append(nginx(root / "site_out", folder, nginx_port))
            if args.datasette:
                datasette_port = free_port()
                process, datasette_url = datasette(root, folder, datasette_port)
                processes.append(process)
            for launch in range(args.launches):
                # Fresh processes each launch: one process of the same code can run a fifth
                # faster or slower than the next for its whole life (bench/RESULTS.md).
                launched: list[subprocess.Popen[bytes]] = []
                port = free_port()
                started = time.perf_counter()
                server = start([FEDNODE, "serve", "--project", str(root), "--port", str(port),
                                "--anonymous-rate", str(HUGE)], port)
                readies.append(time.perf_counter() - started)
                launched.append(server)
                time.sleep(SETTLE)  # the search model loads in the background after the start
                loads.append(resident_mib(server.pid))
                base = f"http://127.0.0.1:{port}"
                record = json.loads(fetch(f"{base}/api/species?limit=1"))["items"][0]["id"]
                for label, url, header in (
                        ("record by id, open", f"{base}/api/species/{record}", None),
                        ("record by id, keyed", f"{base}/api/species/{record}", keyed),
                        ("list of 50 at offset 1000, open",
                         f"{base}/api/species?limit=50&offset=1000", None),
                        ("list of 50 at offset 1000, keyed (groups)",
                         f"{base}/api/species?limit=50&offset=1000", keyed),
                        ("list of 50, updated_since, keyed",
                         f"{base}/api/species?limit=50&offset=1000&updated_since={SINCE}",
                         keyed),
                        ("changes page of 100, keyed",
                         f"{base}/api/changes?since={SINCE}&limit=100", keyed)):
                    case = cases.setdefault(label, Case(label, url, header))
                    case.url, case.pid = url, server.pid
                references: dict[int, Case] = {}
                sizes: dict[str, int] = {}
                for case in cases.values():  # a constant-body server per distinct body size
                    size = sizes[case.label] = len(body := fetch(case.url, case.header))
                    if size not in references:
                        body_file = folder / f"body-{size}.json"
                        body_file.write_bytes(body)
                        reference_port = free_port()
                        launched.append(start([sys.executable, "-c", REFERENCE,
                                               str(reference_port), str(body_file)],
                                              reference_port))
                        reference = constants.setdefault(size, Case(
                            f"aiohttp, constant body of {size / 1024:.1f} KB", ""))
                        reference.url = f"http://127.0.0.1:{reference_port}/api/manifest"
                        reference.pid = launched[-1].pid
                        references[size] = reference
                    case.reference = references[size].url
                record_size = references[sizes["record by id, open"]]
                if launch == 0:
                    # the record's file itself: a CDN edge routes /api/species/{id} to it
                    if args.nginx:
                        extra.append(Case("nginx over site_out/, one record",
                                          f"http://127.0.0.1:{nginx_port}/"
                                          f"{record_file('species', record)}"))
                    if args.datasette:
                        extra.append(Case("Datasette, one row by primary key",
                                          f"{datasette_url}{record}.json"))
                everything = [*references.values(), *cases.values(), *extra]
                for case in everything:
                    wrk(case.url, 1, args.connections, case.header)  # warm up
                by_url = {case.url: case for case in references.values()}
                for round_ in range(args.rounds):
                    for case in [*cases.values(), *extra]:  # each beside its reference
                        against = by_url.get(case.reference, record_size)  # nginx, Datasette:
                        pair = (against, case) if round_ % 2 == 0 else (case, against)  # a
                        for one in pair:  # record's
                            rate, p99, spent = wrk(one.url, args.seconds, args.connections,
                                                   one.header, one.pid)
                            one.rates.append(rate)
                            one.p99s.append(p99)
                            one.cpus.append(spent)
                        case.ratios.append(case.rates[-1] / against.rates[-1])
                        if case.pid:
                            case.cpu_ratios.append(against.cpus[-1] / case.cpus[-1])
                memory = resident_mib(server.pid)
                if launch == args.launches - 1:
                    reload = follow_reload(root, server.pid, base) \
                        if args.reload or not args.node else ""
                for process in launched:
                    process.terminate()
                    process.wait()
        finally:
            for process in processes:
                process.terminate()
                process.wait()
    everything = [*sorted(constants.values(), key=lambda c: c.label), *cases.values(), *extra]
    median = statistics.median
    print(f"{args.connections} connections, wrk -t2, {args.launches} launches of fresh servers x "
          f"{args.rounds} rounds of {args.seconds}s, each request beside its reference; medians "
          f"over every pair (pairs' lowest-highest)")
    print(f"{'request':<44} {'req/s':>9} {'p99 ms':>8} {'vs constant body':>22} "
          f"{'server CPU':>11} {'vs constant':>12}")
    for case in everything:
        ratio = (f"{median(case.ratios):6.0%} ({min(case.ratios):.0%}-{max(case.ratios):.0%})"
                 if case.ratios else "100%")
        cpu = (f"{median(case.cpus):8.0f} µs {median(case.cpu_ratios or [1.0]):12.0%}"
               if case.pid else f"{'-':>11} {'-':>12}")  # nginx, Datasette: not counted
        print(f"{case.label:<44} {median(case.rates):9.0f} {median(case.p99s):8.1f} "
              f"{ratio:>22} {cpu}")
    print("server CPU: the answering process's user and system time per request (steadier "
          "than requests/s on a shared machine, where wrk takes the same cores)")
    print(f"sidecar: answering {min(readies):.1f}-{max(readies):.1f} s after start; resident "
          f"{min(loads):.0f}-{max(loads):.0f} MiB once loaded ({SETTLE:.0f} s after), "
          f"{memory:.0f} MiB after the last launch's run")
    if reload:
        print(reload)

if __name__ == "__main__":
    main()
