"""A taxon's page for people, `/taxa/{name}/`: every member's public records of one taxon,
by member, with a chart of how many each holds.

The page is what `service.taxon` (the service `/api/taxa/{name}` answers from) gives an
anonymous caller, so it shows public records only, whatever key the request carries, and a
taxon that only restricted records name has no page (the same 404 as a name nothing names).
It is written into the hub's exported taxa/index.html (exporter/site/templates/taxa.html):
its title and its `taxon` section are replaced, so the page has the look, navigation and
footer of every other page and the sidecar needs no template of its own; the collections'
titles are read from its navigation. A node's taxon page, like its `/api/taxa/{name}`, has
one holder: itself."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

from exporter.contract.page_urls import record_href
from exporter.shared.bars import count_chart

from .errors import APIError

_REGION = re.compile(r'<section id="taxon" data-state="static" data-of="(hub|node)">.*?'
                     r"</section>", re.S)
_TITLE = re.compile(r"<title>([^<]*)</title>")
_NAV = re.compile(r'<a href="/([a-z]+)/">([^<]*)</a>')


def _escaped(text: object) -> str:
    return html.escape(str(text), quote=True)


class TaxonPage:
    """The exported taxa page, read for what a taxon's page is written into."""

    def __init__(self, exported: bytes) -> None:
        self.text = exported.decode("utf-8")
        region = _REGION.search(self.text)
        title = _TITLE.search(self.text)
        if region is None or title is None:
            raise APIError("the exported taxa page has no section this hub can fill; run "
                           "`fednode hub export` again")
        self.region, self.title = region, title
        self.hub = region.group(1) == "hub"
        self.titles = {name: html.unescape(shown) for name, shown in _NAV.findall(self.text)}

    def filled(self, title: str, content: str) -> bytes:
        """The page titled `title` (before the exported title), its section `content`."""
        text = (self.text[:self.region.start()] + '<section id="taxon" data-state="server">'
                + content + "</section>" + self.text[self.region.end():])
        at = _TITLE.search(text)
        assert at is not None
        text = (text[:at.start(1)] + _escaped(title) + " · " + at.group(1)
                + text[at.end(1):])
        return text.encode("utf-8")

    def answer(self, found: dict[str, Any]) -> bytes:
        """The page of a taxon, from `service.taxon`'s answer."""
        name = found["canonical"]
        shown = name[:1].upper() + name[1:].lower()
        holders = found["holders"]
        counts = found["counts"]
        said = [f"{count} {self._noun(collection, count)}" for collection, count
                in counts.items() if count]
        members = len(holders)
        whose = (f" from {members} member{'' if members == 1 else 's'}: each member's public "
                 f"records" if self.hub else ": the public records")
        parts = [f"<h1><i>{_escaped(shown)}</i></h1>",
                 f"<p>{_escaped(self._listed(said))}{whose} that name <i>{_escaped(shown)}</i>"
                 f", under any authorship{', side by side and never merged' if self.hub else ''}"
                 f". As JSON: <a href=\"/api/taxa/{_escaped(quote(name, safe=''))}\">"
                 f"<code>/api/taxa/{_escaped(name)}</code></a>.</p>"]
        if self.hub:
            parts += ["<h2>Records by member</h2>", chart(shown, holders, self._total)]
        for holder in holders:
            parts.append(self.holder(holder))
        return self.filled(shown, "".join(parts))

    def missing(self, name: str) -> bytes:
        """The page for a name no public record names (answered with 404)."""
        return self.filled("No such taxon", (
            f"<h1>No such taxon</h1><p>No public record of this {'hub' if self.hub else 'node'}"
            " names "
            f"<i>{_escaped(name)}</i>. Search the hub's records from the "
            '<a href="/search/">search page</a>, or browse its <a href="/species/">'
            "species</a>.</p>"))

    def _noun(self, collection: str, count: int) -> str:
        if collection == "species":
            return "species record" if count == 1 else "species records"
        title = self.titles.get(collection, collection).lower()
        return title[:-1] if count == 1 and title.endswith("s") else title

    @staticmethod
    def _listed(said: list[str]) -> str:
        return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]

    @staticmethod
    def _total(holder: dict[str, Any]) -> int:
        return sum(len(value) for key, value in holder.items()
                   if isinstance(value, list) and key != "node")

    def holder(self, holder: dict[str, Any]) -> str:
        """A member's section: its licence, then its records of the taxon, by collection."""
        node = holder["node"]
        licence = holder.get("license")
        out = [f"<section><h2>{_escaped(node['name'])}</h2>",
               f"<p>Licence: {_escaped(licence)}.</p>" if licence else
               "<p>Its node names no licence.</p>"]
        for collection, records in holder.items():
            if not isinstance(records, list) or not records:
                continue
            title = self.titles.get(collection, collection)
            out.append(f"<h3>{_escaped(title)}</h3><ul class=\"records\">")
            for record in records:
                out.append(f"<li>{record_link(collection, record)}</li>")
            out.append("</ul>")
        out.append("</section>")
        return "".join(out)


def record_link(collection: str, record: dict[str, Any]) -> str:
    """A record's line: a link to its page (a species' name in italics, with its common
    name)."""
    href = _escaped(record_href(collection, str(record.get("id", ""))))
    if collection == "species":
        name = record.get("scientificName") or record.get("id")
        line = f'<a href="{href}"><i>{_escaped(name)}</i></a>'
        common = record.get("vernacularName")
        if isinstance(common, str) and common:
            line += f' <span class="vernacular">{_escaped(common)}</span>'
        return line
    return f'<a href="{href}">{_escaped(record.get("title") or record.get("id"))}</a>'


def chart(name: str, holders: list[dict[str, Any]], total: Any) -> str:
    """A bar chart of the records each member holds of the taxon (`shared.bars.count_chart`)."""
    counts = [(str(holder["node"]["name"]), int(total(holder))) for holder in holders]
    return count_chart(counts, f"Records of {name} by member",
                       f"Records of <i>{_escaped(name)}</i> by member", "Member", "chart-title")
