"""The visibility rule has two spellings — Python (the exporter's public change list, the
sidecar's reads by id and list slices) and SQL (the keyed feed, filtered lists) — and they
must agree on every ledger and every set of records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ACCESS, ledgers

from exporter.contract.bundle import RECORD_COLUMNS, RECORDS, segment_path, segments
from exporter.contract.feed import Event, visible_events
from exporter.contract.wire import COLLECTIONS, PUBLIC
from sidecar.records import Records
from sidecar.service import changes_sql, rule, visible
from sidecar.store import EVENTS_VIEW

_LEDGER = duckdb.connect(":memory:")
_LEDGER.execute('CREATE TABLE raw (seq BIGINT, "at" VARCHAR, op VARCHAR, collection VARCHAR, '
                "id VARCHAR, hash VARCHAR, access VARCHAR)")
_LEDGER.execute(EVENTS_VIEW.format(source="raw"))


def in_sql(events: list[Event], groups: list[str], collections: list[str]) -> set[Any]:
    """The feed's SQL over a table holding these events alone (emptied, then filled: one
    database the examples share)."""
    _LEDGER.execute("DELETE FROM raw")
    _LEDGER.executemany("INSERT INTO raw VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(e.seq, e.at, e.op, e.collection, e.id, e.hash, e.access)
                         for e in events])
    rows = _LEDGER.execute(changes_sql(groups, collections)).fetchall()
    return {tuple(row) for row in rows}


def in_python(events: list[Event], groups: list[str], collections: list[str]) -> set[Any]:
    last = {}
    for seen in visible_events(events, groups, collections):
        last[(seen.event.collection, seen.event.id)] = seen
    return {(s.event.collection, s.event.id, s.event.at, s.visible, s.event.hash)
            for s in last.values()}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(ledgers(), st.sampled_from([[PUBLIC], [PUBLIC, "partners"], [PUBLIC, "sensitive"]]),
       st.sampled_from([list(COLLECTIONS), ["species"], ["resources"]]))
def test_the_two_spellings_of_the_rule_agree(events: list[Event], groups: list[str],
                                             collections: list[str]) -> None:
    assert in_sql(events, groups, collections) == in_python(events, groups, collections)


@st.composite
def record_tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Live records of a bundle: collections, access groups and list positions at random."""
    rows: list[dict[str, Any]] = []
    positions: dict[str, int] = {}
    for n in range(draw(st.integers(0, 30))):
        collection = draw(st.sampled_from(COLLECTIONS))
        positions[collection] = positions.get(collection, -1) + 1
        rows.append({"collection": collection, "id": f"00000000-0000-4000-8000-{n:012d}",
                     "access": draw(st.sampled_from(ACCESS)), "title": f"t{n}",
                     "created_at": "", "content_hash": f"h{n}",
                     "updated_at": f"2026-03-0{draw(st.integers(1, 3))}T08:00:0{n % 2}Z",
                     "position": positions[collection], "render_key": "",
                     "item": f'{{"n": {n}}},'.encode(), "digest": n.to_bytes(16)})
    return draw(st.permutations(rows))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(record_tables(), st.sampled_from([[PUBLIC], [PUBLIC, "partners"], [PUBLIC, "sensitive"]]),
       st.sampled_from([list(COLLECTIONS), ["species"], ["resources", "team"]]))
