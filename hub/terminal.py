"""Where a sync run's progress goes: a status line on a terminal, a log file if asked, and
nothing at all when standard error is piped and no log file is given.

The hub's modules only log (logger `fednode.hub`): progress at INFO (each page at DEBUG),
waits and retries at INFO with what they wait for."""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from exporter.contract.errors import FednodeError

from .errors import SyncError, one_line

LOGGER = "fednode.hub"


class StatusLine(logging.Handler):
    """Each record rewrites one line of a terminal; closing clears it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.DEBUG)
        self.stream = stream
        self.shown = False

    def emit(self, record: logging.LogRecord) -> None:
        width = max(shutil.get_terminal_size().columns - 1, 20)
        self.stream.write("\r\x1b[K" + one_line(record.getMessage(), width))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        super().close()


@contextlib.contextmanager
def reporting(stream: TextIO, log_file: Path | None) -> Iterator[None]:
    """Show progress on `stream` if it is a terminal; append to `log_file` if given."""
    logger = logging.getLogger(LOGGER)
    handlers: list[logging.Handler] = []
    if stream.isatty():
        handlers.append(StatusLine(stream))
    if log_file is not None:
        try:
            file_handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise SyncError(f"cannot write the log file {log_file}: {one_line(str(exc))}"
                            ) from None
        file_handler.setLevel(logging.INFO)
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handlers.append(file_handler)
    for handler in handlers:
        logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield
    except FednodeError as exc:
        logger.error("%s", exc)
        raise
    finally:
        logger.setLevel(previous)
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()
