"""The URLs of the pages for people, and the files under site_out/ that serve them (the
exporter writes them, the sidecar serves them; see exporter/site/pages.py)."""

from __future__ import annotations

from urllib.parse import quote

from .layout import shard

LIBRARY_HREF = "/library/"  # the library's page: its public documents, and a form to ask it

TAXA_HREF = "/taxa/"  # a hub's page about its taxon pages, which the sidecar fills for each


def taxon_href(canonical: str) -> str:
    """The URL of the page of the taxon of this canonical name (`shared.names`)."""
    return f"{TAXA_HREF}{quote(canonical, safe='')}/"


def record_href(collection: str, record_id: str) -> str:
    return f"/{collection}/{shard(record_id)}/{record_id}.html"


def collection_href(collection: str, page: int = 1) -> str:
    return f"/{collection}/" if page == 1 else f"/{collection}/{page}.html"


def href_of(endpoint: str, segments: dict[str, str]) -> str:
    """The URL of a page, from its endpoint's name and path segments (as the sidecar routes
    it)."""
    fixed = {"sitemap": "/sitemap.xml", "robots": "/robots.txt", "stylesheet": "/site.css",
             "search_page": "/search/", "taxa_page": TAXA_HREF,
             "library_page": LIBRARY_HREF}
    if endpoint in fixed:
        return fixed[endpoint]
    if endpoint == "sitemap_part":
        return f"/sitemaps/{segments['page']}.xml"
    if endpoint == "taxon_page":
        return taxon_href(segments["name"])
    if endpoint == "collection_page":
        return collection_href(segments["collection"])
    if endpoint == "collection_page_n":
        return f"/{segments['collection']}/{segments['page']}.html"
    return f"/{segments['collection']}/{segments['shard']}/{segments['id']}.html"


def file_of(href: str) -> str:
    """The file under site_out/ that serves a page URL."""
    return href.lstrip("/") + ("index.html" if href.endswith("/") else "")
