"""What content is read into: a content file as found on disk (`SourceFile`) and each record
it holds (`SourceRecord`), with the lines its fields are on for messages."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from exporter.contract.wire import PUBLIC


@dataclass
class SourceRecord:
    """One record as the content has it. A record restored from the export cache carries
    only what identifies it (id, access, hash); its fields are read again from its file if
    they are ever needed."""

    collection: str
    path: str  # relative to the project root, with forward slashes
    line: int  # first line of the record (1 for a file, the row's line for CSV)
    id: str
    access: str
    field_lines: dict[str, int] = field(default_factory=dict)
    hash: str = ""
    _fields: dict[str, Any] | None = field(default=None, repr=False)
    # For a record restored from the cache: reads its fields (given the record) when needed.
    loader: Callable[[SourceRecord], dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def parsed(cls, collection: str, path: str, line: int, fields: dict[str, Any],
               field_lines: dict[str, int]) -> SourceRecord:
        """A record just parsed from its file, its id and access taken from its fields.
        Field names are interned: the parser makes each name a string of its own, in both
        dicts, while a node's records use a few dozen names between them. (Sent back from a
        worker, a chunk's records share one copy of each name: pickle sends an object it has
        sent once as a reference.)"""
        fields = {sys.intern(name): value for name, value in fields.items()}
        field_lines = {sys.intern(name): line for name, line in field_lines.items()}
        return cls(collection, path, line, str(fields.get("id", "")),
                   str(fields.get("access", PUBLIC)), field_lines, _fields=fields)

    @property
    def fields(self) -> dict[str, Any]:
        """The record's fields, read again from its file for a record from the cache."""
        if self._fields is None:
            if self.loader is None:
                raise RuntimeError(f"{self.path}: record fields were never loaded")
            self._fields = self.loader(self)
        return self._fields

    def seal(self) -> None:
        """Fix the hash of a valid record: sha256 of its fields in canonical JSON."""
        canonical = json.dumps(self.fields, sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        self.hash = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def line_of(self, name: str) -> int:
        """The line a field is on, for messages (the record's first line if not known)."""
        return self.field_lines.get(name, self.line)


class SourceFile(NamedTuple):
    """A content file on disk, with what identifies its version cheaply."""

    collection: str
    path: str
    rel: str
    mtime_ns: int
    size: int
    changed_ns: int  # the inode's change time: set by the kernel, never by a tool
    inode: int

    @property
    def version(self) -> tuple[int, int, int, int]:
        """What tells this version of the file from another without reading it
        (`version_of`)."""
        return self.mtime_ns, self.size, self.changed_ns, self.inode
