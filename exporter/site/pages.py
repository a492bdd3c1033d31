"""Pages for people: the home page, a page per collection (paged), a page per public record
with schema.org JSON-LD, the search page, `sitemap.xml` and `robots.txt`.

Only public records reach this module (the caller passes them); a restricted record has no
page, no link, no count and no sitemap entry. Each page is an `OutputFile` with a
fingerprint of everything it shows, so an unchanged record's page is not rendered again.

Page URLs never collide with the API's (`/api/...`) nor with the library's PDFs:

    /                                  the home page            index.html
    /{collection}/                     first page of a list     {collection}/index.html
    /{collection}/{page}.html          page 2, 3, ...           {collection}/{page}.html
    /{collection}/{shard}/{id}.html    one record               shard: contract.layout
                                                                (256 folders)
    /search/                           the search page          search/index.html
    /sitemap.xml, /sitemaps/{n}.xml, /robots.txt, /site.css (the one stylesheet)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from xml.sax.saxutils import escape

import jinja2
from markupsafe import Markup

from exporter.contract.endpoints import ENDPOINTS
from exporter.contract.page_urls import LIBRARY_HREF, collection_href, file_of, record_href
from exporter.contract.scientific_names import UPRIGHT, name_html
from exporter.contract.wire import SEARCH_QUERY_MAX
from exporter.pipeline.cache import Cache
from exporter.pipeline.outputs import OutputFile, constant
from exporter.project.config import NodeConfig
from exporter.project.content import SourceRecord
from exporter.project.schemas import Collection
from exporter.site import charts, network, species_page
from exporter.site.record_page import NAMES_SPECIES, record_page_html
from exporter.site.served import Rendered, fingerprint, json_of

PAGE_SIZE = 100  # records listed on one collection page
SITEMAP_MAX = 50_000  # URLs in one sitemap file (the sitemaps.org limit)
TEMPLATES = ("base.html", "nav.html", "footer.html", "index.html", "collection.html",
             "record.html", "search.html", "search.js", "site.css", "taxa.html")
# The search page: its form, and a section its results are written into, by its script from
# /api/search on a static copy of the site, or by the sidecar (sidecar/search_page.py), which
# answers the page with a query; both list SEARCH_LIMIT results, read from the page.
SEARCH_HREF = "/search/"
SEARCH_LIMIT = 20

@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("exporter.site").joinpath(f"templates/{name}")
            .read_text("utf-8")),
        autoescape=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
    )


@cache
def _templates_digest() -> str:
    digest = hashlib.sha256()
    for name in TEMPLATES:
        digest.update(resources.files("exporter.site").joinpath(f"templates/{name}").read_bytes())
    # how values and bodies become HTML, and how they are labelled, shows on every page as
    # much as the templates do
    for module in ("record_page.py", "values.py", "dates.py", "sentence.py", "species_page.py",
                   "network.py", "charts.py"):
        digest.update(resources.files("exporter.site").joinpath(module).read_bytes())
    digest.update(resources.files("exporter.shared").joinpath("bars.py").read_bytes())
    digest.update(resources.files("exporter.project").joinpath("schemas/labels.json")
                  .read_bytes())
    digest.update(resources.files("exporter.contract").joinpath("scientific_names.py")
                  .read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Site:
    """What every page shows besides its own content."""

    node: NodeConfig
    collections: list[dict[str, Any]]  # name, title, description, href, count
    print_: str  # changes whenever any of the above may
    # The parts of base.html alike on every page, rendered once per export rather than on
    # each page
    nav: Markup
    footer: Markup
    library: bool = False  # the node has a library page (`library_page`)

    # record.html made once per collection (`_Skeleton`), by collection name
    skeletons: dict[str, _Skeleton] = dataclasses.field(default_factory=dict)

    def render(self, template: str, **values: Any) -> bytes:
        return _template(template).render(
            node=self.node, collections=self.collections, nav=self.nav, footer=self.footer,
            **values).encode("utf-8")

    def skeleton(self, collection: Collection) -> _Skeleton:
        made = self.skeletons.get(collection.name)
        if made is None:
            made = self.skeletons[collection.name] = _Skeleton(self, collection)
        return made


# What record.html shows that differs from one record's page to the next; everything else
# on the page is the same for a whole collection.
_PER_PAGE = ("title", "heading", "lead", "here", "json_path", "json_ld", "facts", "updated_at",
             "updated", "body", "sections", "data")
# Marks where a per-page value goes: unguessable, so no node name or title can hold one.
_MARK = f"\x00{secrets.token_hex(8)}"


class _Skeleton:
    """record.html rendered once for a collection, with a mark where each per-page value
    goes. A page is then the skeleton's pieces joined with that page's values, each escaped
    as the template's autoescape escapes it (`markupsafe.escape`): the bytes of rendering
    the template for every page (tests/exporter/site/test_pages.py compares the two), without
    Jinja's work for each page."""

    def __init__(self, site: Site, collection: Collection) -> None:
        marked = site.render("record.html", collection=collection,
                             collection_href=collection_href(collection.name),
                             **{name: Markup(f"{_MARK}{name}\x00") for name in _PER_PAGE})
        pieces = re.split(f"{_MARK}(\\w+)\x00", marked.decode("utf-8"))
        self.literals, self.names = pieces[0::2], pieces[1::2]
        # a filter on a per-page value would have changed its mark, not the value
        if sorted(set(self.names)) != sorted(_PER_PAGE) or any(
                _MARK[1:].casefold() in literal.casefold() for literal in self.literals):
            raise RuntimeError(f"record.html must show each of {sorted(_PER_PAGE)} as it is, "
                               f"with no filter")

    def render(self, values: dict[str, str]) -> bytes:
        out = [self.literals[0]]
        for name, literal in zip(self.names, self.literals[1:], strict=True):
            out.append(values[name])
            out.append(literal)
        return "".join(out).encode("utf-8")


