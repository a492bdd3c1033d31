"""A network hub over real member nodes: the figures a network hub is held to, each beside
its reference.

    .venv/bin/python bench/hub_network.py [--members 20] [--records 25000] [--edits 100]
        [--edited-members 10] [--searches 200] [--seconds 4] [--folder DIR]

Builds `--members` nodes of `--records` records each (the bundled sample plus records cloned
from it, tests/builders.py `multiply`; each node with an id and name of its own), exports
each and serves each with its own `fednode serve` on 127.0.0.1. Then a hub folder (`fednode
hub init`, one `fednode hub add` a member) and, each command as its own process (wall time,
CPU, peak RSS):

1. the first `hub sync` of every member (goal <= 4 min at 20 x 25,000); reference: the same
   sync files (manifest, snapshot files, change list) downloaded with aiohttp, as many
   members at once as the hub syncs;
2. `hub sync` with nothing changed (goal <= 1 s), before and after the hub is exported;
   reference: every member's manifest downloaded with aiohttp;
3. `hub export`, the union of every member's public records (the hub is served from it),
   with the members' sidecars stopped (the export reads the hub's copies, never the
   members; 20 sidecars and a first export of 500,000 records do not fit in 24 GiB),
   and the fall in the machine's available memory (its forks included);
4. `fednode hub serve`: its start, search latency (goal p95 <= 50 ms; judged queries of
   bench/search_judged.json, default mode, one at a time on one connection) against a
   constant-body aiohttp server of the median answer's size; a record by id with wrk (goal
   >= 40 % of a constant body of the same size, rounds of pairs as bench/read_speed.py);
   its resident memory (goal <= 1.5 GB);
5. `--edits` records edited over `--edited-members` members, each exported and reloaded by
   its sidecar, then `hub sync` (goal <= 5 s), which ends with the hub's export of what
   changed; reference: those members' manifests and change lists with aiohttp.

Before each member's sidecar and each heavy step the machine's available memory is checked
(`--min-free`): the run stops rather than push a shared machine out of memory. Every server
started is stopped on the way out. Needs wrk (apt-get install wrk)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply  # noqa: E402
from hub_sync import edit, run  # noqa: E402
from read_speed import fetch, resident_mib, wrk  # noqa: E402
from timing import (  # noqa: E402
    FEDNODE,
    REFERENCE,
    Request,
    free_port,
    latencies,
    reference_loop,
    timed_command,
)

SAMPLE_RECORDS = 100  # what bench/read_speed.py counts for the sample's own records
FULL = 20 * 25_000  # the network


@dataclass
class Member:
    name: str
    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Figures:
    """The table's rows: figure, value, reference, goal and whether it is met."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    def add(self, figure: str, value: str, reference: str, goal: str = "") -> None:
        self.rows.append((figure, value, reference, goal))
        print(f"  {figure}: {value} | reference: {reference} | {goal}", flush=True)


def available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def need_memory(minimum: float, step: str) -> None:
    free = available_mib()
    if free < minimum:
        raise SystemExit(f"stopping before {step}: {free:.0f} MiB available, under "
                         f"--min-free {minimum:.0f} MiB")


def peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def build_member(folder: Path, index: int, records: int) -> Member:
    """A node of its own id and name, `records` records, exported for its own port."""
    name = f"member-{index:02d}"
    member = Member(name, folder / name, free_port())
    copy_sample(member.root)
    node_toml = member.root / "content" / "node.toml"
    lines = []
    for line in node_toml.read_text("utf-8").splitlines():
        if line.startswith("id = "):
            line = f'id = "{uuid.uuid5(uuid.NAMESPACE_URL, f"fednode-bench/{name}")}"'
        elif line.startswith("name = "):
            line = f'name = "Bench network {name}"'
        lines.append(line)
    node_toml.write_text("\n".join(lines) + "\n", "utf-8")
    multiply(member.root / "content", max(records - SAMPLE_RECORDS, 0))
    wall, cpu, rss, _ = timed_command("export", "--project", str(member.root),
                                      "--base-url", member.base)
    print(f"  {name}: exported in {wall:.1f} s wall, {cpu:.1f} s CPU, peak {rss:.0f} MiB",
          flush=True)
    return member


