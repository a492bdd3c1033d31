"""How the sidecar asks the search index: a caller's words as one tantivy query, each access
group's index opened for reading (`Group`) and the library's passages (`Passages`), with the
ranking constants that weigh names, titles, phrases and typos."""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from exporter.contract.wire import COLLECTIONS
from exporter.shared import encoder
from exporter.shared.search import (
    DIMENSIONS,
    PASSAGE_ROWS,
    PASSAGE_SCHEMA,
    SCHEMA,
    SENSES,
    STATE,
    STOPWORDS,
    VECTORS,
    open_index,
    stems,
    words,
)
from exporter.shared.sentences import SENTENCE_SENSES, table

from . import lists
from .lists import Lists
from .vectors import Vectors

# How much a match counts, by field: names (scientific, vernacular, a person's name) most.
BOOST_NAMES = 4.0
BOOST_PHRASE = 4.0  # all the query's words in a name, in order
BOOST_TITLE = 2.0
BOOST_NAMED = 1.5  # a word of the query that is some record's name, in title and text
BOOST_FUZZY = 1.5  # a name one typo away (a constant score: it has no term statistics)
FUZZY_MIN = 5  # shorter words are not matched fuzzily: too many neighbours
# Semantic matches: cosine similarity at or above this counts as a match (for `counts`,
# and for hybrid results); below it a record has nothing to do with the query.
SEMANTIC_FLOOR = 0.20
# Hybrid: score = WEIGHT_KEYWORD * bm25 / best bm25 + WEIGHT_SEMANTIC * scaled similarity.
WEIGHT_KEYWORD = 0.7
WEIGHT_SEMANTIC = 0.3
DEPTH = 50  # results each side contributes to fusion, per group
NODES_COUNTED = 10_000  # member nodes a hub's matches are counted by, at most
SNIPPET_CHARS = 220


def keyword_query(text: str, named: frozenset[str] = frozenset()) -> tantivy.Query | None:
    """A user's words as one query: each word in names, title and text (stemmed), a name one
    typo away, and the whole phrase in names. None when no word is left to search. A word
    that names something (`named`: stems of the query's words that are some record's name)
    weighs BOOST_NAMED times more in title and text: "alder" in "why do so few of my alder
    seeds germinate" tells what the question is about, "seeds" only what about it."""
    names, terms = words(text), stems(text)
    should: list[tantivy.Query] = []
    for word in dict.fromkeys(w for w in names if w not in STOPWORDS):
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "names", word), BOOST_NAMES))
        if len(word) >= FUZZY_MIN:
            should.append(_boost(tantivy.Query.fuzzy_term_query(
                SCHEMA, "names", word, distance=1, transposition_cost_one=True), BOOST_FUZZY))
    for term in dict.fromkeys(terms):
        lift = BOOST_NAMED if term in named else 1.0
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "title", term),
                             BOOST_TITLE * lift))
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "text", term), lift))
        # the same words in the text a snippet shows: to find them there, weighing nothing
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "shown", term), 0.0))
    if len(names) > 1:
        phrase: list[str | tuple[int, str]] = list(names)
        should.append(_boost(tantivy.Query.phrase_query(SCHEMA, "names", phrase), BOOST_PHRASE))
    if not should:
        return None
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in should])


def _boost(query: tantivy.Query, boost: float) -> tantivy.Query:
    return tantivy.Query.boost_query(query, boost)


def _within(query: tantivy.Query, collections: Sequence[str],
            only: Sequence[str] | None = None) -> tantivy.Query:
    """`query` within `collections` and, if given, among the records `only` names (a search
    of some nodes' records: that filter adds nothing to a match's score)."""
    if only is not None:
        among_ids = _boost(tantivy.Query.term_set_query(SCHEMA, "id", list(only)), 0.0)
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query),
                                             (tantivy.Occur.Must, among_ids)])
    if list(collections) == list(COLLECTIONS):
        return query
    among = tantivy.Query.boolean_query([
        (tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "collection", name))
        for name in collections])
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, query),
                                        (tantivy.Occur.Must, among)])


def _either(query: tantivy.Query | None, ids: Sequence[str]) -> tantivy.Query | None:
    """The records matching `query` or among `ids`; None when that is none."""
    parts: list[tuple[tantivy.Occur, tantivy.Query]] = []
    if query is not None:
        parts.append((tantivy.Occur.Should, query))
    if ids:
        parts.append((tantivy.Occur.Should,
                      tantivy.Query.term_set_query(SCHEMA, "id", list(ids))))
    return tantivy.Query.boolean_query(parts) if parts else None


