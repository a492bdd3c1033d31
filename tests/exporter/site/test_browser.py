"""The pages for people in a real browser: Debian's headless chromium, driven by Playwright,
over the real sidecar started by `fednode serve` on 127.0.0.1. Screenshots go to
tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from browsers import ARGS, ARTIFACTS, chromium, screens
from builders import REPO, debian_tool, exported_sample
from processes import ENV, FEDNODE, free_port, wait_for

from exporter.contract.page_urls import record_href, taxon_href
from exporter.contract.wire import COLLECTIONS


@pytest.mark.slow
def test_a_reader_goes_from_the_home_page_to_a_species_and_its_treatment(
        tmp_path: Path) -> None:
    browser_path = debian_tool("chromium", "chromium")  # Debian's, from the test setup
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    root = exported_sample(tmp_path / "node")
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, check=True,
                   capture_output=True, timeout=300)
    port = free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ARTIFACTS.mkdir(exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    try:
        manifest = json.loads(wait_for(f"{base}/api/manifest", server, 60)[2])
        count = str(next(c["public_count"] for c in manifest["collections"]
                         if c["name"] == "species"))
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(browser_path), args=ARGS)
            page = browser.new_page()
            page.goto(f"{base}/")
            assert page.locator("h1").inner_text() == "Meuse Valley Restoration Network"
            assert page.locator("img:not([alt])").count() == 0
            row = page.locator("table tr", has=page.get_by_role("link", name="Species",
                                                                   exact=True))
            assert row.locator("td").nth(1).inner_text() == count
            page.keyboard.press("Tab")  # the first stop is the skip link
            assert page.evaluate("document.activeElement.textContent") == "Skip to content"
            page.screenshot(path=str(ARTIFACTS / "home.png"), full_page=True)

            page.locator("table").get_by_role("link", name="Species", exact=True).click()
            page.wait_for_url(f"{base}/species/")
            assert page.locator("#total").inner_text() == count
            assert page.locator("ul.records li").count() == int(count)
            page.screenshot(path=str(ARTIFACTS / "species.png"), full_page=True)

            page.get_by_role("link", name="Impatiens glandulifera").click()
            page.wait_for_url("**/species/*/*.html")
            assert page.locator("h1").inner_text() == "Impatiens glandulifera Royle"
            taxon = json.loads(page.locator('script[type="application/ld+json"]')
                               .text_content() or "")
            assert (taxon["@type"], taxon["name"]) == ("Taxon", "Impatiens glandulifera")
            assert taxon["alternateName"] == "Himalayan balsam"
            assert taxon["url"].endswith(page.url.removeprefix(base))
            page.screenshot(path=str(ARTIFACTS / "record.png"), full_page=True)
            species_page = page.url

            treatments = page.locator("section", has=page.get_by_role("heading",
                                                                      name="Treatments"))
            treatments.get_by_role("link").first.click()
            page.wait_for_url("**/treatments/*/*.html")
            howto = json.loads(page.locator('script[type="application/ld+json"]')
                               .text_content() or "")
            assert howto["@type"] == "HowTo"
            assert {"@type": "Taxon", "name": "Impatiens glandulifera",
                    "url": taxon["url"]} in howto["about"]
            page.screenshot(path=str(ARTIFACTS / "treatment.png"), full_page=True)
            page.get_by_role("link", name="Impatiens glandulifera").click()
            page.wait_for_url(species_page)

            href = page.get_by_role("link", name="/api/species/").get_attribute("href") or ""
            answer = page.goto(base + href)  # the record's JSON, from the same server
            assert answer is not None and answer.status == 200
            assert answer.json()["scientificName"] == "Impatiens glandulifera"
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


RINSE = REPO / "tests" / "data" / "dwc" / "rinse-pathways-checklist"  # 20 plants imported
MARKDOWN = """
## Where to report

