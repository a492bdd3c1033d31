"""One taxon across the network: the records that name it, by the node that holds them.

A record names a taxon by a scientific name in one field of its collection (`NAMING`): a
species record by its `scientificName`, a treatment by `targetSpecies`, a resource by
`relatedSpecies`, a germination result by `species`, the fields by which a species' page
links the records that name it (`exporter/site/record_page.py`, `NAMES_SPECIES`). Two names are of
one taxon when GBIF's name parser gives them the same canonical name, case aside
(`exporter/shared/names.py`, as the Darwin Core import splits names): "Fallopia japonica",
"fallopia japonica (Houtt.) Ronse Decr." and "FALLOPIA JAPONICA Houtt." are one taxon,
"Platanus x hispanica Mill. ex Münchh." and "Platanus × hispanica" another.

`Taxa` is made once a snapshot, over every record, restricted ones included: it says which
records name a taxon, never whether a caller may read them. `service.taxon` reads each
through the caller's `View`, and `answer` groups what the caller may read by the node that
holds it (a hub's member, its `source_node`; the node itself for its own records), each
record whole and apart: two nodes' records of one taxon are never merged."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from exporter.shared.names import canonical_names

from .store import Snapshot

# The collections whose records name species, each with its naming field, in answer order.
NAMING = {"species": "scientificName", "treatments": "targetSpecies",
          "resources": "relatedSpecies", "germination": "species"}


class Named(NamedTuple):
    """A record that names a taxon: where to read it, and the node that holds it."""

    collection: str
    id: str
    node: str


class Holder(NamedTuple):
    """A node, as a taxon's answer names it."""

    name: str
    licence: str | None


def canonical(name: str) -> str:
    """The canonical name of the taxon a scientific name names, as the parser writes it."""
    return canonical_names([name])[0]


def key_of(name: str) -> str:
    """What two names of one taxon share: the canonical name, casefolded."""
    return " ".join(name.casefold().split())


def names_in(value: Any) -> list[str]:
    """The names a naming field holds: one name, or a list of them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [name for name in value if isinstance(name, str)]
    return []


class Taxa:
    """Which records of a snapshot name each taxon, in each collection's list order, and
    each node that holds records, with its name and licence."""

    def __init__(self, snapshot: Snapshot) -> None:
        records = snapshot.records
        manifest = json.loads(snapshot.manifest)
        own = snapshot.meta.node_id
        node = manifest.get("node") or {}
        listed = (manifest.get("network") or {}).get("members") or ()
        members = {member.get("node_id"): member.get("licence") for member in listed}
        # A holder's name is the manifest's (a hub's member), never a record's: a restricted
        # record's fields are read only through the caller's view.
        member_names = {member.get("node_id"): member.get("node_name") for member in listed}
        self.nodes: dict[str, Holder] = {own: Holder(str(node.get("name", own)),
                                                     node.get("licence"))}
        groups = sorted(set(records.access))
        found: list[tuple[Named, list[str]]] = []
        for collection, field in NAMING.items():
            for row in records.listed(collection, groups).rows.tolist():
                data = json.loads(records.body(row))
                source = data.get("source_node") or own
                if source not in self.nodes:
                    self.nodes[source] = Holder(str(member_names.get(source) or source),
                                                members.get(source))
                found.append((Named(collection, data["id"], source),
                              names_in(data.get(field))))
        distinct = sorted({name for _, names in found for name in names})
        keys = dict(zip(distinct, map(key_of, canonical_names(distinct)), strict=True))
        self.named: dict[str, list[Named]] = {}
        for named, names in found:
            for key in dict.fromkeys(keys[name] for name in names):
                self.named.setdefault(key, []).append(named)

    def naming(self, canonical_name: str) -> list[Named]:
        """The records that name the taxon of this canonical name, whoever may read them."""
        return self.named.get(key_of(canonical_name), [])


_TAXA: weakref.WeakKeyDictionary[Snapshot, Taxa] = weakref.WeakKeyDictionary()
_MAKING = threading.Lock()


def taxa_of(snapshot: Snapshot, groups: Sequence[str] = ()) -> Taxa:
    """The snapshot's `Taxa`, made by the first caller that needs it (on a worker thread:
    the others wait for it). `groups` is not read: the index covers every record, and the
    service layer reads each record it names through the caller's view."""
    with _MAKING:
        made = _TAXA.get(snapshot)
        if made is None:
            made = _TAXA[snapshot] = Taxa(snapshot)
        return made


def made(snapshot: Snapshot) -> bool:
    """Whether the snapshot's `Taxa` has been made (a reloaded snapshot then makes its own
    ahead of callers: `service.prepare`)."""
    return snapshot in _TAXA


def answer(taxa: Taxa, name: str, canonical_name: str, collections: Sequence[str],
           readable: Iterable[tuple[Named, bytes]]) -> dict[str, Any]:
    """The answer for a taxon: the records the caller may read (`readable`, each with its
    served bytes, in the index's order), grouped by the node that holds them; each holder's
    lists and the counts cover the naming collections the caller may read (`collections`)."""
    holders: dict[str, dict[str, Any]] = {}
    counts = dict.fromkeys(collections, 0)
    for named, body in readable:
        holder = holders.get(named.node)
        if holder is None:
            node = taxa.nodes[named.node]
            holder = holders[named.node] = {
                "node": {"id": named.node, "name": node.name}, "license": node.licence,
                **{collection: [] for collection in collections}}
        holder[named.collection].append(json.loads(body))
        counts[named.collection] += 1
    ordered = sorted(holders.values(),
                     key=lambda holder: (holder["node"]["name"].casefold(), holder["node"]["id"]))
    return {"name": name, "canonical": canonical_name, "holders": ordered, "counts": counts}
