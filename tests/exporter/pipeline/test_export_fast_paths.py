"""The export's fast paths give exactly what the plain paths give: the public change list
formatted directly, the ledger read with one regular expression, records taken from the
previous bundle as Arrow columns, and work done aside in a forked process. Figures:
bench/export_speed.py."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import Node, engine_file, same_key, search_ids, species, team
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ledgers

from exporter.contract.feed import EVENT_FIELDS, OPS, Event, public_changes, visible_events
from exporter.contract.wire import PUBLIC, encode, record_url
from exporter.pipeline import forks as aside
from exporter.pipeline.build import BuildReport
from exporter.pipeline.ledger import Ledger
from exporter.pipeline.previous import runs

Export = Callable[..., BuildReport]


def plain_changes(events: list[Event], base_url: str) -> bytes:
    """The public change list as it was first written: one `encode` a line."""
    last = {}
    for seen in visible_events(events, (PUBLIC,)):
        last[(seen.event.collection, seen.event.id)] = seen
    return b"".join(encode({
        "seq": s.number, "collection": s.event.collection, "id": s.event.id,
        "op": "upsert" if s.visible else "delete", "updated_at": s.event.at,
        "url": record_url(base_url, s.event.collection, s.event.id),
        "content_hash": s.event.hash if s.visible else None,
    }) + b"\n" for s in sorted(last.values(), key=lambda s: s.number))


@given(ledgers(), st.text(st.characters(codec="utf-8"), max_size=12),
       st.sampled_from(["h", 'a"b', "a\\b", "tab\there", "é", "\x00"]))
def test_change_list_is_what_encode_writes(events: list[Event], tail: str, odd: str) -> None:
    events = [Event(e.seq, e.at, e.op, e.collection, e.id, e.hash + odd, e.access)
              for e in events]
    for base_url in ("https://node.example.org", "https://node.example.org/" + tail):
        assert public_changes(events, base_url).body == plain_changes(events, base_url)
    for e in events:
        assert e.line() == json.dumps({name: getattr(e, name) for name in EVENT_FIELDS},
                                      separators=(",", ":"), ensure_ascii=False) + "\n"


def plain_ledger(data: bytes) -> list[Event]:
    return [Event(**json.loads(line)) for line in data.split(b"\n") if line.strip()]


@given(ledgers())
def test_ledger_lines_read_back_as_written(tmp_path_factory: pytest.TempPathFactory,
                                           events: list[Event]) -> None:
    ids = {e.id: f"{n:08x}-0000-4000-8000-000000000000" for n, e in enumerate(events)}
    events = [Event(e.seq, e.at, e.op if e.op in OPS else "update", e.collection, ids[e.id],
                    "sha256:" + "0" * 64, e.access) for e in events]
    path = tmp_path_factory.mktemp("ledger") / "ledger.jsonl"
    data = "".join(e.line() for e in events).encode()
    spaced = data.replace(b'","', b'", "', 1)  # valid JSON, not as Event.line writes it
    for content in (data, spaced, data + b'{"seq": 99'):  # and a torn last line
        path.write_bytes(content)
        assert Ledger.load(path).events == events == plain_ledger(content.rpartition(b"\n")[0])


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not engine_file(str(p.relative_to(root)))}


def test_reused_renderings_give_the_bundle_a_fresh_export_gives(node: Node, export: Export,
                                                               tmp_path: Path) -> None:
    records = {f"s{n:02d}": species(f"Species number{n:02d}") for n in range(30)}
    for slug, fields in records.items():
        node.write("species", slug, fields)
    node.write("team", "t", team("Bea", access="sensitive"))
    export(node.root)
    node.write("species", "s10", dict(records["s10"], scientificName="Aaa first now"))
    node.remove("species", "s20")
    node.write("team", "t", team("Bea B", access="sensitive"))
    node.write("species", "new", species("Zzz last"))
    report = export(node.root)
    # Most were reused (the pages add the two new records' pages, a collection page, the sitemap).
    assert report.site is not None and 0 < report.site.written < 15
    other = tmp_path / "elsewhere"
    shutil.copytree(node.root / "content", other / "content")
    shutil.copy(node.root / "ledger.jsonl", other / "ledger.jsonl")
    same_key(node.root, other)
    export(other)  # renders everything
    assert tree(other / ".fednode" / "bundle") == tree(node.root / ".fednode" / "bundle")
    assert tree(other / "site_out") == tree(node.root / "site_out")
    for words, groups in (("species number", ("public",)), ("zzz aaa", ("public",)),
                          ("bea", ("public", "sensitive", "partners"))):
        found = search_ids(node.root / ".fednode" / "bundle", words, groups)
        assert found and found == search_ids(other / ".fednode" / "bundle", words, groups)


def test_work_done_aside_in_a_process_equals_work_done_on_a_thread(
        node: Node, export: Export, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The change list, the events table and the search index are made aside: in a forked
    process where the export has one thread (the command), else on a thread. Both give the
    same bundle and the same site, on a first export and after edits."""
    for n in range(12):
        node.write("species", f"s{n:02d}", species(f"Species number{n:02d}"))
    node.write("team", "t", team("Bea", access="sensitive"))
    threaded = tmp_path / "threaded"

    def both() -> None:
        assert aside.forks(), threading.enumerate()
        export(node.root)
        shutil.rmtree(threaded / "content", ignore_errors=True)
        shutil.copytree(node.root / "content", threaded / "content")
        shutil.copy(node.root / "ledger.jsonl", threaded / "ledger.jsonl")  # the same times
        same_key(node.root, threaded)
        with monkeypatch.context() as patched:
            patched.setattr(aside, "forks", lambda: False)
            export(threaded)
        for name in ("site_out", ".fednode/bundle"):
            assert tree(threaded / name) == tree(node.root / name)
        for words, groups in (("species number", ("public",)),
                              ("bea", ("public", "sensitive", "partners"))):
            found = search_ids(node.root / ".fednode" / "bundle", words, groups)
            assert found and found == search_ids(threaded / ".fednode" / "bundle", words, groups)

    both()
    node.write("species", "s03", species("Species number03 renamed"))
    node.write("team", "t", team("Bea B", access="partners"))
    node.remove("species", "s07")
    both()