@cache
def _template(name: str) -> jinja2.Template:
    """A template, looked up once (they are the package's own files, never changed)."""
    return _environment().get_template(name)


def site_of(node: NodeConfig, known: dict[str, Collection], counts: dict[str, int],
            library: bool = False) -> Site:
    """`library`: the node has a library page (`library_page.has_page`), which the
    navigation links to."""
    listed = [{"name": c.name, "title": c.title, "description": c.description,
               "href": collection_href(c.name), "count": counts.get(c.name, 0)}
              for c in known.values()]
    # The counts are left out: only the home page shows them, and its fingerprint is its
    # bytes. (With them in, a record added or removed would render every page again.)
    shown = [{key: value for key, value in c.items() if key != "count"} for c in listed]
    print_ = fingerprint("site", _templates_digest(), node.name, node.description,
                         node.publisher, node.contact, node.licence, node.language,
                         node.base_url, node.key_request, json.dumps(shown), str(library))
    nav, footer = (Markup(_template(name).render(node=node, collections=listed,
                                                 search=SEARCH_HREF,
                                                 library=LIBRARY_HREF if library else ""))
                   for name in ("nav.html", "footer.html"))
    return Site(node, listed, print_, nav, footer, library)


def home(site: Site) -> bytes:
    """The home page; a hub's lists its members (`network.members`) and charts their public
    records."""
    members = network.members(site.node.network)
    return site.render("index.html", members=members,
                       chart=Markup(network.members_chart(members)))


def files(site: Site, known: dict[str, Collection], public: dict[str, list[Rendered]],
          sources: dict[str, SourceRecord], related: Related) -> list[OutputFile]:
    """Every page but the home page, for the public records given (by collection, in list
    order). `sources` has each public record's content; `related` is `relations(...)`."""
    out: list[OutputFile] = []
    for name, items in public.items():
        out.extend(collection_pages(site, known[name], items))
        out.extend(record_page(site, known[name], r, sources[r.id], related.get(r.id, []))
                   for r in items)
    out.extend(sitemaps(site.node.base_url, public, site.library))
    out.append(search_page(site))
    out.append(network.taxa_page(site))
    robots = _robots(site.node.base_url).encode()
    style = resources.files("exporter.site").joinpath("templates/site.css").read_bytes()
    for path, data in (("robots.txt", robots), ("site.css", style)):
        out.append(constant(path, data, hashlib.sha256(data).hexdigest()))
    return out


