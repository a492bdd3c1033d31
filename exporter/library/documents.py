"""The document library: PDFs in `content/library/`, each with its resources record beside
it. The export reads each PDF page by page (pypdf), keeps the printed page labels, splits
the pages into passages of whole sentences, and indexes them with the search engine
(`search`: tantivy and wordllama), one index per access group as for records, into the
bundle's `passages/<group>/`. Public PDFs are published under `site_out/library/`; every
PDF is in the bundle, for the sidecar to serve to the keys that may read it."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from exporter.contract.bundle import PASSAGES
from exporter.contract.wire import PUBLIC
from exporter.indexing import writing
from exporter.pipeline.cache import LIBRARY_PAGES
from exporter.pipeline.forks import Aside, cores, forks, in_child
from exporter.pipeline.switch import OutputFile, private_folder
from exporter.project.content import LIBRARY, SourceRecord, version_of
from exporter.shared import encoder, search, word_vectors
from exporter.shared.errors import Problem

CACHE = LIBRARY_PAGES  # in .fednode/cache: the pages of each PDF, by path and version
PASSAGE_CHARS = 600  # a passage: whole sentences of one page, up to about this long
# How passages are made from pages: a new number makes the next export index them again.
# 2: running headers and footers left out. 4: each row with its headings' spans.
PASSAGE_FORMAT = 4
# A line whose characters are at least this many times the page's body text's size is a
# heading (the body's size: the one most of the page's characters have).
HEADING_SIZE = 1.15
EDGE_LINES = 2  # lines at the top and at the bottom of a page where furniture is looked for
# What a PDF may hold, at most: a hostile or broken file is refused with its path, rather
# than exhaust the export's memory or time (docs/library.md, "Limits").
PDF_BYTES = 256 * 2**20
PAGE_CHARS = 200_000  # characters of text on one page (a dense page holds about 5,000)
PDF_CHARS = 20_000_000  # characters of text in one PDF (a 1,000-page book: about 3 million)
LABEL_CHARS = 64  # a printed page label
READ_SECONDS = 120.0  # to read one PDF, in a process of its own (where the export forks)
READ_MEMORY = 2 * 2**30  # bytes of memory that process may take beyond the export's own
# Characters dropped from a PDF's text: controls (but line breaks and tabs), direction
# overrides and invisible ones, which a quote would carry to a client or which split words.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2069\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character: never valid text


@dataclass(frozen=True)
class Page:
    number: int  # 1-based, physical
    label: str  # as printed (the PDF's /PageLabels), or the number
    text: str
    headings: frozenset[str] = frozenset()  # its lines set larger than its body text


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
    read = _read_each([(rel, pdf) for _, rel, pdf, entry in described if entry is None])
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


def _read_each(pdfs: list[tuple[str, Path]]) -> dict[str, Read]:
    """Each PDF read (`_guarded`): its cache entry (version, SHA-256, pages), or the error
    that says why it has none. Where the export forks, as many are read at once as it has
    cores, each in a process of its own, and as many PDFs are held in memory: a first
    export's PDFs were read one after the other, the other core idle (0.9 s of a
    100,000-record node's first export, half the sample's reading). Elsewhere (a process
    that also serves: the tests) one after the other, on a thread, as before."""
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
                    data = _bytes_of(pdf)
                except (OSError, ValueError) as exc:
                    results[rel] = exc
                    continue
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                with _warnings_named(rel):  # (a forked reader's warnings name its PDF)
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


class _Named(logging.Handler):
    """pypdf's warnings while it reads one PDF (a damaged file it could read all the same),
    each a line on standard error that names the PDF, not a bare message."""

    def __init__(self, rel: str) -> None:
        super().__init__(logging.WARNING)
        self.rel = rel

    def emit(self, record: logging.LogRecord) -> None:
        # a Problem's line: printable, escaped and capped as every message of the export is
        sys.stderr.write(f"{Problem(self.rel, 0, '', f'warning: pypdf: {record.getMessage()}')}\n")


@contextmanager
def _warnings_named(rel: str) -> Iterator[None]:
    reader = logging.getLogger("pypdf")
    handler, kept = _Named(rel), reader.propagate
    reader.addHandler(handler)
    reader.propagate = False
    try:
        yield
    finally:
        reader.removeHandler(handler)
        reader.propagate = kept


def _bytes_of(pdf: Path) -> bytes:
    """A PDF's bytes: a regular file of at most PDF_BYTES (not a device, a pipe or a link to
    one, which could be read for ever)."""
    descriptor = os.open(pdf, os.O_RDONLY | os.O_NONBLOCK)  # (a pipe's open would wait)
    with open(descriptor, "rb", buffering=0) as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("not a regular file")
        data = handle.read(PDF_BYTES + 1)
    if len(data) > PDF_BYTES:
        raise ValueError(f"larger than {PDF_BYTES // 2**20} MiB")
    return data


def _guarded(data: bytes) -> list[list[Any]]:
    """`_read`, in a process of its own where the export forks (the command): killed after
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
    return _read(data)


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", _INVISIBLE.sub("", text))


