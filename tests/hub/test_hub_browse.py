"""A hub people can browse: every list entry and search result names its member, the home
page lists the members with their records, licence and freshness, and a taxon's page
(`/taxa/{name}/`, answered by the sidecar from the service of `/api/taxa/{name}`) gathers
every member's public records of one plant, linked from each species page. Restricted
records and private members show on none of these pages, nor in any count.

Real member nodes with real sidecars on 127.0.0.1, a real `fednode hub sync` and `hub
export`, and a real sidecar over the hub's node."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from browsers import chromium, screens
from builders import (
    REPO,
    ServerThread,
    _missing,
    app_for,
    debian_tool,
    http_get,
    issue_key,
    species,
)
from test_hub_serve import Member, hub_cli, make_member, solo, solo_hub, treatment

from exporter.contract.page_urls import record_href, taxon_href
from exporter.pipeline.build import build
from exporter.project.config import Project
from hub.export import hub_project
from hub.republish import hub_id

MARK = "quokkaweed"  # in every restricted record and private member, in nothing public
BALSAM = "Impatiens glandulifera"
VNU = REPO / ".cache" / "vnu-jar-26.9.27" / "node_modules" / "vnu-jar" / "build" / "dist" / \
    "vnu.jar"


@dataclass
class Network:
    folder: Path
    members: dict[str, Member]
    hub: str


def members_of(root: Path) -> dict[str, Member]:
    alpha = make_member(root, 1, "alpha", "CC-BY-4.0")
    alpha.add("balsam", "species", species(BALSAM, vernacularName="Himalayan balsam"),
              "Alphamarsh balsam.")
    alpha.add("pulling", "treatments", treatment("Pulling balsam", BALSAM),
              "Alphamarsh balsam pulling.")
    alpha.add("secret", "species", species("Quokkaweed secreta", access="partners"),
              "Hidden.")
    beta = make_member(root, 2, "beta", "https://creativecommons.org/publicdomain/zero/1.0/")
    beta.licence = "CC0-1.0"
    beta.add("balsam", "species", species("IMPATIENS GLANDULIFERA Royle"), "Betabrook balsam.")
    beta.add("secret", "treatments", treatment("Quokkaweed burning", BALSAM,
                                               access="partners"), "Hidden.")
    gamma = make_member(root, 3, "gamma", "CC0-1.0")
    gamma.add("balsam", "species", species(BALSAM), "Gammafen balsam.")
    partner = make_member(root, 4, "partner", "CC0-1.0")
    partner.node_name = "Node partner"
    partner.add("balsam", "species", species(BALSAM, vernacularName="Quokkaweed balsam"),
                "Partnerland.")
    partner.add("secret", "species", species("Quokkaweed partnerii", access="partners"),
                "Hidden.")
    members = {m.name: m for m in (alpha, beta, gamma, partner)}
    for member in members.values():
        build(Project(member.node.root), now=datetime(2026, 3, 1, 8, tzinfo=UTC))
    return members


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("browse")
    members = members_of(root)
    servers = {name: ServerThread(app_for(m.node.root, reload_interval=0))
               for name, m in members.items()}
    try:
        for name, server in servers.items():
            members[name].url = server.__enter__().url
        key, _ = issue_key(members["partner"].node.root, "hub", scopes=["read", "changes"],
                           groups=["partners"])
        folder = root / "hub"
        assert hub_cli("init", str(folder), "--name", "Balsam hub").exit_code == 0
        for name, member in members.items():
            extra = ["--key-env", "PARTNER_KEY", "--private"] if name == "partner" else []
            added = hub_cli("add", member.url, "--hub", str(folder), "--name", name, *extra)
            assert added.exit_code == 0, added.stderr
        synced = hub_cli("sync", "--hub", str(folder), env={"PARTNER_KEY": key})
        assert synced.exit_code == 0, synced.output
        settings = folder / "hub.toml"  # a member down is given up after 3 s, not 15
        settings.write_text(settings.read_text().replace("timeout = 300", "timeout = 3"))
        servers.pop("gamma").__exit__(None, None, None)  # gamma is down: its copy is stale
        again = hub_cli("sync", "--hub", str(folder), env={"PARTNER_KEY": key})
        assert again.exit_code == 1 and "gamma: failed" in again.output
        exported = hub_cli("export", "--hub", str(folder))
        assert exported.exit_code == 0, exported.output
        with ServerThread(app_for(hub_project(folder).root, reload_interval=0)) as hub:
            yield Network(folder, members, hub.url)
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)


def page(network: Network, path: str) -> tuple[int, str]:
    status, _, body = http_get(network.hub + path)
    return status, body.decode("utf-8")


class Text(HTMLParser):
    """A page's text as people read it, white space collapsed, and its links."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links += [value or "" for name, value in attrs if name == "href"]

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    @classmethod
    def of(cls, html: str) -> Text:
        made = cls()
        made.feed(html)
        return made

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())