@given(st.lists(st.integers(-6, 30), max_size=40))
def test_runs_give_back_the_rows(rows: list[int]) -> None:
    """The records table is cut from runs of rows; they give back every row, in order, each
    run as long as it can be."""
    made = [first + n if old else -(first + n) - 1
            for old, first, length in runs(rows) for n in range(length)]
    assert made == rows
    spans = runs(rows)
    for (old, first, length), (next_old, next_first, _) in zip(spans, spans[1:], strict=False):
        assert old != next_old or next_first != first + length  # else one run


@given(st.lists(st.binary(max_size=40), max_size=2600))
def test_an_output_written_in_pieces_is_their_bytes_in_order(pieces: list[bytes]) -> None:
    """A CSV download is written from its parts without joining them (`writer.Pieces`):
    more pieces than one writev takes, and empty ones, give the joined bytes."""
    import os
    import tempfile

    from exporter.pipeline.outputs import Pieces
    from exporter.pipeline.writes import write_file

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "out.csv")
        write_file(path, Pieces(tuple(pieces)), 0o644)
        assert Path(path).read_bytes() == b"".join(pieces)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 900), max_size=60))
def test_the_writer_holds_a_bounded_amount_of_bytes(sizes: list[int]) -> None:
    """Files go to the writing threads in batches closed at `BATCH_BYTES`, and no more than
    `PENDING_BYTES` made for them wait (or one batch, however large): a run of large files
    (snapshot chunks, 20 MB each at 100,000 records) is not held whole. Every file is
    written, with its bytes."""
    import os
    import tempfile

    from exporter.pipeline.writes import Writes

    class Small(Writes):
        BATCH_BYTES = 300
        PENDING_BYTES = 1000

    waiting: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        with Small() as writes:
            for n, size in enumerate(sizes):
                writes.put(os.path.join(folder, f"{n}"), bytes([n % 256]) * size, 0o644)
                waiting.append(writes._pending_bytes)
        for n, size in enumerate(sizes):
            assert Path(folder, f"{n}").read_bytes() == bytes([n % 256]) * size
    largest_batch = Small.BATCH_BYTES + max(sizes, default=0)
    assert all(each <= max(Small.PENDING_BYTES, largest_batch) for each in waiting)
