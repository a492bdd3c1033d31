"""The public change list and the bundle's events table, held by a delta export and
brought up to date by appending the events of each edit (`ChangeList`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pyarrow as pa

from exporter.contract.feed import Event, PublicChanges, Seen, change_line, visible_events
from exporter.contract.wire import PUBLIC
from exporter.pipeline import bundle_files as bundle_writer


@dataclass
class ChangeList:
    """The public change list line by line, by record, latest last (as `public_changes`
    makes it), and the bundle's events table: each brought up to date by appending."""

    lines: dict[tuple[str, str], bytes]
    changes: PublicChanges
    events: pa.Table

    @classmethod
    def of(cls, events: list[Event], changes: PublicChanges) -> ChangeList:
        """The list and table of every event (`changes`: the list `public_changes` made of
        them)."""
        keys: dict[tuple[str, str], None] = {}
        for seen in visible_events(events, (PUBLIC,)):
            key = (seen.event.collection, seen.event.id)
            keys.pop(key, None)
            keys[key] = None
        lines = [line + b"\n" for line in changes.body.split(b"\n")[:-1]]
        return cls(dict(zip(keys, lines, strict=True)), changes,
                   bundle_writer.events_arrow(events))

    def add(self, events: list[Event], base_url: str) -> None:
        """Events of records that keep their access: a public one's is seen by everyone."""
        number, updated_at = self.changes.seq, self.changes.updated_at
        gone: list[bytes] = []  # lines of the list before that leave it
        moved: set[tuple[str, str]] = set()
        for event in events:
            if event.live_for((PUBLIC,), None):
                number += 1
                key = (event.collection, event.id)
                line = self.lines.pop(key, None)
                if line is not None and key not in moved:
                    gone.append(line)
                moved.add(key)
                self.lines[key] = change_line(Seen(number, event, True), base_url)
                updated_at = event.at
        self.changes = PublicChanges(self._body(gone, len(moved)), number, updated_at)
        self.events = pa.concat_tables([self.events, bundle_writer.events_arrow(events)])

    def _body(self, gone: list[bytes], moved: int) -> bytes:
        """The list's lines joined: for a few changed records (up to 64), the list as it
        was with their lines cut out and their new ones after it (each line holds its own
        sequence number, so it is found once), rather than every line joined again; past
        that, every line joined."""
        body = self.changes.body
        starts = [body.find(line) for line in gone] if len(gone) <= 64 else [-1]
        if -1 in starts:
            return b"".join(self.lines.values())
        view, at = memoryview(body), 0
        pieces: list[bytes | memoryview] = []
        for start, line in sorted(zip(starts, gone, strict=True)):
            pieces.append(view[at:start])
            at = start + len(line)
        pieces.append(view[at:])
        pieces.extend(reversed(list(itertools.islice(reversed(self.lines.values()), moved))))
        return b"".join(pieces)