def no_secret(html: str) -> None:
    assert MARK not in html.casefold() and "node partner" not in html.casefold(), \
        html[html.casefold().find(MARK) - 300:][:600]


@pytest.mark.slow
def test_species_list_names_each_entrys_member(network: Network) -> None:
    status, html = page(network, "/species/")
    assert status == 200
    entries = re.findall(r"<li>(.*?)</li>", html)
    balsams = sorted(Text.of(entry).text for entry in entries if "mpatiens" in entry.lower())
    assert balsams == ["IMPATIENS GLANDULIFERA Royle from Node beta",
                       "Impatiens glandulifera Himalayan balsam from Node alpha",
                       "Impatiens glandulifera from Node gamma"]
    assert "3 public records" in Text.of(html).text  # nor the private member's, nor secrets
    no_secret(html)


@pytest.mark.slow
def test_search_results_name_each_member(network: Network) -> None:
    """The search page as the sidecar answers it, and the hub's /api/search that the static
    page's script reads, name the member of each result."""
    status, html = page(network, "/search/?q=balsam")
    assert status == 200
    results = re.findall(r'<p class="where">(.*?)</p>', html)
    said = sorted(Text.of(where).text for where in results)
    assert said == ["Species · from Node alpha", "Species · from Node beta",
                    "Species · from Node gamma", "Treatments · from Node alpha"]
    no_secret(html)
    _, _, body = http_get(network.hub + "/api/search?q=balsam")
    assert sorted(item["source_node_name"] for item in json.loads(body)["items"]) == [
        "Node alpha", "Node alpha", "Node beta", "Node gamma"]
    script = (hub_project(network.folder).root / "site_out" / "search" / "index.html"
              ).read_text()
    assert "item.source_node_name" in script and '" · from "' in script


@pytest.mark.slow
def test_home_page_lists_members_with_counts_licence_and_freshness(network: Network) -> None:
    status, html = page(network, "/")
    assert status == 200
    [listed] = re.findall(r'<ul class="members">(.*?)</ul>', html, re.S)
    lines = [Text.of(item).text for item in re.findall(r"<li>(.*?)</li>", listed)]
    assert lines[0] == "Node alpha: 2 public records; licence CC-BY-4.0; synced 1 March 2026" \
        or lines[0].startswith("Node alpha: 2 public records; licence CC-BY-4.0; synced ")
    assert lines[1].startswith("Node beta: 1 public record; licence CC0-1.0; synced ")
    assert lines[2].startswith("Node gamma: 1 public record; licence CC0-1.0; stale: last "
                               "synced ")
    assert len(lines) == 3  # the private member is not named
    manifest = json.loads(http_get(network.hub + "/api/manifest")[2])
    stale = {m["node_name"]: m.get("stale") for m in manifest["network"]["members"]}
    assert stale == {"Node alpha": False, "Node beta": False, "Node gamma": True}
    assert '<strong class="stale">stale</strong>' in listed
    day = manifest["network"]["members"][0]["last_success"]
    assert f'<time datetime="{day}">' in listed
    # the chart of public records by member: its picture's title and its table say the same
    [chart] = re.findall(r'<figure class="chart">(.*?)</figure>', html, re.S)
    assert re.search(r'<title id="members-chart">Public records by member: Node alpha: 2; '
                     r"Node beta: 1; Node gamma: 1</title>", chart)
    rows = re.findall(r'<tr><th scope="row">([^<]*)</th><td>(\d+)</td></tr>', chart)
    assert rows == [("Node alpha", "2"), ("Node beta", "1"), ("Node gamma", "1")]
    no_secret(html)


