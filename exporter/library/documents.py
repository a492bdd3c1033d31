"""The document library: PDFs in `content/library/`, each with its resources record beside
it. The export reads each PDF page by page (pypdf), keeps the printed page labels, splits
the pages into passages of whole sentences, and indexes them with the search engine
(`search`: tantivy and wordllama), one index per access group as for records, into the
bundle's `passages/<group>/`. Public PDFs are published under `site_out/library/`; every
PDF is in the bundle, for the sidecar to serve to the keys that may read it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from exporter.contract.bundle import PASSAGES
from exporter.contract.wire import PUBLIC
from exporter.indexing import writing
from exporter.library import vector_cache
from exporter.library.passages import PASSAGE_CHARS, Page, passages, without_furniture
from exporter.library.pdf import bytes_of, read_pages, warnings_named
from exporter.pipeline.cache import LIBRARY_PAGES
from exporter.pipeline.forks import Aside, cores, forks, in_child
from exporter.pipeline.locks import private_folder
from exporter.pipeline.outputs import OutputFile
from exporter.project.discovery import LIBRARY
from exporter.project.records import SourceRecord
from exporter.shared import encoder, search, word_vectors
from exporter.shared.errors import Problem
from exporter.shared.fileversion import version_of
from exporter.shared.sentences import SENTENCE_SENSES, table

CACHE = LIBRARY_PAGES  # in .fednode/cache: the pages of each PDF, by path and version
# How passages are made from pages: a new number makes the next export index them again.
# 2: running headers and footers left out. 4: each row with its headings' spans. 5: each
# sentence's vector beside the passages' (`exporter.shared.sentences`).
PASSAGE_FORMAT = 5
READ_SECONDS = 120.0  # to read one PDF, in a process of its own (where the export forks)
READ_MEMORY = 2 * 2**30  # bytes of memory that process may take beyond the export's own


@dataclass(frozen=True)
class Document:
    id: str
    access: str
    title: str
    pdf: Path
    rel: str  # the PDF's path, for messages
    sha256: str
    pages: list[Page]

    def file_name(self) -> str:
        return f"{self.id}.pdf"


def documents(root: Path, records: list[SourceRecord], cache: Path, *, keep: bool = True
              ) -> tuple[list[Document], list[Problem]]:
    """Every library document, its pages read (or taken from the cache when the PDF did
    not change), and the problems of the library's records and PDFs. The pages read are
    kept in the cache unless a PDF has a problem or `keep` is false (an export refused for
    other problems writes nothing)."""
    remembered = _load_cache(cache)
    kept: dict[str, Any] = {}
    problems: list[Problem] = []
    described: list[tuple[SourceRecord, str, Path, Any]] = []  # (entry: cached, or None)
    for record in records:
        if not record.path.startswith(f"content/{LIBRARY}/"):
            continue
        if record.fields.get("kind") != "document":
            problems.append(Problem(record.path, record.line_of("kind"), "kind",
                                    "a library record describes its PDF: kind = \"document\""))
            continue
        rel = record.path[:-len(".md")] + ".pdf"
        pdf = root / rel
        try:
            entry = remembered.get(rel)
            if not (isinstance(entry, dict) and entry.get("version") == _version(pdf)):
                entry = None
        except OSError as exc:
            problems.append(_unreadable(rel, exc))
            continue
        described.append((record, rel, pdf, entry))
    read = _read_each([(rel, pdf) for _, rel, pdf, entry in described if entry is None],
                      remembered)
    found = []
    for record, rel, pdf, entry in described:
        try:
            if entry is None:
                entry = read[rel]
                if isinstance(entry, (OSError, ValueError)):
                    raise entry
            headings = [frozenset(map(str, page[2])) for page in entry["pages"]]
        except (OSError, ValueError) as exc:
            problems.append(_unreadable(rel, exc))
            continue
        kept[rel] = entry
        labels = [str(page[0]) for page in entry["pages"]]
        texts = without_furniture([(str(page[0]), str(page[1])) for page in entry["pages"]])
        pages = [Page(n, label, text, heads) for n, (label, text, heads)
                 in enumerate(zip(labels, texts, headings, strict=True), 1)]
        found.append(Document(record.id, record.access, str(record.fields.get("title", "")),
                              pdf, rel, entry["sha256"], pages))
    if keep and not problems:
        _save_cache(cache, kept)
    return found, problems


def _version(pdf: Path) -> list[int]:
    """What tells this version of the PDF from another, as the cache's JSON holds it."""
    return list(version_of(pdf.stat()))


