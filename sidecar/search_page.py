"""The search page with its results, for readers without JavaScript: `/search/?q=...`
answered with the page the export wrote (site_out/search/index.html, from
exporter/site/templates/search.html), its form holding the query and its results section
the results, in the markup the page's own script writes on a static copy of the site
(exporter/site/templates/search.js). The page has one look whoever writes its results, and
the sidecar needs no template of its own: the collections' titles and the number of
results listed are read from the page too.

The results are an anonymous caller's, through the service layer (`service.search`): a
browser sends no key with a form, and the page, like every page for people, shows public
records only (`handlers.handle` answers pages with an anonymous view, whatever key the
request carries)."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlencode

from exporter.contract.page_urls import record_href
from exporter.contract.scientific_names import name_html

from . import service
from .errors import APIError
from .visibility import View

_BOX = 'id="q" name="q"'
_REGION = re.compile(r'<section id="results"([^>]*)>.*?</section>', re.S)
_STATE = 'data-state="static"'
_LIMIT = re.compile(r'data-limit="([1-9][0-9]*)"')
_OPTION = re.compile(r'<option value="([a-z]+)">([^<]*)</option>')
_MARKS = re.compile(r"(<mark>|</mark>)")
# What the page writes of a reader's words (the form's box, the results' heading) holds no
# C0 or C1 control character but the tab and the line feed (a NUL, an ESC: no reader shows
# one, a terminal or a copy may act on it), and no bidirectional control (the marks U+061C,
# U+200E and U+200F, the embeddings and overrides U+202A to U+202E, the isolates U+2066 to
# U+2069), which would show the words, and the page after them, in another order than they
# were typed: each is replaced with U+FFFD, so the reader sees that something was there.
# search.js writes the words by the same rule (`plain`).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(text: str) -> str:
    """A reader's words as the page writes them: controls dropped, bidirectional controls
    replaced with U+FFFD (other letters, accents, "×" and every script kept)."""
    return _BIDI.sub("\ufffd", _CONTROLS.sub("", text))


def _escaped(text: str) -> str:
    return html.escape(text, quote=True)


class SearchPage:
    """The exported page, read for what its results are written with."""

    def __init__(self, exported: bytes, href: str) -> None:
        self.text = exported.decode("utf-8")
        self.href = href
        region = _REGION.search(self.text)
        limit = _LIMIT.search(region.group(1)) if region else None
        if region is None or limit is None or _STATE not in region.group(1) or \
                self.text.count(_BOX) != 1:
            raise APIError("the exported search page has no form or results section this "
                           "node can fill; run `fednode export` again")
        self.region = region
        self.limit = int(limit.group(1))
        self.titles = {name: html.unescape(title) for name, title in _OPTION.findall(self.text)}

    def filled(self, q: str, collection: str, results: str) -> bytes:
        """The page with `q` in its box, `collection` chosen and `results` in its section."""
        attributes = self.region.group(1).replace(_STATE, 'data-state="server"')
        text = (self.text[:self.region.start()] + f'<section id="results"{attributes}>'
                + results + "</section>" + self.text[self.region.end():])
        text = text.replace(_BOX, f'{_BOX} value="{_escaped(plain(q))}"', 1)
        if collection in self.titles:
            option = f'<option value="{collection}">'
            text = text.replace(option, f'<option value="{collection}" selected>', 1)
        return text.encode("utf-8")

    def link(self, q: str, collection: str) -> str:
        """The page's address for these words in this collection ("": all of them)."""
        query = {"q": q, **({"collections": collection} if collection else {})}
        return f"{self.href}?{urlencode(query)}"

    def results(self, found: dict[str, Any], collection: str) -> str:
        """The results section's content for a search's answer (`service.search`)."""
        q, counts, items = found["query"], found["counts"], found["items"]
        total = sum(counts.values())
        where = f" in {self.titles.get(collection, collection)}" if collection else ""
        parts = [heading(f"Results for “{plain(q)}”{where}")]
        if not total:
            parts.append('<p class="summary">No public record matches these words.</p>')
        else:
            best = f"; the best {len(items)} are listed" if total > len(items) else ""
            noun = "record" if total == 1 else "records"
            parts.append(f'<p class="summary">{total} {noun} found{best}.</p>')
        parts.append(self.counts(q, counts, collection))
        if items:
            parts.append('<ol class="found">' + "".join(self.item(item) for item in items)
                         + "</ol>")
        return "".join(parts)

    def counts(self, q: str, counts: dict[str, int], collection: str) -> str:
        """Each collection searched with its matches, a link to narrow the search to it;
        once narrowed, a link back to all of them."""
        listed = []
        for name, count in counts.items():
            title = _escaped(self.titles.get(name, name))
            if count and not collection:
                title = f'<a href="{_escaped(self.link(q, name))}">{title}</a>'
            listed.append(f"<li>{title} {count}</li>")
        if collection:
            listed.append(f'<li><a href="{_escaped(self.link(q, ""))}">All collections</a></li>')
        return ('<nav class="counts" aria-label="Results by collection"><ul>'
                + "".join(listed) + "</ul></nav>")

    def item(self, item: dict[str, Any]) -> str:
        href = _escaped(record_href(item["collection"], item["id"]))
        title = (name_html(item["title"]) if item["collection"] == "species" and item["title"]
                 else _escaped(item["title"] or item["id"]))
        where = _escaped(self.titles.get(item["collection"], item["collection"]))
        member = item.get("source_node_name")  # on a hub: the member the record comes from
        if isinstance(member, str) and member:
            where += f' · from <span class="member">{_escaped(member)}</span>'
        shown = snippet(item["snippet"]) if item["snippet"] else ""
        return (f'<li><h3><a href="{href}">{title}</a></h3><p class="where">{where}</p>'
                f"{shown}</li>")


def heading(text: str) -> str:
    return f'<h2 id="results-title" tabindex="-1">{_escaped(text)}</h2>'


def snippet(marked: str) -> str:
    """A search answer's snippet (escaped text, the query's words in <mark>) as a paragraph
    whose only element is <mark>: its text is read back and escaped again, so nothing else
    in it can reach the page as markup."""
    out, inside = [], False
    for part in _MARKS.split(marked):
        if part in ("<mark>", "</mark>"):
            inside = part == "<mark>"
        elif part:
            text = _escaped(html.unescape(part))
            out.append(f"<mark>{text}</mark>" if inside else text)
    return f'<p class="snippet">{"".join(out)}</p>'


async def answer(view: View, page: SearchPage, q: str, collection: str) -> bytes:
    """The page with the results of `q` in `collection` ("": every collection), as the
    view's caller may read them."""
    found = await service.search(view, text=q, collections=(collection,) if collection
                                 else None, limit=page.limit, mode="hybrid")
    return page.filled(q, collection, page.results(found, collection))


def refused(page: SearchPage, q: str, collection: str, message: str) -> bytes:
    """The page saying why a search was not made, or failed, its words kept in the form."""
    return page.filled(q, collection,
                       heading("Results") + f'<p class="error">{_escaped(plain(message))}</p>')
