"""A record's values as HTML for its page: each controlled value by its label
(`exporter.project.labels`), dates in words in `<time>`, scientific names in `<i>`, nested
records as small tables, booleans as yes/no, http(s) URLs as links, and Markdown bodies
rendered with a CommonMark library and sanitised (or, for search snippets, as plain text).

Every text from content is escaped as the templates' autoescape escapes it; the Markdown
renderer emits no raw HTML from content and no link or image whose URL has a scheme other
than http, https or mailto (no `javascript:`, `data:`, `vbscript:` ...)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

from exporter.project.labels import field_label, labels, value_label
from exporter.project.schemas import collections
from exporter.site.dates import date_html

# an http(s) URL inside a text, less the punctuation that ends a sentence or list
_URL = re.compile(r"https?://[^\s<>\"'|]+(?<![.,;:!?)\]])", re.IGNORECASE)
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):", re.IGNORECASE)
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def escaped(text: str) -> str:
    """A text as the templates' autoescape writes it (`markupsafe.escape`, to the byte)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("'", "&#39;").replace('"', "&#34;"))


@cache
def date_fields() -> frozenset[str]:
    """The fields whose values are dates or times: those of a `date` or `date-time` format
    in any schema, and a distribution's `eventDate`."""
    found = {"eventDate"}
    for collection in collections().values():
        for name, spec in collection.schema["properties"].items():
            if spec.get("format") in ("date", "date-time"):
                found.add(name)
    return frozenset(found)


def is_shown(value: Any) -> bool:
    """Whether a value has anything to show (empty values get no row)."""
    return value not in (None, "", [], {})


def scalar_html(value: Any) -> str:
    """One plain value: yes/no for a boolean, else its text with each http(s) URL in it a
    link (a resource's `url`, a dataset's DOI, the sources a checklist cites)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    text, out, done = str(value), [], 0
    for found in _URL.finditer(text):
        url = escaped(found.group())
        out.append(f'{escaped(text[done:found.start()])}<a href="{url}">{url}</a>')
        done = found.end()
    out.append(escaped(text[done:]))
    return "".join(out)


def value_html(value: Any, field: str = "") -> str:
    """Any value of `field`: a list of records as a table, one record as a two-column table,
    a list of plain values separated by commas, a controlled value by its label, a date in
    words, a plain value as `scalar_html`."""
    if isinstance(value, dict):
        return _pairs_table(value)
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, dict) for item in value):
            return _records_table(value)
        return ", ".join(value_html(item, field) for item in value if is_shown(item))
    if isinstance(value, str) and field in labels().values:
        return escaped(value_label(field, value))
    if isinstance(value, str) and field in date_fields():
        return date_html(value)
    return scalar_html(value)


def _records_table(records: Sequence[dict[str, Any]]) -> str:
    """Records as rows, one column for each key any of them has (in first-seen order), so
    that a distribution's region, status and pathway read across."""
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    head = "".join(f'<th scope="col">{escaped(field_label(str(c)))}</th>' for c in columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{value_html(r.get(c), c) if is_shown(r.get(c)) else ''}</td>"
                         for c in columns) + "</tr>\n"
        for r in records)
    return (f'<table class="nested">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}'
            "</tbody>\n</table>")


def _pairs_table(record: dict[str, Any]) -> str:
    """One record as rows of name and value."""
    rows = "".join(f'<tr><th scope="row">{escaped(field_label(str(k)))}</th>'
                   f"<td>{value_html(v, str(k))}</td></tr>\n"
                   for k, v in record.items() if is_shown(v))
    return f'<table class="nested">\n<tbody>\n{rows}</tbody>\n</table>'


def safe_url(url: str) -> bool:
    """Whether a link or image URL from content may be written: a relative URL, or one
    whose scheme is http, https or mailto. Control characters and spaces are ignored as
    browsers ignore them when they read a scheme."""
    squeezed = re.sub(r"[\x00-\x20\x7f]+", "", url)
    found = _SCHEME.match(squeezed)
    return found is None or found.group(1).lower() in SAFE_SCHEMES


def _headings_below_the_title(state: StateCore) -> None:
    """A body's headings moved so that its highest is <h2>: the page's <h1> is its title,
    and no level is skipped after it (`#` and `##` alike start at <h2>)."""
    headings = [t for t in state.tokens if t.type in ("heading_open", "heading_close")]
    if headings:
        shift = 2 - min(int(t.tag[1:]) for t in headings)
        for token in headings:
            token.tag = f"h{min(6, int(token.tag[1:]) + shift)}"


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with raw HTML off (content's tags are shown as text) and only
    `safe_url` links and images."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = safe_url  # type: ignore[method-assign]
    md.core.ruler.push("headings_below_the_title", _headings_below_the_title)
    return md


def markdown_html(text: str) -> str:
    """A Markdown body as HTML: emphasis, lists, links, headings, code; sanitised."""
    if not text.strip():
        return ""
    return _markdown().render(text)


_BREAKS = frozenset({"softbreak", "hardbreak"})


def plain_text(text: str) -> str:
    """A Markdown body as the plain text a reader sees on its page: no `**`, `#`, link
    targets or tags; a line between blocks."""
    lines: list[str] = []
    for token in _markdown().parse(text):
        if token.type == "inline":
            words = "".join(" " if child.type in _BREAKS else child.content
                            for child in token.children or ()
                            if child.type in ("text", "code_inline", *_BREAKS))
            lines.append(" ".join(words.split()))
        elif token.type in ("code_block", "fence"):
            lines.append(" ".join(token.content.split()))
    return "\n".join(line for line in lines if line)
