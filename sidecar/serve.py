"""`fednode serve`: run the sidecar on a port until stopped, in one process or several."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from exporter.contract.errors import FednodeError
from exporter.shared.process import without_pandas

from . import access_log
from .app import NodeRunner, SidecarConfig, create_app
from .errors import Unavailable
from .limits import where_of
from .state import RUNNING
from .store import Store

log = logging.getLogger("fednode.sidecar")
class ServeError(FednodeError):
    """The sidecar cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class Options:
    bundle: Path
    private: Path
    host: str
    port: int
    anonymous_rate: int
    redis: str | None = None  # rate-limit windows in Redis, shared by workers and hosts
    trusted_proxies: tuple[str, ...] = ()  # whose X-Forwarded-For is believed
    # The command that exports this project with another base URL, as the address warnings
    # name it (a hub's folder is exported by `fednode hub export`)
    export_command: str = "fednode export"


def run(options: Options, *, workers: int, say: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM: in this process, or in `workers` processes sharing
    the port (each one loads the bundle; the kernel spreads connections among them)."""
    if workers > 1 and not options.redis:
        raise ServeError(f"--workers {workers} needs --redis URL: each worker would keep its "
                         f"own rate-limit windows and let every key through {workers} times "
                         f"its rate. Run Redis and pass --redis redis://127.0.0.1:6379/0 (or "
                         f"set redis under [serve] in content/node.toml), or use one worker")
    _more_open_files()
    if workers == 1:
        asyncio.run(serve(options, say=say))
    else:
        _supervise(options, workers, say)


OPEN_FILES = 1 << 20  # the most `_more_open_files` asks for (Linux's usual nr_open)


def _more_open_files() -> None:
    """Raise the soft limit on open files to the hard one (at most OPEN_FILES), as servers
    commonly do: besides a descriptor a connection, a loaded bundle holds each segment of its
    records table open (`records`: some 250 at 500,000 records, twice that while a reload
    holds two bundles), and the usual soft limit is 1,024. Workers inherit it."""
    try:
        import resource
    except ImportError:  # (not a Unix)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            log.warning("could not raise the limit on open files from %d to %d", soft, wanted)


async def serve(options: Options, *, say: Callable[[str], None], reuse_port: bool = False,
                ready: Callable[[], None] | None = None) -> None:
    """Load the bundle once, listen, and serve until SIGINT or SIGTERM."""
    app = create_app(SidecarConfig(bundle=options.bundle, private=options.private,
                                   anonymous_rate=options.anonymous_rate,
                                   trusted_proxies=options.trusted_proxies,
                                   redis=options.redis))
    runner = NodeRunner(app)
    try:
        await runner.setup()  # loads the bundle: BundleMissing says to export first
    except Unavailable as exc:  # Redis did not answer
        raise ServeError(exc.message) from None
    try:
        site = web.TCPSite(runner, options.host, options.port, reuse_port=reuse_port or None)
        try:
            await site.start()
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ServeError(f"cannot listen on {options.host}:{options.port}: {reason}; stop "
                             f"what uses that port or choose another with --port") from None
        here = f"http://{options.host}:{options.port}"
        say(f"fednode sidecar on {here}/api/manifest")
        if options.trusted_proxies:
            say(f"anonymous requests from {', '.join(options.trusted_proxies)} are counted by "
                f"the client address they forward (X-Forwarded-For)")
        meta = app[RUNNING].store.snapshot.meta
        for line in address_warnings(here, meta.base_url, meta.sidecar_url,
                                     options.export_command):
            say(line)
        if ready is not None:
            ready()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        flushing = asyncio.create_task(_flush_access_log(stop))
        watching = asyncio.create_task(_warn_on_reload(app[RUNNING].store, here, stop,
                                                       options.export_command))
        await stop.wait()
        await flushing
        await watching
    finally:
        await runner.cleanup()
        access_log.flush()


async def _warn_on_reload(store: Store, here: str, stop: asyncio.Event,
                          export_command: str = "fednode export", interval: float = 1.0
                          ) -> None:
    """Log `address_warnings` for every bundle the store reloads: an export run while the
    sidecar serves (with another --base-url, or a node.toml edited) moves its links away
    from this server, and the warning said at start no longer tells."""
    seen = store.snapshot
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass
        fresh = store.snapshot
        if fresh is seen:
            continue
        seen = fresh
        for line in address_warnings(here, fresh.meta.base_url, fresh.meta.sidecar_url,
                                     export_command):
            log.warning("build %s: %s", fresh.build, line.removeprefix("warning: "))


async def _flush_access_log(stop: asyncio.Event) -> None:
    """Write the waiting access lines every FLUSH_SECONDS until `stop`."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), access_log.FLUSH_SECONDS)
        except TimeoutError:
            pass
        access_log.flush()


def _supervise(options: Options, workers: int, say: Callable[[str], None]) -> None:
    """Start the workers, say once that they are up, restart one that dies, and stop them
    all on SIGINT or SIGTERM. A worker that fails to start stops everything, with its
    reason."""
    _check_port(options)
    pool = _Workers(options, workers)
    previous = {signum: signal.signal(signum, pool.stop)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        if not pool.started():
            return
        say(f"fednode sidecar on http://{options.host}:{options.port}/api/manifest, "
            f"{workers} workers, rate limits in Redis at {where_of(options.redis or '')}")
        while not pool.stopping:
            _log_reports(pool.reports)
            pool.restart_the_dead()
            time.sleep(0.2)
    finally:
        pool.end()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Workers:
    """The worker processes of `serve --workers N`, each in a slot of its own.

    A worker that dies soon after it started (Redis gone, say) is started again after a
    pause that doubles up to RESTART_MAX; one that had run a while, at once. Why it could not
    start (its report) is logged, not lost; restarting every fifth of a second would burn a
    core (19 restarts in 12 s)."""

    def __init__(self, options: Options, count: int) -> None:
        self.options = options
        self.context = multiprocessing.get_context("spawn")  # fresh: no inherited threads
        self.reports = self.context.Queue()
        self.stopping = False
        self.running = [self._start() for _ in range(count)]
        self.born = [time.monotonic()] * count
        self.pause = [0.0] * count
        self.due: list[float | None] = [None] * count  # when a dead worker's slot restarts

    def _start(self) -> BaseProcess:
        process = self.context.Process(target=_worker, args=(self.options, self.reports),
                                       daemon=True)
        process.start()
        return process

    def stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def started(self) -> bool:
        """Wait until every worker reports it is serving: False if told to stop first."""
        started = 0
        while started < len(self.running) and not self.stopping:
            try:
                kind, text = self.reports.get(timeout=0.5)
            except queue.Empty:
                if any(p.exitcode is not None for p in self.running):
                    raise ServeError("a worker stopped while starting; see the log above") \
                        from None
                continue
            if kind == "error":
                raise ServeError(text)
            started += 1
        return not self.stopping

    def restart_the_dead(self) -> None:
        now = time.monotonic()
        for n, process in enumerate(self.running):
            when = self.due[n]
            if when is not None:
                if now >= when and not self.stopping:
                    self.running[n], self.born[n], self.due[n] = self._start(), now, None
            elif process.exitcode is not None and not self.stopping:
                self.pause[n] = 0.0 if now - self.born[n] > RESTART_MAX else \
                    min(max(1.0, 2 * self.pause[n]), RESTART_MAX)
                log.warning("worker %s ended (exit code %s); starting another in %.0f s",
                            process.pid, process.exitcode, self.pause[n])
                self.due[n] = now + self.pause[n]

    def end(self) -> None:
        for process in self.running:
            if process.exitcode is None:
                process.terminate()
        for process in self.running:
            process.join(10)
            if process.exitcode is None:
                process.kill()


RESTART_MAX = 30.0  # seconds between restarts of a worker that keeps dying at once


def _log_reports(reports: multiprocessing.Queue[tuple[str, str]]) -> None:
    """What workers reported since the last look: why one could not start."""
    while True:
        try:
            kind, text = reports.get_nowait()
        except queue.Empty:
            return
        if kind == "error":
            log.error("a worker could not start: %s", text)


def _worker(options: Options, reports: multiprocessing.Queue[tuple[str, str]]) -> None:
    """One worker process: serve on the shared port, report when listening or why not."""
    without_pandas()
    access_log.configure(worker=True)
    try:
        asyncio.run(serve(options, say=lambda line: None, reuse_port=True,
                          ready=lambda: reports.put(("ready", ""))))
    except FednodeError as exc:
        reports.put(("error", str(exc)))
        sys.exit(1)


def _check_port(options: Options) -> None:
    """Fail at once, with the reason, when the port is taken (workers share it with
    SO_REUSEPORT, which only lets them in beside each other)."""
    try:
        with socket.create_server((options.host, options.port), reuse_port=True):
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ServeError(f"cannot listen on {options.host}:{options.port}: {reason}; stop what "
                         f"uses that port or choose another with --port") from None


def address_warnings(here: str, base_url: str, sidecar_url: str,
                     export_command: str = "fednode export") -> list[str]:
    """What a user serving on this address should know about the links the node gives:
    every `url`, `next` and manifest address is built from the exported base_url and
    sidecar_url, not from the address the sidecar listens on. `export_command` exports the
    project being served (`fednode export`, or a hub's `fednode hub export --hub ...`)."""
    listening = urlsplit(here)
    lines = []
    for name, url in (("base_url", base_url), ("sidecar_url", sidecar_url)):
        exported = urlsplit(url)
        local = exported.hostname in ("127.0.0.1", "localhost", "::1")
        if local and exported.port != listening.port:
            lines.append(f"warning: links in responses point to {url} (the exported {name}), "
                         f"not to this server; run `{export_command} --base-url {here}` to "
                         f"match it")
    return lines[:1] if base_url == sidecar_url else lines
