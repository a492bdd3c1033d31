"""The visibility rule has two spellings — Python in the contract (the exporter's public
change list) and SQL in the sidecar (the keyed feed) — and they must agree on every ledger."""

from __future__ import annotations

from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.contract.feed import Event, visible_events
from exporter.contract.wire import COLLECTIONS, PUBLIC
from sidecar.service import START, changes_sql
from sidecar.store import EVENTS_TABLE

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


def in_sql(events: list[Event], groups: list[str], collections: list[str]) -> set[Any]:
    db = duckdb.connect(":memory:")
    db.execute('CREATE TABLE raw (seq BIGINT, "at" VARCHAR, op VARCHAR, collection VARCHAR, '
               "id VARCHAR, hash VARCHAR, access VARCHAR)")
    db.executemany("INSERT INTO raw VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(e.seq, e.at, e.op, e.collection, e.id, e.hash, e.access) for e in events])
    db.execute(EVENTS_TABLE.format(source="raw"))
    rows = db.execute(changes_sql(groups, collections)[0], {
        "since": "1970-01-01T00:00:00Z",
        "limit": 1000, "after_at": START.at, "after_collection": START.collection,
        "after_id": START.id}).fetchall()
    return {tuple(row) for row in rows}


def in_python(events: list[Event], groups: list[str], collections: list[str]) -> set[Any]:
    last = {}
    for seen in visible_events(events, groups, collections):
        last[(seen.event.collection, seen.event.id)] = seen
    return {(s.event.collection, s.event.id, s.event.at, s.visible, s.event.hash)
            for s in last.values()}


@settings(max_examples=300, deadline=None)
@given(ledgers(), st.sampled_from([[PUBLIC], [PUBLIC, "partners"], [PUBLIC, "sensitive"]]),
       st.sampled_from([list(COLLECTIONS), ["species"], ["resources"]]))
def test_the_two_spellings_of_the_rule_agree(events: list[Event], groups: list[str],
                                             collections: list[str]) -> None:
    assert in_sql(events, groups, collections) == in_python(events, groups, collections)