def test_the_record_reads_follow_the_sql_rule(tmp_path_factory: Any, rows: list[dict[str, Any]],
                                              groups: list[str], collections: list[str]) -> None:
    """Reads by id (`visible`) and list slices (`Records.listed` of the caller's groups, and
    `listed_since`) see exactly the records the SQL spelling selects, in position order."""
    schema = pa.schema([(name, pa.binary(16) if kind == "digest" else getattr(pa, kind)())
                        for name, kind in RECORD_COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    path = tmp_path_factory.mktemp("records") / RECORDS
    # in segments of three rows whatever they hold (the rule does not depend on them)
    cuts = [(n, min(n + 3, len(rows))) for n in range(0, len(rows), 3)]
    write_records(path, table, cuts)
    records = Records(path)
    db = _LEDGER.cursor()  # (a connection of the shared database's, for this example)
    db.register("records", table)
    in_sql = db.execute(f"SELECT collection, id FROM records WHERE "
                        f"{rule(groups, collections)} ORDER BY collection, position").fetchall()
    by_id = [(row["collection"], row["id"]) for row in sorted(
        rows, key=lambda row: (row["collection"], row["position"]))
        if visible(groups, collections, row["access"], row["collection"])]
    listed = [(name, table.column("id")[int(row)].as_py())
              for name in sorted(collections)
              for row in records.listed(name, groups).rows]
    assert by_id == [tuple(row) for row in in_sql] == listed
    since = "2026-03-02T08:00:01Z"
    in_sql_since = db.execute(f"SELECT collection, id FROM records WHERE "
                              f"{rule(groups, collections)} AND updated_at >= '{since}' "
                              f"ORDER BY collection, position").fetchall()
    assert [tuple(row) for row in in_sql_since] == [
        (name, table.column("id")[int(row)].as_py()) for name in sorted(collections)
        for row in records.listed_since(name, groups, since).rows]
    for row in rows:
        at = records.row(row["id"])
        assert at is not None and records.body(at) == row["item"][:-1]
        assert records.digest(at) == row["digest"]
    # as the export writes it: by collection, access group and list position
    stored = sorted(rows, key=lambda row: (row["collection"], row["access"], row["position"]))
    # (in segments of two of a group's rows, to cut its runs where segments end too)
    stored_path = path.with_name("stored")
    stored_cuts = segments([row["collection"] for row in stored],
                           [row["access"] for row in stored], 2)
    write_records(stored_path, pa.Table.from_pylist(stored, schema=schema), stored_cuts)
    exported = Records(stored_path)
    assert exported.grouped
    for kept, kept_cuts in ((records, cuts), (exported, stored_cuts)):
        segment = [n for n, (first, stop) in enumerate(kept_cuts) for _ in range(first, stop)]
        for name in collections:  # any page of the caller's rows, cut from runs of rows
            for listing in (kept.listed(name, groups), kept.listed_since(name, groups, since)):
                for start in range(0, len(listing.rows) + 1, 3):
                    page = listing.rows[start:start + 4]
                    assert kept.joined(listing, start, start + 4, b"[", b"]") == b"[" + \
                        b",".join(kept.body(int(at)) for at in page) + b"]"
                    assert kept.digests(page) == b"".join(kept.digest(int(at)) for at in page)
                    if not len(page):
                        continue
                    # What a page costs follows from its runs: they depend on the caller's
                    # own rows alone (a run ends where its group does, where the caller's
                    # filter skipped a row, or where a segment of its group's rows ends),
                    # never on rows between them that it may not see; a file not grouped so
                    # is cut row by row.
                    access = [kept.access[int(at)] for at in page]
                    runs = 1 + sum(a != b or int(y) != int(x) + 1
                                   or segment[int(x)] != segment[int(y)]
                                   for a, b, x, y in zip(access, access[1:], page, page[1:],
                                                         strict=False)) \
                        if kept.grouped else len(page)
                    found = kept.runs_of(page) if listing.runs is None else \
                        listing.runs[start:start + 4]
                    assert len(set(found.tolist())) == runs


def write_records(folder: Path, table: pa.Table, cuts: list[tuple[int, int]]) -> None:
    """A bundle's records folder holding `table` in these segments."""
    folder.mkdir()
    for n, (first, stop) in enumerate(cuts):
        part = table.slice(first, stop - first)
        name = segment_path(n).rpartition("/")[2]
        with pa.OSFile(str(folder / name), "wb") as sink, \
                pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(part)