def wait_answering(port: int, seconds: float) -> float:
    """Seconds until 127.0.0.1:port answers /api/manifest with 200, at most `seconds`."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        try:
            fetch(f"http://127.0.0.1:{port}/api/manifest")
            return time.perf_counter() - started
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing answered on port {port} within {seconds:.0f} s")


def serve(command: list[str], port: int, seconds: float = 120) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_answering(port, seconds)
    except BaseException:
        process.terminate()
        process.wait()
        raise
    return process


async def download(bases: list[str], width: int, parts: str) -> tuple[float, int]:
    """Seconds and bytes to fetch each node's manifest and, by `parts`, its change list
    ("changes") or its snapshot files and change list ("all", what a first open sync
    reads), `width` nodes at once."""
    gate = asyncio.Semaphore(width)
    async with aiohttp.ClientSession() as session:
        async def get(url: str) -> bytes:
            async with session.get(url) as response:
                response.raise_for_status()
                return await response.read()

        async def one(base: str) -> int:
            async with gate:
                body = await get(f"{base}/api/manifest")
                sync = json.loads(body)["sync"]
                urls = [snap["url"] for snap in sync["snapshots"]] if parts == "all" else []
                urls += [sync["changes"]["url"]] if parts != "manifest" else []
                return len(body) + sum([len(await get(url)) for url in urls])

        started = time.perf_counter()
        sizes = await asyncio.gather(*(one(base) for base in bases))
        return time.perf_counter() - started, sum(sizes)


def reference_download(bases: list[str], width: int, parts: str) -> str:
    seconds, size = asyncio.run(download(bases, width, parts))
    what = {"all": "sync files", "changes": "manifests and change lists",
            "manifest": "manifests"}[parts]
    return (f"aiohttp, the {len(bases)} members' {what} ({size / 2**20:.2f} MiB, {width} at "
            f"once): {seconds:.2f} s")


def hub_sync(hub: Path) -> tuple[float, float, float, float | None, list[str]]:
    """One `fednode hub sync`: wall seconds to its end, CPU seconds, peak RSS in MiB, the
    seconds at which its `total:` line came (the members synced, before the hub's export),
    and its output lines."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    process = subprocess.Popen([FEDNODE, "hub", "sync", "--hub", str(hub)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    lines, total_at = [], None
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("total:"):
                total_at = time.perf_counter() - started
    except BaseException:  # interrupted: the sync goes too
        process.terminate()
        process.wait()
        raise
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        raise SystemExit("hub sync failed:\n" + "\n".join(lines))
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, total_at, lines


def said(lines: list[str]) -> str:
    return "; ".join(line for line in lines if line.startswith(("total:", "hub export:")))


def start_members(members: list[Member], minimum: float) -> str:
    for member in members:
        need_memory(minimum, f"serving {member.name}")
        member.process = serve([FEDNODE, "serve", "--project", str(member.root), "--port",
                                str(member.port), "--anonymous-rate", "0"], member.port)
        time.sleep(2)  # its search model loads in the background: counted at the next check
    sizes = [resident_mib(member.process.pid) for member in members if member.process]
    return (f"{len(sizes)} member sidecars resident {sum(sizes):.0f} MiB in all "
            f"({min(sizes):.0f}-{max(sizes):.0f} MiB each)")


def make_hub(hub: Path, members: list[Member]) -> None:
    subprocess.run([FEDNODE, "hub", "init", str(hub), "--name", "Bench network hub"],
                   check=True, capture_output=True)
    for member in members:
        subprocess.run([FEDNODE, "hub", "add", member.base, "--hub", str(hub), "--name",
                        member.name], check=True, capture_output=True)


def syncs(hub: Path, members: list[Member], width: int, figures: Figures) -> None:
    """The first sync, then syncs with nothing changed (the hub not exported yet)."""
    bases = [member.base for member in members]
    reference = reference_download(bases, width, "all")
    wall, cpu, rss, _, lines = hub_sync(hub)
    figures.add("first hub sync", f"{wall:.2f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} "
                f"MiB ({said(lines)})", reference, "goal <= 240 s at 20 x 25,000")
    unchanged(hub, bases, width, figures, "not exported yet")


def unchanged(hub: Path, bases: list[str], width: int, figures: Figures, when: str) -> None:
    runs = [hub_sync(hub) for _ in range(3)]
    walls = sorted(one[0] for one in runs)
    members = statistics.median(one[3] or 0.0 for one in runs)
    figures.add(f"hub sync, nothing changed ({when})",
                f"median of 3 {walls[1]:.2f} s ({walls[0]:.2f}-{walls[2]:.2f}; "
                f"{members:.2f} s to the members' lines), peak RSS "
                f"{max(one[2] for one in runs):.0f} MiB ({said(runs[-1][4])})",
                reference_download(bases, width, "manifest"), "goal <= 1 s")


def hub_export(hub: Path, base: str, figures: Figures, total: int) -> None:
    """The hub's first export, with the machine's memory in use at its peak: the export's
    own peak RSS leaves out the processes it forks, which copy much of its heap."""
    before = available_mib()
    lowest = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            lowest[0] = min(lowest[0], available_mib())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        wall, cpu, rss, summary = timed_command("hub", "export", "--hub", str(hub),
                                                "--base-url", base)
    finally:
        done.set()
        watcher.join()
    figures.add("hub export, first", f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS "
                f"{rss:.0f} MiB (the machine's available memory, sampled every 0.5 s, fell "
                f"by {before - lowest[0]:.0f} MiB at its lowest, its forks included); "
                f"{wall / total * 1000:.2f} ms a record",
                "(reference loop, table's header)", summary.splitlines()[-1][:160])


def stop_members(members: list[Member]) -> None:
    for member in members:
        if member.process:
            member.process.terminate()
    for member in members:
        if member.process:
            member.process.wait()
            member.process = None


def search(port: int, folder: Path, count: int, figures: Figures) -> None:
    judged = json.loads((REPO / "bench" / "search_judged.json").read_text())["queries"]
    texts = [query["q"] for query in judged]
    paths = [f"/api/search?q={quote(texts[n % len(texts)])}" for n in range(count)]
    requests: list[Request] = [("GET", path, None, {}) for path in paths]
    latencies(port, requests[:20])  # warm up
    mine = sorted(latencies(port, requests))
    sizes = [len(fetch(f"http://127.0.0.1:{port}{path}")) for path in paths[:len(texts)]]
    body = folder / "search-body.json"
    body.write_bytes(b"x" * int(statistics.median(sizes)))
    reference_port = free_port()
    reference = serve([sys.executable, "-c", REFERENCE, str(reference_port), str(body)],
                      reference_port)
    try:
        constant: list[Request] = [("GET", "/api/search", None, {})] * count
        latencies(reference_port, constant[:20])
        theirs = sorted(latencies(reference_port, constant))
    finally:
        reference.terminate()
        reference.wait()
    figures.add("hub search, default mode (hybrid), one at a time",
                f"p50 {percentile(mine, 50):.1f} ms, p95 {percentile(mine, 95):.1f} ms, "
                f"max {mine[-1]:.1f} ms ({count} requests)",
                f"aiohttp, constant {body.stat().st_size} B body: p50 "
                f"{percentile(theirs, 50):.1f} ms, p95 {percentile(theirs, 95):.1f} ms",
                "goal p95 <= 50 ms")


def percentile(values: list[float], at: int) -> float:
    return values[max(int(len(values) * at / 100) - 1, 0)]


def record_reads(port: int, pid: int, folder: Path, seconds: int, figures: Figures) -> None:
    base = f"http://127.0.0.1:{port}"
    record = json.loads(fetch(f"{base}/api/species?limit=1&offset=100"))["items"][0]["id"]
    url = f"{base}/api/species/{record}"
    body = folder / "record-body.json"
    body.write_bytes(fetch(url))
    reference_port = free_port()
    reference = serve([sys.executable, "-c", REFERENCE, str(reference_port), str(body)],
                      reference_port)
    try:
        constant = f"http://127.0.0.1:{reference_port}/api/manifest"
        wrk(url, 1, 16, None)
        wrk(constant, 1, 16, None)  # warm up
        ratios, rates, refs = [], [], []
        for round_ in range(4):  # each beside its reference, the order alternating
            pair = (constant, url) if round_ % 2 == 0 else (url, constant)
            got = {one: wrk(one, seconds, 16, None, pid if one == url else reference.pid)
                   for one in pair}
            rates.append(got[url][0])
            refs.append(got[constant][0])
            ratios.append(got[url][0] / got[constant][0])
    finally:
        reference.terminate()
        reference.wait()
    figures.add("hub record by id, open (wrk -t2 -c16)",
                f"{statistics.median(ratios):.0%} of the constant body "
                f"({min(ratios):.0%}-{max(ratios):.0%}); {statistics.median(rates):.0f} req/s",
                f"aiohttp, constant {body.stat().st_size} B body: "
                f"{statistics.median(refs):.0f} req/s", "goal >= 40 %")


def edits(members: list[Member], hub: Path, args: argparse.Namespace,
          hub_port: int, figures: Figures) -> None:
    """`--edits` edits over `--edited-members` members, exported; then the hub's sync."""
    edited = members[:min(args.edited_members, len(members))]
    for n, member in enumerate(edited):
        count = args.edits // len(edited) + (n < args.edits % len(edited))
        seq = json.loads(fetch(f"{member.base}/api/manifest"))["sync"]["seq"]
        edit(member.root, count)
        run("export", "--project", str(member.root))
        deadline = time.monotonic() + 60
        while json.loads(fetch(f"{member.base}/api/manifest"))["sync"]["seq"] == seq:
            if time.monotonic() > deadline:
                raise SystemExit(f"{member.name}'s sidecar did not reload its new export")
            time.sleep(0.2)
    hub_base = f"http://127.0.0.1:{hub_port}"
    before = fetch(f"{hub_base}/api/manifest")
    reference = reference_download([m.base for m in edited], args.concurrency,
                                   "changes")
    wall, cpu, rss, total_at, lines = hub_sync(hub)
    started = time.perf_counter()
    while fetch(f"{hub_base}/api/manifest") == before and time.perf_counter() - started < 60:
        time.sleep(0.1)
    figures.add(f"hub sync after {args.edits} edits over {len(edited)} members (served hub)",
                f"{wall:.2f} s wall ({total_at or 0:.2f} s to the members' lines, the rest "
                f"the hub's export), {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB; the hub's "
                f"sidecar served it {time.perf_counter() - started:.1f} s later "
                f"({said(lines)})", reference, "goal <= 5 s")


def network(folder: Path, args: argparse.Namespace, figures: Figures) -> None:
    """Everything from the built members on; every server started is stopped here."""
    members: list[Member] = []
    started = time.perf_counter()
    for index in range(args.members):
        members.append(build_member(folder, index, args.records))
    print(f"built and exported {len(members)} members in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    hub, hub_port = folder / "hub", free_port()
    servers: list[subprocess.Popen[bytes]] = []
    try:
        print(start_members(members, args.min_free), flush=True)
        make_hub(hub, members)
        syncs(hub, members, args.concurrency, figures)
        total = args.members * args.records
        # The hub's export reads its copies, never the members: their sidecars are stopped
        # meanwhile (20 of them and a first export of 500,000 records do not fit in 24 GiB).
        stop_members(members)
        need_memory(args.min_free, "the hub's export")
        hub_export(hub, f"http://127.0.0.1:{hub_port}", figures, total)
        print(start_members(members, args.min_free), flush=True)
        unchanged(hub, [m.base for m in members], args.concurrency, figures, "served hub")
        need_memory(args.min_free, "the hub's sidecar")
        began = time.perf_counter()
        server = serve([FEDNODE, "hub", "serve", "--hub", str(hub), "--port", str(hub_port),
                        "--anonymous-rate", "0"], hub_port, seconds=600)
        servers.append(server)
        ready = time.perf_counter() - began
        time.sleep(3)
        figures.add("hub serve start (its hub export finding nothing changed, then the "
                    "sidecar)", f"answering after {ready:.1f} s; resident "
                    f"{resident_mib(server.pid):.0f} MiB, peak {peak_mib(server.pid):.0f} "
                    f"MiB", "-", "")
        search(hub_port, folder, args.searches, figures)
        record_reads(hub_port, server.pid, folder, args.seconds, figures)
        figures.add("hub serve resident memory after search and reads",
                    f"{resident_mib(server.pid):.0f} MiB (peak {peak_mib(server.pid):.0f} "
                    f"MiB)", "-", "goal <= 1.5 GB (1,430 MiB)")
        edits(members, hub, args, hub_port, figures)
        figures.add("hub serve memory after the edits' reload",
                    f"{resident_mib(server.pid):.0f} MiB (peak {peak_mib(server.pid):.0f} "
                    f"MiB)", "-", "goal <= 1.5 GB (1,430 MiB)")
    finally:
        servers += [member.process for member in members if member.process]
        for process in servers:
            process.terminate()
        for process in servers:
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--records", type=int, default=25_000, help="records a member")
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--edited-members", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4,
                        help="members synced at once by the reference (hub.toml's default)")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=4, help="of each wrk run")
    parser.add_argument("--min-free", type=float, default=1024,
                        help="MiB the machine must have available before each heavy step")
    parser.add_argument("--folder", type=Path, help="build here (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the members and the hub afterwards (their folder is "
                             "printed), to look into them; by default they are deleted")
    args = parser.parse_args()
    figures = Figures()
    loop_before = reference_loop()
    print(f"reference loop {loop_before:.2f} s; {available_mib():.0f} MiB available; "
          f"{args.members} members x {args.records} records", flush=True)
    with contextlib.ExitStack() as stack:
        if args.keep:
            name = tempfile.mkdtemp(prefix="fednode-hub-network-", dir=args.folder)
            stack.callback(print, f"kept: {name}")
        else:
            name = stack.enter_context(tempfile.TemporaryDirectory(
                prefix="fednode-hub-network-", dir=args.folder))
        try:
            network(Path(name), args, figures)
        finally:
            loop_after = reference_loop()
            print(f"\n{args.members} members x {args.records} records; reference loop "
                  f"{loop_before:.2f} s before, {loop_after:.2f} s after\n")
            print("| figure | value | reference | goal |\n| --- | --- | --- | --- |")
            for row in figures.rows:
                print("| " + " | ".join(row) + " |")
            scale = FULL / (args.members * args.records)
            if scale != 1:
                print(f"\nthe issue's network is {scale:g} times as many records")


if __name__ == "__main__":
    main()
