"""The library's page for people, `/library/`: each public document of the library with its
pages, its description and a link to download its PDF, and a form that asks the library.

The form is its page's script's (`library.js`): it sends the reader's question and key to
`POST /api/library/ask` (on the node's own address, which the sidecar answers, or the CDN
sends to it) and shows the passages and answer it gets, each passage linked to its page of
the PDF. A browser without JavaScript gets the list and downloads, and is told how to ask
with any HTTP client. A copy of the site with no sidecar behind it says where the node's
sidecar is.

Only public documents are listed; a node with none has no library page and no link to one
(`has_page`): a restricted document leaves no trace on any page, not even a count."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import date
from typing import Any

from markupsafe import Markup

from exporter.contract.page_urls import LIBRARY_HREF, file_of, record_href
from exporter.contract.wire import ASK_LIMIT_DEFAULT, PUBLIC, QUESTION_MAX, document_url
from exporter.library.documents import Document
from exporter.pipeline.outputs import OutputFile, constant
from exporter.project.content import SourceRecord
from exporter.site.pages import Site
from exporter.site.values import markdown_html

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")  # (not the machine's locale's)


def has_page(documents: Iterable[Document]) -> bool:
    """Whether the node has a library page: it has a public document."""
    return any(d.access == PUBLIC for d in documents)


def files(site: Site, documents: list[Document], sources: dict[str, SourceRecord]
          ) -> list[OutputFile]:
    """The library's page, or none without a public document. `sources` holds each public
    record's content, by id."""
    listed = sorted((d for d in documents if d.access == PUBLIC),
                    key=lambda d: (d.title.casefold(), d.id))
    if not listed:
        return []
    data = site.render("library.html", here=LIBRARY_HREF,
                       documents=[_described(d, sources[d.id]) for d in listed],
                       longest=QUESTION_MAX, limit=ASK_LIMIT_DEFAULT)
    return [constant(file_of(LIBRARY_HREF), data, hashlib.sha256(data).hexdigest())]


def _described(document: Document, source: SourceRecord) -> dict[str, Any]:
    """What the page shows of one document."""
    fields = source.fields
    published = _date(fields.get("published"))
    authors = [str(a) for a in fields.get("authors") or [] if str(a).strip()]
    return {"title": document.title, "record": record_href("resources", document.id),
            "pdf": document_url("", document.id), "pages": len(document.pages),
            "size": _size(document.pdf.stat().st_size),
            "summary": str(fields.get("summary") or ""),
            "body": Markup(markdown_html(str(fields.get("body") or ""))),
            "authors": ", ".join(authors), "published": published,
            "licence": str(fields.get("licence") or "")}


def _date(value: object) -> tuple[str, str] | None:
    """A date as the page writes it, "1 March 2025", with its machine form."""
    try:
        day = date.fromisoformat(str(value)[:10])
    except ValueError:
        return None
    return day.isoformat(), f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def _size(size: int) -> str:
    if size < 1000 * 1000:
        return f"{max(1, round(size / 1000))} kB"
    return f"{size / 1000 / 1000:.1f} MB"

