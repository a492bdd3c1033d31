"""The hub as a node: the fednode project `fednode hub export` writes in the hub's folder.

    <hub>/node.toml            the hub's identity as a node (its id, contact, base_url, ...):
                               made once with a fresh id, then the operator's to edit
    <hub>/node/content/        written by each `hub export`: node.toml (from the file above,
                               hub.toml's name and the members' licences, and a [network]
                               table) and one record file per public record of each member
    <hub>/node/ledger.jsonl    the hub's ledger: its records' times and its changes feed
    <hub>/node/.fednode/       the export's builds, the bundle, keys (as any node's)

The project is exported by the node's own pipeline, so the hub answers every endpoint, page,
search, download, sync file and changes feed as a node does, from one implementation. Only
members of hub.toml that are not private are read, each from members/ (hub/republish.py);
private/ is never read."""

from __future__ import annotations

import tomllib
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.contract.licences import KNOWN

from .members import Hub, HubError, Member
from .republish import Republished, Source, toml_key, toml_value
from .status import Status

NODE_DIR = "node"  # <hub>/node/: the project the hub is served from
IDENTITY = "node.toml"  # <hub>/node.toml: the hub's identity as a node
# The settings of <hub>/node.toml's [node] table: a node's, but its name (hub.toml's) and its
# licence (its members').
NODE_SETTINGS = ("id", "description", "publisher", "contact", "base_url", "sidecar_url",
                 "key_request", "language", "mcp_origins")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"  # <hub>/node.toml's base_url as first written
LISTED = 6  # licences the hub's own licence names at most; any others are counted

IDENTITY_TEMPLATE = """\
# The hub as a node: the identity and settings of the node `fednode hub export` makes of the
# members' public records (in node/), which `fednode hub serve` serves. Its name is hub.toml's
# and its licence the members'. Every setting is a node's (docs/hub-reference.md, "Serving the
# network"); a [serve] table sets how `fednode hub serve` runs, as in a node's node.toml.

[node]
# Names the hub to its callers, in its keys and to the hubs that follow it. Keep it.
id = {id}
description = {description}
publisher = {publisher}
contact = "hub@example.org"
# Public address of the hub's static files (a CDN), or of `fednode hub serve`. Links in every
# page and response start with it; `fednode hub export --base-url URL` overrides it.
base_url = {base_url}
# Address of the sidecar that answers keyed requests. Left out, it is base_url.
# sidecar_url = "https://api.hub.example.org"
key_request = "Write to hub@example.org with your organisation and what you need."
language = "en"
"""

GENERATED = """\
# Written by `fednode hub export` at each export, from the hub folder's node.toml and
# hub.toml and the members' copies: edit those, not this file.
"""


def identity_file(hub: Hub) -> Path:
    return hub.folder / IDENTITY


def read_identity(hub: Hub) -> dict[str, Any]:
    """<hub>/node.toml, read and checked (made first, with a fresh id, if missing)."""
    path = identity_file(hub)
    if not path.exists():
        text = IDENTITY_TEMPLATE.format(
            id=toml_value(str(uuid.uuid4())), publisher=toml_value(hub.name),
            base_url=toml_value(DEFAULT_BASE_URL),
            description=toml_value(f"The records that the nodes {hub.name} follows publish "
                                   f"openly, each with the node it comes from and its "
                                   f"licence."))
        with path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HubError(f"{path}: not valid TOML: {exc}") from None
    node = data.get("node")
    if not isinstance(node, dict):
        raise HubError(f"{path}: no [node] table; delete the file and `fednode hub export` "
                       f"writes one (with a new id)")
    for key in data:
        if key not in ("node", "serve"):
            raise HubError(f"{path}: unknown table {key!r}: the file holds [node] and [serve]")
    for key in node:
        if key in ("name", "licence"):
            where = "hub.toml's [hub] name" if key == "name" else "its members' licences"
            raise HubError(f"{path}: [node] {key}: the hub's {key} is {where}; remove it here")
        if key not in NODE_SETTINGS:
            raise HubError(f"{path}: [node] unknown setting {key!r}; the settings are "
                           f"{', '.join(NODE_SETTINGS)}")
    return data