def _unreadable(rel: str, exc: Exception) -> Problem:
    return Problem(rel, 0, "", f"cannot read this PDF: {exc}; replace it with a PDF whose "
                               f"text can be extracted")


Read = dict[str, Any] | OSError | ValueError  # a PDF's cache entry, or why it has none


def _read_each(pdfs: list[tuple[str, Path]], remembered: dict[str, Any]) -> dict[str, Read]:
    """Each PDF read (`_guarded`): its cache entry (version, SHA-256, pages), or the error
    that says why it has none. A PDF whose bytes are those the cache read before, under
    another version of the file (a copy of the node's folder, a checkout, a restore from a
    backup, `touch`), keeps the pages read then. Where the export forks, as many are read at
    once as it has cores, each in a process of its own, and as many PDFs are held in
    memory; elsewhere (a process that also serves: the tests) one after the other, on a
    thread."""
    at_once = cores(4) if forks() else 1
    results: dict[str, Read] = {}
    waiting = list(reversed(pdfs))
    running: list[tuple[str, Aside[list[list[Any]]], float, dict[str, Any]]] = []
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                rel, pdf = waiting.pop()
                try:
                    entry: dict[str, Any] = {"version": _version(pdf)}
                    data = bytes_of(pdf)
                except (OSError, ValueError) as exc:
                    results[rel] = exc
                    continue
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                before = remembered.get(rel)
                if isinstance(before, dict) and before.get("sha256") == entry["sha256"] \
                        and isinstance(before.get("pages"), list):
                    results[rel] = {**entry, "pages": before["pages"]}
                    continue
                with warnings_named(rel):  # (a forked reader's warnings name its PDF)
                    if at_once > 1:
                        running.append((rel, Aside(_read_limited, data, redo=False),
                                        time.monotonic() + READ_SECONDS, entry))
                        continue
                    try:  # on a thread, read under the handler
                        entry["pages"] = _guarded(data)
                        results[rel] = entry
                    except (OSError, ValueError) as exc:
                        results[rel] = exc
            if running:
                rel, work, deadline, entry = running[0]
                try:
                    entry["pages"] = _result(work, max(0.0, deadline - time.monotonic()))
                    results[rel] = entry
                except (OSError, ValueError) as exc:
                    results[rel] = exc
                running.pop(0)
    finally:  # an export that fails here leaves no reader running
        for _, work, _, _ in running:
            work.cancel()
    return results


def _guarded(data: bytes) -> list[list[Any]]:
    """`pdf.read_pages`, in a process of its own where the export forks (the command): killed after
    READ_SECONDS, with READ_MEMORY of memory at most, so that no PDF can hang the export or
    take the machine's memory. (In a process that serves too, such as the tests, on a
    thread: no limits.)"""
    return _result(Aside(_read_limited, data, redo=False), READ_SECONDS)


def _result(work: Aside[list[list[Any]]], timeout: float) -> list[list[Any]]:
    """The pages `work` read, or ValueError saying why there are none."""
    try:
        return work.result(timeout=timeout)
    except TimeoutError:
        raise ValueError(f"reading it took more than {READ_SECONDS:g} s") from None
    except MemoryError:
        raise ValueError(f"reading it took more than {READ_MEMORY // 2**30} GiB of memory"
                         ) from None
    except ChildProcessError:
        raise ValueError(f"the process reading it ended without an answer (it may have "
                         f"needed more than {READ_MEMORY // 2**30} GiB of memory)") from None


def _read_limited(data: bytes) -> list[list[Any]]:
    if in_child():
        import resource
        with open("/proc/self/statm") as statm:  # the process's size now, in pages
            now = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = now + READ_MEMORY if hard == resource.RLIM_INFINITY else \
            min(now + READ_MEMORY, hard)
        # (The cyclic collector stays off, as in the export: collecting here would walk, and
        # copy, every object the export had made, those of its extensions too; the
        # reader's cycles are bounded by the limit and go with the process.)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return read_pages(data)


