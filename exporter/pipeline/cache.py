"""What an export remembers between runs so that a small edit costs little.

- what identifies each valid record of each content file (id, access, content hash) and
  its place in lists (its sort key), keyed by the file's path, size and mtime, so unchanged
  files are not read again;
- the sha256 of outputs too large to hash on every run, keyed by their fingerprint;
- the species each public record names, keyed by its render key (for the pages' links);
- the records whose body is still `fednode new`'s placeholder, keyed by their content hash,
  so that every run warns of them, not only the one that read their file;
- parts of the download files (the rows of a few hundred records, as text), keyed by their
  fingerprint, so that an edit re-renders only the part it falls in (`downloads`).

Rendered records are not kept here: the previous bundle has them (`renderings`).

The cache is derived data in `.fednode/cache/` (0700, its one file 0600): deleting it only
makes the next export slower. It is tied to the fednode version and the schemas, and
ignored if either changed."""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter import __version__
from exporter.pipeline.locks import private_folder, replace_private
from exporter.project.content import RULES, SourceFile, SourceRecord, reload
from exporter.project.placeholders import placeholder_line
from exporter.project.schemas import Collection, collections
from exporter.shared.errors import ExportError

FILE = "sources.marshal"
PARTS = "parts"  # a file a download: the text of its parts
LIBRARY_PAGES = "library.json"  # the library's PDFs, read (`library.CACHE`)
FORMAT = "6"  # bump when the entries change shape (5: a file's version holds its change
# time and inode; 6: the records holding a placeholder body)

SortKey = tuple[str, ...]
# A part of a download: its pieces of text, UTF-8 encoded (joined as they are: at 100,000
# records the species CSV is 87 MB, and encoding it whole would take 0.2 s an export).
Part = tuple[bytes, ...]
# path -> (its version (`SourceFile.version`),
#          [(collection, path, line, id, access, id_line, hash, sort key)])
SourceEntry = tuple[tuple[int, ...], list[tuple[str, str, int, str, str, int, str, SortKey]]]


def _version() -> str:
    schemas = "".join(repr(c.schema) for c in collections().values())
    return f"{__version__}:{FORMAT}:{RULES}:" + hashlib.sha256(schemas.encode()).hexdigest()[:16]


