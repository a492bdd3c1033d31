"""Time `fednode sync` against a large node served by the real sidecar.

    .venv/bin/python bench/hub_sync.py [--records 100000] [--edits 100] [--keep DIR]

Builds the node (the bundled sample plus N synthetic records, tests/builders.py `multiply`),
exports it, issues a key (scopes read and changes, every collection, no rate limit to
speak of) and serves it with `fednode serve` on 127.0.0.1. Then each sync runs as its own
`fednode sync` process (wall time, and that process's peak RSS):

1. the first sync without a key (the snapshot files), goal <= 30 s and <= 1 GB;
2. the first sync with the key (list pages of 200, then the feed), goal <= 90 s;
3. a sync of each hub with nothing new;
4. after editing `--edits` records and exporting: a sync of each hub, goal <= 3 s.

For reference, the same run downloads the same bytes with aiohttp in this process: the
manifest, snapshot files and change list; every list page, one after another. `--keep DIR`
builds the node in DIR once and reuses it on later runs (the edits accumulate)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply  # noqa: E402
from timing import FEDNODE, HUGE, free_port  # noqa: E402


def run(*args: str) -> str:
    done = subprocess.run([FEDNODE, *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"fednode {args[0]} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def timed_sync(base: str, into: Path, key: str | None) -> tuple[float, float, str]:
    """One `fednode sync` process: wall seconds, peak RSS in MiB, its output line."""
    command = [FEDNODE, "sync", base, "--into", str(into)] + (["--key", key] if key else [])
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    output = process.stdout.read().decode().strip() if process.stdout else ""
    if os.waitstatus_to_exitcode(status):
        error = process.stderr.read().decode().strip() if process.stderr else ""
        raise SystemExit(f"sync failed: {error}")
    return seconds, usage.ru_maxrss / 1024, output


def build_node(root: Path, records: int) -> None:
    if (root / ".fednode" / "bundle").exists():
        print(f"reusing the node in {root}")
        return
    copy_sample(root)
    started = time.perf_counter()
    multiply(root / "content", records)
    run("export", "--project", str(root))
    print(f"built and exported the node ({records} synthetic records) in "
          f"{time.perf_counter() - started:.0f} s")


def edit(root: Path, count: int) -> None:
    """Change the title-like field of `count` synthetic records."""
    done = 0
    for path in sorted((root / "content").glob("*/synthetic-*.md")):
        text = path.read_text("utf-8")
        edited = re.sub(r'^((?:title|name|scientificName) = "[^"]*)"', r'\1 edited"', text,
                        count=1, flags=re.M)
        if edited != text:
            path.write_text(edited, "utf-8")
            done += 1
        if done == count:
            return


def manifest(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/api/manifest") as answer:
        return dict(json.load(answer))


async def download(base: str, key: str) -> tuple[float, int, float, int]:
    """Seconds and bytes to fetch the open sync files, then every list page with the key."""
    roots = [base]
    async with aiohttp.ClientSession() as session:
        async def get(url: str, headers: dict[str, str] | None = None) -> bytes:
            for root in roots[1:]:
                url = url.replace(root, base)
            async with session.get(url, headers=headers) as response:
                response.raise_for_status()
                return await response.read()
        started = time.perf_counter()
        body = await get(f"{base}/api/manifest")
        data = json.loads(body)
        roots += [data["node"]["base_url"], data["node"]["sidecar_url"]]
        size = len(body)
        for snap in data["sync"]["snapshots"]:
            size += len(await get(snap["url"]))
        size += len(await get(data["sync"]["changes"]["url"]))
        open_seconds = time.perf_counter() - started
        started, listed = time.perf_counter(), 0
        headers = {"Authorization": f"Bearer {key}"}
        for item in data["collections"]:
            url: str | None = f"{base}/api/{item['name']}?limit=200"
            while url:
                page = await get(url, headers)
                listed += len(page)
                url = json.loads(page)["next"]
        return open_seconds, size, time.perf_counter() - started, listed


def repeated(base: str, key: str, hub: Path) -> int:
    """How many items the feed gives for the `since` the keyed hub holds."""
    import duckdb

    with duckdb.connect(str(hub), read_only=True) as db:
        row = db.execute("SELECT value FROM hub WHERE name = 'since'").fetchone()
    assert row is not None
    url: str | None = f"{base}/api/changes?since={row[0]}&limit=1000"
    count = 0
    while url:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request) as answer:
            page = json.load(answer)
        count += len(page["items"])
        url = page["next"] and base + "/api/" + page["next"].split("/api/", 1)[1]
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="build the node here once and reuse it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fednode-hub-bench-") as folder:
        root = args.keep or Path(folder) / "node"
        build_node(root, args.records)
        key = run("keys", "create", "--project", str(root), "--name", "bench hub", "--scopes",
                  "read,changes", "--rate", str(HUGE))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([FEDNODE, "serve", "--project", str(root), "--port",
                                   str(port), "--anonymous-rate", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    seq = manifest(base)["sync"]["seq"]
                    break
                except OSError:
                    time.sleep(0.1)
            open_ref, open_bytes, keyed_ref, keyed_bytes = asyncio.run(download(base, key))
            print(f"reference, aiohttp download of the same bytes: open sync files "
                  f"{open_bytes / 2**20:.0f} MiB in {open_ref:.1f} s; every list page (200 "
                  f"a page, one after another) {keyed_bytes / 2**20:.0f} MiB in "
                  f"{keyed_ref:.1f} s")
            hubs = {"open": (Path(folder) / "open.duckdb", None),
                    "keyed": (Path(folder) / "keyed.duckdb", key)}
            figures = [("first sync", name, *timed_sync(base, path, token))
                       for name, (path, token) in hubs.items()]
            print(f"the changes feed answers {repeated(base, key, hubs['keyed'][0])} items "
                  f"to a poll with the last `until` and nothing new (0 once `since` is "
                  f"exclusive)")
            figures += [("nothing new", name, *timed_sync(base, path, token))
                        for name, (path, token) in hubs.items()]
            edit(root, args.edits)
            run("export", "--project", str(root))
            while manifest(base)["sync"]["seq"] == seq:  # the sidecar reloads within 1 s
                time.sleep(0.2)
            figures += [(f"after {args.edits} edits", name, *timed_sync(base, path, token))
                        for name, (path, token) in hubs.items()]
        finally:
            server.terminate()
            server.wait()
    for step, name, seconds, rss, line in figures:
        print(f"{step:>16} {name:>5}: {seconds:6.2f} s wall, peak RSS {rss:5.0f} MiB  ({line})")


if __name__ == "__main__":
    main()
