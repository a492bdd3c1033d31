#!/usr/bin/env python3
"""Build the document library's PDFs from their source texts.

    python scripts/build_library.py            # build every scripts/library/*.txt
    python scripts/build_library.py --check    # build, then read the PDFs back with pypdf

Each source text scripts/library/<slug>.txt becomes content/library/<slug>.pdf. A source
text starts with `key: value` lines (title, authors, year, and optionally access), then one
block per printed page, each opened by a line `===== page <label>`. Labels are lower-case
roman numerals for the front matter (i, ii, iii...) followed by arabic numbers from 1 for
the body. Inside a page, a blank line starts a new paragraph, a line starting with "# " is
a heading, and *asterisks* mark italics (species names).

One source page is exactly one PDF page: a page whose text does not fit is an error (shorten
the text). The printed labels are written to the PDF's /PageLabels number tree, so that a
reader (pypdf's `page_labels`) returns them, and printed in each page's footer. The output
is deterministic (reportlab's invariant mode): rebuilding unchanged sources gives identical
bytes. The metadata records content/library/<slug>.md are written by hand, not here.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab import rl_config
from reportlab.lib.colors import HexColor
from reportlab.lib.enums import TA_CENTER
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Frame, Paragraph, Spacer

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "scripts" / "library"
OUTPUT = ROOT / "content" / "library"

PAGE_MARK = re.compile(r"^===== page ([0-9]+|[ivxlcdm]+)\s*$")
HEADER_LINE = re.compile(r"^([a-z]+):\s*(.*)$")
ROMAN = re.compile(r"^[ivxlcdm]+$")

FONT_DIR = Path(rl_config.__file__).resolve().parent / "fonts"
FONTS = {"Vera": "Vera.ttf", "Vera-Bold": "VeraBd.ttf", "Vera-Italic": "VeraIt.ttf",
         "Vera-BoldItalic": "VeraBI.ttf"}

WIDTH, HEIGHT = A4
MARGIN_X = 22 * mm
MARGIN_TOP = 22 * mm
MARGIN_BOTTOM = 24 * mm
INK = HexColor("#1f2a24")
MUTED = HexColor("#5b6b62")
ACCENT = HexColor("#2e5e4e")


@dataclass
class SourcePage:
    label: str
    line: int
    blocks: list[tuple[str, str]] = field(default_factory=list)  # ("h" | "p", text)


@dataclass
class Source:
    slug: str
    title: str
    authors: str
    year: str
    access: str
    pages: list[SourcePage]


class SourceError(Exception):
    pass


# --- reading the source texts -------------------------------------------------------------

def parse(path: Path) -> Source:
    lines = path.read_text("utf-8").splitlines()
    header: dict[str, str] = {}
    start = 0
    while start < len(lines) and not PAGE_MARK.match(lines[start]):
        text = lines[start].strip()
        if text:
            m = HEADER_LINE.match(text)
            if not m:
                raise SourceError(f"{path.name}:{start + 1}: expected `key: value` before the "
                                  f"first page, found {text!r}")
            header[m.group(1)] = m.group(2).strip()
        start += 1
    for key in ("title", "authors", "year"):
        if not header.get(key):
            raise SourceError(f"{path.name}: the header needs `{key}:`")
    pages: list[SourcePage] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            pages[-1].blocks.append(("p", " ".join(paragraph)))
            paragraph.clear()

    for n in range(start, len(lines)):
        raw = lines[n]
        m = PAGE_MARK.match(raw)
        if m:
            if pages:
                flush()
            pages.append(SourcePage(m.group(1), n + 1))
            continue
        text = raw.strip()
        if not text:
            flush()
        elif text.startswith("# "):
            flush()
            pages[-1].blocks.append(("h", text[2:].strip()))
        else:
            paragraph.append(text)
    if pages:
        flush()
    if not pages:
        raise SourceError(f"{path.name}: no `===== page` blocks")
    for page in pages:
        if not page.blocks:
            raise SourceError(f"{path.name}:{page.line}: page {page.label} is empty")
    _check_labels(path.name, [p.label for p in pages])
    return Source(path.stem, header["title"], header["authors"], header["year"],
                  header.get("access", "public"), pages)


def roman(n: int) -> str:
    out = ""
    for value, numeral in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"),
                           (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"),
                           (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out, n = out + numeral, n - value
    return out


def _check_labels(name: str, labels: list[str]) -> None:
    """Front matter i, ii, iii... then body 1, 2, 3..., with no gaps."""
    front = [label for label in labels if ROMAN.match(label)]
    expected = [roman(k + 1) for k in range(len(front))]
    expected += [str(k + 1) for k in range(len(labels) - len(front))]
    if labels != expected:
        raise SourceError(f"{name}: page labels must run i, ii, ... then 1, 2, ...; "
                          f"found {labels}")


# --- writing the PDFs ---------------------------------------------------------------------

def register_fonts() -> None:
    for name, file in FONTS.items():
        if name not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont(name, str(FONT_DIR / file)))
    pdfmetrics.registerFontFamily("Vera", normal="Vera", bold="Vera-Bold",
                                  italic="Vera-Italic", boldItalic="Vera-BoldItalic")


def styles() -> dict[str, ParagraphStyle]:
    body = ParagraphStyle("body", fontName="Vera", fontSize=11, leading=16,
                          textColor=INK, spaceAfter=7, hyphenationLang="",
                          embeddedHyphenation=0, uriWasteReduce=0)
    return {
        "p": body,
        "h": ParagraphStyle("h", parent=body, fontName="Vera-Bold", fontSize=13.5,
                            leading=18, textColor=ACCENT, spaceBefore=5, spaceAfter=7),
        "title": ParagraphStyle("title", parent=body, fontName="Vera-Bold", fontSize=23,
                                leading=30, textColor=ACCENT, alignment=TA_CENTER,
                                spaceBefore=40 * mm, spaceAfter=14),
        "cover": ParagraphStyle("cover", parent=body, fontSize=11, leading=16,
                                alignment=TA_CENTER, spaceAfter=9),
    }


def markup(text: str) -> str:
    """Plain text with *italics* as reportlab paragraph markup."""
    if text.count("*") % 2:
        raise SourceError(f"unbalanced * in: {text[:80]!r}")
    parts = escape(text).split("*")
    return "".join(f"<i>{part}</i>" if k % 2 else part for k, part in enumerate(parts))


def plain(text: str) -> str:
    return text.replace("*", "")


def build(source: Source, out: Path) -> None:
    st = styles()
    canvas = Canvas(str(out), pagesize=A4, invariant=1, pageCompression=1)
    canvas.setTitle(source.title)
    canvas.setAuthor(source.authors)
    canvas.setSubject(f"{source.authors}, {source.year}"
                      + ("" if source.access == "public"
                         else f"; restricted to access group '{source.access}'"))
    canvas.setCreator("fednode scripts/build_library.py")
    canvas.setProducer("ReportLab")
    canvas.setKeywords(source.slug)
    # /PageLabels: one entry where each numbering style starts.
    first_body = next((k for k, p in enumerate(source.pages) if not ROMAN.match(p.label)),
                      None)
    if first_body != 0:
        canvas.addPageLabel(0, "ROMAN_LOWER", 1)
    if first_body is not None:
        canvas.addPageLabel(first_body, "ARABIC", 1)

    frame_args = dict(leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0,
                      showBoundary=0)
    for index, page in enumerate(source.pages):
        frame = Frame(MARGIN_X, MARGIN_BOTTOM, WIDTH - 2 * MARGIN_X,
                      HEIGHT - MARGIN_TOP - MARGIN_BOTTOM, **frame_args)
        story = []
        is_cover = index == 0
        for kind, text in page.blocks:
            if is_cover and kind == "h":
                story.append(Paragraph(markup(text), st["title"]))
            elif is_cover:
                story.append(Paragraph(markup(text), st["cover"]))
            else:
                story.append(Paragraph(markup(text), st[kind]))
        if is_cover:
            story.insert(0, Spacer(1, 1))
        frame.addFromList(story, canvas)
        if story:
            raise SourceError(f"{source.slug}.txt:{page.line}: page {page.label} does not fit "
                              f"on one PDF page; shorten it ({len(story)} block(s) left over)")
        _furniture(canvas, source, page.label, is_cover)
        canvas.showPage()
    canvas.save()


def _furniture(canvas: Canvas, source: Source, label: str, is_cover: bool) -> None:
    canvas.saveState()
    canvas.setStrokeColor(MUTED)
    canvas.setLineWidth(0.4)
    y = MARGIN_BOTTOM - 9 * mm
    canvas.line(MARGIN_X, y + 4.5 * mm, WIDTH - MARGIN_X, y + 4.5 * mm)
    canvas.setFillColor(MUTED)
    canvas.setFont("Vera", 8)
    if source.access != "public":
        canvas.drawString(MARGIN_X, HEIGHT - 12 * mm,
                          f"RESTRICTED: access group {source.access}. Do not circulate.")
    if not is_cover:
        canvas.drawString(MARGIN_X, y, plain(source.title))
    canvas.setFont("Vera", 9)
    canvas.drawRightString(WIDTH - MARGIN_X, y, label)
    canvas.restoreState()


# --- checking the PDFs --------------------------------------------------------------------

def _flat(text: str) -> str:
    return " ".join(text.split())


def check(source: Source, out: Path) -> list[str]:
    """Read the PDF back: page count, labels, metadata, and every block's text on its page."""
    from pypdf import PdfReader

    reader = PdfReader(out)
    problems = []
    labels = [p.label for p in source.pages]
    if len(reader.pages) != len(source.pages):
        problems.append(f"{len(reader.pages)} PDF pages for {len(source.pages)} source pages")
    if list(reader.page_labels) != labels:
        problems.append(f"page labels {list(reader.page_labels)} != {labels}")
    meta: dict[str, object] = dict(reader.metadata or {})
    if meta.get("/Title") != source.title or meta.get("/Author") != source.authors:
        problems.append(f"metadata {meta.get('/Title')!r} / {meta.get('/Author')!r}")
    for page, pdf_page in zip(source.pages, reader.pages, strict=False):
        text = _flat(pdf_page.extract_text() or "")
        for _, block in page.blocks:
            if _flat(plain(block)) not in text:
                problems.append(f"page {page.label}: text not extracted as written: "
                                f"{plain(block)[:70]!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="read the PDFs back with pypdf and compare with the sources")
    parser.add_argument("slugs", nargs="*", help="build only these (default: all)")
    args = parser.parse_args(argv)
    register_fonts()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    paths = sorted(SOURCES.glob("*.txt"))
    if args.slugs:
        paths = [p for p in paths if p.stem in args.slugs]
    failed = False
    for path in paths:
        try:
            source = parse(path)
            out = OUTPUT / f"{source.slug}.pdf"
            temporary = out.with_suffix(".pdf.tmp")
            build(source, temporary)
            os.replace(temporary, out)
        except SourceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed = True
            continue
        words = sum(len(plain(t).split()) for p in source.pages for _, t in p.blocks)
        print(f"{out.relative_to(ROOT)}: {len(source.pages)} pages "
              f"({', '.join(p.label for p in source.pages)}), {words} words")
        if args.check:
            for problem in check(source, out):
                print(f"  check: {problem}", file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
