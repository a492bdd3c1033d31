"""Write the search index of an export: `search/<group>/` in the bundle, per access group
(see `search` for why by group), each with its tantivy index, its vectors and `state.json`.

An export after a small edit does not index everything again. Each group starts from the
live build's copy of it (hard links: tantivy never writes into a file it has written):

- the group's records are unchanged: the copy is the group;
- records were added, edited or deleted: those are removed and added in the copy;
- a record left the group for another one (its access changed): the group is indexed
  afresh, so that not even its term statistics remember a record now restricted.

Vectors are reused by content hash from the live build, so only new text is embedded, and
that while tantivy's own thread indexes the words (`writing.write`'s `alongside`). All of it
is done aside (`Index`), on the other core, while the export renders the site.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tantivy

from exporter.contract.bundle import SEARCH
from exporter.indexing import writing
from exporter.indexing.readable import is_shown, searched_fields
from exporter.pipeline.forks import Aside
from exporter.pipeline.locks import private_folder
from exporter.project.content import SourceRecord
from exporter.project.schemas import Collection
from exporter.shared import search, word_vectors

Row = tuple[str, str, str]  # collection, id, content hash
Listed = tuple[str, str, str, str]  # collection, id, content hash, access


class Vectors:
    """Embeddings by content hash: those of the live build's groups are reused, the others
    made here (`embed`)."""

    def __init__(self, live: Path | None, version: str) -> None:
        self.version = version
        self.live = _live_groups(live, version)  # group -> its rows, in the live build
        self.matrices: list[np.ndarray] = []
        self.known: dict[str, tuple[int, int]] = {}  # hash -> (matrix, row)
        for group, rows in self.live.items():
            try:
                matrix = np.load(live / SEARCH / group / search.VECTORS,  # type: ignore[operator]
                                 mmap_mode="r")
            except (OSError, ValueError):
                continue
            if matrix.shape == (len(rows), search.DIMENSIONS):
                source = len(self.matrices)
                self.matrices.append(matrix)
                for n, row in enumerate(rows):
                    self.known[row[2]] = (source, n)
        self.fresh: dict[str, np.ndarray] = {}
        self._waiting: dict[str, str] = {}  # hash -> its text, to embed

    def want(self, digest: str, doc: search.Doc) -> None:
        """Have the text of a document being indexed embedded, if its hash has no vector."""
        if digest not in self.known and digest not in self.fresh and \
                digest not in self._waiting:
            self._waiting[digest] = doc.embedding_text()

    def step(self) -> bool:
        """Embed one group of the texts waiting (`WordVectors.SUM_TEXTS`, the texts it sums
        together), if a whole group waits: work done while tantivy's queue drains
        (`writing.write`'s `alongside`); whether there was any."""
        if len(self._waiting) < word_vectors.WordVectors.SUM_TEXTS:
            return False
        self._embed()
        return True

    def finish(self, rows: list[Row], sources: dict[str, SourceRecord],
               known: dict[str, Collection]) -> None:
        """Embed every text still waiting, and that of each of `rows` with no vector yet (a
        group linked from the live build whose vectors could not be read)."""
        for _, record_id, digest in rows:
            if digest not in self.known and digest not in self.fresh:
                self.want(digest, _doc(sources[record_id], known))
        while self._waiting:  # (the model is loaded only where a text waits)
            self._embed()

    def _embed(self) -> None:
        taken = list(itertools.islice(self._waiting, word_vectors.WordVectors.SUM_TEXTS))
        texts = [self._waiting.pop(digest) for digest in taken]
        self.fresh.update(zip(taken, word_vectors.Embedder.embed(texts), strict=True))

    def of(self, rows: list[Row]) -> np.ndarray:
        """The vectors of `rows`, in order."""
        out = np.empty((len(rows), search.DIMENSIONS), np.float32)
        taken: list[tuple[list[int], list[int]]] = [([], []) for _ in self.matrices]
        for n, (_, _, digest) in enumerate(rows):
            found = self.fresh.get(digest)
            if found is None:
                source, at = self.known[digest]
                taken[source][0].append(n)
                taken[source][1].append(at)
            else:
                out[n] = found
        for matrix, (into, rows_of) in zip(self.matrices, taken, strict=True):
            if into:
                out[into] = matrix[rows_of]
        return out


class Index:
    """The search index of an export, built aside (`aside.Aside`): new text embedded, then
    each group indexed, in a process of its own while the export renders and writes the
    site on the other core. `result` waits for it and gives its digest."""

    def __init__(self, bundle: Path, live: Path | None, listed: list[Listed],
                 sources: dict[str, SourceRecord], known: dict[str, Collection]) -> None:
        self._work: Aside[str] | None = Aside(_index, bundle, live, listed, sources, known)

    def result(self) -> str:
        assert self._work is not None, "the index was cancelled"
        work, self._work = self._work, None
        return work.result()

    def cancel(self) -> None:
        """Stop it if the export ended without it (on a thread: wait for it to end, so that
        nothing writes into the build afterwards)."""
        if self._work is not None:
            self._work.cancel(wait=True)
            self._work = None


def _index(bundle: Path, live: Path | None, listed: list[Listed],
           sources: dict[str, SourceRecord], known: dict[str, Collection]) -> str:
    return build(bundle, live, listed, sources, known, Vectors(live, index_version(known)))


def build(bundle: Path, live: Path | None, listed: list[Listed],
          sources: dict[str, SourceRecord], known: dict[str, Collection],
          vectors: Vectors) -> str:
    """Write `bundle/search/`, starting from the live bundle's; return a digest of what it
    indexes (for the bundle's meta). `listed`: every record, in list order. The text of
    each document added that has no vector is embedded while tantivy indexes
    (`writing.write`'s `alongside`), the rest once every group is indexed, then the vectors
    are written. A document is made as it is added, and let go: every record's documents
    are never held at once."""
    root = bundle / SEARCH
    shutil.rmtree(root, ignore_errors=True)  # the build before last's: never trusted
    private_folder(root)
    groups: dict[str, list[Row]] = {}
    for collection, record_id, digest_of, access in listed:
        groups.setdefault(access, []).append((collection, record_id, digest_of))
    moved = _moved(vectors.live, groups)
    digest = hashlib.sha256(vectors.version.encode())
    unsaved = []
    for group in sorted(groups):
        state, indexed = _group(root / group, live / SEARCH / group if live else None,
                                vectors.live.get(group), groups[group], group in moved,
                                sources, known, vectors)
        _mark(digest, group, state)
        if indexed:
            unsaved.append(group)
    vectors.finish([row for group in unsaved for row in groups[group]], sources, known)
    for group in unsaved:
        writing.save_vectors(root / group / search.VECTORS, vectors.of(groups[group]))
        writing.seal(root / group)
    return digest.hexdigest()[:16]


def _mark(digest: hashlib._Hash, group: str, state: bytes) -> None:
    """What the index's digest takes of one group: its name and its `state.json`, which
    lists each of its records with its content hash."""
    digest.update(f"{group}\n".encode() + hashlib.sha256(state).digest())


class Change(NamedTuple):
    """A record changed by an export brought up to date (`update`)."""

    record: SourceRecord
    row: int  # its row in its group, which it keeps
    before: str  # its content hash in the live build


def update(bundle: Path, live: Path, version: str, groups: Iterable[str],
           changed: list[Change], known: dict[str, Collection]) -> str:
    """`build` where the live build's index (this version's, of the access `groups`) is
    that of every record but those `changed`, which keep their ids, groups and rows (an
    export brought up to date, `delta`): every other group is linked as it is, and only the
    changed documents, vectors and rows are replaced."""
    root = bundle / SEARCH
    shutil.rmtree(root, ignore_errors=True)
    private_folder(root)
    by_group: dict[str, list[Change]] = {}
    for change in changed:
        by_group.setdefault(change.record.access, []).append(change)
    digest = hashlib.sha256(version.encode())
    for group in sorted(groups):
        folder, source = root / group, live / SEARCH / group
        writing.link_tree(source, folder)
        if group not in by_group:
            _mark(digest, group, (folder / search.STATE).read_bytes())
            continue
        changes = by_group[group]
        state = (source / search.STATE).read_bytes()
        for change in changes:  # each row is written once, as `_save_state` writes it
            record = change.record
            old, new = (json.dumps([record.collection, record.id, digest_of],
                                   separators=(",", ":")).encode()
                        for digest_of in (change.before, record.hash))
            if state.count(old) != 1:
                raise ValueError(f"{source / search.STATE}: not the index's rows")
            state = state.replace(old, new)
        docs = [_doc(change.record, known) for change in changes]
        (folder / search.STATE).unlink()
        (folder / search.VECTORS).unlink()
        writing.write(search.open_index(folder), [writing.record_document(doc) for doc in docs],
                     [change.record.id for change in changes])
        # a copy of the live file (made by the kernel: 100 MB at 100,000 records), its
        # changed rows written into it
        shutil.copyfile(source / search.VECTORS, folder / search.VECTORS)
        matrix = np.load(folder / search.VECTORS, mmap_mode="r+")
        rows = [change.row for change in changes]
        if matrix.ndim != 2 or matrix.shape[1] != search.DIMENSIONS or \
                matrix.dtype != np.float32 or max(rows) >= len(matrix):
            raise ValueError(f"{source / search.VECTORS}: not the index's vectors")
        matrix[rows] = word_vectors.Embedder.embed([doc.embedding_text() for doc in docs])
        matrix.flush()
        del matrix
        (folder / search.STATE).write_bytes(state)
        _mark(digest, group, state)
        writing.seal(folder)
    return digest.hexdigest()[:16]


def _save_state(folder: Path, version: str, rows: list[Row]) -> bytes:
    state = json.dumps({"version": version, "rows": rows}, separators=(",", ":")).encode()
    (folder / search.STATE).write_bytes(state)
    return state


def _moved(live: dict[str, list[Row]], groups: dict[str, list[Row]]) -> set[str]:
    """The live groups some record has left for another group."""
    now = {row[1]: group for group, rows in groups.items() for row in rows}
    left: set[str] = set()
    for group, rows in live.items():
        if any(now.get(row[1], group) != group for row in rows):
            left.add(group)
    return left


def index_version(known: dict[str, Collection]) -> str:
    """What an index depends on besides the records: the engine's version and which fields
    each collection searches (`x-fednode.search`). A change of either indexes afresh."""
    fields = repr([(c.name, c.search_names, c.search_text) for c in known.values()])
    return f"{search.SEARCH_VERSION}:" + hashlib.sha256(fields.encode()).hexdigest()[:12]


def _live_groups(live: Path | None, version: str) -> dict[str, list[Row]]:
    """Each group of the live build's index, with its rows (if made by this version)."""
    found: dict[str, list[Row]] = {}
    if live is None or not (live / SEARCH).is_dir():
        return found
    for folder in sorted((live / SEARCH).iterdir()):
        state = _state(folder, version)
        if state is not None:
            found[folder.name] = state
    return found


def _state(folder: Path, version: str) -> list[Row] | None:
    try:
        state = json.loads((folder / search.STATE).read_bytes())
        if state["version"] != version:
            return None
        return [tuple(row) for row in state["rows"]]  # type: ignore[misc]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _group(folder: Path, live: Path | None, before: list[Row] | None, rows: list[Row],
           moved: bool, sources: dict[str, SourceRecord], known: dict[str, Collection],
           vectors: Vectors) -> tuple[bytes, bool]:
    """Write one group's tantivy index and `state.json`; return the state, and whether the
    group's vectors are still to be written (and its folder sealed), or were linked whole
    from the live build's."""
    if live is not None and before is not None and not moved:
        writing.link_tree(live, folder)
        if before == rows:
            return (folder / search.STATE).read_bytes(), False
        old = {row[1]: row[2] for row in before}
        new = {row[1]: row[2] for row in rows}
        remove = [record_id for record_id, digest in old.items() if new.get(record_id) != digest]
        add = [row for row in rows if old.get(row[1]) != row[2]]
        (folder / search.STATE).unlink()
        (folder / search.VECTORS).unlink()
        writing.write(search.open_index(folder), _docs(add, sources, known, vectors),
                     remove, vectors.step)
    else:
        writing.write(search.create(folder), _docs(rows, sources, known, vectors),
                     alongside=vectors.step)
    return _save_state(folder, vectors.version, rows), True


def _docs(rows: list[Row], sources: dict[str, SourceRecord], known: dict[str, Collection],
          vectors: Vectors) -> Iterator[tantivy.Document]:
    """Each row's tantivy document, its text handed to `vectors` to embed if it has no
    vector yet."""
    for _, record_id, digest in rows:
        doc = _doc(sources[record_id], known)
        vectors.want(digest, doc)
        yield writing.record_document(doc)


def _doc(record: SourceRecord, known: dict[str, Collection]) -> search.Doc:
    spec, fields = known[record.collection], record.fields
    searched = searched_fields(record.collection, fields)
    shown = [name for name in spec.search_text if is_shown(name, searched.get(name))]
    return search.document(record.collection, record.id, str(fields.get(spec.title_field, "")),
                           searched, spec.search_names, spec.search_text, shown)
