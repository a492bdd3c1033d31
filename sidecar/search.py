"""One search, run on one snapshot over the groups the service layer chose: keyword and
semantic rankings, fused, and the items with their titles and snippets.

This module never decides who sees what: `service.search` passes the caller's groups and
collections, and nothing here reads any other group."""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from exporter.contract.wire import COLLECTIONS, record_url
from exporter.shared import search, word_vectors

from . import intent, ranking
from .store import Snapshot

Mode = Literal["keyword", "semantic", "hybrid"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")


def run(snapshot: Snapshot, groups: Sequence[str], collections: Sequence[str], text: str,
        mode: Mode, limit: int, nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """The best `limit` matches of `text` among the records of the caller's groups, within
    `collections` and, if `nodes` is given, of those nodes (`Origins`)."""
    indexes = snapshot.groups(groups)
    text = search.as_asked(text)
    origins = origins_of(snapshot) if nodes is not None or is_hub(snapshot) else None
    only = origins.ids_of(nodes) if origins is not None and nodes is not None else None
    query = None
    if mode != "semantic":
        named = frozenset().union(*(group.names_of(text) for group in indexes))
        query = ranking.keyword_query(text, named)
    found = _found(indexes, query, text, mode, collections, limit, only)
    shown: dict[str, tuple[str, str]] = {}
    for group in indexes:
        shown.update(group.present(query, [hit.id for hit in found.ranked
                                           if hit.group == group.name]))
    items = [{
        "collection": hit.collection,
        "id": hit.id,
        "title": shown[hit.id][0],
        "snippet": shown[hit.id][1],
        "score": round(hit.score, 6),
        "url": record_url(snapshot.base_url, hit.collection, hit.id),
        **provenance(snapshot, hit.id),
    } for hit in found.ranked]
    answer = {"query": text, "mode": mode, "collections": list(collections), "items": items,
              "counts": found.counts}
    if origins is not None and origins.hub:  # a hub's matches, counted by member node
        asked = nodes if nodes is not None else origins.nodes(groups)
        answer["node_counts"] = _by_node(indexes, query, found, mode, collections, only,
                                         asked, origins)
    return answer


def _by_node(indexes: Sequence[ranking.Group], query: Any, found: Found, mode: Mode,
             collections: Sequence[str], only: Sequence[str] | None, asked: Sequence[str],
             origins: Origins) -> dict[str, int]:
    """The matches `found` counted, counted again by the member node of each (`asked`):
    a keyword or hybrid search in one pass over the index's `node` field; a semantic one,
    whose matches are vectors, node by node."""
    if mode == "semantic":
        vector = found.vector
        if vector is None:
            return dict.fromkeys(asked, 0)
        return {node: sum(sum(group.semantic(vector, collections, 1,
                                             origins.ids_of([node]))[1].values())
                          for group in indexes) for node in asked}
    counts = dict.fromkeys(asked, 0)
    for group in indexes:
        close = found.close.get(group.name, []) if mode == "hybrid" else []
        for node, count in group.by_node(query, close, collections, only).items():
            if node in counts:
                counts[node] += count
    return counts


@dataclass
class Found:
    ranked: list[ranking.Hit]
    counts: dict[str, int]
    vector: np.ndarray | None  # the query's, for semantic and hybrid searches
    close: dict[str, list[str]]  # group -> its semantic candidates


def _found(indexes: Sequence[ranking.Group], query: Any, text: str, mode: Mode,
           collections: Sequence[str], limit: int, only: Sequence[str] | None) -> Found:
    """The ranked matches and their counts by collection, among `only`'s records if given.
    A hybrid search's semantic candidates are of a large group's closest lists alone
    (`ranking.Group.semantic`: it asks for no count)."""
    keyword: list[ranking.Hit] = []
    semantic: list[ranking.Hit] = []
    counts = dict.fromkeys(collections, 0)
    depth = limit if mode != "hybrid" else max(limit, ranking.DEPTH)
    if query is not None:
        for group in indexes:
            keyword += group.keyword(query, collections, depth, only)
            if mode == "keyword":
                _add(counts, group.counts(query, collections, only))
    close: dict[str, list[str]] = {}  # group -> its semantic candidates
    vector = None
    if mode != "keyword":
        vector = word_vectors.Embedder.embed([text], serving=True)[0]
        for group in indexes:
            hits, matched = group.semantic(vector, collections, depth, only,
                                           count=mode == "semantic")
            semantic += hits
            close[group.name] = [hit.id for hit in hits]
            if mode == "semantic":
                _add(counts, matched)
    if mode == "hybrid":  # matching a word, or among the closest by meaning
        for group in indexes:
            _add(counts, group.either(query, close[group.name], collections, only))
    ranked = {"keyword": lambda: _ordered(keyword), "semantic": lambda: _ordered(semantic),
              "hybrid": lambda: _lifted(_fused(_ordered(keyword), _ordered(semantic)),
                                        intent.asked_for(text))}[mode]()[:limit]
    return Found(ranked, counts, vector, close)


# A hub's record carries where it comes from and its licence (docs/hub-reference.md, "Serving the
# network"), and so does each of its hits. A node's own records have none of these.
PROVENANCE = ("source_node", "source_node_name", "source_url", "license")


def provenance(snapshot: Snapshot, record_id: str) -> dict[str, str]:
    """The provenance fields of a hit's record, as the record is served; none for a record
    without `source_node` (a node's own)."""
    row = snapshot.records.row(record_id)
    if row is None:
        return {}
    served = snapshot.records.body(row)
    if b'"source_node":' not in served:  # (a key of the record's JSON, never a value's text)
        return {}
    record = json.loads(served)
    return {name: record[name] for name in PROVENANCE if isinstance(record.get(name), str)}


def _add(counts: dict[str, int], found: dict[str, int]) -> None:
    for name, n in found.items():
        counts[name] += n


def _ordered(hits: list[ranking.Hit]) -> list[ranking.Hit]:
    """Best first; ties by collection order, then id: never by the order groups were read."""
    rank = {name: n for n, name in enumerate(COLLECTIONS)}
    return sorted(hits, key=lambda h: (-h.score, rank[h.collection], h.id))


def _lifted(hits: list[ranking.Hit], collections: tuple[str, ...]) -> list[ranking.Hit]:
    """The records of the collections a question asks for (`intent`) lifted by LIFT."""
    if not collections:
        return hits
    return _ordered([ranking.Hit(h.collection, h.id, h.score + intent.LIFT, h.group)
                     if h.collection in collections
                     else h for h in hits])


def _fused(keyword: list[ranking.Hit], semantic: list[ranking.Hit]) -> list[ranking.Hit]:
    """A weighted sum of both sides, each scaled to 0..1: BM25 divided by the best BM25 of
    this answer, similarity mapped from SEMANTIC_FLOOR..1. (Measured against reciprocal rank
    fusion on bench/search_judged.json: see docs/search.md.)"""
    best = keyword[0].score if keyword else 1.0
    scores: dict[str, float] = {}
    hits: dict[str, ranking.Hit] = {}
    for hit in keyword:
        scores[hit.id] = ranking.WEIGHT_KEYWORD * hit.score / best
        hits[hit.id] = hit
    floor = ranking.SEMANTIC_FLOOR
    for hit in semantic:
        closeness = max(0.0, hit.score - floor) / (1.0 - floor)
        scores[hit.id] = scores.get(hit.id, 0.0) + ranking.WEIGHT_SEMANTIC * closeness
        hits.setdefault(hit.id, hit)
    return _ordered([ranking.Hit(h.collection, h.id, scores[h.id], h.group)
                     for h in hits.values()])


def is_hub(snapshot: Snapshot) -> bool:
    """Whether the snapshot is a hub's: its manifest has a `network` (docs/hub.md)."""
    return b'"network":' in snapshot.manifest and \
        json.loads(snapshot.manifest).get("network") is not None


# A served record's `source_node` (a key of its JSON: in a value's text its quotes are
# escaped); node ids are `endpoints.NODE_ID_PATTERN`.
_SOURCE_NODE = re.compile(rb'"source_node":"([A-Za-z0-9._:-]{1,200})"')


class Origins:
    """The node each record of a snapshot comes from: its `source_node` on a hub, the node
    itself for a node's own record. Made once a snapshot, when first needed."""

    def __init__(self, snapshot: Snapshot) -> None:
        own = snapshot.meta.node_id
        records = snapshot.records
        self.ids: dict[str, list[str]] = {}  # node -> its records' ids
        self.groups: dict[str, set[str]] = {}  # node -> the access groups of its records
        for record_id, row in records.ids():
            named = _SOURCE_NODE.search(records.body(row))
            node = named.group(1).decode() if named else own
            self.ids.setdefault(node, []).append(record_id)
            self.groups.setdefault(node, set()).add(records.access[row])
        # A hub by its manifest, never by its records: a restricted record of a node's own
        # that names a source_node would otherwise show in every caller's answer.
        self.hub = is_hub(snapshot)

    def ids_of(self, nodes: Sequence[str]) -> list[str] | None:
        """The ids of these nodes' records; None when that is every record (no filter)."""
        if all(node in nodes for node in self.ids):
            return None
        return [record_id for node in nodes for record_id in self.ids.get(node, ())]

    def nodes(self, groups: Sequence[str]) -> list[str]:
        """The nodes of the records a caller of `groups` may find, in id order."""
        return sorted(node for node, held in self.groups.items() if held & set(groups))


_ORIGINS: weakref.WeakKeyDictionary[Snapshot, Origins] = weakref.WeakKeyDictionary()
_MAKING = threading.Lock()


def origins_of(snapshot: Snapshot) -> Origins:
    with _MAKING:  # (searches run on worker threads: the first makes it, the others wait)
        made = _ORIGINS.get(snapshot)
        if made is None:
            made = _ORIGINS[snapshot] = Origins(snapshot)
        return made
