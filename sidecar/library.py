"""The document library's passages and grounded answers, on one snapshot, over the access
groups the service layer chose. The passages closest to a question are ranked by the
sentence encoder, keywords and word vectors (`_ranked_passages`), each quoting its best
sentence; none where nothing comes near. A question is answered by one sentence: the
sentences closest to it in meaning (the sentence encoder's vectors of each sentence, made
at export) and those of the passages retrieved by keyword and meaning are each scored
(`Score`: closeness in meaning, share of the question's words, whether it gives the kind
of answer asked for, by `answer_kinds`), and the best is the answer where it scores ANSWER
or more, stands in the closest passage, and the question names nothing the caller's
documents never mention: never a made-up one, nor a neighbouring fact presented as one.

Everything is weighed over the caller's groups alone (word rarity, names, scores): a
document the caller may not read changes no answer, score or message.

Every sentence of an answer is quoted as it stands on its page (the PDF's text with its
line breaks undone), so a reader can find it at `url` (`…pdf#page=N`)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from exporter.contract.wire import PUBLIC, document_url
from exporter.shared import encoder, search, word_vectors

from . import answer_kinds, ranking
from .store import Snapshot

PASSAGES = 4  # passages found by keyword and meaning whose every sentence is weighed
DEPTH = 20  # passages each side of retrieval brings, per group
SENTENCE_DEPTH = 40  # sentences closest in meaning weighed too, per group
SENTENCE_POOL = 200  # the closest sentences among which those SENTENCE_DEPTH are found
FOCUS = 0.15  # what the words naming what is asked weigh (`answer_kinds.focus`)
KEY_WORDS = 2  # the question's rarest words the library uses (`Score.rare`)
ANSWER = 0.70  # the best sentence's score (`Score`) at which the question is answered
# How a passage is ranked (`_ranked_passages`): the closeness in meaning of its best
# sentence and of the whole passage (the sentence encoder's), its keyword score (BM25, as a
# share of the best in its group) and its closeness by word vectors.
PASSAGE_WEIGHTS = (0.3, 0.2, 0.1, 0.4)
NEAR = 0.38  # the best sentence's closeness under which the library holds nothing near
QUOTE_STEPS = 2  # sentences on each side of the best one a quote may hold
QUOTE_CHARS = 600  # a passage's quote: its best sentence, with neighbours up to this length
QUOTE_WORDS = 0.4  # what the share of the question's words weighs in choosing that sentence
PASSAGE_POOL = 30  # passages each retrieval brings, per group
NOTHING_NEAR = ("The library holds nothing near this question: its documents are about other "
                "things (GET /api/resources lists them).")
NOT_STATED = ("No sentence of the library states the answer clearly; the passages are the "
              "closest it holds: read them to judge.")
# Words written in capitals that are common words, not names (`is_name`).
COMMON_CAPITALS = frozenset({"OK", "OKAY", "I", "ASAP", "DIY", "FAQ", "PS", "TV"})
_YEAR = re.compile(r"(?:1[89]|2[01])\d\d")
_WORD = re.compile(r"\w+")
_SENTENCE_ENDS = (".", "!", "?", ":", ";", "\"", "“", "(")
_CONTENTS = re.compile(r",\s*pages?\s+\d+")  # "Pulling balsam, page 10.": a contents line


# Words that make a question a question, not what it is about.
ASKING = frozenset(search.all_stems(
    "what when where which who whom whose why how do does did done should shall can could "
    "would will must may might i we you me us my our your best way ways need needs please "
    "tell know"))


class Score(NamedTuple):
    """How well one sentence answers a question, each part 0..1, weighed by WEIGHTS (chosen
    on the tuning questions of the older set, bench/library_judged.json): `sense`, its
    closeness in meaning by the sentence encoder; `before`, that of
    the two sentences before it in its passage (an answer often follows the sentence that
    names its subject: "Partners without a drying room can store seed in a simpler way. ...
    Then keep it in paper envelopes"); `words` and `window`, its weighted share of the
    question's words, alone and with the sentence before it; `kind`, whether it gives the
    kind of answer asked for (`answer_kinds.gives`); `passage`, its passage's closeness in
    meaning; `static`, its closeness by word vectors (wordllama's, which tell words apart
    where the encoder reads a whole); `rare`, the share of the question's KEY_WORDS rarest
    words (that the caller's library uses) in its window; `counted`, whether the question
    counts a number by a unit ("into each cane") that the sentence counts by too (a
    sentence without it is no answer: `answer_kinds.counted_by`)."""
    sense: float
    before: float
    words: float
    window: float
    kind: float
    passage: float
    static: float
    rare: float
    counted: float

    def weighed(self, weights: Sequence[float] = ()) -> float:
        return math.fsum(w * part for w, part in zip(weights or WEIGHTS, self, strict=True))


WEIGHTS = (0.5, 0.1, 0.1, 0.2, 0.05, 0.1, 0.2, 0.1, 0.2)


class Quote(NamedTuple):
    sentence: str
    passage: list[Any]  # [document id, page, label, text]
    score: float
    parts: Score  # what `score` weighs


class Weighed(NamedTuple):
    """What the library holds for one question: its evidence (the best sentence's score),
    and the sentences weighed, best first."""
    evidence: float
    quotes: list[Quote]


NOTHING = Weighed(0.0, [])


def answer(snapshot: Snapshot, groups: Sequence[str], question: str, limit: int
           ) -> dict[str, Any]:
    """What the library holds for a question, from the passages of these groups alone: the
    `limit` passages closest to it, each quoting its best sentence; and an answer, the
    sentence that states it, only where one sentence clearly does (its score reaches ANSWER,
    it stands in the closest passage, and the question names nothing the documents never
    mention). No passages at all where nothing is near (NEAR)."""
    indexes = snapshot.passage_groups(groups)
    asked = search.as_asked(question)  # the response echoes the question as it was sent
    # The question's vectors, by the sentence encoder and the word vectors: made once, for
    # the passages and the weighing alike.
    sense = encoder.Encoder.shared().encode([asked])[0] if indexes else None
    vector = word_vectors.Embedder.embed([asked], serving=True)[0] if indexes else None
    passages = [] if sense is None or vector is None else _ranked_passages(
        indexes, asked, sense, vector, limit)
    unknown = unknown_names(asked, indexes)
    if not passages:
        return _reply(question, [], NOTHING_NEAR if not unknown else (
            f"The library's documents never mention {unknown[0]!r}, and hold nothing near "
            f"this question (GET /api/resources lists them)."))
    found = weigh(indexes, asked, sense=sense, vector=vector)
    weighed = {group.name: _best_weighed(found, group) for group in indexes}
    shown = [_passage(snapshot, indexes, n, one, weighed[one.group.name])
             for n, one in enumerate(passages, 1)]
    if unknown:
        return _reply(question, shown, f"The library's documents never mention {unknown[0]!r}, "
                                       f"so none of them states the answer; the passages are "
                                       f"the closest they hold.")
    chosen = found.quotes[:1] if found.evidence >= ANSWER else []
    top = passages[0]
    if not chosen or chosen[0].passage is not top.group.rows[top.row]:
        # (an answer is a sentence of the closest passage: where the weighing of sentences
        # and the ranking of passages disagree, neither is sure)
        return _reply(question, shown, NOT_STATED)
    citations = [_citation(snapshot, indexes, n, quote.passage, quote.sentence)
                 for n, quote in enumerate(chosen, start=1)]
    text = " ".join(f"{quote.sentence} [{n}]" for n, quote in enumerate(chosen, start=1))
    return {"question": question, "answer": text, "grounded": True, "citations": citations,
            "passages": shown}


class Found(NamedTuple):
    """A passage found for a question: its group, its row, its score, its sentences
    (indexes into the group's `sentences`) and the best of them for the question."""
    group: ranking.Passages
    row: int
    score: float
    members: list[int]
    best: int


def _ranked_passages(indexes: list[ranking.Passages], question: str, sense: np.ndarray,
                     vector: np.ndarray, limit: int) -> list[Found]:
    """The `limit` passages of these groups closest to the question (PASSAGE_WEIGHTS),
    each with its best sentence for the question; none where no sentence comes NEAR."""
    terms = sorted(set(search.stems(question)) - ASKING)
    scored: list[tuple[float, str, int, ranking.Passages]] = []
    nearest = 0.0
    for group in indexes:
        if not group.sentences:
            continue
        keyword = dict(group.keyword(terms, PASSAGE_POOL))
        top = max(keyword.values(), default=0.0) or 1.0
        static = dict(group.semantic(vector, PASSAGE_POOL))
        dense = group.sentence_closeness(sense)
        closest = np.argsort(-dense, kind="stable")[:PASSAGE_POOL]
        nearest = max(nearest, float(dense[closest[0]]))
        rows = set(keyword) | set(static) | {group.sentences[int(n)].row for n in closest}
        for row in sorted(rows):
            members = group.row_sentences[row]
            if not members:
                continue
            parts = (float(dense[members].max()), float(group.senses[row] @ sense),
                     keyword.get(row, 0.0) / top,
                     static.get(row, float(group.vectors[row] @ vector)))
            score = math.fsum(w * max(0.0, part)
                              for w, part in zip(PASSAGE_WEIGHTS, parts, strict=True))
            scored.append((-score, group.name, row, group))
    if nearest < NEAR:
        return []
    scored.sort(key=lambda found: found[:3])
    return [_found(group, row, -negative, set(terms), sense)
            for negative, _, row, group in scored[:limit]]


def _found(group: ranking.Passages, row: int, score: float, terms: set[str],
           sense: np.ndarray) -> Found:
    """A passage found, with its best sentence for the question: the closest in meaning,
    and QUOTE_WORDS times the share of the question's words it holds."""
    members = group.row_sentences[row]
    dense = np.asarray(group.sentence_senses[members] @ sense, dtype=np.float64)
    shares = [len(terms & set(search.all_stems(group.sentences[n].weighed))) / max(1, len(terms))
              for n in members]
    best = int(np.argmax(dense + QUOTE_WORDS * np.asarray(shares)))
    return Found(group, row, score, members, members[best])


def _best_weighed(found: Weighed, group: ranking.Passages) -> dict[int, str]:
    """The sentence the weighing put first in each of the group's passages (by row)."""
    rows = {id(row): n for n, row in enumerate(group.rows)}
    best: dict[int, str] = {}
    for quote in found.quotes:  # (best first)
        row = rows.get(id(quote.passage))
        if row is not None:
            best.setdefault(row, quote.sentence)
    return best


def _quote(found: Found, weighed: dict[int, str]) -> str:
    """A passage's best sentence with the sentences around it, as they stand on the page,
    up to QUOTE_STEPS on each side within QUOTE_CHARS, the nearest first and the one before
    before the one after (an answer often follows the sentence that names its subject).
    Its best sentence is the one the weighing of sentences put first in the passage
    (`weighed`, by row), else the closest."""
    group, members = found.group, found.members
    best = next((n for n in members if group.sentences[n].quoted == weighed.get(found.row)),
                found.best)
    at = members.index(best)
    chosen, reach = [best], [at, at]
    for step in (-1, 1) * QUOTE_STEPS:
        other = reach[step > 0] + step
        if 0 <= other < len(members):
            text = " ".join(group.sentences[n].quoted for n in sorted([*chosen,
                                                                       members[other]]))
            if len(text) <= QUOTE_CHARS:
                chosen.append(members[other])
                reach[step > 0] = other
    return " ".join(group.sentences[n].quoted for n in sorted(chosen))


def _passage(snapshot: Snapshot, indexes: list[ranking.Passages], n: int,
             found: Found, weighed: dict[int, str]) -> dict[str, Any]:
    shown = _citation(snapshot, indexes, n, found.group.rows[found.row],
                      _quote(found, weighed))
    shown["score"] = round(found.score, 3)
    return shown


def _citation(snapshot: Snapshot, indexes: list[ranking.Passages], n: int,
              row: Sequence[Any], quote: str) -> dict[str, Any]:
    """A quote of the page passage `row` is on: its document, page and link."""
    document_id, page, label = str(row[0]), int(row[1]), str(row[2])
    group = next(g for g in indexes if document_id in g.titles)
    # A public PDF is a static file; a restricted one is served by the sidecar only.
    root = snapshot.base_url if group.name == PUBLIC else snapshot.meta.sidecar_url
    return {"n": n, "document_id": document_id, "title": group.titles[document_id],
            "page": page, "page_label": label, "quote": quote,
            "url": f"{document_url(root, document_id)}#page={page}"}


def _reply(question: str, passages: list[dict[str, Any]], message: str) -> dict[str, Any]:
    """An answer the library does not give: the passages (none when nothing is near) and
    why."""
    return {"question": question, "answer": None, "grounded": False, "citations": [],
            "passages": passages, "message": message}


def weigh(indexes: list[ranking.Passages], question: str, weights: Sequence[float] = (), *,
          sense: np.ndarray | None = None, vector: np.ndarray | None = None) -> Weighed:
    """The sentences that may answer a question, from these groups alone, each scored
    (`Score`), best first, and the best score as its evidence. The sentences weighed: those
    closest in meaning to the question, and every sentence of the passages that keyword
    and meaning retrieve (`candidates`). `sense` and `vector`: the question's vectors, where
    the caller made them already."""
    terms = set(search.stems(question)) - ASKING
    term_weights = _weights(indexes, terms)
    used = [t for t in term_weights if any(g.searcher.doc_freq("text", t) for g in indexes)]
    key = set(sorted(used, key=lambda t: (-term_weights[t], t))[:KEY_WORDS])
    for word in answer_kinds.focus(question):  # what is asked for: the answer replaces it
        for stem in set(search.all_stems(word)) & set(term_weights):
            term_weights[stem] *= FOCUS
    whole = math.fsum(term_weights.values())
    if not whole:
        return NOTHING

    def share(stems: set[str]) -> float:  # fsum: the same in any order a set is walked in
        return math.fsum(term_weights[t] for t in stems if t in term_weights) / whole

    if sense is None:
        sense = encoder.Encoder.shared().encode([question])[0]
    kind = answer_kinds.asked(question)
    asked_stems = set(search.all_stems(question))
    per = answer_kinds.units(question) if kind in answer_kinds.STRICT - {"time", "season"} \
        else []
    scored = []
    if vector is None:
        vector = word_vectors.Embedder.embed([question], serving=True)[0]
    answers = answering(kind, per)
    for group, found in candidates(indexes, question, sense, vector, answers):
        dense = np.asarray(group.sentence_senses[found] @ sense, dtype=np.float64)
        closeness = dict(zip(found, dense.tolist(), strict=True))
        static = dict(zip(found, np.asarray(word_vectors.Embedder.embed(
            [group.sentences[n].weighed for n in found], serving=True) @ vector,
            dtype=np.float64).tolist(), strict=True))
        for n in found:
            sentence = group.sentences[n]
            if answers(sentence.quoted) and _quotable(sentence.quoted, asked_stems):
                parts = _score(group, n, sense, closeness, share, kind, key)
                scored.append(Quote(sentence.quoted, group.rows[sentence.row], 0.0,
                                    parts._replace(static=max(0.0, static[n]),
                                                   counted=float(bool(per)))))
    return ranked(scored, weights)


def answering(kind: str | None, per: list[str]) -> Callable[[str], bool]:
    """Whether a sentence can answer a question that asks for this kind of answer, counted
    by these units: where a number, a unit or a time is asked (`answer_kinds.STRICT`), only
    a sentence that gives one, counted by the unit asked (`answer_kinds.counted_by`)."""
    def answers(quoted: str) -> bool:
        return kind not in answer_kinds.STRICT or (
            answer_kinds.gives(kind, quoted)
            and (not per or answer_kinds.counted_by(quoted, per)))
    return answers


def ranked(quotes: list[Quote], weights: Sequence[float] = ()) -> Weighed:
    """Quotes scored with these weights (WEIGHTS by default), best first (equals in the
    order given: by group, then by their place in it), and the best score as evidence."""
    scored = sorted((quote._replace(score=quote.parts.weighed(weights)) for quote in quotes),
                    key=lambda quote: -quote.score)
    return Weighed(scored[0].score if scored else 0.0, scored)


def _score(group: ranking.Passages, n: int, sense: np.ndarray, closeness: dict[int, float],
           share: Callable[[set[str]], float], kind: str | None, key: set[str]) -> Score:
    """The parts of the `n`th sentence's score in `group` (`Score`)."""
    sentence = group.sentences[n]
    before = [m for m in (n - 1, n - 2) if m >= 0 and group.sentences[m].row == sentence.row]
    stems = set(search.all_stems(sentence.weighed))
    window = stems.union(*(search.all_stems(group.sentences[m].weighed) for m in before[:1]))
    near = [closeness[m] if m in closeness else float(group.sentence_senses[m] @ sense)
            for m in before]
    return Score(max(0.0, closeness[n]), max([0.0, *near]), share(stems), share(window),
                 float(answer_kinds.gives(kind, sentence.quoted)),
                 max(0.0, float(group.senses[sentence.row] @ sense)), 0.0,
                 len(key & window) / len(key) if key else 0.0, 0.0)


def candidates(indexes: list[ranking.Passages], question: str, sense: np.ndarray,
               vector: np.ndarray, answers: Callable[[str], bool] = lambda _: True
               ) -> list[tuple[ranking.Passages, list[int]]]:
    """Per group, the sentences to weigh (indexes into its `sentences`, ascending): the
    SENTENCE_DEPTH closest in meaning (the sentence encoder's) among those that can give
    the kind of answer asked for (`answers`: of the SENTENCE_POOL closest), and those of
    the PASSAGES passages of all groups best by keyword (BM25) and meaning (word vectors)
    together."""
    terms = sorted(set(search.stems(question)) - ASKING)
    found: list[tuple[float, str, int]] = []
    for group in indexes:
        keyword = group.keyword(terms, DEPTH)
        top = keyword[0][1] if keyword else 1.0
        scores: dict[int, float] = {row: 0.5 * score / top for row, score in keyword}
        for row, closeness in group.semantic(vector, DEPTH):
            scores[row] = scores.get(row, 0.0) + 0.5 * max(0.0, closeness)
        found += [(-score, group.name, row) for row, score in scores.items()]
    rows = {(name, row) for _, name, row in sorted(found)[:PASSAGES]}
    out = []
    for group in indexes:
        closest = group.closest_sentences(sense, SENTENCE_POOL)
        chosen = set(itertools.islice(
            (n for n in closest if answers(group.sentences[n].quoted)), SENTENCE_DEPTH))
        chosen.update(n for n, s in enumerate(group.sentences) if (group.name, s.row) in rows)
        out.append((group, sorted(chosen)))
    return out


def _quotable(sentence: str, asked_stems: set[str]) -> bool:
    """Whether a sentence can be an answer: a statement (20 characters or more, ending as a
    sentence ends), not a contents line, and not a restatement of the question (a sentence
    whose every word the question has)."""
    if len(sentence) < 20 or not sentence.rstrip("\"”’)").endswith((".", "!", "?")):
        return False
    if _CONTENTS.search(sentence):
        return False
    return not set(search.all_stems(sentence)) <= asked_stems


def unknown_names(question: str, indexes: list[ranking.Passages]) -> list[str]:
    """The question's names that none of these passages mention: a word written as a name
    (`is_name`) that the passages never use (stemmed as the index stems it). A library that
    never mentions the species, place or product a question is about cannot answer it,
    however close its other words come. A common word the library does not use
    ("weedkiller" where it says "herbicide", "OK") never refuses: it is left to the weighing
    of sentences. Only the caller's groups are consulted."""
    found = []
    for match in _WORD.finditer(question):
        word, before = match.group(), question[:match.start()].rstrip()
        if not is_name(word, opens=not before or before.endswith(_SENTENCE_ENDS)):
            continue
        stemmed = search.stems(word)
        if not stemmed or stemmed[0] in ASKING:
            continue  # a stop word or a question word: what it asks, not what about
        if not any(group.searcher.doc_freq("text", stemmed[0]) for group in indexes):
            found.append(word)
    return found


def is_name(word: str, *, opens: bool) -> bool:
    """Whether a word is written as a name: a capital where no sentence opens ("Namur",
    "Arnica"), letters with digits (a code: "P1"), or a year ("2026"). A word in capitals
    that is a common word ("OK") is none."""
    if word.upper() in COMMON_CAPITALS:
        return False
    if any(c.isdigit() for c in word):
        return any(c.isalpha() for c in word) or bool(_YEAR.fullmatch(word))
    return not opens and word[:1].isupper()


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
