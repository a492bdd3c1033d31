"""What the benchmarks share: waiting for a server, and timing requests one at a time on one
kept-alive connection (client-side latency, in milliseconds)."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterable

Request = tuple[str, str, bytes | None, dict[str, str]]  # method, path, body, headers


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