def _load_cache(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / CACHE).read_bytes())
        return data if isinstance(data, dict) and data.get("version") == 3 else {}
    except (OSError, ValueError):
        return {}


def _save_cache(folder: Path, entries: dict[str, Any]) -> None:
    """Written whole under a name of this process's own, with mode 0600 from the start: an
    export and a `check` may save it at once (one fixed temporary name made one of them
    fail with a traceback)."""
    private_folder(folder)
    path = folder / CACHE
    descriptor, temporary = tempfile.mkstemp(prefix=CACHE + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # mkstemp: mode 0600
            handle.write(json.dumps({"version": 3, **entries}))  # 3: `version` an entry
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def published(documents: list[Document]) -> list[OutputFile]:
    """The public PDFs, for site_out/library/ (restricted ones never)."""
    return [_file(d, f"{LIBRARY}/{d.file_name()}") for d in documents if d.access == PUBLIC]


def private(documents: list[Document]) -> list[OutputFile]:
    """Every PDF, for the bundle's library/<access group>/: a sidecar still answering from
    an older snapshot (in which a document was public) reads the folder of the group that
    snapshot knows, never a newer export's PDF of another group written into the build it
    was loaded from (one served a partners-only revision to anonymous callers)."""
    return [_file(d, f"{LIBRARY}/{d.access}/{d.file_name()}") for d in documents]


def _file(document: Document, path: str) -> OutputFile:
    return OutputFile(path, document.sha256, lambda: document.pdf.read_bytes())


def build(bundle: Path, live: Path | None, documents: list[Document]) -> str:
    """Write `bundle/passages/<group>/` for each access group; an unchanged group is linked
    from the live build. Returns a digest of what is indexed."""
    root = bundle / PASSAGES
    shutil.rmtree(root, ignore_errors=True)
    private_folder(root)
    groups: dict[str, list[Document]] = {}
    for document in documents:
        groups.setdefault(document.access, []).append(document)
    made = f"{search.SEARCH_VERSION}:{PASSAGE_CHARS}:{PASSAGE_FORMAT}:{encoder.VERSION}".encode()
    digest = hashlib.sha256(made)
    for group in sorted(groups):
        mark = hashlib.sha256(made)
        for document in groups[group]:
            mark.update(f"{document.id} {document.sha256} {document.title}\n".encode())
        digest.update(f"{group} {mark.hexdigest()}\n".encode())
        _group(root / group, live / PASSAGES / group if live else None, groups[group],
               mark.hexdigest())
    return digest.hexdigest()[:16]


class Building:
    """`build` run aside (`aside.Aside`), from the start of an export's writing: the
    sentence encoder's 40 ms a passage then shares the other core with the search index
    while the pages render, instead of running alone at the end on one core (the last 8 s
    of a 100,000-record node's first export, the other core idle). This process learns the
    passages it encoded (`_encoded`), as if it had encoded them itself."""

    def __init__(self, bundle: Path, live: Path | None, documents: list[Document]) -> None:
        self._work: Aside[tuple[str, dict[str, np.ndarray]]] | None = Aside(
            _build_learning, bundle, live, documents)

    def result(self) -> str:
        assert self._work is not None, "the library's build was cancelled"
        work, self._work = self._work, None
        digest, learned = work.result()
        _learn(learned)
        return digest

    def cancel(self) -> None:
        """Stop it if the export ended without it (on a thread: wait for it to end, so that
        nothing writes into the build afterwards)."""
        if self._work is not None:
            self._work.cancel(wait=True)
            self._work = None


def _build_learning(bundle: Path, live: Path | None,
                    documents: list[Document]) -> tuple[str, dict[str, np.ndarray]]:
    before = set(_encoded)
    digest = build(bundle, live, documents)
    return digest, {text: vector for text, vector in _encoded.items() if text not in before}


def _group(folder: Path, live: Path | None, documents: list[Document], mark: str) -> None:
    if live is not None and _mark(live) == mark and _sound(live):
        writing.link_tree(live, folder)
        return
    rows: list[list[object]] = []
    for document in documents:
        for page in document.pages:
            for text, headings in passages(page):
                rows.append([document.id, page.number, page.label, text, headings])
    writing.write(search.create(folder, search.PASSAGE_SCHEMA),
                 [writing.passage_document(n, str(row[3])) for n, row in enumerate(rows)])
    titles = {d.id: d.title for d in documents}
    writing.save_vectors(folder / search.VECTORS, word_vectors.Embedder.embed(
        [f"{titles[str(row[0])]}: {row[3]}" for row in rows]))
    writing.save_vectors(folder / search.SENSES, _senses([str(row[3]) for row in rows], live))
    writing.save_vectors(folder / SENTENCE_SENSES, _senses(
        [sentence.weighed for sentence in table(rows)], live, sentences=True))
    (folder / search.PASSAGE_ROWS).write_text(json.dumps(
        {"mark": mark, "titles": titles, "rows": rows, "senses": encoder.VERSION},
        ensure_ascii=False), "utf-8")
    writing.seal(folder)


# Passages this process encoded last (text -> vector), at most ENCODED_KEPT of them: a
# process that exports several nodes with the same library (the test suite, a script) encodes
# each passage once. A node's own exports take them from its live build (`_senses`).
ENCODED_KEPT = 10_000  # about 15 MB
_encoded: dict[str, np.ndarray] = {}


def _senses(texts: list[str], live: Path | None, *, sentences: bool = False) -> np.ndarray:
    """Each passage's (or, with `sentences`, each sentence's) vector by the sentence encoder:
    taken from the live build's group where it holds the same text (an unchanged PDF beside
    a changed one is not encoded again), from what this process encoded last, or from the
    machine's cache (`vector_cache`); encoded otherwise (about 10 ms a sentence, 40 ms a
    passage), and kept in that cache."""
    known: dict[str, np.ndarray] = dict(_encoded)
    if live is not None:
        try:
            state = json.loads((live / search.PASSAGE_ROWS).read_bytes())
            rows = state["rows"]
            made = [s.weighed for s in table(rows)] if sentences else [str(r[3]) for r in rows]
            vectors = np.load(live / (SENTENCE_SENSES if sentences else search.SENSES))
            # made by this encoder (another version's vectors mean something else), and
            # each one sound (a NaN one is encoded again, never carried on)
            if state.get("senses") == encoder.VERSION and len(vectors) == len(made):
                known.update((text, vector) for text, vector, usable in zip(
                    made, vectors, vector_cache.sound(vectors), strict=True) if usable)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            pass  # none there (an older build), or unreadable: encoded again
    out = np.zeros((len(texts), encoder.DIMENSIONS), np.float32)
    new = [n for n, text in enumerate(texts) if text not in known]
    for n, text in enumerate(texts):
        if text in known:
            out[n] = known[text]
    cached = vector_cache.look_up([texts[n] for n in new])
    for n, vector in cached.items():
        out[new[n]] = vector
    encode = [n for i, n in enumerate(new) if i not in cached]
    if encode:
        out[encode] = encoder.Encoder.shared().encode(
            [texts[n] for n in encode], processes=cores(4) if forks() else 1, aside=Aside)
        vector_cache.keep([texts[n] for n in encode], out[encode])
    if new:
        _learn({texts[n]: out[n].copy() for n in new})
    return out


def _learn(encoded: dict[str, np.ndarray]) -> None:
    """Remember passages encoded (at most ENCODED_KEPT; those `Building` learned on a
    thread are here already, and stay)."""
    if len(_encoded) + len(encoded) > ENCODED_KEPT:
        _encoded.clear()
    _encoded.update(dict(list(encoded.items())[:ENCODED_KEPT]))


def _sound(folder: Path) -> bool:
    """Whether a live group's sentence vectors may be linked as they are: every one sound
    (`vector_cache.sound`: a build made from a damaged cache may hold NaN, and a NaN
    passage answers nothing)."""
    try:
        matrices = [np.load(folder / name, mmap_mode="r")
                    for name in (search.SENSES, SENTENCE_SENSES)]
    except (OSError, ValueError):
        return False
    return all(matrix.ndim == 2 and vector_cache.sound(matrix).all() for matrix in matrices)


def _mark(folder: Path) -> str | None:
    try:
        found = json.loads((folder / search.PASSAGE_ROWS).read_bytes()).get("mark")
        return found if isinstance(found, str) else None
    except (OSError, ValueError, AttributeError):
        return None

