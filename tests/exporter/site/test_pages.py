"""Pages for people: what they show, what they never show (restricted records), that they
are rendered only when what they show changes, and that the sidecar serves the same bytes."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import jinja2
import pytest
from aiohttp.test_utils import TestClient
from builders import REPO, app_for, exported_sample
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from cli.main import main
from exporter.contract.page_urls import record_href
from exporter.contract.wire import COLLECTIONS, PUBLIC
from exporter.pipeline.build import build, load
from exporter.project.config import Project, load_node_config
from exporter.project.content import SourceRecord
from exporter.project.schemas import collections
from exporter.site import pages, record_page, species_page
from exporter.site.pages import PAGE_SIZE
from exporter.site.served import Rendered

NOW = datetime(2026, 3, 1, tzinfo=UTC)
RINSE = REPO / "tests" / "data" / "dwc" / "rinse-pathways-checklist"  # 20 plants
PAGE_FILES = re.compile(r".*\.html|sitemap\.xml|sitemaps/.*|robots\.txt|site\.css")


def page_files(root: Path) -> dict[str, bytes]:
    site = (root / "site_out").resolve()
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file() and PAGE_FILES.fullmatch(str(p.relative_to(site)))}


def href_of(path: str) -> str:
    return "/" + (path[:-len("index.html")] if path.endswith("index.html") else path)


def json_ld(page: bytes) -> dict[str, object]:
    found = re.search(rb'<script type="application/ld\+json">(.*?)</script>', page, re.S)
    assert found, "no JSON-LD"
    data: dict[str, object] = json.loads(found.group(1))
    return data


def test_every_public_record_has_a_page_with_its_json_ld(sample_root: Path) -> None:
    content = load(Project(sample_root))
    files = page_files(sample_root)
    public = [r for r in content.records if r.access == PUBLIC]
    types = {"species": {"Taxon"}, "treatments": {"HowTo"}, "team": {"Person"},
             "resources": {"Dataset", "CreativeWork"}, "germination": {"Dataset"}}
    for record in public:
        page = files.pop(record_href(record.collection, record.id).lstrip("/"))
        data = json_ld(page)
        assert data["identifier"] == record.id
        assert data["@type"] in types[record.collection]
        assert f'href="/api/{record.collection}/{record.id}"'.encode() in page
    # What is left: the home page, the collection pages, the search page, the library's
    # page, the page the sidecar writes each taxon's page into, the sitemap and robots.txt.
    assert set(files) == {"index.html", "sitemap.xml", "robots.txt", "site.css",
                          "search/index.html", "library/index.html", "taxa/index.html",
                          *(f"{name}/index.html" for name in COLLECTIONS)}
    sitemap = files["sitemap.xml"].decode()
    assert sitemap.count("<url>") == 2 + len(COLLECTIONS) + len(public)  # (home, library)


def test_a_species_page_links_to_its_treatments_and_resources(sample_root: Path) -> None:
    files = page_files(sample_root)
    balsam = next(page for path, page in files.items()
                  if b"<h1><i>Impatiens glandulifera</i> <span class=\"authorship\">Royle</span>"
                  b"</h1>" in page)
    assert b"<h2>Treatments</h2>" in balsam and b"<h2>Resources</h2>" in balsam
    # the common name, family and status under the name; the facts in words
    assert (b'<p class="common">Himalayan balsam</p>\n<p class="status">Family Balsaminaceae'
            b" \xc2\xb7 Invasive alien \xc2\xb7 Widespread invasive</p>") in balsam
    assert b"<dt>Introduced by</dt><dd>Horticulture</dd>" in balsam
    data = json_ld(balsam)
    assert data["@type"] == "Taxon" and data["alternateName"] == "Himalayan balsam"
    linked = re.findall(rb'href="(/(?:treatments|resources)/[^"]+)"', balsam)
    assert len(linked) >= 3
    for href in linked:  # every link leads to a page that links back to the species
        target = files[href.decode().lstrip("/")]
        assert b"<h2>Species</h2>" in target and b"><i>Impatiens glandulifera</i></a>" in target
    for path, page in files.items():  # no page links to a page that does not exist
        for href in re.findall(rb'href="(/[^"]*)"', page):
            link = href.decode()
            if not link.startswith(("/api/", "/library/")):
                assert link.lstrip("/") in files or link.lstrip("/") + "index.html" in files, \
                    (path, link)


def test_lists_show_vernacular_names_and_documents_link_to_their_pdf(
        sample_root: Path) -> None:
    files = page_files(sample_root)
    assert re.search(rb'<li><a href="/species/[^"]+"><i>Impatiens glandulifera</i></a> '
                     rb'<span class="vernacular">Himalayan balsam</span></li>',
                     files["species/index.html"])
    library = [r for r in load(Project(sample_root)).records
               if r.path.startswith("content/library/") and r.access == PUBLIC]
    assert library
    for record in library:
        page = files[record_href(record.collection, record.id).lstrip("/")]
        assert f'<a href="/library/{record.id}.pdf" type="application/pdf">'.encode() in page
        assert (sample_root / "site_out" / "library" / f"{record.id}.pdf").is_file()
    for page in files.values():  # no Python value shows on a page
        assert b"{&#39;" not in page and b"<dd>False</dd>" not in page


def test_imported_species_read_like_field_guide_entries(tmp_path: Path) -> None:
    """An imported taxon without text opens with a sentence made from its terms, lists its
    places with their status, and keeps its identifiers in a collapsed Data section."""
    root = exported_sample(tmp_path / "node")
    result = CliRunner().invoke(main, ["import", "dwc", str(RINSE), "--project", str(root)])
    assert result.exit_code == 0, result.output
    build(Project(root), now=NOW)
    files = page_files(root)
    imported = [r for r in load(Project(root)).records if r.fields.get("distributions")]
    assert imported
    for record in imported:
        page = files[record_href("species", record.id).lstrip("/")].decode()
        assert re.search(r'<p class="generated">An alien plant[^<]*, introduced in [^<]*'
                         r"(; native to [^<]*)?\.</p>", page), page
        assert '<h2>Where it grows</h2>\n<ul class="places">' in page
        assert re.search(r"<li><strong>[^<]+</strong>: introduced", page)
        data = page[page.index('<details class="data">'):page.index("</details>")]
        assert re.search(r"<dt>Terrestrial</dt><dd>(yes|no)</dd>", data)
        assert '<dd><a href="https://doi.org/10.15468/guejza">' in data  # the dataset
        assert "<dt>Taxon identifier</dt>" in data and "<table" not in page
        assert "{&#39;" not in page and "WGSRPD" not in page.split("<details")[0]


@pytest.mark.slow
def test_restricted_records_leave_no_trace_on_any_page(tmp_path: Path) -> None:
    """The pages of the sample equal, byte for byte, those of the same node without its
    restricted records: no page, link, title, count or sitemap entry of them."""
    with_them = exported_sample(tmp_path / "with")
    without = exported_sample(tmp_path / "without")
    restricted = [r for r in load(Project(without)).records if r.access != PUBLIC]
    assert len(restricted) >= 5
    for record in restricted:
        path = without / record.path
        if path.suffix == ".md":
            path.unlink()
            path.with_suffix(".pdf").unlink(missing_ok=True)  # a library document's PDF
        else:  # a CSV row
            lines = path.read_text("utf-8").splitlines(keepends=True)
            path.write_text("".join(line for line in lines if record.id not in line), "utf-8")
    build(Project(with_them), now=NOW)
    build(Project(without), now=NOW)
    pages, reference = page_files(with_them), page_files(without)
    assert pages == reference
    routing = (with_them / "site_out" / "_redirects").read_bytes()
    assert routing == (without / "site_out" / "_redirects").read_bytes()
    everything = b"".join(pages.values())
    public_text = b"".join(p.read_bytes() for p in (without / "content").rglob("*.*"))
    for record in restricted:
        assert record.id.encode() not in everything and record.id.encode() not in routing
        title = str(record.fields.get("title") or record.fields.get("scientificName") or "")
        if title.encode() not in public_text:  # a name public records use too may show
            assert title.encode() not in everything, title
    home = pages["index.html"].decode()
    counts = dict(re.findall(r'<a href="/(\w+)/">[^<]+</a></td><td>(\d+)</td>', home))
    public = load(Project(with_them)).records
    for name in COLLECTIONS:
        expected = sum(1 for r in public if r.collection == name and r.access == PUBLIC)
        assert int(counts[name]) == expected
        listing = pages[f"{name}/index.html"].decode()
        assert f'<span id="total">{expected}</span>' in listing
        assert listing.count("<li><a href=") == min(expected, PAGE_SIZE)


def test_collection_pages_are_paged(tmp_path: Path) -> None:
    from builders import multiply
    root = exported_sample(tmp_path / "node")
    multiply(root / "content", 260)
    build(Project(root), now=NOW)
    files = page_files(root)
    total = int(re.search(rb'<span id="total">(\d+)</span>', files["species/index.html"])
                .group(1))  # type: ignore[union-attr]
    assert total > PAGE_SIZE
    last = -(-total // PAGE_SIZE)
    listed = files["species/index.html"].count(b"<li><a href=\"/species/")
    for page in range(2, last + 1):
        listed += files[f"species/{page}.html"].count(b"<li><a href=\"/species/")
    assert listed == total and f"species/{last + 1}.html" not in files
    assert b'rel="next" href="/species/2.html"' in files["species/index.html"]
    assert b'rel="prev" href="/species/"' in files["species/2.html"]
    # An A-Z index on every page of a long collection, each letter leading to the page and
    # the first record filed under it.
    index = re.search(rb'<nav aria-label="A to Z" class="az"><p>(.*?)</p></nav>',
                      files["species/2.html"])
    assert index is not None
    letters = re.findall(rb'<a href="/species/(\d+\.html)?#letter-(\w+)">', index.group(1))
    assert len(letters) >= 5
    for page, letter in letters:
        target = files[f"species/{page.decode() or 'index.html'}"]
        assert re.search(rb'<li><a href="[^"]+" id="letter-' + letter + rb'">', target), letter
    assert b'aria-label="A to Z"' not in files["team/index.html"]  # one page: no index


def test_an_unchanged_records_page_is_not_rendered_again(tmp_path: Path) -> None:
    root = exported_sample(tmp_path / "node")
    build(Project(root), now=NOW)
    site = root / "site_out"
    files = page_files(root)
    public = [r for r in load(Project(root)).records if r.access == PUBLIC]
    edited = next(r for r in public if r.collection == "team")
    other = next(r for r in public if r.collection == "species")
    before = {r.id: (site / record_href(r.collection, r.id).lstrip("/")).stat().st_ino
              for r in (edited, other)}
    source = root / edited.path
    source.write_text(source.read_text("utf-8") + "\nOne more paragraph.\n", "utf-8")
    report = build(Project(root), now=NOW)
    after = {r.id: (site / record_href(r.collection, r.id).lstrip("/")).stat().st_ino
             for r in (edited, other)}
    assert after[other.id] == before[other.id]  # the same file, linked from the last build
    assert after[edited.id] != before[edited.id]
    assert b"One more paragraph." in (site / record_href("team", edited.id).lstrip("/")
                                       ).read_bytes()
    changed = {path for path, data in page_files(root).items() if files.get(path) != data}
    assert changed == {record_href("team", edited.id).lstrip("/"), "sitemap.xml"}
    assert report.site is not None and report.site.written < 10, report.summary()


def test_links_follow_an_edit_of_the_species_a_record_names(tmp_path: Path) -> None:
    """The species a record names are remembered between exports (by render key): after a
    treatment is pointed at another species, every page is what an export that remembers
    nothing makes."""
    root = exported_sample(tmp_path / "node")
    build(Project(root), now=NOW)
    records = load(Project(root)).records
    treatment = next(r for r in records if r.collection == "treatments"
                     and r.access == PUBLIC and isinstance(r.fields.get("targetSpecies"), list))
    other = next(r.fields["scientificName"] for r in records if r.collection == "species"
                 and r.access == PUBLIC
                 and r.fields["scientificName"] not in treatment.fields["targetSpecies"])
    source = root / treatment.path
    text = source.read_text("utf-8")
    first = treatment.fields["targetSpecies"][0]
    assert f'"{first}"' in text
    source.write_text(text.replace(f'"{first}"', f'"{other}"', 1), "utf-8")
    build(Project(root), now=NOW)
    kept = page_files(root)
    (root / ".fednode" / "cache" / "sources.marshal").unlink()
    shutil.rmtree(root / ".fednode" / "cache" / "parts", ignore_errors=True)
    for outputs in (root / ".fednode" / "builds").glob("*/outputs.marshal"):
        outputs.unlink()
    build(Project(root), now=NOW)
    assert page_files(root) == kept
    assert other.encode() in kept[record_href("treatments", treatment.id).lstrip("/")]


async def test_the_sidecar_serves_the_same_pages(
        sample_root: Path, aiohttp_client: Callable[..., object]) -> None:
    client: TestClient = await aiohttp_client(app_for(sample_root))  # type: ignore[operator]
    files = page_files(sample_root)
    for path, data in files.items():
        response = await client.get(href_of(path))
        assert response.status == 200, path
        assert await response.read() == data, path
    content = load(Project(sample_root))
    hidden = next(r for r in content.records if r.access != PUBLIC)
    for href in (record_href(hidden.collection, hidden.id), "/species/2.html", "/nothing/",
                 "/species/zz/" + hidden.id + ".html", "/sitemaps/1.xml"):
        response = await client.get(href)
        assert response.status == 404, href
        assert (await response.json())["error"]["code"] == "not_found"


# What record.html's loop over related records was before they were made in Python
# (`pages.related_html`): the reference they must equal, escaping included.
RELATED = jinja2.Environment(autoescape=True).from_string(
    "{% for group in related %}<section>\n<h2>{{ group.title }}</h2>\n<ul>"
    "{% for item in group['items'] %}<li><a href=\"{{ item.href }}\">{{ item.title }}"
    "</a></li>{% endfor %}</ul>\n</section>\n{% endfor %}")
ODD = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["<script>", "a & b", "\"'", "\x00", "{{ title }}", "</dl>", "\u202e", "é"])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(node_name=ODD, title=ODD, vernacular=st.lists(ODD, max_size=3), habitat=ODD,
       body=st.lists(ODD, max_size=4), related=st.lists(st.tuples(ODD, ODD), max_size=4))
def test_a_record_page_is_its_template_rendered(
        sample_root: Path, node_name: str, title: str, vernacular: list[str], habitat: str,
        body: list[str], related: list[tuple[str, str]]) -> None:
    """A record page is put together from record.html rendered once per collection: its
    bytes are Jinja's rendering of the template for that page, whatever the node's name,
    the record's title and its fields hold; its related records are what the template's
    loop made of them."""
    known = collections()
    species = known["species"]
    node = dataclasses.replace(load_node_config(Project(sample_root)), name=node_name)
    site = pages.site_of(node, known, {"species": 1})
    record_id = "0b6f2a52-0d3c-4b6e-9e55-1a2b3c4d5e6f"
    rendered = Rendered("species", record_id, PUBLIC, title, "2026-01-01T00:00:00Z",
                        "2026-01-02T00:00:00Z", "", b"{}", "key")
    fields = {"scientificName": title, "vernacularName": vernacular, "habitat": habitat,
              "body": "\n\n".join(body), "family": title, "scientificNameAuthorship": habitat,
              "distributions": [{"locality": title, "establishmentMeans": "introduced"}],
              "taxonID": title}
    source = SourceRecord("species", "content/species/x.md", 1, record_id, PUBLIC,
                          _fields=fields)
    links = [("Treatments", Rendered("treatments", f"t{n}", PUBLIC, other, "", "", "",
                                     b"{}", "k")) for n, (other, _) in enumerate(related)]
    links += [("Resources", Rendered("resources", f"r{n}", PUBLIC, other, "", "", "", b"{}",
                                     "k")) for n, (_, other) in enumerate(related)]
    page = record_page.record_page_html(site, species, rendered, source, links)

    groups: dict[str, list[dict[str, str]]] = {}
    for section, other in links:
        groups.setdefault(section, []).append(
            {"href": record_href(other.collection, other.id), "title": other.title or other.id})
    related_html = RELATED.render(related=[{"title": t, "items": items}
                                           for t, items in groups.items()])
    assert record_page.related_html(links) == related_html
    made = {name: Markup(value) for name, value in {
        "heading": species_page.heading_html(fields, title or record_id),
        "lead": species_page.lead_html(fields),
        "facts": record_page.facts_section(species_page.facts_html(fields)
                                      + record_page.fields_html(species, source)),
        "body": species_page.body_html(fields),
        "sections": species_page.sections_html(fields) + related_html,
        "data": record_page.data_html(species, source)}.items()}
    expected = site.render(
        "record.html", collection=species, title=title or record_id, here=record_href(
            "species", record_id), json_path=f"/api/species/{record_id}",
        json_ld=record_page.script_json(record_page.json_ld(
            node.base_url, "species", rendered, fields, links)),
        updated_at=rendered.updated_at, updated="2 January 2026", collection_href="/species/",
        **made)
    assert page == expected
