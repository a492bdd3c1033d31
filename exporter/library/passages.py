"""Passages of a PDF's pages: the pages' text without running headers and footers
(`without_furniture`), cut into passages of whole sentences (`passages`), each with the spans
of its headings."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.shared import search

PASSAGE_CHARS = 600  # a passage: whole sentences of one page, up to about this long
EDGE_LINES = 2  # lines at the top and at the bottom of a page where furniture is looked for


@dataclass(frozen=True)
class Page:
    """One page of a library PDF, as passages are made from it."""

    number: int  # 1-based, physical
    label: str  # as printed (the PDF's /PageLabels), or the number
    text: str
    headings: frozenset[str] = frozenset()  # its lines set larger than its body text


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
