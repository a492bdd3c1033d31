"""One PDF's text, read with pypdf: each page's printed label, its text without invisible
characters, and its headings (lines set larger than its body text). A hostile or broken file
is refused with a ValueError, never a crash, and never read beyond the limits below."""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exporter.shared.errors import Problem

# A line whose characters are at least this many times the page's body text's size is a
# heading (the body's size: the one most of the page's characters have).
HEADING_SIZE = 1.15
# What a PDF may hold, at most: a hostile or broken file is refused with its path, rather
# than exhaust the export's memory or time (docs/library.md, "Limits").
PDF_BYTES = 256 * 2**20
PAGE_CHARS = 200_000  # characters of text on one page (a dense page holds about 5,000)
PDF_CHARS = 20_000_000  # characters of text in one PDF (a 1,000-page book: about 3 million)
LABEL_CHARS = 64  # a printed page label
# Characters dropped from a PDF's text: controls (but line breaks and tabs), direction
# overrides and invisible ones, which a quote would carry to a client or which split words.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2069\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character: never valid text


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
def warnings_named(rel: str) -> Iterator[None]:
    """pypdf's warnings meanwhile each a line on standard error naming the PDF `rel`
    (`_Named`), not passed on to the root logger."""
    reader = logging.getLogger("pypdf")
    handler, kept = _Named(rel), reader.propagate
    reader.addHandler(handler)
    reader.propagate = False
    try:
        yield
    finally:
        reader.removeHandler(handler)
        reader.propagate = kept


def bytes_of(pdf: Path) -> bytes:
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


def _clean(text: str) -> str:
    """Text without invisible characters, and with half characters made replacement ones."""
    return _SURROGATE.sub("\ufffd", _INVISIBLE.sub("", text))


def read_pages(data: bytes) -> list[list[Any]]:
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
        raise  # (`documents._guarded` says how much was allowed)
    except Exception as exc:  # noqa: BLE001 - a damaged or hostile file can make the
        # reader fail in any way (NotImplementedError, struct and zlib errors, recursion
        # among them): each is "this PDF cannot be read", never a crash
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
