"""Progress of a long export on standard error, phase by phase (`fednode export`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import click


class Progress:
    """The export's `progress(phase, done, total)` callback. Quiet while the export is short;
    once it has run `SHOWN_AFTER` seconds, each phase is shown: one line rewritten in place on
    a terminal, one line per phase otherwise (a log, a CI build). A short export prints
    nothing, so the summary line stays alone; a long one says what it is waiting for."""

    SHOWN_AFTER = 2.0  # seconds

    def __init__(self, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.clock = clock
        self.begun = clock()
        self.active = False
        self.shown = False  # a line is being rewritten in place (terminal)
        self.phase = ""
        self.said = ""  # the last phase given its line (not a terminal)
        self.started = self.begun

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        if phase != self.phase:
            self.phase, self.started = phase, now
        self.active = self.active or now - self.begun >= self.SHOWN_AFTER
        if not self.active:
            return
        if not self.terminal:
            if self.said != phase:
                self.said = phase
                click.echo(f"{phase}: {total}", err=True)
            return
        self.shown = True
        click.echo(f"\r{phase}: {done}/{total}".ljust(40), nl=False, err=True)
        if done == total:
            click.echo(f"\r{phase}: {total} in {now - self.started:.1f}s".ljust(40), err=True)
            self.shown = False

    def end(self) -> None:
        """Clear a line left half written (an export that failed mid-phase)."""
        if self.shown and self.terminal:
            click.echo("\r" + " " * 40 + "\r", nl=False, err=True)