@pytest.mark.slow
def test_footer_names_each_licence_once(network: Network) -> None:
    """Two members spell CC0 two ways (its id, its URL): the footer names it once."""
    _, html = page(network, "/")
    [footer] = re.findall(r"<footer>(.*?)</footer>", html, re.S)
    assert "creativecommons.org" not in footer
    assert footer.count("CC0-1.0") == 1 and footer.count("CC-BY-4.0") == 1


@pytest.mark.slow
def test_taxon_page_gathers_every_members_records(network: Network) -> None:
    alpha, beta, gamma = (network.members[name] for name in ("alpha", "beta", "gamma"))
    status, html = page(network, taxon_href(BALSAM))
    assert status == 200
    text = Text.of(html)
    assert "<h1><i>Impatiens glandulifera</i></h1>" in html
    assert "<title>Impatiens glandulifera · Taxa · Balsam hub</title>" in html
    sections = re.findall(r"<section><h2>(.*?)</h2>(.*?)</section>", html)
    assert [name for name, _ in sections] == ["Node alpha", "Node beta", "Node gamma"]
    holders = dict(sections)
    for member in (alpha, beta, gamma):
        record = hub_id(member.node_id, member.public["balsam"][1]["id"])
        assert record_href("species", record) in holders[member.node_name]
    pulling = hub_id(alpha.node_id, alpha.public["pulling"][1]["id"])
    assert record_href("treatments", pulling) in holders["Node alpha"]
    assert "Licence: CC0-1.0." in holders["Node beta"]
    # the chart, and its numbers as a table
    assert re.search(r'<svg [^>]*role="img"', html)
    assert "Node alpha: 2; Node beta: 1; Node gamma: 1" in html
    assert re.findall(r'<tr><th scope="row">(.*?)</th><td>(\d+)</td></tr>', html) == [
        ("Node alpha", "2"), ("Node beta", "1"), ("Node gamma", "1")]
    assert "3 species records and 1 treatment from 3 members" in text.text
    # the same answer as the API's
    _, _, body = http_get(network.hub + f"/api/taxa/{quote(BALSAM)}")
    assert json.loads(body)["counts"] == {"species": 3, "treatments": 1, "resources": 0,
                                          "germination": 0}
    # every spelling leads to the same page
    for name in ("IMPATIENS GLANDULIFERA Royle", "impatiens glandulifera"):
        assert page(network, f"/taxa/{quote(name, safe='')}/")[1].replace(
            "IMPATIENS GLANDULIFERA Royle", "x") == html.replace("IMPATIENS GLANDULIFERA Royle",
                                                                 "x")


@pytest.mark.slow
def test_taxon_page_and_counts_never_reveal_restricted_records(network: Network) -> None:
    """Beta's restricted treatment of the balsam is in neither the page nor its counts; a
    taxon that only restricted records name, or only a private member's, has no page."""
    _, html = page(network, taxon_href(BALSAM))
    no_secret(html)
    assert "Quokkaweed burning" not in html
    assert not re.search(r"<h3>Treatments</h3>", dict(re.findall(
        r"<section><h2>(.*?)</h2>(.*?)</section>", html))["Node beta"])
    for name in ("Quokkaweed secreta", "Quokkaweed partnerii"):
        status, missing = page(network, taxon_href(name))
        assert status == 404
        assert "No public record of this hub names" in missing
        # the same answer as for a name nothing names
        assert missing.replace(name, "x") == page(network, taxon_href("Nonexistus fakeus"))[
            1].replace("Nonexistus fakeus", "x")
    # a key makes no difference: pages are answered for an anonymous caller
    status, _, _ = http_get(network.hub + taxon_href("Quokkaweed secreta"),
                            {"X-API-Key": "not-a-key"})
    assert status in (401, 404)


