"""The library's page (/library/): every public document with its pages and download, never a
restricted one, linked from every page's navigation; served by the real sidecar as exported,
which sends a page's address without its final slash to the page; and, in Debian's headless
chromium, its form asking the real sidecar with a reader's key, the page without JavaScript,
and a static copy of the site without a sidecar saying where the sidecar is."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from browsers import ARGS, ARTIFACTS, no_serious_violation
from builders import (
    NODE_TOML,
    Node,
    app_for,
    debian_tool,
    exported_sample,
    issue_key,
    make_pdf,
    record_text,
    species,
)
from markupsafe import escape
from processes import ENV, FEDNODE, free_port, wait_for
from pypdf import PdfReader

from exporter.contract.page_urls import record_href
from exporter.contract.wire import PUBLIC
from exporter.pipeline.build import build, load
from exporter.project.config import Project

NAV_LINK = '<a href="/library/">Library</a>'


def library_records(root: Path) -> tuple[list[Any], list[Any]]:
    """The library's public and restricted records."""
    found = [r for r in load(Project(root)).records if r.path.startswith("content/library/")]
    return ([r for r in found if r.access == PUBLIC], [r for r in found if r.access != PUBLIC])


def test_the_page_lists_each_public_document_and_no_restricted_one(sample_root: Path) -> None:
    site = sample_root / "site_out"
    page = (site / "library" / "index.html").read_text("utf-8")
    public, restricted = library_records(sample_root)
    assert public and restricted
    for r in public:
        pdf = sample_root / r.path.removesuffix(".md")
        pdf = pdf.with_name(pdf.name + ".pdf")
        pages = len(PdfReader(pdf).pages)
        entry = re.search(rf'<li>\s*<h3><a href="{re.escape(record_href("resources", r.id))}">'
                          rf"{re.escape(str(escape(r.fields['title'])))}</a></h3>.*?</li>",
                          page, re.S)
        assert entry, r.path
        assert f"{pages} pages" in entry.group()
        assert str(escape(r.fields["summary"])) in entry.group()
        download = f'<a href="/library/{r.id}.pdf" type="application/pdf" download>'
        assert download in entry.group()
        assert (site / "library" / f"{r.id}.pdf").read_bytes() == pdf.read_bytes()
    assert page.count("<li>\n<h3>") == len(public)
    for r in restricted:
        for secret in (r.id, str(r.fields["title"]), str(r.fields["summary"])[:60]):
            assert secret not in page and str(escape(secret)) not in page
    assert f"<loc>{load(Project(sample_root)).node.base_url}/library/</loc>" in \
        (site / "sitemap.xml").read_text()
    # every page links to it, in its navigation
    pages = list(site.rglob("*.html"))
    assert len(pages) > 90
    assert [p for p in pages if NAV_LINK not in p.read_text("utf-8")] == []


async def test_a_node_without_a_public_document_has_no_library_page(
        tmp_path: Path, aiohttp_client: Callable[..., Any]) -> None:
    node = Node(tmp_path, NODE_TOML)
    node.write("species", "knotweed", species("Fallopia japonica"))
    library = tmp_path / "content" / "library"
    make_pdf(library / "protocol.pdf", ["Wear gloves and goggles when you mix the product."])
    (library / "protocol.md").write_text(record_text(
        {"id": "5a6483be-c0b3-4d82-9f9c-6521bd8c1799", "title": "Spill protocol",
         "kind": "document", "summary": "For partner teams.", "access": "sensitive"},
        "Restricted."))
    build(Project(tmp_path))
    site = tmp_path / "site_out"
    assert not (site / "library").exists()
    assert "/library/" not in (site / "sitemap.xml").read_text()
    for page in site.rglob("*.html"):
        text = page.read_text("utf-8")
        assert "/library/" not in text and "Spill protocol" not in text, page
    client = await aiohttp_client(app_for(tmp_path, anonymous_rate=0))
    answer = await client.get("/library/")
    assert answer.status == 404
    assert (await answer.json())["error"]["code"] == "not_found"


async def test_the_sidecar_serves_the_page_and_sends_addresses_without_a_slash_on(
        sample_root: Path, aiohttp_client: Callable[..., Any]) -> None:
    client = await aiohttp_client(app_for(sample_root, anonymous_rate=0))
    answer = await client.get("/library/")
    assert answer.status == 200
    assert await answer.read() == (sample_root / "site_out" / "library" / "index.html"
                                   ).read_bytes()
    for asked, sent in (("/library", "/library/"), ("/search", "/search/"),
                        ("/search?q=knot%20weed&collections=species",
                         "/search/?q=knot%20weed&collections=species"),
                        ("/species", "/species/"), ("/germination", "/germination/")):
        answer = await client.get(asked, allow_redirects=False)
        assert (answer.status, answer.headers.get("Location")) == (301, sent), asked
        assert answer.headers["X-Node-Access"] == "open"
    answer = await client.get("/search", params={"q": "knotweed"})  # followed: the results
    assert answer.status == 200 and "Results for “knotweed”" in await answer.text()
    # not a page: the contract's 404, as before
    for asked in ("/plants", "/api/species/x", "/library/x", "/search/x"):
        answer = await client.get(asked, allow_redirects=False)
        assert answer.status == 404, asked
        assert (await answer.json())["error"]["code"] == "not_found"
    answer = await client.post("/search", allow_redirects=False)
    assert answer.status in (404, 405)


