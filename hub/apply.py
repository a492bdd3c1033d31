"""The two ways records reach the index: a full load (every record the caller may see,
all at once or not at all) and a batch of changes (fetch what changed, apply it and the
sync position in one transaction, so an interrupted run resumes after the last batch)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from types import TracebackType

from .errors import SyncError, one_line
from .index import Index
from .messages import Item, Record, parse_record
from .node import Node, record_path
from .report import SyncReport

log = logging.getLogger("fednode.hub")
CHUNK = 5_000  # records loaded by one statement in a full load
# Bytes of fetched records a batch of changes holds before it writes them: a node serving
# 200 records of 64 MiB in one batch would otherwise have needed gigabytes held at once.
RUN_BYTES = 64 * 2**20


class FullLoad:
    """Load every record into a table of its own, a chunk per transaction, then swap it
    in for the records at once (`finish`); leaving the block any other way drops it and
    leaves the index as it was."""

    def __init__(self, index: Index, node_id: str, report: SyncReport, expected: int) -> None:
        self.index = index
        self.node_id = node_id
        self.report = report
        self.expected = expected  # for progress only
        self.staged = 0
        self.buffer: list[Record] = []
        self.finished = False

    def __enter__(self) -> FullLoad:
        self.index.start_full_load()
        return self

    def add(self, records: Iterable[Record], what: str, *, milestone: bool = False) -> int:
        """Load records, a chunk of CHUNK at a time, taking them as they come (a snapshot
        file's are parsed one by one: memory holds a chunk, not the file); return how many.
        Progress goes to the log at INFO for each chunk and each `milestone` (a file), at
        DEBUG for the rest."""
        taken = 0
        for record in records:
            self.buffer.append(record)
            taken += 1
            if len(self.buffer) >= CHUNK:
                self.index.load(self.buffer, self.node_id)
                self.buffer = []
                milestone = True
        self.staged += taken
        log.log(logging.INFO if milestone else logging.DEBUG, "loading %s: %d of %d records",
                what, self.staged, self.expected)
        return taken

    def finish(self, state: dict[str, str | None]) -> None:
        self.index.load(self.buffer, self.node_id)
        self.buffer = []
        self.report.count(*self.index.swap_in(state))
        self.finished = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        if not self.finished:
            self.index.abandon_full_load()


def expected_url(node: Node, item: Item, where: str) -> str:
    """The record's own address; an item naming another is an error."""
    own = node.url(record_path(item.collection, item.id))
    if item.url is not None and node.resolve(item.url, where) != own:
        raise SyncError(f"{where}: the item for {item.collection}/{item.id} names "
                        f"{one_line(item.url, 100)}, not that record's address")
    return str(own)


async def apply_items(node: Node, index: Index, node_id: str, items: Sequence[Item],
                      state: dict[str, str | None], report: SyncReport, where: str) -> None:
    """Fetch the upserts the index does not hold yet, then apply them, the deletes and
    `state` in one transaction."""
    latest = {(item.collection, item.id): item for item in items}  # the last word counts
    urls = {key: expected_url(node, item, where) for key, item in latest.items()}
    held = index.versions(list(latest))
    wanted = [item for key, item in latest.items()
              if item.op == "upsert" and held.get(key) != (item.content_hash, item.updated_at)]
    records: list[Record] = []
    size = 0  # of the records fetched and not yet written
    gone = [key for key, item in latest.items() if item.op == "delete"]
    at_once = 2 * node.limits.connections
    for start in range(0, len(wanted), at_once):
        group = wanted[start:start + at_once]
        bodies = await asyncio.gather(*(
            node.get(node.url(record_path(item.collection, item.id)),
                     cap=node.limits.json_bytes, missing_ok=True) for item in group))
        for item, body in zip(group, bodies, strict=True):
            key = (item.collection, item.id)
            if body is None:  # gone, or no longer visible, since the list was made
                gone.append(key)
            else:
                records.append(parse_record(body, urls[key], item.collection, item.id))
                size += len(body)
        if size >= RUN_BYTES:
            # Written now: memory holds a run, not the batch. The position moves with the
            # batch's last run; a run resumed finds these held and fetches them no more.
            with index.transaction(size):
                report.count(*index.upsert(records, node_id), 0)
            records, size = [], 0
    with index.transaction(size):
        added, updated = index.upsert(records, node_id)
        report.count(added, updated, index.remove(gone))
        index.set_state(state)
