"""Write the search index of an export: `search/<group>/` in the bundle, per access group
(see `search` for why by group), each with its tantivy index, its vectors and `state.json`.

An export after a small edit does not index everything again. Each group starts from the
live build's copy of it (hard links: tantivy never writes into a file it has written):

- the group's records are unchanged: the copy is the group;
- records were added, edited or deleted: those are removed and added in the copy;
- a record left the group for another one (its access changed): the group is indexed
  afresh, so that not even its term statistics remember a record now restricted.

Vectors are kept in `.fednode/cache/vectors/` by content hash, so only new text is embedded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import search
from .content import SourceRecord
from .contract.bundle import SEARCH
from .render import Rendered
from .schemas import Collection
from .writer import private_folder

CACHE = "vectors"
Row = tuple[str, str, str]  # collection, id, content hash


@dataclass
class Vectors:
    """Embeddings of record texts, by content hash; `save` keeps those used this export."""

    folder: Path
    known: dict[str, int]
    matrix: np.ndarray
    fresh: dict[str, np.ndarray]
    used: set[str]

    @classmethod
    def load(cls, cache: Path) -> Vectors:
        folder = cache / CACHE
        try:
            hashes = json.loads((folder / "hashes.json").read_bytes())
            matrix = np.load(folder / "vectors.npy")
            if hashes.get("version") != search.SEARCH_VERSION or \
                    matrix.shape != (len(hashes["rows"]), search.DIMENSIONS):
                raise ValueError("another version")
            known = {h: n for n, h in enumerate(hashes["rows"])}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            known, matrix = {}, np.zeros((0, search.DIMENSIONS), np.float32)
        return cls(folder, known, matrix, {}, set())

    def of(self, rows: list[Row], texts: Callable[[list[Row]], list[str]]) -> np.ndarray:
        """The vectors of `rows`, in order; those not cached are embedded now."""
        missing = [row for row in rows if row[2] not in self.known and row[2] not in self.fresh]
        if missing:
            embedded = search.Embedder.embed(texts(missing))
            for row, vector in zip(missing, embedded, strict=True):
                self.fresh[row[2]] = vector
        out = np.empty((len(rows), search.DIMENSIONS), np.float32)
        for n, (_, _, digest) in enumerate(rows):
            self.used.add(digest)
            at = self.known.get(digest)
            out[n] = self.matrix[at] if at is not None else self.fresh[digest]
        return out

    def save(self) -> None:
        if not self.fresh and set(self.known) == self.used:
            return
        order = sorted(self.used)
        matrix = self.of([("", "", digest) for digest in order], lambda rows: [])
        private_folder(self.folder)
        _save_npy(self.folder / "vectors.npy", matrix)
        _write(self.folder / "hashes.json",
               json.dumps({"version": search.SEARCH_VERSION, "rows": order}).encode())


def build(bundle: Path, live: Path | None, rendered: list[Rendered],
          sources: dict[str, SourceRecord], known: dict[str, Collection],
          vectors: Vectors) -> str:
    """Write `bundle/search/`, starting from the live bundle's; return a digest of what it
    indexes (for the bundle's meta)."""
    root = bundle / SEARCH
    shutil.rmtree(root, ignore_errors=True)  # the build before last's: never trusted
    private_folder(root)
    groups: dict[str, list[Row]] = {}
    for r in rendered:
        groups.setdefault(r.access, []).append((r.collection, r.id, r.content_hash))
    moved = _moved(live, groups)
    digest = hashlib.sha256(search.SEARCH_VERSION.encode())
    for group in sorted(groups):
        rows = groups[group]
        digest.update(f"{group}\n".encode())
        for row in rows:
            digest.update(f"{row[0]} {row[1]} {row[2]}\n".encode())
        _group(root / group, live / SEARCH / group if live else None, rows,
               group in moved, sources, known, vectors)
    return digest.hexdigest()[:16]


def _moved(live: Path | None, groups: dict[str, list[Row]]) -> set[str]:
    """The live groups some record has left for another group."""
    now = {row[1]: group for group, rows in groups.items() for row in rows}
    left: set[str] = set()
    for group, rows in _live_rows(live).items():
        if any(now.get(row[1], group) != group for row in rows):
            left.add(group)
    return left


def _live_rows(live: Path | None) -> dict[str, list[Row]]:
    found: dict[str, list[Row]] = {}
    if live is None or not (live / SEARCH).is_dir():
        return found
    for folder in (live / SEARCH).iterdir():
        state = _state(folder)
        if state is not None:
            found[folder.name] = state
    return found


def _state(folder: Path) -> list[Row] | None:
    try:
        state = json.loads((folder / search.STATE).read_bytes())
        if state["version"] != search.SEARCH_VERSION:
            return None
        return [tuple(row) for row in state["rows"]]  # type: ignore[misc]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _group(folder: Path, live: Path | None, rows: list[Row], moved: bool,
           sources: dict[str, SourceRecord], known: dict[str, Collection],
           vectors: Vectors) -> None:
    before = _state(live) if live is not None else None
    if before is not None and not moved:
        _link_tree(live, folder)  # type: ignore[arg-type]
        if before == rows:
            return
        old = {row[1]: row[2] for row in before}
        new = {row[1]: row[2] for row in rows}
        remove = [record_id for record_id, digest in old.items() if new.get(record_id) != digest]
        add = [row for row in rows if old.get(row[1]) != row[2]]
        (folder / search.STATE).unlink()
        (folder / search.VECTORS).unlink()
        search.write(search.open_index(folder), _docs(add, sources, known), remove)
    else:
        search.write(search.create(folder), _docs(rows, sources, known))
    _save_npy(folder / search.VECTORS,
              vectors.of(rows, lambda missing: [d.embedding_text()
                                               for d in _docs(missing, sources, known)]))
    _write(folder / search.STATE, json.dumps(
        {"version": search.SEARCH_VERSION, "rows": rows}, separators=(",", ":")).encode())
    for entry in os.scandir(folder):  # tantivy's empty lock files; and every file 0600
        if entry.name.startswith(".tantivy-"):
            os.unlink(entry.path)
        else:
            os.chmod(entry.path, 0o600)
    os.chmod(folder, 0o700)


def _docs(rows: list[Row], sources: dict[str, SourceRecord],
          known: dict[str, Collection]) -> list[search.Doc]:
    docs = []
    for collection, record_id, _ in rows:
        spec = known[collection]
        fields = sources[record_id].fields
        docs.append(search.document(collection, record_id, str(fields.get(spec.title_field, "")),
                                    fields, spec.search_names, spec.search_text))
    return docs


def _link_tree(source: Path, target: Path) -> None:
    """`target` becomes a copy of `source` made of hard links."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith(".tantivy-"):
            os.link(entry.path, target / entry.name)


def _save_npy(path: Path, matrix: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32))
    os.chmod(path, 0o600)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o600)