@dataclass
class Served:
    """A member of hub.toml as the hub serves it: its status, and its records (None: no copy
    read), or why it is not served."""

    member: Member
    status: Status
    source: Source | None = None
    records: Republished | None = None
    note: str = ""  # why nothing of it is served, when nothing is
    manifest: str | None = None  # its signed manifest, as its last sync followed it

    def line(self) -> str:
        """What the operator reads of the member at an export."""
        name = self.member.name
        if self.records is None or self.source is None:
            return f"{name}: not served: {self.note}"
        licence = self.source.licence or "no licence"
        said = f"{name}: {self.records.total} records ({licence})"
        if self.status.last_success is not None:
            said += ("; stale since " if self.status.stale else "; synced ") + \
                self.status.last_success
        if self.records.relicensed:
            said += f"; {self.records.relicensed} {_relicensed(self.source)}"
        if self.records.refused:
            said += (f"; {len(self.records.refused)} left out, e.g. "
                     f"{self.records.refused[0]}")
        return said


def _relicensed(source: Source) -> str:
    """What became of the records that name a licence the hub does not know."""
    return ("records name a licence the hub does not know, served without one (their terms "
            "are at their source)")


def licences(served: list[Served]) -> Counter[str]:
    """The licences the hub's records carry, each with its count of records ("": none)."""
    found: Counter[str] = Counter()
    for one in served:
        if one.records is not None:
            found.update(one.records.licences)
    return found


def warnings(served: list[Served]) -> list[str]:
    """What callers and the operator should know: a member whose node names no licence."""
    return [no_licence(one.member.name, one.source.node_name)
            for one in served if one.source is not None and one.records is not None
            and one.source.licence is None]


def no_licence(member: str, node_name: str) -> str:
    return (f"{member}: its node ({node_name}) names no licence: its records are served "
            f"without one, unless a record names its own, and their terms of reuse are "
            f"unknown")


def network(served: list[Served], present: Counter[str]) -> dict[str, Any]:
    """node.toml's [network] table, served as the manifest's `network`: each member with its
    counts and freshness, the licences present and the warnings."""
    members = []
    for one in served:
        entry: dict[str, Any] = {"name": one.member.name, "url": one.member.url}
        if one.source is not None:
            entry.update(node_id=one.source.node_id, node_name=one.source.node_name)
            if one.source.licence is not None:
                entry["licence"] = one.source.licence
            if one.status.key_fingerprint is not None and one.manifest is not None:
                entry.update(key_fingerprint=one.status.key_fingerprint,
                             manifest=one.manifest)
        records = one.records
        entry["records"] = records.total if records else 0
        entry["counts"] = dict(records.counts) if records else {}
        status = one.status
        for name in ("ok", "stale", "last_success", "last_change"):
            value = getattr(status, name)
            if value is not None:
                entry[name] = value
        if one.note:
            entry["note"] = one.note
        members.append(entry)
    return {"members": members,
            "licences": [{"licence": licence, "records": count}
                         for licence, count in sorted(present.items()) if licence],
            "unlicensed_records": present.get("", 0),
            "warnings": warnings(served)}


def licence_text(present: Counter[str]) -> str:
    """The hub's own `licence` (node.toml, and the footer of every page): the one licence
    of all its records, or what each record carries, naming at most LISTED of the known
    licences (`contract.licences`), the most used first, and counting the others. So it is
    bounded, and names no member's licence on the pages of another's records."""
    named = [licence for licence in present if licence]
    if len(named) == 1 and not present.get(""):
        return named[0]
    if not named:
        return "none named: no member names a licence"
    listed = sorted((name for name in named if name in KNOWN),
                    key=lambda name: (-present[name], name))[:LISTED]
    others = len(named) - len(listed)
    if not listed:
        said = "the licence of each record (its license field), as its node names it"
    else:
        said = f"the licence of each record (its license field): {', '.join(listed)}"
        said += f" and {others} other{'s' if others > 1 else ''}" if others else ""
    return said + ("; some records name none" if present.get("") else "")


def node_toml(hub: Hub, identity: dict[str, Any], served: list[Served]) -> str:
    """The generated project's content/node.toml."""
    present = licences(served)
    given = identity["node"]
    node: dict[str, Any] = {"id": given.get("id"), "name": hub.name}
    node.update((key, given[key]) for key in NODE_SETTINGS if key in given and key != "id")
    node["licence"] = licence_text(present)
    lines = [GENERATED, "[node]", *_entries(node)]
    if isinstance(identity.get("serve"), dict):
        lines += ["", "[serve]", *_entries(identity["serve"])]
    table = network(served, present)
    lines += ["", "[network]"]
    for key, value in table.items():
        if isinstance(value, list) and value:
            lines += [f"{key} = [", *(f"  {toml_value(item)}," for item in value), "]"]
        else:
            lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def _entries(table: dict[str, Any]) -> list[str]:
    return [f"{toml_key(key)} = {toml_value(value)}" for key, value in table.items()
            if value is not None]
