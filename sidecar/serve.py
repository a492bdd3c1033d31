"""`fednode serve`: run the sidecar on a port until stopped."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from exporter.contract.errors import FednodeError

from .app import NodeRunner, SidecarConfig, create_app
from .state import STORE


class ServeError(FednodeError):
    """The sidecar cannot start; the message says why and what to do."""


async def serve(bundle: Path, private: Path, *, host: str, port: int, anonymous_rate: int,
                say: Callable[[str], None]) -> None:
    """Load the bundle once, listen, and serve until SIGINT or SIGTERM."""
    app = create_app(SidecarConfig(bundle=bundle, private=private,
                                   anonymous_rate=anonymous_rate))
    runner = NodeRunner(app)
    await runner.setup()  # loads the bundle: BundleMissing says to export first
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ServeError(f"cannot listen on {host}:{port}: {reason}; stop what uses that "
                             f"port or choose another with --port") from None
        here = f"http://{host}:{port}"
        say(f"fednode sidecar on {here}/api/manifest")
        meta = app[STORE].snapshot.meta
        for line in address_warnings(here, meta.base_url, meta.sidecar_url):
            say(line)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def address_warnings(here: str, base_url: str, sidecar_url: str) -> list[str]:
    """What a user serving on this address should know about the links the node gives:
    every `url`, `next` and manifest address is built from the exported base_url and
    sidecar_url, not from the address the sidecar listens on."""
    listening = urlsplit(here)
    lines = []
    for name, url in (("base_url", base_url), ("sidecar_url", sidecar_url)):
        exported = urlsplit(url)
        local = exported.hostname in ("127.0.0.1", "localhost", "::1")
        if local and exported.port != listening.port:
            lines.append(f"warning: links in responses point to {url} (the exported {name}), "
                         f"not to this server; run `fednode export --base-url {here}` to "
                         f"match it")
    return lines[:1] if base_url == sidecar_url else lines
