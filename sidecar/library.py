"""Grounded answers from the document library, on one snapshot, over the access groups the
service layer chose: retrieve passages (keyword and meaning), rank their sentences, and
compose the answer from the best supporting sentences, each with its citation. Where no
sentence supports the question well enough, there is no answer — never a made-up one.

Every sentence of an answer is quoted as it stands on its page (the PDF's text with its
line breaks undone), so a reader can find it at `url` (`…pdf#page=N`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from exporter.contract.wire import PUBLIC, document_url
from exporter.shared import encoder, search, word_vectors

from . import ranking
from .store import Snapshot

PASSAGES = 4  # passages whose sentences are weighed
DEPTH = 20  # passages each side of retrieval brings, per group
# A sentence supports the question when its score reaches SUPPORT (0..1: half the share of
# the question's words it holds, each weighted by how rare it is in the library, half its
# closeness in meaning).
SUPPORT = 0.25
# The question is answered only if its evidence reaches EVIDENCE: the weighted sum of the
# best passage's share of the question's words, the best passage's closeness in meaning by
# word vectors and by the sentence encoder, and the best share of two sentences that follow
# each other (`Evidence`). These four settings are calibrated on bench/library_judged.json with
# bench/library_quality.py --sweep: see docs/library.md.
EVIDENCE_WEIGHTS = (0.1, 0.3, 0.4, 0.2)
EVIDENCE = 0.47
NO_ANSWER = ("The library holds no passage that answers this question; try other words, or "
             "ask about what its documents cover (GET /api/resources lists them).")
# A word the tokenizer of the embedding model splits into this many pieces or more is rare in
# the text its vocabulary was learnt from (common words are one or two pieces).
RARE_PIECES = 3
_WORD = re.compile(r"\w+")
_SENTENCE_ENDS = (".", "!", "?", ":", ";", "\"", "“", "(")


# Words that make a question a question, not what it is about.
ASKING = frozenset(search.all_stems(
    "what when where which who whom whose why how do does did done should shall can could "
    "would will must may might i we you me us my our your best way ways need needs please "
    "tell know"))


class Candidate(NamedTuple):
    group: str
    row: int
    score: float


class Evidence(NamedTuple):
    """How well the library covers a question, each part 0..1, of the passages retrieved:
    the best passage's weighted share of the question's words; its closeness in meaning by
    word vectors (wordllama's, which retrieval uses too); its closeness by the sentence
    encoder (`exporter.shared.encoder`, which reads words in their context: a question put in other
    words than the passage's comes close by it, where word vectors cannot tell a passage that
    answers from one that uses the same words); and the best share of two sentences that
    follow each other in one passage (where the question's words stand close together, the
    passage is more likely about what it asks). Each is the best of its kind, not
    necessarily of one passage."""
    passage_words: float
    passage_meaning: float
    passage_sense: float
    pair_words: float

    def weighed(self, weights: Sequence[float] = ()) -> float:
        return sum(w * part for w, part in zip(weights or EVIDENCE_WEIGHTS, self, strict=True))


class Quote(NamedTuple):
    sentence: str
    passage: list[Any]  # [document id, page, label, text]
    score: float


class Weighed(NamedTuple):
    """What the library holds for one question: its evidence, and the sentences of the
    passages retrieved for it, best first."""
    evidence: Evidence
    quotes: list[Quote]


NOTHING = Weighed(Evidence(0.0, 0.0, 0.0, 0.0), [])


def answer(snapshot: Snapshot, groups: Sequence[str], question: str, limit: int
           ) -> dict[str, Any]:
    indexes = snapshot.passage_groups(groups)
    asked = search.as_asked(question)  # the response echoes the question as it was sent
    unknown = unknown_names(asked, indexes)
    if unknown:
        return _refusal(question, f"The library's documents never mention {unknown[0]!r}, so "
                                  f"they cannot answer this question; ask about what they "
                                  f"cover (GET /api/resources lists them).")
    found = weigh(indexes, asked)
    chosen = choose(found.quotes, limit) if found.evidence.weighed() >= EVIDENCE else []
    if not chosen:
        return _refusal(question, NO_ANSWER)
    citations = []
    for n, (sentence, cited, _) in enumerate(chosen, start=1):
        document_id, page, label = str(cited[0]), int(cited[1]), str(cited[2])
        group = next(g for g in indexes if document_id in g.titles)
        # A public PDF is a static file; a restricted one is served by the sidecar only.
        root = snapshot.base_url if group.name == PUBLIC else snapshot.meta.sidecar_url
        citations.append({"n": n, "document_id": document_id,
                          "title": group.titles[document_id], "page": page,
                          "page_label": label, "quote": sentence,
                          "url": f"{document_url(root, document_id)}#page={page}"})
    text = " ".join(f"{sentence} [{n}]" for n, (sentence, _, _) in enumerate(chosen, start=1))
    return {"question": question, "answer": text, "citations": citations, "grounded": True}


def weigh(indexes: list[ranking.Passages], question: str) -> Weighed:
    """Retrieve the passages for a question from these groups, and weigh them and their
    sentences: its evidence, and its quotes best first."""
    terms = set(search.stems(question)) - ASKING
    weights = _weights(indexes, terms)
    whole = math.fsum(weights.values())
    if not whole:
        return NOTHING

    def share(stems: set[str]) -> float:  # fsum: the same in any order a set is walked in
        return math.fsum(weights[t] for t in stems if t in weights) / whole

    vector = word_vectors.Embedder.embed([question], serving=True)[0]
    found: list[Candidate] = []
    for group in indexes:
        keyword = group.keyword(sorted(terms), DEPTH)
        top = keyword[0][1] if keyword else 1.0
        scores: dict[int, float] = {row: 0.5 * score / top for row, score in keyword}
        for row, closeness in group.semantic(vector, DEPTH):
            scores[row] = scores.get(row, 0.0) + 0.5 * max(0.0, closeness)
        found += [Candidate(group.name, row, score) for row, score in scores.items()]
    found.sort(key=lambda c: (-c.score, c.group, c.row))
    by_name = {group.name: group for group in indexes}
    passages = [(by_name[c.group].rows[c.row], by_name[c.group].vectors[c.row],
                 by_name[c.group].senses[c.row]) for c in found[:PASSAGES]]
    if not passages:
        return NOTHING
    found_in = [(row, search.statements(str(row[3]), row[4] if len(row) > 4 else ()))
                for row, _, _ in passages]
    split = [(row, [weighed for weighed, _ in statements]) for row, statements in found_in]
    # (weighed, quoted, passage): one sentence may be weighed alike in two passages but
    # quoted apart (under a heading in one, not in the other): each is quoted from its own.
    in_order = [(weighed, quoted, row) for row, statements in found_in
                for weighed, quoted in statements]
    unique = list(dict.fromkeys(sentence for sentence, _, _ in in_order))
    near = word_vectors.Embedder.embed(unique, serving=True) @ vector if unique else np.zeros(0)
    stems = {sentence: set(search.all_stems(sentence)) for sentence in unique}  # once each
    words = {sentence: share(stems[sentence]) for sentence in unique}
    meaning = {sentence: max(0.0, float(c)) for sentence, c in zip(unique, near, strict=True)}
    # Each sentence with the next, if any (the analyzer splits words at the space between).
    pairs = [share(stems[sentences[n]].union(*(stems[s] for s in sentences[n + 1:n + 2])))
             for _, sentences in split for n in range(len(sentences))]
    sense = encoder.Encoder.shared().encode([question])[0]
    evidence = Evidence(max(share(set(search.all_stems(str(row[3])))) for row, _, _ in passages),
                        max(max(0.0, float(v @ vector)) for _, v, _ in passages),
                        max(max(0.0, float(s @ sense)) for _, _, s in passages),
                        max(pairs, default=0.0))
    quotes = [Quote(quoted, row, 0.5 * words[sentence] + 0.5 * meaning[sentence])
              for sentence, quoted, row in in_order]
    quotes.sort(key=lambda q: -q.score)  # stable: the better passage first among equals
    return Weighed(evidence, quotes)


def choose(quotes: list[Quote], limit: int) -> list[Quote]:
    """The best `limit` sentences that reach SUPPORT, best first, each once."""
    seen: set[str] = set()
    chosen = []
    for quote in quotes:
        sentence = quote.sentence
        if sentence in seen or quote.score < SUPPORT or len(sentence) < 20 or \
                not sentence.rstrip("\"”’)").endswith((".", "!", "?")):
            continue  # a heading, a caption, a fragment: not a statement to quote
        seen.add(sentence)
        chosen.append(quote)
        if len(chosen) == limit:
            break
    return chosen


def _refusal(question: str, message: str) -> dict[str, Any]:
    return {"question": question, "answer": None, "citations": [], "grounded": False,
            "message": message}


def unknown_names(question: str, indexes: list[ranking.Passages]) -> list[str]:
    """The question's words that name something none of these passages mention: a word
    the passages never use (stemmed as the index stems it) that is written as a name
    (a capital letter not opening a sentence, or a digit) or is rare (`RARE_PIECES`). A
    library that never mentions what a question is about cannot answer it, however close
    its other words come. An ordinary word it does not use ("fridge" where the library says
    "refrigerator") is left to the evidence step."""
    found = []
    tokenizer = word_vectors.Embedder.serving().tokenizer
    for match in _WORD.finditer(question):
        word, before = match.group(), question[:match.start()].rstrip()
        opens = not before or before.endswith(_SENTENCE_ENDS)  # a capital there is no name
        named = (not opens and word[:1].isupper()) or any(c.isdigit() for c in word)
        if not named and len(tokenizer.encode(word.lower(), add_special_tokens=False).ids) \
                < RARE_PIECES:
            continue
        stemmed = search.stems(word)
        if not stemmed or stemmed[0] in ASKING:
            continue  # a stop word or a question word: what it asks, not what about
        if not any(group.searcher.doc_freq("text", stemmed[0]) for group in indexes):
            found.append(word)
    return found


def _weights(indexes: list[ranking.Passages], terms: set[str]) -> dict[str, float]:
    """How much each of the question's words tells (BM25's inverse document frequency over
    the passages this caller may read): a word the library never uses weighs the most, and
    a sentence without it supports the question little."""
    total = sum(len(group.rows) for group in indexes)
    weights = {}
    for term in terms:
        found = sum(group.searcher.doc_freq("text", term) for group in indexes)
        weights[term] = math.log(1 + (total - found + 0.5) / (found + 0.5))
    return weights
