"""The public tree of a large node against the CDN's folder limit.

    .venv/bin/python bench/site_layout.py [--records 100000] [--sample 1000] [--keep DIR]

Builds the node (the bundled sample plus N synthetic records, tests/builders.py `multiply`),
exports it with `fednode export` (its own process: wall time), then reports: files and
folders in site_out/, the fullest folders (Netlify refuses more than 54,000 files in one),
the size of site_out/ and of the bundle on disk, the number of rules in _redirects; and
routes a sample of record URLs through the Edge Function's own code
(netlify/edge-functions/keyed.ts `recordFile`, run by Deno) to check that each lands on
its exported file. `--keep DIR` builds the node in DIR once and reuses it."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from builders import copy_sample, multiply  # noqa: E402

from exporter.contract.layout import FOLDER_LIMIT  # noqa: E402
from exporter.site.folders import entries_per_folder  # noqa: E402

FEDNODE = [sys.executable, "-m", "cli.main"]
DENO = REPO / ".cache" / "deno-2" / "node_modules" / ".bin" / "deno"
ROUTE = """
import { recordFile } from "%s";
const paths = JSON.parse(await new Response(Deno.stdin.readable).text());
const out = [];
for (const path of paths) out.push((await recordFile(new URL(path, "https://cdn.example"))).pathname);
console.log(JSON.stringify(out));
"""


def disk_usage(path: Path) -> str:
    return subprocess.run(["du", "-sh", "--apparent-size", str(path)], capture_output=True,
                          text=True, check=True).stdout.split()[0] + " apparent, " + \
        subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True,
                       check=True).stdout.split()[0] + " on disk"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--keep", type=Path)
    options = parser.parse_args()
    folder = options.keep or Path(tempfile.mkdtemp(prefix="fednode-layout-"))
    root = folder / "node"
    if not root.exists():
        copy_sample(root)
        multiply(root / "content", options.records)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.perf_counter()
    export = subprocess.run([*FEDNODE, "export", "--project", str(root)], env=env,
                            capture_output=True, text=True)
    print(f"export: {time.perf_counter() - started:.1f} s wall, exit {export.returncode}")
    print(export.stdout.strip() or export.stderr.strip()[-2000:])
    if export.returncode:
        sys.exit(1)
    site = (root / "site_out").resolve()
    files = [str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()]
    counts = entries_per_folder(files)
    print(f"site_out/: {len(files):,} files in {len(counts):,} folders; "
          f"{disk_usage(site)}; bundle: {disk_usage((root / '.fednode' / 'bundle').resolve())}")
    fullest = counts.most_common(6)
    print("fullest folders (entries): " + ", ".join(
        f"{name or '.'}/ {count:,}" for name, count in fullest)
        + f"; limit {FOLDER_LIMIT:,}: {'kept' if fullest[0][1] <= FOLDER_LIMIT else 'BROKEN'}")
    rules = [line for line in (site / "_redirects").read_text().splitlines()
             if line and not line.startswith("#")]
    print(f"_redirects: {len(rules)} rules, {(site / '_redirects').stat().st_size:,} bytes")
    records = [path for path in files if path.startswith("api/") and path.count("/") == 3
               and not path.startswith("api/sync/") and "/offset/" not in path]
    sample = random.Random(1).sample(records, min(options.sample, len(records)))
    urls = ["/api/{}/{}".format(path.split("/")[1], path.split("/")[3][:-5]) for path in sample]
    if not DENO.exists():
        print("deno not installed (scripts/test-tools installs it): routing not checked")
        return
    script = folder / "route.ts"
    script.write_text(ROUTE % (REPO / "netlify" / "edge-functions" / "keyed.ts"))
    routed = json.loads(subprocess.run([str(DENO), "run", "--no-remote", str(script)],
                                       input=json.dumps(urls), capture_output=True, text=True,
                                       check=True, env={**os.environ, "NO_COLOR": "1"}).stdout)
    landed = sum(1 for path in routed if (site / path.lstrip("/")).is_file())
    print(f"record URLs routed by the Edge Function's rewrite: {landed} of {len(urls)} land on "
          f"their exported file")


if __name__ == "__main__":
    main()
