"""The pages for people pass the Nu Html Checker (vnu-jar from npm, run by Debian's Java):
one page of every kind the export writes (the library's page and a species page with its
germination chart among them), and the search page as the sidecar answers it."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from builders import REPO, Node, ServerThread, _missing, app_for, debian_tool, http_get, species

from exporter.contract.page_urls import collection_href, record_href
from exporter.contract.wire import COLLECTIONS, PUBLIC
from exporter.pipeline.build import build, load
from exporter.project.config import Project
from exporter.site.pages import PAGE_SIZE

VNU = REPO / ".cache" / "vnu-jar-26.9.27" / "node_modules" / "vnu-jar" / "build" / "dist" / \
    "vnu.jar"
KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"

# A species with records nested in it (tables in its page) and a body using Markdown's
# blocks, hostile HTML included (shown as text).
NESTED = """+++
id = "{id}"
scientificName = "Aaa nested"
family = "Apiaceae"
category = "invasive"
establishmentMeans = "introduced"
tags = ["nested", "checker"]
vernacularNames = [{{ vernacularName = "Nested weed", language = "en" }},
                   {{ vernacularName = "Geneste plant", language = "nl" }}]

[[distributions]]
locationID = "ISO_3166-2:BE-WLG"
locality = "Liège"
occurrenceStatus = "present"
+++
## Where it grows

- **Riverbanks**, see <https://example.org/a?b=1&c=2>
- *Roadsides*: <script>alert(1)</script>

1. First
2. Second

> A quotation, with `code`.
"""


def sample_pages(site: Path, root: Path) -> dict[str, Path]:
    """One exported page of each kind: the home page, each collection's page, a public
    record of each collection, a library document, the search page."""
    pages = {"home": site / "index.html", "search": site / "search" / "index.html"}
    records = [r for r in load(Project(root)).records if r.access == PUBLIC]
    for name in COLLECTIONS:
        pages[f"{name} list"] = site / collection_href(name).lstrip("/") / "index.html"
        first = next(r for r in records if r.collection == name
                     and not r.path.startswith("content/library/"))
        pages[f"{name} record"] = site / record_href(name, first.id).lstrip("/")
    document = next(r for r in records if r.path.startswith("content/library/"))
    pages["library document"] = site / record_href("resources", document.id).lstrip("/")
    pages["library"] = site / "library" / "index.html"
    charted = next(r for r in records if r.fields.get("scientificName") == "Primula veris")
    pages["species with a germination chart"] = site / record_href("species", charted.id
                                                                   ).lstrip("/")
    assert "<svg" in pages["species with a germination chart"].read_text()
    return pages


def many_species(root: Path) -> dict[str, Path]:
    """A node of more than one page of species (an A-Z index, a second page), one of them
    with nested records and a Markdown body: those pages, exported."""
    node = Node(root)
    for n in range(PAGE_SIZE + 1):
        node.write("species", f"s{n:03d}", species(f"{chr(ord('B') + n % 20)}us species{n}"))
    nested = str(uuid.uuid4())
    (root / "content" / "species" / "nested.md").write_text(NESTED.format(id=nested), "utf-8")
    build(Project(root))
    site = root / "site_out"
    return {"species A-Z, page 1": site / "species" / "index.html",
            "species A-Z, page 2": site / "species" / "2.html",
            "species with nested records": site / record_href("species", nested).lstrip("/")}


@pytest.mark.slow
def test_every_kind_of_page_passes_the_nu_html_checker(sample_root: Path,
                                                        tmp_path: Path) -> None:
    java = debian_tool("default-jre-headless", "java")
    if not VNU.is_file():
        _missing("vnu-jar@26.9.27 from npm is not in .cache/")
    pages = sample_pages(sample_root / "site_out", sample_root)
    pages.update(many_species(tmp_path / "many"))
    assert "A to Z" in pages["species A-Z, page 1"].read_text()
    served = tmp_path / "served"
    served.mkdir()
    with ServerThread(app_for(sample_root, anonymous_rate=0)) as sidecar:
        for kind, query, expected in (
                ("search results", "q=knotweed", 200),
                ("search results in one collection", "q=knotweed&collections=treatments", 200),
                ("search refused", "q=%20", 400)):
            status, _, body = http_get(f"{sidecar.url}/search/?{query}")
            assert status == expected, (query, body[:500])
            pages[kind] = served / f"{kind}.html"
            pages[kind].write_bytes(body)
    checked = tmp_path / "checked"
    checked.mkdir()
    named = {}
    for kind, path in pages.items():  # named by kind, for the messages
        copy = checked / (kind.replace(" ", "-").replace(",", "") + ".html")
        shutil.copyfile(path, copy)
        named[copy.name] = kind
    result = subprocess.run([str(java), "-jar", str(VNU), "--errors-only", "--format", "json",
                             *sorted(str(p) for p in checked.iterdir())],
                            capture_output=True, text=True, timeout=600)
    messages = json.loads(result.stderr)["messages"]
    shown = [f"{named.get(m.get('url', '').rsplit('/', 1)[-1], m.get('url'))}:"
             f"{m.get('lastLine')}: {m['message']} [{m.get('extract', '').strip()[:120]}]"
             for m in messages]
    assert not shown, "\n".join(shown)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(named) == len(pages) == 2 * len(COLLECTIONS) + 11
