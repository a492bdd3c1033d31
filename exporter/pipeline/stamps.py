"""The time an export stamps its ledger events with: the whole second in which it began,
a second of its own (`stamped_events`).

Each export claims the second it began in (`STAMP`, in .fednode/), whether it makes events
or not; one that begins in a second claimed already waits for the next. The time depends on
nothing but the clock and when exports ran here, never on what earlier (perhaps restricted)
events were."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from exporter.contract.wire import format_time, parse_time
from exporter.pipeline.ledger import Current, Event, Ledger
from exporter.project.config import Project
from exporter.shared.errors import ExportError

STAMP = "stamp"  # in .fednode/: the second the last export began in, with events or not


def stamped_events(project: Project, ledger: Ledger, current: Iterable[Current], *,
                   now: datetime | None, frozen: bool, whole: bool) -> list[Event]:
    """The events that bring the ledger to `current` (`whole`: every record; else only
    those given, as `Ledger.reconcile` says), stamped with this export's second, which is
    claimed (`_claim`). Refused where the ledger must not change (`frozen`) or where the
    clock is behind it."""
    stamp = _second_of(datetime.now(UTC))
    if now is None:
        # The second of the last export here, with events or without (`_claim`), and of
        # the ledger's last event (a killed export's, or one made elsewhere).
        last_at = max(filter(None, (ledger.last_at, _claimed(project))), default=None)
        if last_at and format_time(stamp) <= last_at:
            last = parse_time(last_at)
            if last - datetime.now(UTC) <= timedelta(seconds=2):
                # The last export began in this second (or, killed by an older fednode,
                # stamped the next): this one's events get the second after it, once that
                # has come.
                _wait_for(last + timedelta(seconds=1))
                stamp = _second_of(datetime.now(UTC))
        _claim(project, stamp)
    events = ledger.reconcile(current, now or stamp, whole=whole)
    if frozen and events:
        raise ExportError(
            f"the ledger is behind the content ({len(events)} change(s)); run `fednode export` "
            f"where the content is edited and commit {project.ledger.name} with it")
    if events and now is None and ledger.last_at and format_time(stamp) <= ledger.last_at:
        # Stamping last+1s would make the time of these events depend on earlier ones,
        # restricted ones included: refuse rather than let that be read.
        raise ExportError(
            f"this machine's clock ({format_time(stamp)}) is behind the last event in "
            f"{project.ledger.name} ({ledger.last_at}); set the clock right (or wait until "
            f"then) and export again")
    return events


def _second_of(moment: datetime) -> datetime:
    """The time an export stamps its events with: the whole second in which it began, a
    time that has come before anything is published. Each export gets a second of its own:
    one that begins in the second the last export began in (with events or without,
    `_claim`) waits for the next (`stamped_events`). The time depends on nothing but the
    clock and when exports ran here, never on what earlier (perhaps restricted) events were;
    only a ledger holding a later second than any export here began in (one killed after
    stamping the next second, or one made on another machine) is waited for as it is."""
    return moment.replace(microsecond=0)


def _claimed(project: Project) -> str | None:
    try:
        text = (project.private / STAMP).read_text("ascii").strip()
        return format_time(parse_time(text))
    except (OSError, ValueError):
        return None  # none yet, or unreadable: the ledger's last event alone decides


def _claim(project: Project, stamp: datetime) -> None:
    """Every export claims the second it began in, whether it makes events or not: the next
    one, if it begins in that second, waits for the next. Were only the ledger's last event
    counted, a public edit exported in the second of an export that changed only restricted
    records would be stamped a second later than after one that changed nothing: the public
    times would tell that something restricted changed."""
    path = project.private / STAMP
    path.with_name(STAMP + ".tmp").write_text(format_time(stamp) + "\n", "ascii")
    os.replace(path.with_name(STAMP + ".tmp"), path)


def _wait_for(moment: datetime) -> None:
    delay = (moment - datetime.now(UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)
