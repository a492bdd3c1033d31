"""Hypothesis strategies several test files draw from."""

from __future__ import annotations

from hypothesis import strategies as st

from exporter.contract.feed import Event
from exporter.contract.wire import COLLECTIONS, PUBLIC

IDS = [f"00000000-0000-4000-8000-00000000000{n}" for n in range(4)]
ACCESS = [PUBLIC, "partners", "sensitive"]


@st.composite
def ledgers(draw: st.DrawFn) -> list[Event]:
    """A plausible ledger: records created, edited, re-grouped, moved and deleted."""
    events: list[Event] = []
    state: dict[str, tuple[str, str] | None] = {}  # id -> (collection, access) while live
    for n in range(draw(st.integers(1, 14))):
        record = draw(st.sampled_from(IDS))
        at = f"2026-03-01T08:{n:02d}:00Z"
        now = state.get(record)
        access = draw(st.sampled_from(ACCESS))
        collection = draw(st.sampled_from(COLLECTIONS[:2]))
        if now is None:
            events.append(Event(len(events) + 1, at, "create", collection, record, f"h{n}",
                                access))
            state[record] = (collection, access)
            continue
        action = draw(st.sampled_from(["update", "access", "delete", "move"]))
        if action == "delete":
            events.append(Event(len(events) + 1, at, "delete", now[0], record, f"h{n}", now[1]))
            state[record] = None
        elif action == "move" and collection != now[0]:
            events.append(Event(len(events) + 1, at, "delete", now[0], record, f"h{n}", now[1]))
            events.append(Event(len(events) + 1, at, "create", collection, record, f"h{n}",
                                access))
            state[record] = (collection, access)
        else:
            new_access = access if action == "access" else now[1]
            op = "update" if action == "move" else action  # a "move" within one collection
            events.append(Event(len(events) + 1, at, op, now[0], record, f"h{n}", new_access))
            state[record] = (now[0], new_access)
    return events
