"""Pages as people see them: Debian's headless chromium driven by Playwright, axe-core
injected into each page, and each page seen at a desktop's width and at a phone's (390 px),
with a screenshot of each in tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from builders import REPO, _missing, debian_tool

ARTIFACTS = REPO / "tests" / "artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
AXE = REPO / ".cache" / "axe-core-4.14.1" / "node_modules" / "axe-core" / "axe.min.js"
# (width, height) in CSS pixels: a laptop, and a phone held upright (an iPhone 12 to 15)
SCREENS = {"desktop": (1280, 800), "phone": (390, 844)}


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium, closed at the end."""
    path = debian_tool("chromium", "chromium")  # Debian's, from the test setup
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(path), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def no_serious_violation(page: Any) -> None:
    """axe-core, injected into the page, finds no serious or critical violation."""
    if not AXE.is_file():
        _missing("axe-core@4.14.1 from npm is not in .cache/")
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    serious = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
               for v in found["violations"] if v["impact"] in ("serious", "critical")]
    assert not serious, (page.url, serious)


# The elements wider than the window, by their tag, class and the start of their text: what
# makes a page scroll sideways.
_WIDER = """() => {
  const width = document.documentElement.clientWidth;
  return [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > width + 1)
    .slice(0, 5)
    .map(e => `${e.tagName.toLowerCase()}.${e.className} ${(e.textContent || '').slice(0, 40)}`);
}"""


def fits(page: Any) -> None:
    """Nothing on the page reaches past the window's width: it never scrolls sideways."""
    scroll, width = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll <= width, (page.url, scroll, width, page.evaluate(_WIDER))


def _dismissed(seen: list[str], dialog: Any) -> None:
    seen.append(dialog.message)
    dialog.dismiss()


def screens(browser: Any, base: str, hrefs: Mapping[str, str], prefix: str) -> None:
    """Each page (by kind: its href under base) at each of SCREENS: it fits the window, axe
    finds nothing serious, and its screenshot is tests/artifacts/{prefix}-{kind}-{screen}.png.
    No page may open a dialog (a script run from content would)."""
    ARTIFACTS.mkdir(exist_ok=True)
    for screen, (width, height) in SCREENS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", functools.partial(_dismissed, dialogs))
        for kind, href in hrefs.items():
            answer = page.goto(base + href)
            assert answer is not None and answer.status == 200, (href, answer)
            assert page.locator("h1").count() == 1, href
            fits(page)
            no_serious_violation(page)
            page.screenshot(path=str(ARTIFACTS / f"{prefix}-{kind}-{screen}.png"),
                            full_page=True)
        assert dialogs == []
        context.close()
