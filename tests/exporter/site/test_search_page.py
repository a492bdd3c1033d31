"""The search page (/search/): answered with its results by the real sidecar, for a form sent
without JavaScript, and searched by its own script through /api/search on the static site
the real Netlify CLI serves; restricted records in neither, whatever is asked and whatever
key is sent. Browser tests drive Debian's chromium with Playwright, as test_browser.py does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from aiohttp.test_utils import TestClient
from browsers import ARGS, no_serious_violation
from builders import (
    REPO,
    ServerThread,
    app_for,
    debian_tool,
    exported_sample,
    http_get,
    issue_key,
    npm_tool,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from processes import free_port
from test_browser import _served

from exporter.contract.wire import PUBLIC
from exporter.pipeline.build import build, load
from exporter.project.config import Project

RECORD_PAGE = re.compile(r"/([a-z]+)/[0-9a-f]{2}/([0-9a-f-]{36})\.html")


def restricted(root: Path) -> list[tuple[str, str, str, str]]:
    """(collection, id, title, access) of each restricted record of the node."""
    content = load(Project(root))
    return [(r.collection, r.id, str(r.fields[content.collections[r.collection].title_field]),
             r.access) for r in content.records if r.access != PUBLIC]


def results_of(page: str) -> str:
    """The results section of a search page."""
    found = re.search(r'<section id="results".*?</section>', page, re.S)
    assert found, page[:2000]
    return found.group()


async def test_the_page_shows_an_anonymous_callers_results_whatever_key_is_sent(
        tmp_path: Path, aiohttp_client: Callable[..., Any]) -> None:
    """Asked for a restricted record by its exact title (or its id), the page leaves it
    out of its results, snippets and counts, with or without a key that reads its group
    (a browser sends none with a form; the page, as every page, is public), where that
    key's /api/search finds it and counts it."""
    root = exported_sample(tmp_path / "node")
    hidden = restricted(root)
    assert len(hidden) >= 5
    token, _ = issue_key(root, "everything", groups=sorted({r[3] for r in hidden}))
    client: TestClient = await aiohttp_client(app_for(root, anonymous_rate=0))
    for collection, record_id, title, _ in hidden:
        asked = {"q": title, "collections": collection}
        keyed = await (await client.get("/api/search", params=asked,
                                        headers={"X-API-Key": token})).json()
        assert record_id in [item["id"] for item in keyed["items"]], title
        anonymous = (await (await client.get("/api/search", params=asked)).json())["counts"]
        assert keyed["counts"][collection] > anonymous[collection]
        for headers in ({}, {"X-API-Key": token}):
            for q in (title, record_id):
                answer = await client.get("/search/", params={**asked, "q": q},
                                          headers=headers)
                assert answer.status == 200 and answer.content_type == "text/html"
                assert answer.headers["X-Node-Access"].startswith("key:" if headers else "open")
                body = await answer.text()
                links = re.findall(r'<li><h3><a href="([^"]+)"', results_of(body))
                assert not any(record_id in link for link in links), title
                if q == title:  # (by its id, the words asked are on the page)
                    assert record_id not in body, title
                    [(_, count)] = re.findall(r"<li>([^<]+) (\d+)</li>", results_of(body))
                    assert int(count) == anonymous[collection], title


async def test_what_the_page_shows_is_escaped_and_mistakes_are_said_on_it(
        sample_client: TestClient) -> None:
    hostile = "<script>alert(1)</script> \"knotweed' & <b>"
    answer = await sample_client.get("/search/", params={"q": hostile})
    assert answer.status == 200
    body = await answer.text()
    assert "<script>alert" not in body and "<b>" not in body
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt; &quot;knotweed&#x27; &amp; &lt;b&gt;"' \
        in body
    assert "Results for “&lt;script&gt;alert(1)&lt;/script&gt;" in results_of(body)
    for query, says in (("q=%20%20", "q may not be empty"),
                        ("q=knotweed&collections=plants", "collections must be one of"),
                        ("q=knotweed&x=1", "unknown parameter")):
        answer = await sample_client.get(f"/search/?{query}")
        assert (answer.status, answer.content_type) == (400, "text/html"), query
        body = await answer.text()
        assert says in results_of(body) and 'class="error"' in body, query
    many = await (await sample_client.get("/search/?q=invasive plants")).text()
    assert results_of(many).count("<li><h3>") == 20  # as many as the page says it lists
    assert "; the best 20 are listed." in results_of(many)
    assert 'data-limit="20"' in many
    narrowed = await (await sample_client.get("/search/?q=knotweed&collections=treatments")
                      ).text()
    assert '<option value="treatments" selected>' in narrowed
    assert set(re.findall(r'<p class="where">([^<]+)</p>', narrowed)) == {"Treatments"}