@dataclass
class Cache:
    folder: Path
    sources: dict[str, SourceEntry] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # output fingerprint -> sha256
    # render key -> the species a public record names (`pages`: links between pages)
    names: dict[str, list[str]] = field(default_factory=dict)
    # content hash -> the line of its body, for each record of a remembered file whose body
    # is still `fednode new`'s placeholder (`placeholders`: warned of on every run)
    placeholders: dict[str, int] = field(default_factory=dict)
    # download -> part fingerprint -> its text: what the last export left (read when first
    # asked for), and what this one used
    _parts: dict[str, dict[str, Part]] = field(default_factory=dict)
    _used: dict[str, dict[str, Part]] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> Cache:
        try:
            data = marshal.loads((folder / FILE).read_bytes())  # load(file) reads piecemeal
            if data["version"] != _version():
                return cls(folder)
            return cls(folder, data["sources"], data["digests"], data["names"],
                       data["placeholders"])
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            return cls(folder)

    def records(self, source: SourceFile, collection: Collection
                ) -> tuple[list[SourceRecord], list[SortKey]] | None:
        """The records of an unchanged file and their sort keys, or None if it must be read
        again. Their fields are read from the file only if needed, once for all of them."""
        entry = self._unchanged(source)
        if entry is None:
            return None
        load = _Reread(source, collection).fields
        return ([SourceRecord(c, p, line, record_id, access, {"id": id_line}, digest, None, load)
                 for c, p, line, record_id, access, id_line, digest, _ in entry[1]],
                [row[7] for row in entry[1]])

    def sort_keys(self, source: SourceFile) -> list[SortKey] | None:
        """The sort keys of an unchanged file's records, or None if it must be read."""
        entry = self._unchanged(source)
        return None if entry is None else [row[7] for row in entry[1]]

    def _unchanged(self, source: SourceFile) -> SourceEntry | None:
        """What is remembered of a file, if it is the same version as then."""
        entry = self.sources.get(source.rel)
        if entry is None or entry[0] != source.version:
            return None
        return entry

    def remember(self, source: SourceFile, records: list[SourceRecord],
                 keys: list[SortKey]) -> None:
        self.sources[source.rel] = (source.version, [
            (r.collection, r.path, r.line, r.id, r.access, r.line_of("id"), r.hash, key)
            for r, key in zip(records, keys, strict=True)])
        for r in records:
            line = placeholder_line(r)
            if line is not None:
                self.placeholders[r.hash] = line

    def part(self, group: str, key: str, make: Callable[[], Part]) -> Part:
        """The part fingerprinted `key` of one download (`group`): remembered, or made now
        and remembered."""
        used = self._used.setdefault(group, {})
        found = used.get(key) or self._known_parts(group).get(key)  # (used: by an export
        if found is None:  # brought up to date in the same process, `delta`)
            found = make()
        used[key] = found
        return found

    def keep_parts(self, group: str, keys: list[str]) -> None:
        """Of the parts used of one download, keep only these (its latest rendering's)."""
        used = self._used.get(group, {})
        self._used[group] = {key: used[key] for key in keys if key in used}

    def has_part(self, group: str, key: str) -> bool:
        return key in self._used.get(group, {}) or key in self._known_parts(group)

    def add_part(self, group: str, key: str, part: Part) -> None:
        """A part made elsewhere, for `part` to find."""
        self._known_parts(group)[key] = part

    def _known_parts(self, group: str) -> dict[str, Part]:
        if group not in self._parts:
            self._parts[group] = self._read_parts(group)
        return self._parts[group]

    def _parts_file(self, group: str) -> Path:
        return self.folder / PARTS / (group.replace("/", "_") + ".marshal")

    def _read_parts(self, group: str) -> dict[str, Part]:
        try:
            data = marshal.loads(self._parts_file(group).read_bytes())
            if data["version"] == _version():
                return data["parts"]  # type: ignore[no-any-return]
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            pass
        return {}

    def save(self, keep: set[str] | None = None) -> None:
        """Write the cache; `keep` limits the source entries to files that still exist.
        A download rendered now keeps only the parts it used, in a file of its own; the
        files of downloads not rendered now are left as they are."""
        sources = self.sources if keep is None else {
            rel: entry for rel, entry in self.sources.items() if rel in keep}
        held = {row[6] for _, rows in sources.values() for row in rows}
        placeholders = {digest: line for digest, line in self.placeholders.items()
                        if digest in held}
        private_folder(self.folder)
        replace_private(self.folder / FILE, marshal.dumps({
            "version": _version(), "sources": sources, "digests": self.digests,
            "names": self.names, "placeholders": placeholders}))
        for group, parts in self._used.items():
            private_folder(self.folder / PARTS)
            replace_private(self._parts_file(group),
                            marshal.dumps({"version": _version(), "parts": parts}))
        for other in self.folder.iterdir():  # what older versions kept here
            if other.name not in (FILE, LIBRARY_PAGES) and other.is_file() and \
                    not other.name.startswith(LIBRARY_PAGES + "."):  # another's, being saved
                other.unlink()


class _Reread:
    """A cached file read again for its records' fields: at most once, when the first of
    them is needed (an export after a base_url change needs them all)."""

    def __init__(self, source: SourceFile, collection: Collection) -> None:
        self.source = source
        self.collection = collection
        self._records: dict[str, SourceRecord] | None = None

    def fields(self, cached: SourceRecord) -> dict[str, Any]:
        if self._records is None:
            self._records = reload(self.source, self.collection)
        record = self._records.get(cached.id)
        if record is None or record.hash != cached.hash:
            raise ExportError(f"{self.source.rel}: the file changed while the export ran; "
                              f"run the export again")
        return record.fields
