"""Writing a search index's files: documents added to tantivy in one indexing thread, the
record vectors saved, index folders linked from the last build and sealed as the bundle keeps
them (`exporter.indexing.search_index` decides what goes in)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import tantivy

from exporter.shared.search import (
    Doc,
)

# An `add_document` that took this long waited: tantivy's queue of documents was full.
WAITED = 50e-6
DRAIN = 0.02  # seconds this thread then sleeps, with nothing else to do, while it drains


def write(index: tantivy.Index, add: Iterable[tantivy.Document],
          remove: Iterable[str] = (), alongside: Callable[[], bool] = lambda: False) -> None:
    """Remove records by id, add documents, commit once, and leave no merge running. One
    indexing thread: the same documents make the same segments, whatever the machine.

    Documents reach tantivy's indexing thread through a queue of 10,000 that this thread
    fills faster than that one empties it. Once it is full, each add would wait for a place
    and be woken for it: two context switches a document, a sizeable share of indexing's
    CPU at 100,000 records. So an add that waited is taken as the sign to step aside while
    the queue drains: a step of `alongside` (the export's other work in this process:
    embedding the texts of the documents added so far) is done then, or, where it says it
    had none to do, this thread sleeps a moment; the documents after are added in a burst,
    without waiting. The documents, and their order, are the same either way."""
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for record_id in remove:
        writer.delete_documents_by_term("id", record_id)
    clock = time.perf_counter
    for doc in add:
        started = clock()
        writer.add_document(doc)
        if clock() - started > WAITED and not alongside():
            time.sleep(DRAIN)
    writer.commit()
    writer.wait_merging_threads()


def record_document(doc: Doc) -> tantivy.Document:
    made = tantivy.Document(collection=doc.collection, id=doc.id, names=doc.names,
                            title=doc.title, text=doc.text, shown=doc.shown)
    if doc.node:
        made.add_text("node", doc.node)
    return made


def passage_document(row: int, text: str) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_unsigned("row", row)  # a plain int would be taken as signed
    doc.add_text("text", text)
    return doc


def link_tree(source: Path, target: Path) -> None:
    """`target` becomes a copy of the index folder `source`, made of hard links: tantivy
    never writes into a file it has written, so the two can share them."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith(".tantivy-"):
            os.link(entry.path, target / entry.name)


def save_vectors(path: Path, matrix: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32))


def seal(folder: Path) -> None:
    """An index folder as the bundle keeps it: tantivy's empty lock files gone, every file
    0600, the folder 0700."""
    for entry in os.scandir(folder):
        if entry.name.startswith(".tantivy-"):
            os.unlink(entry.path)
        else:
            os.chmod(entry.path, 0o600)
    os.chmod(folder, 0o700)