def _hash64(content_hash: str) -> int:
    """8 bytes of a record's content hash ("sha256:<hex>"), as a number."""
    digest = content_hash.rpartition(":")[2]
    try:
        return int(digest[:16], 16)
    except ValueError:  # not hex: any stable 8 bytes of it
        return int.from_bytes(hashlib.blake2b(content_hash.encode(), digest_size=8).digest(),
                              "big")


@dataclass(frozen=True)
class Hit:
    collection: str
    id: str
    score: float
    group: str


class Group:
    """One access group's index and vectors, opened read-only for one bundle."""

    def __init__(self, name: str, folder: Path, earlier: Group | None = None) -> None:
        """`earlier`: this group in the snapshot before, whose inverted file is taken as it
        is where its vectors are the same file (an export links a group it did not
        change)."""
        self.name = name
        state = json.loads((folder / STATE).read_bytes())
        rows: list[list[str]] = state["rows"]
        self.version = str(state.get("version"))  # what the vectors were made by
        self.index = open_index(folder)
        self.searcher = self.index.searcher()
        self._vectors = Vectors(folder / VECTORS)  # (released after each use: `vectors`)
        self.vectors = self._vectors.array
        rank = {name: n for n, name in enumerate(COLLECTIONS)}
        # Each row of `vectors`: its record's collection (a code: COLLECTIONS' order), id
        # (UTF-8) and content hash (8 bytes of it), each in one array, some 48 bytes a
        # record where the rows as read ([collection, id, content hash]) hold some 330 in
        # Python's objects.
        self.size = len(rows)
        self.codes = np.array([rank[row[0]] for row in rows], np.int8)
        self.ids = np.array([row[1].encode() for row in rows], dtype=bytes)
        # Within one version of the index, the export embeds a record anew only when its
        # content hash changed: a row of an earlier snapshot of the same version with the
        # same id and hash holds the very same vector (`make_lists`).
        self.hashes = np.array([_hash64(row[2]) for row in rows], np.uint64)
        if len(rows) != self.vectors.shape[0]:
            raise ValueError(f"search/{name}: {len(rows)} rows but "
                             f"{self.vectors.shape[0]} vectors")
        # A large group's inverted file (`lists`): the one made of the same file before,
        # else made by `make_lists` (until then its searches compare every vector).
        self.identity = self._vectors.identity
        self.lists: Lists | None = earlier.lists if earlier is not None and \
            earlier.identity == self.identity else None

    def make_lists(self, earlier: Group | None = None) -> None:
        """Make the group's inverted file, if it is large enough for one and has none: the
        lists of `earlier` (this group in the snapshot before) brought up to date where it
        has them (`Lists.updated`), else new ones."""
        if self.lists is not None or self.size < lists.FROM:
            return
        try:
            before = None if earlier is None else earlier.lists
            kept = None if earlier is None or before is None else self.kept_rows(earlier)
            if before is not None and kept is not None:
                self.lists = Lists.updated(before, kept, self.vectors, self._vectors.release)
            if self.lists is None:
                self.lists = Lists(self.vectors, self._vectors.release)
        finally:
            self._vectors.release()

    def kept_rows(self, earlier: Group) -> np.ndarray | None:
        """For each row, the row of `earlier` of the same record and content hash (so of
        the same vector), or -1; None where `earlier`'s lists cannot be brought up to date:
        its vectors were made by another version of the index (each record embedded anew,
        its hash the same), or a record of `earlier` is not in this group any more. A record
        that left the group (deleted, or now restricted) is in the centroids learnt from
        its vector: they are learnt again without it, as the export makes again a group's
        index that a record left, so that nothing of a group remembers a record it no
        longer holds."""
        if earlier.version != self.version:
            return None
        at = dict(zip(earlier.ids.tolist(), range(earlier.size), strict=True))
        kept = np.fromiter((at.get(record, -1) for record in self.ids.tolist()), np.int64,
                           self.size)
        found = kept >= 0
        if np.count_nonzero(np.bincount(kept[found], minlength=earlier.size)) < earlier.size:
            return None  # (ids are unique in a group: each earlier row found at most once)
        kept[found & (earlier.hashes[np.where(found, kept, 0)] != self.hashes)] = -1
        return kept

    def keyword(self, query: tantivy.Query, collections: Sequence[str],
                limit: int, only: Sequence[str] | None = None) -> list[Hit]:
        """The best `limit` matches within `collections` (and among `only`'s records)."""
        hits: list[Hit] = []
        if only is not None and not only:
            return hits
        found = self.searcher.search(_within(query, collections, only), limit=limit,
                                     count=False)
        for score, address in found.hits:
            doc = self.searcher.doc(address)
            hits.append(Hit(doc["collection"][0], doc["id"][0], float(score), self.name))
        return hits

    def counts(self, query: tantivy.Query, collections: Sequence[str],
               only: Sequence[str] | None = None) -> dict[str, int]:
        """How many records match `query`, in each of `collections` (among `only`'s)."""
        if only is not None and not only:
            return dict.fromkeys(collections, 0)
        found = self.searcher.aggregate(_within(query, collections, only), {"by": {"terms": {
            "field": "collection", "size": len(COLLECTIONS)}}})
        buckets = {bucket["key"]: int(bucket["doc_count"]) for bucket in found["by"]["buckets"]}
        return {name: buckets.get(name, 0) for name in collections}

    def semantic(self, vector: np.ndarray, collections: Sequence[str],
                 limit: int, only: Sequence[str] | None = None, *, count: bool = True
                 ) -> tuple[list[Hit], dict[str, int]]:
        """The records whose cosine with `vector` reaches SEMANTIC_FLOOR (among `only`'s, if
        given): the best `limit`, and (`count`) how many there are in each collection. A
        large group (`lists`) asked for every collection, and for neither a count nor some
        nodes' records, compares `vector` with the records of its closest lists alone (a
        search of some collections could find few of theirs there)."""
        if not self.size:
            return [], dict.fromkeys(collections, 0)
        every = set(COLLECTIONS) <= set(collections)  # no collection left out
        near = self.lists.near(vector) if (self.lists is not None and not count and every
                                            and only is None) else None
        scores = self._vectors.compare(vector, near)
        codes = self.codes if near is None else self.codes[near]
        wanted = np.array([COLLECTIONS.index(name) for name in collections], np.int8)
        matches = scores >= SEMANTIC_FLOOR
        if not every:
            matches &= np.isin(codes, wanted)
        if only is not None:
            matches &= np.isin(self.ids, np.array([i.encode() for i in only], dtype=bytes))
        counts = dict.fromkeys(collections, 0)
        if count:
            found = np.bincount(codes[matches], minlength=len(COLLECTIONS))
            counts = {name: int(found[code]) for name, code in zip(collections, wanted,
                                                                   strict=True)}
        if int(np.count_nonzero(matches)) > limit:
            # The best `limit` of all, then those of them that match; when fewer match, the
            # best among the matches alone.
            best = np.argpartition(-scores, limit - 1)[:limit]
            at = best[matches[best]]
            if len(at) < limit:
                at = np.flatnonzero(matches)
                at = at[np.argpartition(-scores[at], limit - 1)[:limit]]
        else:
            at = np.flatnonzero(matches)
        rows = at if near is None else near[at]
        # Best first; equal scores by row, so the order never depends on the sort's mood.
        order = np.lexsort((rows, -scores[at]))
        return [Hit(COLLECTIONS[self.codes[r]], self.ids[r].decode(), float(scores[a]),
                    self.name) for r, a in zip(rows[order], at[order], strict=True)], counts

    def either(self, query: tantivy.Query | None, ids: Sequence[str],
               collections: Sequence[str], only: Sequence[str] | None = None
               ) -> dict[str, int]:
        """Per collection, the records matching `query` or among `ids`, each once (among
        `only`'s records, if given)."""
        joined = _either(query, ids)
        if joined is None:
            return dict.fromkeys(collections, 0)
        return self.counts(joined, collections, only)

    def by_node(self, query: tantivy.Query | None, ids: Sequence[str],
                collections: Sequence[str], only: Sequence[str] | None = None
                ) -> dict[str, int]:
        """Per member node (a hub's records' `source_node`), the records within
        `collections` matching `query` or among `ids`, each once (among `only`'s)."""
        joined = _either(query, ids)
        if joined is None or (only is not None and not only):
            return {}
        found = self.searcher.aggregate(_within(joined, collections, only), {"by": {"terms": {
            "field": "node", "size": NODES_COUNTED}}})
        return {str(bucket["key"]): int(bucket["doc_count"])
                for bucket in found["by"]["buckets"]}

    def names_of(self, text: str) -> set[str]:
        """The stems of the words of `text` that are a name of some live record of this
        group. (The index keeps a replaced or deleted record's terms until its segments
        merge, and `doc_freq` counts them: where it finds any, a live match is looked for.)"""
        return {stem for word in words(text) if self._is_name(word) for stem in stems(word)}

    def _is_name(self, word: str) -> bool:
        if not self.searcher.doc_freq("names", word):
            return False
        query = tantivy.Query.term_query(SCHEMA, "names", word)
        return bool(self.searcher.search(query, limit=1, count=False).hits)  # (live ones)

    def present(self, query: tantivy.Query | None, ids: Sequence[str]
                ) -> dict[str, tuple[str, str]]:
        """For each id: the record's title, and a snippet — a piece of its text around the
        query's words, HTML-escaped, the words in <mark>; the start of its text where no
        word matched (a record found by meaning alone)."""
        if not ids:
            return {}
        found = self.searcher.search(tantivy.Query.term_set_query(SCHEMA, "id", list(ids)),
                                     limit=len(ids), count=False)
        generators = []
        if query is not None:
            for field in ("shown", "names", "title"):
                generator = tantivy.SnippetGenerator.create(self.searcher, query, SCHEMA, field)
                generator.set_max_num_chars(SNIPPET_CHARS)
                generators.append(generator)
        shown = {}
        for _, address in found.hits:
            doc = self.searcher.doc(address)
            first = {name: (doc[name] or [""])[0] for name in ("names", "title", "shown")}
            title = first["title"] or first["names"].split("\n")[0]
            shown[doc["id"][0]] = (title, _snippet(doc, first, generators))
        return shown


