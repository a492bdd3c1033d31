"""Helpers for tests that start fednode as a process: the command, its environment, a free
port, and waiting for a server to answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
from typing import Any

from builders import REPO, http_get

FEDNODE = [sys.executable, "-m", "cli.main"]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[Any], seconds: float
             ) -> tuple[int, dict[str, str], bytes]:
    """GET url once the server started by `process` answers it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return http_get(url)
        except urllib.error.URLError:
            assert process.poll() is None, "the server stopped"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