@pytest.mark.slow
def test_each_species_page_links_its_taxon_page(network: Network) -> None:
    beta = network.members["beta"]
    record = hub_id(beta.node_id, beta.public["balsam"][1]["id"])
    status, html = page(network, record_href("species", record))
    assert status == 200
    assert f'<a href="{taxon_href(BALSAM)}">Every member\'s records of <i>{BALSAM}</i></a>' \
        in html
    # a node's species pages link to no taxon page; its taxon page has one holder, itself
    alpha = network.members["alpha"]
    status, _, own = http_get(alpha.url + record_href("species",
                                                      alpha.public["balsam"][1]["id"]))
    assert status == 200 and b"/taxa/" not in own
    status, _, body = http_get(alpha.url + taxon_href(BALSAM))
    assert status == 200
    said = Text.of(body.decode()).text
    assert "1 species record and 1 treatment: the public records that name Impatiens " \
        "glandulifera" in said and "<svg" not in body.decode()


@pytest.mark.slow
def test_hub_pages_pass_the_nu_html_checker(network: Network, tmp_path: Path) -> None:
    java = debian_tool("default-jre-headless", "java")
    if not VNU.is_file():
        _missing("vnu-jar@26.9.27 from npm is not in .cache/")
    beta = network.members["beta"]
    record = hub_id(beta.node_id, beta.public["balsam"][1]["id"])
    paths = {"home": "/", "species": "/species/", "search": "/search/?q=balsam",
             "record": record_href("species", record), "taxon": taxon_href(BALSAM),
             "no-taxon": taxon_href("Nonexistus fakeus"), "taxa": "/taxa/"}
    for kind, path in paths.items():
        (tmp_path / f"{kind}.html").write_text(page(network, path)[1], "utf-8")
    result = subprocess.run([str(java), "-jar", str(VNU), "--errors-only", "--format", "json",
                             *sorted(str(p) for p in tmp_path.glob("*.html"))],
                            capture_output=True, text=True, timeout=600)
    messages = json.loads(result.stderr)["messages"]
    assert not messages, "\n".join(f"{m.get('url', '').rsplit('/', 1)[-1]}:{m.get('lastLine')}"
                                   f": {m['message']}" for m in messages)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.slow
def test_hub_pages_fit_a_phone_and_pass_axe(network: Network) -> None:
    """In Debian's headless chromium, at a desktop's width and a 390 px phone's
    (`browsers.screens`, with a screenshot of each): the hub's home, list, search, record and
    taxon pages scroll no sideways and have no serious accessibility violation; the static
    search page's script names each result's member, as the sidecar's page does."""
    beta = network.members["beta"]
    record = record_href("species", hub_id(beta.node_id, beta.public["balsam"][1]["id"]))
    with chromium() as browser:
        screens(browser, network.hub, {
            "home": "/", "species-list": "/species/", "search-results": "/search/?q=balsam",
            "species": record, "taxon": taxon_href(BALSAM), "taxa": "/taxa/"}, "hub")
        page = browser.new_page()
        # the static page's script (as on a CDN copy): the same member names
        page.goto(network.hub + "/search/")
        page.fill("#q", "balsam")
        page.click("button[type=submit]")
        page.wait_for_selector('#results[data-state="script"] .found')
        said = sorted(" ".join(text.split()) for text in
                      page.locator("#results .where").all_inner_texts())
        assert said == ["Species · from Node alpha", "Species · from Node beta",
                        "Species · from Node gamma", "Treatments · from Node alpha"]


@pytest.mark.slow
def test_a_renamed_member_is_named_anew_in_the_lists(tmp_path: Path) -> None:
    """The sync that follows a member's new name exports lists that show it."""
    member = solo(tmp_path, 30, species(BALSAM))
    folder = tmp_path / "hub"
    lists = hub_project(folder).root / "site_out" / "species" / "index.html"
    with solo_hub(member, folder, exported=True) as node:
        assert "from Node solo" in lists.read_text()
        toml = member.node.root / "content" / "node.toml"
        toml.write_text(toml.read_text().replace('"Node solo"', '"Solo Fen Trust"'))
        build(Project(member.node.root), now=datetime(2026, 3, 1, 9, tzinfo=UTC))
        node.settle()
        synced = hub_cli("sync", "--hub", str(folder))
        assert synced.exit_code == 0, synced.output
    shown = lists.read_text()
    assert "from Solo Fen Trust" in shown and "Node solo" not in shown
    assert "Solo Fen Trust: 1 public record" in Text.of(
        (hub_project(folder).root / "site_out" / "index.html").read_text()).text