def _read(data: bytes) -> list[list[Any]]:
    """[label, text, headings] of each page (`_headings`), the text without invisible
    characters (`_clean`). Any failure of the reader, or a PDF beyond the limits above, is a
    ValueError."""
    import io

    from pypdf import PdfReader
    try:
        reader = PdfReader(io.BytesIO(data))
        labels = list(reader.page_labels)
        out: list[list[Any]] = []
        total = 0
        for n, page in enumerate(reader.pages):
            runs: list[tuple[str, float]] = []

            def drawn(text: str, cm: list[float], tm: list[float], font: Any, size: float,
                      runs: list[tuple[str, float]] = runs) -> None:
                runs.append((text, _size(size, cm, tm)))
            text = _clean(page.extract_text(visitor_text=drawn) or "")
            label = _clean(labels[n] if n < len(labels) else str(n + 1))
            total += len(text)
            if len(text) > PAGE_CHARS or total > PDF_CHARS or len(label) > LABEL_CHARS:
                raise _TooMuch(
                    f"page {n + 1} " + (f"holds {len(text):,} characters of text; a page may "
                                        f"hold {PAGE_CHARS:,}" if len(text) > PAGE_CHARS else
                                        f"brings its text to {total:,} characters; a PDF may "
                                        f"hold {PDF_CHARS:,}" if total > PDF_CHARS else
                                        f"has a label of {len(label):,} characters; a label "
                                        f"may have {LABEL_CHARS}"))
            out.append([label, text, [_clean(line) for line in _headings(runs)]])
        return out
    except _TooMuch as exc:
        raise ValueError(str(exc)) from None
    except MemoryError:
        raise  # (`_guarded` says how much was allowed)
    except Exception as exc:  # noqa: BLE001 - a damaged or hostile file can make the
        # reader fail in any way (hypothesis found NotImplementedError, struct and zlib
        # errors, recursion): each is "this PDF cannot be read", never a crash
        raise ValueError(f"{type(exc).__name__}: {str(exc)[:200]}") from None


class _TooMuch(Exception):
    """A PDF beyond the limits above."""


def _size(size: float, cm: list[float], tm: list[float]) -> float:
    """The height text is drawn at: its font size, scaled by the text and page matrices."""
    return abs(size) * math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])


def _headings(runs: list[tuple[str, float]]) -> list[str]:
    """The lines of a page (the runs of text the reader drew, each with its size, a line
    ending where a run's text has a line break) whose every run is set at least
    HEADING_SIZE times larger than most of the page's characters."""
    chars: dict[float, int] = {}
    for text, size in runs:
        chars[round(size, 1)] = chars.get(round(size, 1), 0) + len(text.strip())
    if not chars:
        return []
    body = max(chars, key=lambda size: (chars[size], -size))
    found: list[str] = []
    line, large = "", True
    for text, size in runs:
        for n, part in enumerate(text.split("\n")):
            if n:  # a line break: the line so far is whole
                if line.strip() and large:
                    found.append(line.strip())
                line, large = "", True
            line += part
            if part.strip() and round(size, 1) < body * HEADING_SIZE:
                large = False
    if line.strip() and large:
        found.append(line.strip())
    return found


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


def without_furniture(pages: list[tuple[str, str]]) -> list[str]:
    """Each page's text (label, text) without its running header and footer: the lines at
    a page's top or bottom that are its printed label, or that stand at the top or bottom of
    at least half the document's pages (and of three at least), such as its title. They are
    on the page, but they are not what it says: a heading joined to the first sentence, or
    a title quoted as an answer."""
    split = [[line.strip() for line in text.splitlines() if line.strip()] for _, text in pages]
    edges: dict[str, int] = {}
    for lines in split:
        for line in set(lines[:EDGE_LINES] + lines[-EDGE_LINES:]):
            edges[line] = edges.get(line, 0) + 1
    repeated = {line for line, n in edges.items() if n >= max(3, len(pages) / 2)}
    out = []
    for (label, _), lines in zip(pages, split, strict=True):
        furniture = repeated | {label.strip()}
        start, end = 0, len(lines)
        while start < min(EDGE_LINES, end) and lines[start] in furniture:
            start += 1
        while end > max(start, len(lines) - EDGE_LINES) and lines[end - 1] in furniture:
            end -= 1
        out.append("\n".join(lines[start:end]))
    return out


