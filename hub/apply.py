"""The two ways records reach the index: a full load (every record the caller may see,
all at once or not at all) and a batch of changes (fetch what changed, apply it and the
sync position in one transaction, so an interrupted run resumes after the last batch)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import TracebackType

from .errors import SyncError, one_line
from .index import Index
from .messages import Item, Record, parse_record
from .node import Node, record_path
from .report import SyncReport

log = logging.getLogger("fednode.hub")
STAGE_CHUNK = 5_000  # records staged by one statement in a full load


class FullLoad:
    """Stage every record inside one transaction, then swap them in (`finish`); leaving
    the block any other way rolls everything back."""

    def __init__(self, index: Index, node_id: str, report: SyncReport, expected: int) -> None:
        self.index = index
        self.node_id = node_id
        self.report = report
        self.expected = expected  # for progress only
        self.staged = 0
        self.buffer: list[Record] = []
        self.finished = False

    def __enter__(self) -> FullLoad:
        self.index.db.begin()
        self.index.begin_load()
        return self

    def add(self, records: Sequence[Record], what: str) -> None:
        """Stage records, a chunk of at least STAGE_CHUNK at a time."""
        self.buffer += records
        self.staged += len(records)
        if len(self.buffer) >= STAGE_CHUNK:
            self.index.stage(self.buffer)
            self.buffer = []
        log.info("loading %s: %d of %d records", what, self.staged, self.expected)

    def finish(self, state: dict[str, str | None]) -> None:
        self.index.stage(self.buffer)
        self.buffer = []
        self.report.count(*self.index.merge(self.node_id, everything=True))
        self.index.set_state(state)
        self.index.db.commit()
        self.finished = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        if not self.finished:
            self.index.db.rollback()


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
    held = index.hashes(list(latest))
    wanted = [item for key, item in latest.items()
              if item.op == "upsert" and held.get(key) != item.content_hash]
    bodies = await asyncio.gather(*(
        node.get(node.url(record_path(item.collection, item.id)),
                 cap=node.limits.json_bytes, missing_ok=True) for item in wanted))
    records: list[Record] = []
    gone = [key for key, item in latest.items() if item.op == "delete"]
    for item, body in zip(wanted, bodies, strict=True):
        key = (item.collection, item.id)
        if body is None:  # gone, or no longer visible, since the list was made
            gone.append(key)
        else:
            records.append(parse_record(body, urls[key], item.collection, item.id))
    with index.transaction():
        added = updated = 0
        if records:
            index.begin_load()
            index.stage(records)
            added, updated, _ = index.merge(node_id, everything=False)
        report.count(added, updated, index.remove(gone))
        index.set_state(state)
