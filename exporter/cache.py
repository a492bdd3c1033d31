"""What an export remembers between runs so that a small edit costs little.

- parsed, valid records per content file, keyed by the file's path, size and mtime;
- each record's rendered bytes, keyed by everything the rendering depends on.

The cache is derived data in `.fednode/cache/`: deleting it only makes the next export
slower. It is tied to the fednode version and the schemas, and ignored if either changed."""

from __future__ import annotations

import hashlib
import marshal
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .content import SourceRecord
from .schemas import collections

FILE = "sources.marshal"

# path -> (mtime_ns, size, [(collection, path, line, id, access, id_line, hash, packed), ...])
SourceEntry = tuple[int, int, list[tuple[str, str, int, str, str, int, str, str]]]


def _version() -> str:
    schemas = "".join(repr(c.schema) for c in collections().values())
    return __version__ + ":" + hashlib.sha256(schemas.encode()).hexdigest()[:16]


@dataclass
class Cache:
    folder: Path
    sources: dict[str, SourceEntry] = field(default_factory=dict)
    # record id -> (rendering key, title, served bytes)
    rendered: dict[str, tuple[str, str, bytes]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # output fingerprint -> sha256

    @classmethod
    def load(cls, folder: Path) -> Cache:
        try:
            with open(folder / FILE, "rb") as handle:
                data = marshal.load(handle)
            if data["version"] != _version():
                return cls(folder)
            return cls(folder, data["sources"], data["rendered"], data["digests"])
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            return cls(folder)

    def records(self, rel: str, mtime_ns: int, size: int) -> list[SourceRecord] | None:
        """The records of an unchanged file, or None if it must be read again."""
        entry = self.sources.get(rel)
        if entry is None or entry[0] != mtime_ns or entry[1] != size:
            return None
        return [SourceRecord(c, p, line, record_id, access, {"id": id_line}, digest, packed)
                for c, p, line, record_id, access, id_line, digest, packed in entry[2]]

    def remember(self, rel: str, mtime_ns: int, size: int, records: list[SourceRecord]) -> None:
        self.sources[rel] = (mtime_ns, size, [
            (r.collection, r.path, r.line, r.id, r.access, r.line_of("id"), r.hash, r.packed)
            for r in records])

    def save(self, keep: set[str] | None = None) -> None:
        """Write the cache; `keep` limits the source entries to files that still exist."""
        sources = self.sources if keep is None else {
            rel: entry for rel, entry in self.sources.items() if rel in keep}
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / (FILE + ".tmp")
        with open(temporary, "wb") as handle:
            marshal.dump({"version": _version(), "sources": sources,
                          "rendered": self.rendered, "digests": self.digests}, handle)
        os.replace(temporary, self.folder / FILE)