def search_page(site: Site) -> OutputFile:
    """The search page: a form, and the section its results are written into."""
    print_ = fingerprint("search page", site.print_, str(SEARCH_LIMIT), str(SEARCH_QUERY_MAX))
    return OutputFile(file_of(SEARCH_HREF), print_, functools.partial(
        site.render, "search.html", here=SEARCH_HREF, limit=SEARCH_LIMIT,
        upright=" ".join(sorted(UPRIGHT)),
        longest=SEARCH_QUERY_MAX))


def record_page(site: Site, collection: Collection, r: Rendered, source: SourceRecord,
                links: list[tuple[str, Rendered]]) -> OutputFile:
    """One public record's page; `links`: its related records, with their sections."""
    print_ = fingerprint("record page", site.print_, r.key,
                         *(f"{section}\x1e{x.collection}/{x.id}\x1e{x.title}"
                           for section, x in links), *charts.chart_prints(links))
    return OutputFile(file_of(record_href(collection.name, r.id)), print_, functools.partial(
        record_page_html, site, collection, r, source, links))


def collection_pages(site: Site, collection: Collection, items: list[Rendered]
                     ) -> Iterator[OutputFile]:
    """The pages listing a collection's public records (`items`, in list order): each
    species with its vernacular name, and an A-Z index when there is more than one page."""
    total = len(items)
    pages = max(1, -(-total // PAGE_SIZE))
    common = vernaculars(items) if collection.name == "species" else [""] * total
    # on a hub, the member each record comes from
    held = network.sources(items) if site.node.network is not None else [""] * total
    index = letters(items, pages)
    for page in range(1, pages + 1):
        at = slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)
        chunk = items[at]
        print_ = fingerprint("collection page", site.print_, collection.name, str(page),
                             str(total), *(f"{k}{n}" for k, n in index.items()),
                             *(f"{r.id}\x1e{r.title}\x1e{v}\x1e{m}" for r, v, m in zip(
                                 chunk, common[at], held[at], strict=True)))
        href = collection_href(collection.name, page)
        firsts = {first for letter, first in index.items() if first // PAGE_SIZE == page - 1}
        listed = [{"href": record_href(collection.name, r.id),
                   "title": _list_title(collection, r),
                   "vernacular": v, "member": m, "anchor": _letter(r) if n in firsts else ""}
                  for n, r, v, m in zip(range(at.start, at.start + len(chunk)), chunk,
                                        common[at], held[at], strict=True)]
        render = functools.partial(
            site.render, "collection.html", collection=collection, items=listed, total=total,
            page=page, pages=pages, here=href,
            index=[(letter, collection_href(collection.name, first // PAGE_SIZE + 1))
                   for letter, first in index.items()],
            previous=collection_href(collection.name, page - 1) if page > 1 else None,
            next=collection_href(collection.name, page + 1) if page < pages else None)
        yield OutputFile(file_of(href), print_, render)


def _list_title(collection: Collection, r: Rendered) -> str | Markup:
    """A record's title in a list: a species' scientific name in italics."""
    if collection.name == "species" and r.title:
        return Markup(name_html(r.title))
    return r.title or r.id


def _letter(r: Rendered) -> str:
    """The letter a record is filed under in an A-Z index ("#" for a digit or symbol)."""
    first = (r.title or r.id)[:1].upper()
    return first if "A" <= first <= "Z" else "#"


def letters(items: list[Rendered], pages: int) -> dict[str, int]:
    """For a collection of more than one page, each initial letter and the place in the
    list of the first record filed under it; none for a collection on one page."""
    if pages <= 1:
        return {}
    found: dict[str, int] = {}
    for n, r in enumerate(items):
        found.setdefault(_letter(r), n)
    return found


def vernaculars(items: list[Rendered]) -> list[str]:
    """Each species' vernacular name, from its served JSON: its `vernacularName`, or else
    the first English (or else the first) of its imported `vernacularNames`."""
    return [species_page.common_name(json.loads(served)) for served in json_of(items)]


Related = dict[str, list[tuple[str, Rendered]]]


def relations(public: dict[str, list[Rendered]], sources: dict[str, SourceRecord],
              remembered: Cache) -> Related:
    """For each public record, the public records it links to, with a section title each:
    a species to the treatments, resources and germination results naming it, and those
    back to the species. The names of a record rendered by this export are its fields'
    (which its served JSON holds as they are); the others' are in the cache, under their
    render key, or else read from their served JSON: a content file is not read again for
    them."""
    species = {r.title: r for r in public.get("species", [])}
    related: dict[str, list[tuple[str, Rendered]]] = {}
    known = remembered.names
    kept: dict[str, list[str]] = {}
    for name, (field, section) in NAMES_SPECIES.items():
        items = public.get(name, [])
        unknown = [r for r in items if r.key not in known]
        for r in unknown:
            if r.fresh is not None:
                known[r.key] = names_of(sources[r.id].fields.get(field))
        unknown = [r for r in unknown if r.key not in known]
        for r, served in zip(unknown, json_of(unknown), strict=True):
            known[r.key] = names_of(json.loads(served).get(field))
        for r in items:
            kept[r.key] = names = known[r.key]
            for scientific in names:
                taxon = species.get(scientific)
                if taxon is not None:
                    related.setdefault(taxon.id, []).append((section, r))
                    related.setdefault(r.id, []).append(("Species", taxon))
    remembered.names = kept
    return related


def names_of(value: Any) -> list[str]:
    """The species a record's naming field (`NAMES_SPECIES`) names."""
    return [value] if isinstance(value, str) else list(value or [])


def sitemaps(base_url: str, public: dict[str, list[Rendered]], library: bool = False
             ) -> list[OutputFile]:
    """`sitemap.xml`, and when the node has more URLs than one sitemap holds, the files it
    indexes under `sitemaps/`."""
    return sitemap_files(base_url, [url_line(*entry)
                                    for entry in sitemap_entries(base_url, public, library)])


Entry = tuple[str, str]  # a sitemap's URL, and its lastmod (or "")


def sitemap_entries(base_url: str, public: dict[str, list[Rendered]], library: bool = False
                    ) -> list[Entry]:
    """Every URL of the sitemaps, in order: the home page, the library's page (`library`:
    the node has one), then each collection's pages and its records' pages."""
    entries = [(f"{base_url}/", "")]
    if library:
        entries.append((base_url + LIBRARY_HREF, ""))
    for name, items in public.items():
        pages = max(1, -(-len(items) // PAGE_SIZE))
        entries.extend((base_url + collection_href(name, page), "")
                       for page in range(1, pages + 1))
        entries.extend((base_url + record_href(name, r.id), r.updated_at) for r in items)
    return entries


def url_line(loc: str, modified: str) -> str:
    """A sitemap's line for one of its entries."""
    return (f"<url><loc>{escape(loc)}</loc>"
            + (f"<lastmod>{modified}</lastmod>" if modified else "") + "</url>\n")


def sitemap_files(base_url: str, entries: list[str], only: set[int] | None = None
                  ) -> list[OutputFile]:
    """The sitemap files of `entries` (`url_line`s; only those holding the entries
    numbered `only`, if given: what changed when only their lastmod did)."""
    if len(entries) <= SITEMAP_MAX:
        return [_sitemap("sitemap.xml", _urlset(entries))]
    chunks = range(0, len(entries), SITEMAP_MAX)
    index = "".join(f"<sitemap><loc>{escape(base_url)}/sitemaps/{n}.xml</loc></sitemap>\n"
                    for n in range(1, len(chunks) + 1))
    files = [] if only is not None else [_sitemap("sitemap.xml", (
        '<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns='
        '"http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{index}</sitemapindex>\n").encode())]
    for n, start in enumerate(chunks, 1):
        if only is None or any(start <= at < start + SITEMAP_MAX for at in only):
            files.append(_sitemap(f"sitemaps/{n}.xml",
                                  _urlset(entries[start:start + SITEMAP_MAX])))
    return files


def _sitemap(path: str, data: bytes) -> OutputFile:
    return constant(path, data, hashlib.sha256(data).hexdigest())


def _urlset(lines: list[str]) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
            f'schemas/sitemap/0.9">\n{"".join(lines)}</urlset>\n').encode()


def _robots(base_url: str) -> str:
    """Crawlers may read every page (taxon pages included) and static file; the sidecar's
    other dynamic and keyed paths (from the endpoint table) are not for them."""
    dynamic = sorted({e.path.split("{")[0] for e in ENDPOINTS if not e.public and not e.page})
    lines = "".join(f"Disallow: {path}\n" for path in dynamic)
    return f"User-agent: *\n{lines}Allow: /\n\nSitemap: {base_url}/sitemap.xml\n"