@pytest.mark.slow
def test_a_reader_asks_the_library_from_its_page(tmp_path: Path) -> None:
    """With a key, the form shows the passages (quotes linked to their PDF pages); a wrong
    key is said; without JavaScript the page lists the documents and says how to ask; a
    static copy of the site without a sidecar says where the sidecar is. No serious axe
    violation, and nothing wider than a 390 px screen."""
    browser_path = debian_tool("chromium", "chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    root = exported_sample(tmp_path / "node")
    subprocess.run([*FEDNODE, "export", "--project", str(root)], env=ENV, check=True,
                   capture_output=True, timeout=300)
    key, _ = issue_key(root, "reader", scopes=["library"])
    public, restricted = library_records(root)
    port, static_port = free_port(), free_port()
    server = subprocess.Popen([*FEDNODE, "serve", "--project", str(root), "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    static = subprocess.Popen([sys.executable, "-m", "http.server", str(static_port), "--bind",
                               "127.0.0.1", "--directory", str(root / "site_out")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base, copy = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{static_port}"
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        wait_for(f"{base}/api/manifest", server, 60)
        wait_for(f"{copy}/library/", static, 60)
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(browser_path), args=ARGS)
            page = browser.new_page()
            page.goto(f"{base}/")
            page.get_by_role("link", name="Library", exact=True).click()
            page.wait_for_url(f"{base}/library/")
            assert page.locator("ul.documents > li").count() == len(public)
            page.get_by_label("Your question").fill("When should knotweed be cut?")
            page.get_by_label("Your key").fill(key)
            page.get_by_role("button", name="Ask").click()
            page.wait_for_selector('#answer[data-state="answered"]', timeout=60_000)
            passages = page.locator("ol.passages > li")
            assert passages.count() >= 1
            ids = {r.id for r in public}
            for n in range(passages.count()):
                item = passages.nth(n)
                assert item.locator("blockquote").inner_text().strip()
                href = item.get_by_role("link").get_attribute("href") or ""
                found = re.fullmatch(r".*/library/([0-9a-f-]{36})\.pdf#page=([1-9][0-9]*)", href)
                assert found and found.group(1) in ids, href
            assert page.evaluate("document.activeElement.id") == "answer-title"
            no_serious_violation(page)
            page.screenshot(path=str(ARTIFACTS / "library-answer.png"), full_page=True)

            page.get_by_label("Your key").fill("fn_not_a_key")
            page.get_by_role("button", name="Ask").click()
            page.wait_for_selector('#answer[data-state="error"]')
            assert "key" in page.locator("#answer .error").inner_text().lower()
            assert key not in page.content()  # the key was sent, never written into the page

            phone = browser.new_page(viewport={"width": 390, "height": 844})
            phone.goto(f"{base}/library/")
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390
            phone.screenshot(path=str(ARTIFACTS / "library-390.png"), full_page=True)
            cowslip = next(r for r in load(Project(root)).records
                            if r.collection == "species"
                            and r.fields.get("scientificName") == "Primula veris")
            phone.goto(base + record_href("species", cowslip.id))
            assert phone.locator("figure.chart svg").count() == 1
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390
            no_serious_violation(phone)
            phone.screenshot(path=str(ARTIFACTS / "germination-chart-390.png"), full_page=True)

            plain = browser.new_page(java_script_enabled=False)
            plain.goto(f"{base}/library/")
            assert not plain.locator("#ask").is_visible()
            assert "/api/library/ask" in plain.locator("#answer pre").inner_text()
            assert plain.locator("ul.documents > li").count() == len(public)

            offline = browser.new_page()
            offline.goto(f"{copy}/library/")
            sidecar = offline.locator("#ask").get_attribute("data-sidecar")
            offline.get_by_label("Your question").fill("When should knotweed be cut?")
            offline.get_by_label("Your key").fill(key)
            offline.get_by_role("button", name="Ask").click()
            offline.wait_for_selector('#answer[data-state="error"]')
            said = offline.locator("#answer .error")
            assert "no server to ask" in said.inner_text()
            assert said.get_by_role("link").get_attribute("href") == f"{sidecar}/library/"
            browser.close()
    finally:
        for process in (server, static):
            process.terminate()
            process.wait(timeout=30)
    for r in restricted:
        assert r.id not in (root / "site_out" / "library" / "index.html").read_text()
