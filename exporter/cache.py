"""What an export remembers between runs so that a small edit costs little.

- what identifies each valid record of each content file (id, access, content hash), keyed
  by the file's path, size and mtime, so unchanged files are not read again;
- the sha256 of outputs too large to hash on every run, keyed by their fingerprint.

Rendered records are not kept here: the previous bundle has them (bundle.read_rendered).

The cache is derived data in `.fednode/cache/`: deleting it only makes the next export
slower. It is tied to the fednode version and the schemas, and ignored if either changed."""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .content import RULES, SourceFile, SourceRecord, reload
from .schemas import Collection, collections

FILE = "sources.marshal"

# path -> (mtime_ns, size, [(collection, path, line, id, access, id_line, hash), ...])
SourceEntry = tuple[int, int, list[tuple[str, str, int, str, str, int, str]]]


def _version() -> str:
    schemas = "".join(repr(c.schema) for c in collections().values())
    return f"{__version__}:{RULES}:" + hashlib.sha256(schemas.encode()).hexdigest()[:16]


@dataclass
class Cache:
    folder: Path
    sources: dict[str, SourceEntry] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # output fingerprint -> sha256

    @classmethod
    def load(cls, folder: Path) -> Cache:
        try:
            with open(folder / FILE, "rb") as handle:
                data = marshal.load(handle)
            if data["version"] != _version():
                return cls(folder)
            return cls(folder, data["sources"], data["digests"])
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            return cls(folder)

    def records(self, source: SourceFile, collection: Collection) -> list[SourceRecord] | None:
        """The records of an unchanged file, or None if it must be read again."""
        entry = self.sources.get(source.rel)
        if entry is None or entry[0] != source.mtime_ns or entry[1] != source.size:
            return None
        return [SourceRecord(c, p, line, record_id, access, {"id": id_line}, digest,
                             loader=functools.partial(reload, source, collection, record_id))
                for c, p, line, record_id, access, id_line, digest in entry[2]]

    def remember(self, rel: str, mtime_ns: int, size: int, records: list[SourceRecord]) -> None:
        self.sources[rel] = (mtime_ns, size, [
            (r.collection, r.path, r.line, r.id, r.access, r.line_of("id"), r.hash)
            for r in records])

    def save(self, keep: set[str] | None = None) -> None:
        """Write the cache; `keep` limits the source entries to files that still exist."""
        sources = self.sources if keep is None else {
            rel: entry for rel, entry in self.sources.items() if rel in keep}
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / (FILE + ".tmp")
        with open(temporary, "wb") as handle:
            marshal.dump({"version": _version(), "sources": sources,
                          "digests": self.digests}, handle)
        os.replace(temporary, self.folder / FILE)
