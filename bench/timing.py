"""What the benchmarks share: the CLI, a free port, the constant-body reference server,
waiting for a server, timing requests one at a time on one kept-alive connection
(client-side latency, in milliseconds), and timing edits under `fednode export --watch`.
Commands run with their compiled modules kept, as on a publisher's machine."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

Request = tuple[str, str, bytes | None, dict[str, str]]  # method, path, body, headers
FEDNODE = str(Path(sys.executable).parent / "fednode")
HUGE = 1_000_000_000  # a rate that never trips
# Between two edits under --watch, as a person saves: the ledger stamps events to the second,
# so an export within the second of the one before waits for the next.
PAUSE = 1.0

# Commands are timed as a publisher's machine runs them: its Python keeps the modules it
# compiles (__pycache__). This machine's environment sets PYTHONDONTWRITEBYTECODE, under
# which every command compiled fednode's own modules again: about 0.6 s of the checklist's
# export of 3.5 s. Every command a benchmark starts inherits this.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The reference: a bare aiohttp server answering one file's bytes to every GET, no logic.
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



def wait_for(port: int) -> None:
    """Until 127.0.0.1:port answers GET /api/manifest (any status), at most a minute."""
    for _ in range(600):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/api/manifest")
            connection.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing answered on port {port}")


def latencies(port: int, requests: Iterable[Request]) -> list[float]:
    """Each request's time to the last byte of its answer; a non-200 answer stops the run."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    for method, path, body, headers in requests:
        started = time.perf_counter()
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        out.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status}")
    return out


def timed_command(*args: str) -> tuple[float, float, float, str]:
    """Run one fednode command; return wall seconds, CPU seconds (with the processes it
    waited for), peak RSS in MiB and its standard output."""
    started = time.perf_counter()
    process = subprocess.Popen([FEDNODE, *args], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    output = process.stdout.read().decode() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"fednode {' '.join(args)} failed: {output}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output.strip()


def watched_edits(root: Path, edits: int, edit: Callable[[Path, int], object],
                  peak: list[float] | None = None) -> list[float]:
    """Seconds from saving an edit (`edit(root, n)`, n from 1, changing one record) to
    `fednode export --watch` reporting the export done, for `edits` edits one after the
    other. The watching process's peak RSS in MiB is appended to `peak`, if given."""
    process = subprocess.Popen([FEDNODE, "export", "--watch", "--project", str(root)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    try:
        process.stdout.readline()  # the export it starts with
        times = []
        for n in range(1, edits + 1):
            time.sleep(PAUSE)
            started = time.perf_counter()
            edit(root, n)
            summary = process.stdout.readline()
            times.append(time.perf_counter() - started)
            assert "1 ledger events" in summary, summary
        if peak is not None:
            status = Path(f"/proc/{process.pid}/status").read_text()
            peak.append(int(status.split("VmHWM:")[1].split()[0]) / 1024)
        return times
    finally:
        process.terminate()
        process.wait()


def reference_loop() -> float:
    """Seconds a pure Python loop takes (the reference bench/RESULTS.md quotes): how fast
    this shared machine runs at the moment, printed beside a run's figures."""
    started = time.perf_counter()
    sum(range(3 * 10**7))
    return time.perf_counter() - started