def passages(page: Page) -> list[tuple[str, list[list[int]]]]:
    """Whole sentences of one page, grouped up to about PASSAGE_CHARS, each passage with the
    spans (start, end) of its sentences that are the page's headings: they are weighed with
    the sentence after them but never quoted with it (`search.statements`)."""
    out: list[tuple[str, list[list[int]]]] = []
    current, spans = "", list[list[int]]()
    for sentence, heading in _bounded(search.marked_sentences(page.text, page.headings)):
        if current and len(current) + len(sentence) > PASSAGE_CHARS:
            out.append((current, spans))
            current, spans = "", []
        current = f"{current} {sentence}" if current else sentence
        if heading:
            spans.append([len(current) - len(sentence), len(current)])
    if current:
        out.append((current, spans))
    return out


def _bounded(sentences: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The sentences, each longer than PASSAGE_CHARS cut at spaces into pieces of at most
    that (a word longer than that, where it must): a page without sentence ends (a table, a
    hostile file) would otherwise be one passage of any length, slow to weigh at every
    question that retrieves it."""
    out = []
    for sentence, heading in sentences:
        while len(sentence) > PASSAGE_CHARS:
            cut = sentence.rfind(" ", 0, PASSAGE_CHARS + 1)
            cut = cut if cut > 0 else PASSAGE_CHARS
            out.append((sentence[:cut].rstrip(), heading))
            sentence = sentence[cut:].lstrip()
        if sentence:
            out.append((sentence, heading))
    return out


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
    if live is not None and _mark(live) == mark:
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
    (folder / search.PASSAGE_ROWS).write_text(json.dumps(
        {"mark": mark, "titles": titles, "rows": rows, "senses": encoder.VERSION},
        ensure_ascii=False), "utf-8")
    writing.seal(folder)


# Passages this process encoded last (text -> vector), at most ENCODED_KEPT of them: a
# process that exports several nodes with the same library (the test suite, a script) encodes
# each passage once. A node's own exports take them from its live build (`_senses`).
ENCODED_KEPT = 10_000  # about 15 MB
_encoded: dict[str, np.ndarray] = {}


def _senses(texts: list[str], live: Path | None) -> np.ndarray:
    """Each passage's vector by the sentence encoder: taken from the live build's group
    where it holds the same text (an unchanged PDF beside a changed one is not encoded
    again), or from what this process encoded last, encoded otherwise (about 40 ms a
    passage)."""
    known: dict[str, np.ndarray] = dict(_encoded)
    if live is not None:
        try:
            state = json.loads((live / search.PASSAGE_ROWS).read_bytes())
            rows = state["rows"]
            vectors = np.load(live / search.SENSES)
            # made by this encoder (another version's vectors mean something else)
            if state.get("senses") == encoder.VERSION and \
                    vectors.shape == (len(rows), encoder.DIMENSIONS):
                known.update((str(row[3]), vector)
                             for row, vector in zip(rows, vectors, strict=True))
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            pass  # none there (an older build), or unreadable: encoded again
    out = np.zeros((len(texts), encoder.DIMENSIONS), np.float32)
    new = [n for n, text in enumerate(texts) if text not in known]
    for n, text in enumerate(texts):
        if text in known:
            out[n] = known[text]
    if new:
        out[new] = encoder.Encoder.shared().encode(
            [texts[n] for n in new], processes=cores(4) if forks() else 1, aside=Aside)
        _learn({texts[n]: out[n].copy() for n in new})
    return out


def _learn(encoded: dict[str, np.ndarray]) -> None:
    """Remember passages encoded (at most ENCODED_KEPT; those `Building` learned on a
    thread are here already, and stay)."""
    if len(_encoded) + len(encoded) > ENCODED_KEPT:
        _encoded.clear()
    _encoded.update(dict(list(encoded.items())[:ENCODED_KEPT]))


def _mark(folder: Path) -> str | None:
    try:
        found = json.loads((folder / search.PASSAGE_ROWS).read_bytes()).get("mark")
        return found if isinstance(found, str) else None
    except (OSError, ValueError, AttributeError):
        return None
