"""What a hub's pages for people show of its network: its members on the home page, each
with its records, licence and freshness, read from node.toml's [network] table (the
manifest's `network`, which `fednode hub export` writes; docs/hub.md), the member beside
each entry of its lists, and the link from each species page to its taxon's page. A node
has no network, and its pages show none of this; every node has the page the sidecar writes
its taxon pages into (`taxa_page`)."""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from markupsafe import escape

from exporter.contract.page_urls import TAXA_HREF, file_of, taxon_href
from exporter.pipeline.outputs import OutputFile
from exporter.shared.bars import count_chart
from exporter.shared.names import canonical_names
from exporter.site.served import Rendered, fingerprint, json_of

if TYPE_CHECKING:
    from exporter.site.pages import Site

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


def day(moment: str) -> str:
    """An RFC 3339 time as people write its day: "1 March 2026" ("" if it is not one)."""
    try:
        parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return ""
    return f"{parsed.day} {MONTHS[parsed.month - 1]} {parsed.year}"


def members(network: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The home page's rows, one a member in the manifest's order: its node's name, its
    address, the public records served, its licence, and its freshness as the manifest
    says it (`stale`: its last sync failed and its copy is as of `last_success`)."""
    rows = []
    for member in (network or {}).get("members") or ():
        if not isinstance(member, dict):
            continue
        synced = member.get("last_success")
        synced = synced if isinstance(synced, str) else ""
        note = member.get("note")
        rows.append({
            "name": str(member.get("node_name") or member.get("name") or ""),
            "url": str(member.get("url") or ""),
            "records": int(member.get("records") or 0),
            "licence": str(member.get("licence") or ""),
            "synced": synced, "day": day(synced) if synced else "",
            "stale": member.get("stale") is True,
            "note": note if isinstance(note, str) else "",
        })
    return rows


def members_chart(members: list[dict[str, Any]]) -> str:
    """The home page's chart of the public records each member serves (`members`' rows;
    "" on a node, which has none)."""
    if not members:
        return ""
    return count_chart([(m["name"], m["records"]) for m in members], "Public records by member",
                       "Public records by member", "Member", "members-chart")


def taxon_name(scientific_name: str) -> str:
    """The canonical name of the taxon a scientific name names (`shared.names`), its genus
    capitalised and the rest in lower case, as a taxon page is named whoever wrote it
    ("FALLOPIA JAPONICA Houtt." -> "Fallopia japonica")."""
    name = canonical_names([scientific_name])[0]
    return name[:1].upper() + name[1:].lower()


def taxon_section(scientific_name: object) -> str:
    """On a hub's species page, the link to its taxon's page, where every member's records
    of it stand side by side ("" for a record without a name)."""
    if not isinstance(scientific_name, str) or not scientific_name.strip():
        return ""
    name = taxon_name(scientific_name)
    return (f'<section>\n<h2>In the network</h2>\n<p><a href="{escape(taxon_href(name))}">'
            f"Every member's records of <i>{escape(name)}</i></a></p>\n</section>\n")


def sources(items: list[Rendered]) -> list[str]:
    """The member each of a hub's records comes from, by name (its served
    `source_node_name`; "" for a record without one): what its lists show beside it."""
    out = []
    for served in json_of(items):
        name = json.loads(served).get("source_node_name")
        out.append(name if isinstance(name, str) else "")
    return out


def taxa_page(site: Site) -> OutputFile:
    """The page about taxon pages (every node's), whose look the sidecar gives each of them
    (sidecar/taxon_page.py)."""
    print_ = fingerprint("taxa page", site.print_)
    return OutputFile(file_of(TAXA_HREF), print_, functools.partial(
        site.render, "taxa.html", here=TAXA_HREF))