- **Online** at [waarnemingen.be](https://waarnemingen.be), or [not this](javascript:alert(1))
- *By e-mail*: <script>alert(1)</script> <img src=x onerror="alert(2)">
"""


@contextmanager
def _served(root: Path) -> Iterator[str]:
    """The node exported, and served by `fednode serve` on a free port: its base URL."""
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, check=True,
                   capture_output=True, timeout=300)
    port = free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{port}/api/manifest", server, 60)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _id(path: Path) -> str:
    found = re.search(r'^id = "([^"]+)"', path.read_text("utf-8"), re.M)
    assert found, path
    return found.group(1)


def _node(root: Path) -> dict[str, str]:
    """The sample with the RINSE checklist's plants imported and a resource's body in
    hostile Markdown: the href of a record page of each kind that shows them."""
    result = subprocess.run([*FEDNODE, "import", "dwc", str(RINSE), "--project", str(root)],
                            env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    content = root / "content"
    resource = content / "resources" / "how-to-report-an-invasive-plant.md"
    with open(resource, "a", encoding="utf-8") as source:
        source.write(MARKDOWN)
    imported = next(p for p in sorted(content.glob("species/*.md"))
                    if "distributions" in p.read_text("utf-8"))
    document = next(p for p in sorted(content.glob("library/*.md"))
                    if "access =" not in p.read_text("utf-8"))
    return {"markdown": record_href("resources", _id(resource)),
            "imported": record_href("species", _id(imported)),
            "document": record_href("resources", _id(document))}


@pytest.mark.slow
def test_every_kind_of_page_reads_well_and_passes_axe(tmp_path: Path) -> None:
    """A page of every collection and a record of each, an imported species with nested
    records, a body in Markdown (hostile HTML in it shown as text, its script link
    dropped), a library document linking to its PDF, the library's page, a taxon's page and
    the search page with and without results: each at a desktop's width and a 390 px
    phone's (`browsers.screens`), with a screenshot, none wider than the screen and none
    with a serious or critical accessibility violation."""
    root = exported_sample(tmp_path / "node")
    hrefs = _node(root)
    with _served(root) as base, chromium() as browser:
        page = browser.new_page()
        for name in COLLECTIONS:  # a record of each collection, as a reader reaches it
            page.goto(f"{base}/{name}/")
            hrefs[name] = page.locator("ul.records a").first.get_attribute("href") or ""
        kinds = {"home": "/", **{f"{name}-list": f"/{name}/" for name in COLLECTIONS},
                 **hrefs, "library": "/library/", "taxon": taxon_href("Impatiens glandulifera"),
                 "search": "/search/", "search-results": "/search/?q=knotweed"}
        screens(browser, base, kinds, "node")
        for href in kinds.values():
            page.goto(base + href)
            assert "{'" not in page.inner_text("main"), href
        page.goto(f"{base}/species/")
        balsam = page.locator("ul.records li", has=page.get_by_role(
            "link", name="Impatiens glandulifera", exact=True))
        assert balsam.locator(".vernacular").inner_text() == "Himalayan balsam"

        page.goto(base + hrefs["imported"])  # a sentence, places, and its data out of sight
        assert page.locator("p.generated").inner_text().startswith("An ")
        assert page.locator("ul.places li").count() >= 1
        terrestrial = page.locator("details.data dt", has_text="Terrestrial").locator(
            "xpath=following-sibling::dd[1]")
        assert not terrestrial.is_visible()
        page.locator("details.data summary").click()
        assert terrestrial.inner_text() in ("yes", "no")
        page.screenshot(path=str(ARTIFACTS / "imported.png"), full_page=True)

        page.goto(base + hrefs["markdown"])
        article = page.locator("article")
        assert article.get_by_role("heading", name="Where to report").evaluate(
            "h => h.tagName") == "H2"
        assert article.locator("li strong", has_text="Online").count() == 1
        assert article.get_by_role("link", name="waarnemingen.be").get_attribute(
            "href") == "https://waarnemingen.be"
        assert article.get_by_role("link", name="not this").count() == 0
        assert article.locator("script, img[onerror]").count() == 0
        assert "<script>alert(1)</script>" in article.inner_text()
        page.screenshot(path=str(ARTIFACTS / "markdown.png"), full_page=True)

        page.goto(base + hrefs["document"])
        pdf = page.get_by_role("link", name="Read the document (PDF)")
        answer = page.request.get(base + (pdf.get_attribute("href") or ""))
        assert answer.status == 200 and answer.body().startswith(b"%PDF")
