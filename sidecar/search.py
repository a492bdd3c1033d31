"""One search, run on one snapshot over the groups the service layer chose: keyword and
semantic rankings, fused, and the items with their titles and snippets.

This module never decides who sees what: `service.search` passes the caller's groups and
collections, and nothing here reads any other group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from exporter.contract.wire import COLLECTIONS, record_url
from exporter.shared import search, word_vectors

from . import intent, ranking
from .store import Snapshot

Mode = Literal["keyword", "semantic", "hybrid"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")


def run(snapshot: Snapshot, groups: Sequence[str], collections: Sequence[str], text: str,
        mode: Mode, limit: int) -> dict[str, Any]:
    indexes = snapshot.groups(groups)
    text = search.as_asked(text)
    query = ranking.keyword_query(text) if mode != "semantic" else None
    keyword: list[ranking.Hit] = []
    semantic: list[ranking.Hit] = []
    counts = dict.fromkeys(collections, 0)
    depth = limit if mode != "hybrid" else max(limit, ranking.DEPTH)
    if query is not None:
        for group in indexes:
            keyword += group.keyword(query, collections, depth)
            if mode == "keyword":
                _add(counts, group.counts(query, collections))
    close: dict[str, list[str]] = {}  # group -> its semantic candidates
    if mode != "keyword":
        vector = word_vectors.Embedder.embed([text], serving=True)[0]
        for group in indexes:
            hits, found = group.semantic(vector, collections, depth)
            semantic += hits
            close[group.name] = [hit.id for hit in hits]
            if mode == "semantic":
                _add(counts, found)
    if mode == "hybrid":  # matching a word, or among the closest by meaning
        for group in indexes:
            _add(counts, group.either(query, close[group.name], collections))
    ranked = {"keyword": lambda: _ordered(keyword), "semantic": lambda: _ordered(semantic),
              "hybrid": lambda: _lifted(_fused(_ordered(keyword), _ordered(semantic)),
                                        intent.asked_for(text))}[mode]()[:limit]
    shown: dict[str, tuple[str, str]] = {}
    for group in indexes:
        shown.update(group.present(query, [hit.id for hit in ranked
                                           if hit.group == group.name]))
    items = [{
        "collection": hit.collection,
        "id": hit.id,
        "title": shown[hit.id][0],
        "snippet": shown[hit.id][1],
        "score": round(hit.score, 6),
        "url": record_url(snapshot.base_url, hit.collection, hit.id),
    } for hit in ranked]
    return {"query": text, "mode": mode, "collections": list(collections), "items": items,
            "counts": counts}


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