def _snippet(doc: tantivy.Document, first: dict[str, str],
             generators: list[tantivy.SnippetGenerator]) -> str:
    for generator in generators:
        snippet = generator.snippet_from_doc(doc)
        if snippet.highlighted():
            return _marked(snippet.fragment(), snippet.highlighted())
    text = " ".join((first["shown"] or first["names"]).split())
    return html.escape(_clip(text), quote=False)


def _marked(fragment: str, ranges: Sequence[Any]) -> str:
    """`fragment` HTML-escaped, with each highlighted range (byte offsets) in <mark>."""
    data = fragment.encode()
    out: list[str] = []
    at = 0
    for span in sorted(ranges, key=lambda r: r.start):
        if span.start < at:
            continue
        out.append(html.escape(data[at:span.start].decode(errors="replace"), quote=False))
        out.append("<mark>" + html.escape(data[span.start:span.end].decode(errors="replace"),
                                          quote=False) + "</mark>")
        at = span.end
    out.append(html.escape(data[at:].decode(errors="replace"), quote=False))
    return " ".join("".join(out).split())


def _clip(text: str) -> str:
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text[:SNIPPET_CHARS].rsplit(" ", 1)[0]
    return cut + " …"


class Passages:
    """One access group's library passages, opened read-only for one bundle."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        state = json.loads((folder / PASSAGE_ROWS).read_bytes())
        self.rows: list[list[Any]] = state["rows"]  # [document id, page, label, text]
        self.titles: dict[str, str] = state["titles"]
        self.index = open_index(folder)
        self.searcher = self.index.searcher()
        self.vectors = np.load(folder / VECTORS, mmap_mode="r")
        self.senses = np.load(folder / SENSES, mmap_mode="r")
        # Each passage's sentences (`exporter.shared.sentences`), row by row, and their
        # vectors by the sentence encoder.
        self.sentences = table(self.rows)
        self.row_sentences: list[list[int]] = [[] for _ in self.rows]  # each row's, in order
        for n, sentence in enumerate(self.sentences):
            self.row_sentences[sentence.row].append(n)
        self.sentence_senses = np.load(folder / SENTENCE_SENSES, mmap_mode="r")
        if not (self.vectors.shape == (len(self.rows), DIMENSIONS)
                and self.senses.shape == (len(self.rows), encoder.DIMENSIONS)
                and self.sentence_senses.shape == (len(self.sentences), encoder.DIMENSIONS)):
            raise ValueError(f"passages/{name}: {len(self.rows)} rows but vectors of shape "
                             f"{self.vectors.shape}, senses of shape {self.senses.shape} and "
                             f"sentence senses of shape {self.sentence_senses.shape}")

    def keyword(self, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """(row, BM25) of the passages best matching these stemmed terms."""
        if not terms or not self.rows:
            return []
        query = tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.term_query(PASSAGE_SCHEMA, "text", term))
            for term in dict.fromkeys(terms)])
        hits = self.searcher.search(query, limit=limit, count=False).hits
        rows = self.searcher.fast_field_values("row", [address for _, address in hits])
        return [(int(row or 0), float(score)) for (score, _), row in zip(hits, rows, strict=True)]

    def closest_sentences(self, sense: np.ndarray, limit: int) -> list[int]:
        """The sentences (indexes into `sentences`) closest in meaning to `sense` (a vector
        by the sentence encoder), best first (equals by index)."""
        if not self.sentences:
            return []
        scores = self.sentence_closeness(sense)
        best = np.argsort(-scores, kind="stable")[:limit]
        return [int(n) for n in best]

    def sentence_closeness(self, sense: np.ndarray) -> np.ndarray:
        """Every sentence's closeness in meaning to `sense`, float32, in `sentences`' order."""
        return np.asarray(self.sentence_senses @ sense, dtype=np.float32)

    def semantic(self, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(row, cosine) of the passages closest in meaning."""
        if not self.rows:
            return []
        scores = np.asarray(self.vectors @ vector, dtype=np.float32)
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(int(r), float(scores[r])) for r in best]
