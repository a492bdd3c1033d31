"""The CLI end to end: `fednode export` then `fednode serve` as real processes."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from builders import REPO, copy_sample, exported_sample, http_get
from processes import ENV, FEDNODE, free_port, wait_for


@pytest.mark.slow
def test_export_then_serve_answers_with_the_static_bytes(tmp_path: Path) -> None:
    root = copy_sample(tmp_path)
    missing = subprocess.run([*FEDNODE, "serve", "--project", str(root)], env=ENV,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "Run `fednode export` first" in missing.stderr
    export = subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV,
                            capture_output=True, text=True, timeout=120, check=True)
    assert export.stdout.startswith("exported species 42, resources 21, treatments 13, "
                                    "germination 18, team 7; 10 restricted kept private;")
    port = free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        status, headers, body = wait_for(f"{base}/api/manifest", server, 30)
        assert headers["X-Node-Access"] == "open"
        assert body == (root / "site_out" / "api" / "manifest.json").read_bytes()
        with urllib.request.urlopen(f"{base}/api/team") as answer:
            assert answer.read() == (root / "site_out" / "api" / "team" / "index.json").read_bytes()
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=30)
    assert b"GET /api/team 200 open" in errors


@pytest.mark.slow
def test_a_sidecar_host_needs_the_build_alone(tmp_path: Path) -> None:
    """A sidecar host is given the build (docs/operations.md), not content/: without
    content/node.toml there are no [serve] settings, and the defaults hold."""
    root = exported_sample(tmp_path / "publisher")
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, capture_output=True,
                   timeout=120, check=True)
    host = tmp_path / "host"
    shutil.copytree(root / ".fednode", host / ".fednode", symlinks=True)
    port = free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(host), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        status, _, body = wait_for(f"http://127.0.0.1:{port}/api/manifest", server, 30)
        assert status == 200
        assert body == (root / "site_out" / "api" / "manifest.json").read_bytes()
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.slow
def test_access_lines_are_written_within_a_second_while_serving(tmp_path: Path) -> None:
    """Access lines are buffered, not held: they reach standard error within about
    half a second of the request, while the server keeps running."""
    root = exported_sample(tmp_path / "node")
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, capture_output=True,
                   timeout=120, check=True)
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as errors:
        server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port",
                                   str(port)], env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=errors)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/api/manifest", server, 30)
        for offset in (1, 2, 3):
            http_get(f"{base}/api/species?offset={offset}")
        asked = time.monotonic()
        while log.read_bytes().count(b"fednode.access GET /api/species?offset=") < 3:
            assert time.monotonic() - asked < 2, log.read_text()
            time.sleep(0.05)
        assert server.poll() is None
        # Each line in the layout of every other log line, one a request, even for a path
        # written to look like a second line.
        forged = "/api/species%0A127.0.0.1%20GET%20/forged%20200"
        assert http_get(f"{base}{forged}")[0] == 404
        asked = time.monotonic()
        while forged.encode() not in log.read_bytes():
            assert time.monotonic() - asked < 2, log.read_text()
            time.sleep(0.05)
        lines = [line for line in log.read_text().splitlines() if "fednode.access" in line]
        assert len(lines) == 5  # the manifest waited for, three lists, the forged path
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} fednode\.access "
                                r"GET \S+ \d{3} open \d+\.\dms", line) for line in lines), lines
        assert lines[-1].split()[4:6] == [forged, "404"]
        # An error is written after the access lines of the requests before it.
        http_get(f"{base}/api/species?offset=4")
        (root / ".fednode" / "keys.json").write_text("{damaged")
        try:
            http_get(f"{base}/api/species", {"Authorization": "Bearer x.y.z"})
        except urllib.error.HTTPError as error:
            assert error.code == 503
        text = log.read_text()
        assert text.index("GET /api/species?offset=4") < text.index("refusing every key")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_access_lines_flushed_from_two_threads_are_each_written_once_in_order() -> None:
    """A warning on a worker thread flushes the batch while the loop adds and flushes: no
    line is lost, doubled or moved."""
    import io
    import logging
    import threading

    from sidecar.access_log import Batch

    stream = io.StringIO()
    target = logging.StreamHandler(stream)
    batch = Batch(target, "fednode.access")
    done = threading.Event()

    def warn_often() -> None:
        while not done.is_set():
            batch.flush()

    other = threading.Thread(target=warn_often)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    other.start()
    try:
        for n in range(20_000):
            batch.add("GET", f"/api/species/{n}", 200, "open", 0.0001)
            if n % 7 == 0:
                batch.flush()
    finally:
        done.set()
        other.join()
        sys.setswitchinterval(interval)
    batch.flush()
    numbers = [int(line.split()[4].rpartition("/")[2]) for line in stream.getvalue().splitlines()]
    assert numbers == list(range(20_000))


def test_netlify_builds_with_the_frozen_ledger_and_publishes_site_out() -> None:
    config = tomllib.loads((REPO / "netlify.toml").read_text())
    assert config["build"]["publish"] == "site_out"
    assert "--frozen" in config["build"]["command"]
    # The routing is the export's own site_out/_redirects (tests/test_seams.py checks it).
    assert "redirects" not in config
    headers = {rule["for"]: rule["values"] for rule in config["headers"]}
    assert headers["/*"]["X-Node-Access"] == "open"
    assert headers["/api/:file"]["Content-Type"].startswith("application/json")
    assert headers["/api/sync/:part/*"]["Content-Type"].startswith("application/x-ndjson")


def checkout_copy(destination: Path) -> Path:
    """The files git tracks in this checkout, as they are now, copied to `destination`: a
    fresh clone of the working tree, with no .venv, site_out/ or .fednode/."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def seeded_venv(checkout: Path) -> None:
    """A virtual environment in `checkout`/.venv holding the packages fednode needs, hard
    links to this test run's own (fednode itself left out), as pip's cache would give
    them: `scripts/run` then installs fednode into it, and its dependencies are found
    installed. (Installing them anew is what `./scripts/test` does on every clean clone.)
    Where the two are on different file systems the environment is left empty, and
    `scripts/run` installs everything."""
    subprocess.run(["python3", "-m", "venv",
                    str(checkout / ".venv")], check=True, capture_output=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = checkout / ".venv" / ours.relative_to(sys.prefix)
    for folder, _, files in os.walk(ours):
        relative = Path(folder).relative_to(ours)
        if relative.parts and relative.parts[0].startswith(("fednode", "__editable__")):
            continue
        (theirs / relative).mkdir(exist_ok=True)
        for name in files:
            if name.startswith("__editable__") or (theirs / relative / name).exists():
                continue
            try:
                os.link(Path(folder) / name, theirs / relative / name)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                return


@pytest.mark.slow
def test_scripts_run_on_another_port_gives_working_links() -> None:
    """The README's first command, on a fresh copy of the checkout and a port of one's own:
    it installs, exports and serves, and every link answers."""
    with tempfile.TemporaryDirectory(prefix="fednode-run-") as where:  # (beside .venv)
        checkout = checkout_copy(Path(where) / "fednode")
        seeded_venv(checkout)
        serve_with_scripts_run(checkout)


def serve_with_scripts_run(checkout: Path) -> None:
    port = free_port()
    server = subprocess.Popen([str(checkout / "scripts" / "run"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items()
                                   if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    try:
        base = f"http://127.0.0.1:{port}"
        manifest = json.loads(wait_for(f"{base}/api/manifest", server, 600)[2])
        assert manifest["node"]["base_url"] == manifest["node"]["sidecar_url"] == base
        with urllib.request.urlopen(f"{base}/api/species?limit=5") as answer:
            page = json.loads(answer.read())
        for url in (page["next"], page["items"][0]["url"], manifest["endpoints"]["list"]["url"]
                    .replace("{collection}", "team")):
            with urllib.request.urlopen(url) as answer:
                assert answer.status == 200, url
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=30)
    assert "warning" not in errors
