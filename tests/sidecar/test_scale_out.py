"""`fednode serve --workers N --redis URL`: several worker processes on one port, with rate
limits kept in a real Redis (Debian's redis-server, installed where missing), exact across
the workers, failing closed while Redis is down and recovering when it returns."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from builders import debian_tool
from processes import ENV, FEDNODE, free_port, wait_for

LIMIT = 20


class Redis:
    def __init__(self, binary: Path, folder: Path) -> None:
        self.binary, self.folder, self.port = binary, folder, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(debian_tool("redis-server", "redis-server"), tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def node(tmp_path: Path, sample_root: Path) -> tuple[Path, str]:
    """The exported sample, with a key limited to LIMIT requests a minute."""
    root = tmp_path / "node"
    shutil.copytree(sample_root, root, symlinks=True)
    key = subprocess.run([*FEDNODE, "keys", "create", "--project", str(root), "--name", "t",
                          "--scopes", "read", "--rate", str(LIMIT)], env=ENV, check=True,
                         capture_output=True, text=True).stdout.strip()
    return root, key


EARLY: dict[int, list[str]] = {}  # a server's log lines read before it was stopped, by pid


def serve(root: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port),
                                *options], env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    wait_for(f"{base}/api/schema", process, 90)
    # The first worker answers before the others listen: the start line waits for them all.
    assert process.stderr is not None
    early = EARLY[process.pid] = []
    while not early or not early[-1].startswith("fednode sidecar on "):
        line = process.stderr.readline()
        assert line, "".join(early)
        early.append(line)
    return process, base


def get(url: str, key: str | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"}
                                     if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    _, log = process.communicate(timeout=30)
    return "".join(EARLY.pop(process.pid, [])) + log


def test_more_than_one_worker_needs_redis(node: tuple[Path, str]) -> None:
    done = subprocess.run([*FEDNODE, "serve", "--project", str(node[0]), "--workers", "2",
                           "--port", str(free_port())], env=ENV, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert "--workers 2 needs --redis URL" in done.stderr


@pytest.mark.slow
def test_serve_refuses_a_redis_that_does_not_answer(node: tuple[Path, str]) -> None:
    done = subprocess.run([*FEDNODE, "serve", "--project", str(node[0]), "--redis",
                           f"redis://127.0.0.1:{free_port()}/0", "--port", str(free_port())],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "does not answer" in done.stderr and "Traceback" not in done.stderr


def test_serve_settings_in_node_toml_are_checked(node: tuple[Path, str]) -> None:
    toml = node[0] / "content" / "node.toml"
    toml.write_text(toml.read_text() + "\n[serve]\nworkers = 0\nthreads = 4\n")
    done = subprocess.run([*FEDNODE, "serve", "--project", str(node[0]), "--port",
                           str(free_port())], env=ENV, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert re.search(r"content/node.toml:\d+: serve.workers: must be a whole number",
                     done.stderr)
    assert "serve.threads: unknown setting" in done.stderr
    assert "the sidecar did not start" in done.stderr and "nothing was written" not in done.stderr


@pytest.mark.slow
def test_limits_are_exact_across_three_workers(node: tuple[Path, str],
                                               redis_server: Redis) -> None:
    root, key = node
    process, base = serve(root, "--workers", "3", "--redis", redis_server.url,
                          "--anonymous-rate", str(LIMIT))
    try:
        # Fresh connections, all at once: the kernel spreads them over the workers.
        with ThreadPoolExecutor(24) as pool:
            keyed = Counter(status for status, _ in pool.map(
                lambda _: get(f"{base}/api/team", key), range(3 * LIMIT)))
            anonymous = Counter(status for status, _ in pool.map(
                lambda _: get(f"{base}/api/species"), range(3 * LIMIT)))
    finally:
        log = stop(process)
    assert keyed == {200: LIMIT, 429: 2 * LIMIT}
    # The sample's schema was fetched once while waiting for the server: one anonymous hit.
    assert anonymous == {200: LIMIT - 1, 429: 2 * LIMIT + 1}
    served = {line.split()[2] for line in log.splitlines() if "fednode.access GET" in line}
    assert len(served) >= 2, f"one worker answered everything:\n{log}"


@pytest.mark.slow
def test_a_redis_outage_fails_closed_and_recovers(node: tuple[Path, str],
                                                  redis_server: Redis) -> None:
    root, key = node
    process, base = serve(root, "--redis", redis_server.url)
    try:
        assert get(f"{base}/api/team", key)[0] == 200
        redis_server.stop()
        for who in (key, None):
            started = time.monotonic()
            status, body = get(f"{base}/api/team", who)
            assert status == 503 and body["error"]["code"] == "unavailable"
            assert "rate limiter, Redis, does not answer" in body["error"]["message"]
            assert time.monotonic() - started < 5
        redis_server.start()
        for _ in range(50):
            status, _ = get(f"{base}/api/team", key)
            if status == 200:
                break
            time.sleep(0.1)
        assert status == 200
    finally:
        log = stop(process)
    assert "rate limiter: Redis at redis://127.0.0.1" in log


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_retry_after_is_when_a_request_fits_again(kind: str, tmp_path: Path) -> None:
    """Refused, a caller is told to wait until enough requests leave the window that one more
    fits: after its key's rate was lowered (100 a minute to 5), that is not when the oldest
    leaves (waiting only that long would be refused again). Both limiters, the real Redis
    too."""
    from sidecar.limits import MemoryLimiter, RedisLimiter
    if kind == "redis":
        server = Redis(debian_tool("redis-server", "redis-server"), tmp_path)
        server.start()
        limiter: Any = RedisLimiter(server.url, "node")
        spread = 0.0  # Redis keeps its own clock: the requests come at once
    else:
        now = [0.0]
        limiter = MemoryLimiter(clock=lambda: now[0])
        spread = 0.5
    try:
        for n in range(20):
            if kind == "memory":
                now[0] = n * spread  # 20 requests over 10 s
            assert (await limiter.hit("key:k", 100)).allowed
        if kind == "memory":
            now[0] = 10.0
        refused = await limiter.hit("key:k", 5)
        assert not refused.allowed
        # the 16th request of 20 must leave the window before a 6th fits in 5
        assert refused.retry_after == (58 if kind == "memory" else 60), refused
        if kind == "memory":
            now[0] = 10.0 + refused.retry_after
            assert (await limiter.hit("key:k", 5)).allowed
    finally:
        await limiter.close()
        if kind == "redis":
            server.stop()


def _workers_of(pid: int) -> list[int]:
    """The worker processes `fednode serve --workers` started (multiprocessing's spawn)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


ENDED = re.compile(r"^(\S+ \S+) .*worker \d+ ended \(exit code -?\d+\); "
                   r"starting another in (\d+) s$", re.MULTILINE)


@pytest.mark.slow
def test_a_worker_that_keeps_dying_is_restarted_slower_and_says_why(
        node: tuple[Path, str], redis_server: Redis) -> None:
    """A worker that dies while Redis is gone cannot start again: it is restarted after a
    pause that doubles (1, 2, 4 s ...), and why it could not start is logged: it is not
    restarted every fifth of a second (19 times in 12 s at a core's full use) with its reason
    lost. Each restart comes at least its pause after the end before it, by the log's
    clock."""
    import os
    import signal
    import threading
    from datetime import datetime
    root, _ = node
    process, _ = serve(root, "--workers", "2", "--redis", redis_server.url)
    lines: list[str] = []
    assert process.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stderr.readline, "")),
                              daemon=True)
    try:
        workers = _workers_of(process.pid)
        assert len(workers) == 2, workers
        redis_server.stop()
        os.kill(workers[0], signal.SIGKILL)
        reader.start()
        deadline = time.monotonic() + 120  # until a restarted worker's end is logged
        while len(ENDED.findall("".join(lines))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(30)
    log = "".join(EARLY.pop(process.pid, []) + lines)
    ended = ENDED.findall(log)
    assert len(ended) >= 2, log
    pauses = [int(pause) for _, pause in ended]
    assert pauses == [1, 2, 4, 8, 16][:len(pauses)], ended
    at = [datetime.strptime(when, "%Y-%m-%d %H:%M:%S,%f") for when, _ in ended]
    assert all((later - earlier).total_seconds() >= pause
               for earlier, later, pause in zip(at, at[1:], pauses, strict=False)), ended
    assert "a worker could not start:" in log and "Redis" in log, log