# What the page never writes raw: C0 and C1 control characters but the tab and the line
# feed, and the bidirectional controls (marks, embeddings, overrides, isolates).
UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069]")
CONTROLS = list("\x00\x07\x1b\r\x7f\x85\x9b\u061c\u200e\u200f\u202a\u202b\u202c"
                "\u202d\u202e\u2066\u2067\u2068\u2069")
WORDS = st.text(st.sampled_from(CONTROLS) | st.characters(exclude_categories=["Cs"]),
                min_size=1, max_size=40).filter(lambda text: UNSHOWN.search(text) is not None)


@pytest.fixture(scope="module")
def sample_server(sample_root: Path) -> Iterator[ServerThread]:
    with ServerThread(app_for(sample_root, anonymous_rate=0)) as server:
        yield server


def search_page(server: ServerThread, **query: str) -> tuple[int, str]:
    status, _, body = http_get(f"{server.url}/search/?{urlencode(query)}")
    return status, body.decode("utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(words=WORDS, collection=st.sampled_from(["", "species", "plants"]))
@example(words="\u202eknotweed", collection="")
@example(words="\x1b[31mknotweed\x00", collection="species")
@example(words="\u2066\u200f", collection="")
def test_the_page_writes_no_control_or_bidi_character_of_the_words(
        words: str, collection: str, sample_server: ServerThread) -> None:
    """Words holding controls or bidirectional controls, searched (200) or refused (400):
    the page, its form and its heading, holds none of them."""
    status, page = search_page(sample_server, q=words,
                               **({"collections": collection} if collection else {}))
    assert status in (200, 400), page[:2000]
    found = UNSHOWN.search(page)
    assert found is None, (found.group(), page[max(found.start() - 80, 0):found.end() + 80])


def test_the_page_keeps_the_words_letters_and_marks_what_it_replaced(
        sample_server: ServerThread) -> None:
    for words in ("Fallopia × bohemica", "renouée du Japon", "イタドリ", "حشيشة", "Ἀρχή"):
        status, page = search_page(sample_server, q=words)
        assert status == 200
        assert f'value="{words}"' in page and f"Results for “{words}”" in results_of(page)
    status, page = search_page(sample_server, q="\x1b[2Jknot\u202eweed\x00")
    assert status == 200
    assert 'value="[2Jknot\ufffdweed"' in page
    assert "Results for “[2Jknot\ufffdweed”" in results_of(page)


@pytest.mark.slow
def test_the_pages_script_writes_no_control_or_bidi_character_of_the_words(
        sample_server: ServerThread) -> None:
    """The exported page's script (a static copy of the site) writes the words by the
    sidecar's rule: in the heading of the results it writes, and in the form's box when
    they come from the address (back, forward, a counts' link)."""
    browser_path = debian_tool("chromium", "chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    words, shown = "\x1b[2Jknot\u202eweed\u2066", "[2Jknot\ufffdweed\ufffd"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(browser_path), args=ARGS)
        page = browser.new_page()
        page.goto(f"{sample_server.url}/search/")
        page.get_by_label("Words to search for", exact=True).fill(words)
        page.get_by_role("button", name="Search").click()
        page.wait_for_selector('#results[data-state="script"]')
        assert page.locator("#results-title").inner_text() == f"Results for “{shown}”"
        page.evaluate("""words => {
            history.pushState(null, "", "/search/?q=" + encodeURIComponent(words));
            dispatchEvent(new PopStateEvent("popstate"));
        }""", words)
        assert page.locator("#q").input_value() == shown
        page.wait_for_function(
            'document.getElementById("results-title").textContent.includes("\ufffd")')
        assert UNSHOWN.search(page.locator("#results").inner_text()) is None
        browser.close()


@pytest.mark.slow
def test_the_form_without_javascript_finds_records_on_the_node(tmp_path: Path) -> None:
    """`fednode serve` answers the form: results link to the records' pages with snippets,
    counts per collection add up, the collection filter and the counts' links narrow the
    results; no restricted record is in the results, the counts or the snippets when asked
    for by its exact title. (test_browser.py runs axe on the page and its results.)"""
    browser_path = debian_tool("chromium", "chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    root = exported_sample(tmp_path / "node")
    hidden = restricted(root)
    assert len(hidden) >= 5
    with _served(root) as base, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(browser_path), args=ARGS)
        page = browser.new_context(java_script_enabled=False).new_page()
        page.goto(f"{base}/")
        page.get_by_role("navigation", name="Site").get_by_role("link", name="Search").click()
        page.wait_for_url(f"{base}/search/")
        assert page.get_by_text("Without JavaScript, results come from").is_visible()
        page.get_by_label("Words to search for", exact=True).fill("knotweed")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url(f"{base}/search/?q=knotweed&collections=")  # (all of them)
        everywhere = _read_results(page)
        assert everywhere["state"] == "server" and everywhere["items"]
        assert sum(everywhere["counts"].values()) == everywhere["total"] >= \
            len(everywhere["items"])
        assert any("<mark>" in item["snippet"] for item in everywhere["items"])

        page.get_by_label("Collection", exact=True).select_option("treatments")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url(f"{base}/search/?q=knotweed&collections=treatments")
        narrowed = _read_results(page)
        assert {item["where"] for item in narrowed["items"]} == {"Treatments"}
        assert narrowed["counts"] == {"Treatments": everywhere["counts"]["Treatments"]}
        assert len(narrowed["items"]) < len(everywhere["items"])
        page.get_by_role("link", name="All collections").click()
        page.wait_for_url(f"{base}/search/?q=knotweed")
        page.get_by_role("navigation", name="Results by collection").get_by_role(
            "link", name="Species").click()
        page.wait_for_url(f"{base}/search/?q=knotweed&collections=species")
        assert {item["where"] for item in _read_results(page)["items"]} == {"Species"}

        first = _read_results(page)["items"][0]
        page.get_by_role("link", name=first["title"], exact=True).first.click()
        page.wait_for_url(f"{base}{first['href']}")
        assert page.locator("h1").inner_text().startswith(first["title"])  # (its authorship)
        for _, record_id, title, _ in hidden:
            page.goto(f"{base}/search/?q={quote(title)}")
            _assert_absent(page, record_id, title)
        browser.close()


def _read_results(page: Any) -> dict[str, Any]:
    """What the results section shows: its state, total, counts and items."""
    return page.evaluate("""() => {
        const region = document.getElementById("results");
        const summary = region.querySelector(".summary").textContent;
        const total = /^(\\d+)/.exec(summary);
        const counts = {};
        for (const li of region.querySelectorAll(".counts li")) {
            const found = /^(.*) (\\d+)$/.exec(li.textContent);
            if (found) counts[found[1]] = Number(found[2]);
        }
        return {state: region.dataset.state, total: total ? Number(total[1]) : 0, counts,
                items: [...region.querySelectorAll(".found > li")].map(li => ({
                    title: li.querySelector("h3 a").textContent,
                    href: li.querySelector("h3 a").getAttribute("href"),
                    where: li.querySelector(".where").textContent,
                    snippet: (li.querySelector(".snippet") || {innerHTML: ""}).innerHTML}))};
    }""")


def _assert_absent(page: Any, record_id: str, title: str) -> None:
    """A restricted record is not among the results, by its id or its page's link."""
    page.wait_for_selector('#results:not([data-state="static"])')
    shown = _read_results(page)
    assert record_id not in page.content(), title
    for item in shown["items"]:
        found = RECORD_PAGE.fullmatch(item["href"])
        assert found is not None and found.group(2) != record_id, (title, item)


@contextmanager
def _cdn(root: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The node exported with its sidecar on a free port, site_out/ served by `netlify dev`
    (offline) routing as the exported _redirects says: the CDN's and the sidecar's URLs."""
    cli = npm_tool("netlify-cli", "26.2.0", "netlify")
    sidecar_port = free_port()
    node_toml = root / "content" / "node.toml"
    node_toml.write_text(node_toml.read_text().replace(
        "[node]\n", f'[node]\nsidecar_url = "http://127.0.0.1:{sidecar_port}"\n', 1))
    build(Project(root))
    with ServerThread(app_for(root, anonymous_rate=0), port=sidecar_port) as sidecar:
        site = tmp_path / "deploy"
        shutil.copytree(root / "site_out", site / "site_out", symlinks=False)
        port = free_port()
        (site / "netlify.toml").write_text((REPO / "netlify.toml").read_text().replace(
            'framework = "#static"', f'framework = "#static"\nport = {port}', 1))
        log = open(tmp_path / "netlify-dev.log", "w")  # noqa: SIM115 - closed below
        dev = subprocess.Popen([str(cli), "dev", "--offline", "--internal-disable-edge-functions"],
                               cwd=site, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "NETLIFY_TELEMETRY_DISABLED": "1",
                                    "BROWSER": "none"})
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                assert dev.poll() is None, (tmp_path / "netlify-dev.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "netlify dev did not answer"
                try:
                    if http_get(base + "/api/manifest")[0] == 200:
                        break
                except OSError:
                    pass  # (not listening yet)
                time.sleep(0.5)
            yield base, sidecar.url
        finally:
            dev.terminate()
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                dev.kill()
            log.close()


@pytest.mark.slow
def test_the_static_page_searches_through_the_api_with_javascript(tmp_path: Path) -> None:
    """On the CDN (`netlify dev` over site_out/), the exported page's script sends the form
    to /api/search (which the CDN sends to the sidecar) and writes the same results section
    the sidecar writes; its filter and counts' links narrow them; without JavaScript the
    page says results need it or the live server, and the form sent from it reaches the
    sidecar. No restricted record is in its results."""
    browser_path = debian_tool("chromium", "chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    root = exported_sample(tmp_path / "node")
    hidden = restricted(root)
    with _cdn(root, tmp_path) as (base, sidecar), sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(browser_path), args=ARGS)
        page = browser.new_page()
        answer = page.goto(f"{base}/search/")
        assert answer is not None and "aiohttp" not in answer.headers.get("server", "")
        assert (root / "site_out" / "search" / "index.html").read_bytes() == answer.body()
        assert page.get_by_text("Results appear here once you search.").is_visible()
        assert not page.get_by_text("Without JavaScript").count()  # (not for this browser)
        page.get_by_label("Words to search for", exact=True).fill("knotweed")
        page.get_by_role("button", name="Search").click()
        page.wait_for_selector('#results[data-state="script"]')
        assert page.url == f"{base}/search/?q=knotweed"
        scripted = page.inner_html("#results")
        everywhere = _read_results(page)
        assert everywhere["items"] and sum(everywhere["counts"].values()) == everywhere["total"]
        assert page.evaluate("document.activeElement.id") == "results-title"
        no_serious_violation(page)

        server = browser.new_context(java_script_enabled=False).new_page()
        server.goto(f"{sidecar}/search/?q=knotweed")
        assert server.inner_html("#results") == scripted  # one look, whoever writes it

        page.get_by_label("Collection", exact=True).select_option("species")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url(f"{base}/search/?q=knotweed&collections=species")
        page.wait_for_function("() => document.querySelector('#results h2').textContent"
                               ".endsWith(' in Species')")
        assert {item["where"] for item in _read_results(page)["items"]} == {"Species"}
        page.get_by_role("link", name="All collections").click()
        page.wait_for_url(f"{base}/search/?q=knotweed")
        page.wait_for_function("() => !document.querySelector('#results h2').textContent"
                               ".endsWith(' in Species')")
        page.get_by_role("navigation", name="Results by collection").get_by_role(
            "link", name="Treatments").click()
        page.wait_for_url(f"{base}/search/?q=knotweed&collections=treatments")
        page.wait_for_function("() => document.querySelector('#results h2').textContent"
                               ".endsWith(' in Treatments')")
        first = _read_results(page)["items"][0]
        assert first["where"] == "Treatments"
        page.get_by_role("link", name=first["title"], exact=True).click()
        page.wait_for_url(f"{base}{first['href']}")
        assert page.locator("h1").inner_text() == first["title"]

        for _, record_id, title, _ in hidden:
            page.goto(f"{base}/search/")
            page.get_by_label("Words to search for", exact=True).fill(title)
            page.get_by_role("button", name="Search").click()
            _assert_absent(page, record_id, title)

        plain = browser.new_context(java_script_enabled=False).new_page()
        plain.goto(f"{base}/search/")
        assert plain.get_by_text("Without JavaScript, results come from the node's live "
                                 "server only").is_visible()
        plain.get_by_label("Words to search for", exact=True).fill("knotweed")
        plain.get_by_role("button", name="Search").click()
        plain.wait_for_url(f"{base}/search/?q=knotweed&collections=")
        assert plain.get_attribute("#results", "data-state") == "server"
        assert plain.inner_html("#results") == scripted
        browser.close()

