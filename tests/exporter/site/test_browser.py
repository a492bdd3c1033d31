"""The pages for people in a real browser: Debian's headless chromium, driven by Playwright,
over the real sidecar started by `fednode serve` on 127.0.0.1. Screenshots go to
tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from builders import REPO, debian_tool, exported_sample
from processes import ENV, FEDNODE, free_port, wait_for

ARTIFACTS = REPO / "tests" / "artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


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
            assert page.locator("h1").inner_text() == "Impatiens glandulifera"
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
