"""The access log: one line a request (method, raw path escaped, status, caller, time
taken), on standard error with the other log lines.

A served request only appends what its line says to a `Batch`, as a tuple; the batch formats
and writes the lines with one write at least every `FLUSH_SECONDS` (the server's task calls
`flush`), when `CAPACITY` lines wait, and before any warning or error, so the log keeps its
order. Making a `LogRecord`, and formatting its time, for every request took a sixth of a
record read's time: the batch formats the lines itself, in the layout of every other line
(`LINE_FORMAT`, or with the process id, `WORKER_FORMAT`), with the time formatted once a
second."""

from __future__ import annotations

import logging
import os
import time
from collections import deque

from aiohttp import abc, web

from .state import CALLER

LINE_FORMAT = "%(asctime)s %(name)s %(message)s"  # every line the sidecar logs
WORKER_FORMAT = "%(asctime)s %(process)d %(name)s %(message)s"  # with --workers
FLUSH_SECONDS = 0.5  # an access line may wait this long before it is written
CAPACITY = 1024  # access lines kept before they are written, whatever the time

logger = logging.getLogger("fednode.access")


def printable(text: str) -> str:
    """Text as it may go into a log line: control and non-ASCII characters escaped, so a
    request cannot forge or break log lines."""
    if text.isascii() and text.isprintable():  # nearly every path: nothing to escape
        return text
    return text.encode("ascii", "backslashreplace").decode("ascii").translate(_CONTROL)


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7f)}


class AccessLogger(abc.AbstractAccessLogger):
    """aiohttp's access logger (one a connection): hands each request's line to the
    access logger's `Batch`, or, where logging has no batch (tests, embedding), logs it."""

    def __init__(self, logger: logging.Logger, log_format: str) -> None:
        super().__init__(logger, log_format)
        self.batch = next((h for h in logger.handlers if isinstance(h, Batch)), None)

    def log(self, request: web.BaseRequest, response: web.StreamResponse,
            time: float) -> None:
        caller = request.get(CALLER)
        access = caller.access if caller else "open"
        if self.batch is not None:
            self.batch.add(request.method, request.raw_path, response.status, access, time)
        else:
            self.logger.info("%s", line(request.method, request.raw_path, response.status,
                                        access, time))


def line(method: str, path: str, status: int, access: str, seconds: float) -> str:
    """What an access line says, after the time and the logger's name."""
    return f"{printable(method)} {printable(path)} {status} {access} {seconds * 1000:.1f}ms"


class Batch(logging.Handler):
    """Access lines waiting to be written to `target`'s stream, as `target` would write
    them. A record logged the usual way (`emit`) goes after the lines before it."""

    def __init__(self, target: logging.StreamHandler, head: str) -> None:  # type: ignore[type-arg]
        super().__init__(logging.INFO)
        self.target = target
        self.head = head  # what comes between the time and the line
        # (time, method, path, status, access, seconds): appended on the loop, taken by any
        # thread
        self.lines: deque[tuple[float, str, str, int, str, float]] = deque()
        self._second = -1
        self._stamp = ""

    def add(self, method: str, path: str, status: int, access: str, seconds: float) -> None:
        self.lines.append((time.time(), method, path, status, access, seconds))
        if len(self.lines) >= CAPACITY:
            self.flush()

    def emit(self, record: logging.LogRecord) -> None:
        self.flush()
        self.target.handle(record)

    def flush(self) -> None:
        if not self.lines:
            return
        with self.target.lock:  # type: ignore[union-attr]  # one flush at a time
            take = self.lines.popleft
            text = "".join([self._format(*take()) for _ in range(len(self.lines))])
            try:
                self.target.stream.write(text)
                self.target.flush()
            except (OSError, ValueError):
                pass  # standard error is gone: nothing to tell it to

    def _format(self, now: float, method: str, path: str, status: int, access: str,
                seconds: float) -> str:
        second = int(now)
        if second != self._second:  # logging.Formatter.formatTime's default form
            self._second = second
            self._stamp = time.strftime(logging.Formatter.default_time_format,
                                        logging.Formatter.converter(now))
        return (f"{self._stamp},{int((now - second) * 1000):03d} {self.head} "
                f"{line(method, path, status, access, seconds)}\n")


class _FlushFirst(logging.Handler):
    """Before a warning or an error is written, the access lines that came before it."""

    def __init__(self, batch: Batch) -> None:
        super().__init__(logging.WARNING)
        self.batch = batch

    def emit(self, record: logging.LogRecord) -> None:
        self.batch.flush()


def configure(*, worker: bool = False) -> None:
    """Log lines (INFO and up) to standard error, each as LINE_FORMAT (a worker's as
    WORKER_FORMAT), with the access lines batched; configuring twice changes nothing.
    (Where logging was configured otherwise before, access lines are logged one by one, as
    any other line.)"""
    if any(isinstance(h, Batch) for h in logger.handlers):
        return
    format_ = WORKER_FORMAT if worker else LINE_FORMAT
    logging.logThreads = False  # not in our lines; a record need not look them up
    logging.logMultiprocessing = False
    logging.basicConfig(level=logging.INFO, format=format_)
    root = logging.getLogger()
    target = root.handlers[0]
    if type(target) is not logging.StreamHandler or target.formatter is None \
            or target.formatter._fmt != format_:
        return
    batch = Batch(target, f"{os.getpid()} {logger.name}" if worker else logger.name)
    logger.addHandler(batch)
    logger.propagate = False
    root.handlers.insert(0, _FlushFirst(batch))


def flush() -> None:
    for handler in logger.handlers:
        handler.flush()
