"""The search engine, both halves: what the export indexes and how the sidecar asks.

Keyword search is tantivy (BM25, English stemming, fuzzy terms for typos in names, phrase
boosts); semantic search is wordllama's static word vectors, embedded offline at export
time and compared by cosine with numpy. Neither is written by hand here: this module only
says which text goes where, and how a user's words become a query.

The index is split by access group: `search/<group>/` in the bundle holds the tantivy
index and the vectors of that group's records only. A caller's search reads the groups it
holds (public, plus its key's groups) and nothing else, so a restricted record cannot
change a single byte of what another caller gets: not its results, order, scores,
snippets or counts (BM25's term statistics are those of the group's own records).
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from . import encoder
from .contract.wire import COLLECTIONS
from .errors import ExportError

# Bump when what is indexed, or how, changes: every group is then indexed afresh.
SEARCH_VERSION = "4"
STATE = "state.json"  # per group: the version and the rows, in the order of VECTORS
PASSAGE_ROWS = "passages.json"  # per library group: [document id, page, label, text,
# headings] a row (headings: the spans of its heading sentences in text, `library.passages`)
VECTORS = "vectors.npy"  # per group: float32 (rows, DIMENSIONS), unit length
# per library group: float32 (rows, encoder.DIMENSIONS), each passage's text by the sentence
# encoder (`exporter.encoder`), unit length, in the order of PASSAGE_ROWS
SENSES = "senses.npy"
DIMENSIONS = 256
MODEL = {"config": "l2_supercat", "dim": DIMENSIONS}
EMBED_CHARS = 600  # of a record's text: static vectors are averages, and a long tail blurs them

TEXT = "fednode_text"  # analyzer: words, lower case, ASCII-folded, English stop words, stems
NAMES = "fednode_names"  # analyzer: words, lower case, ASCII-folded; no stems, no stop words

# How much a match counts, by field: names (scientific, vernacular, a person's name) most.
BOOST_NAMES = 4.0
BOOST_PHRASE = 4.0  # all the query's words in a name, in order
BOOST_TITLE = 2.0
BOOST_FUZZY = 1.5  # a name one typo away (a constant score: it has no term statistics)
FUZZY_MIN = 5  # shorter words are not matched fuzzily: too many neighbours
QUERY_WORDS = 32
# Semantic matches: cosine similarity at or above this counts as a match (for `counts`,
# and for hybrid results); below it a record has nothing to do with the query.
SEMANTIC_FLOOR = 0.20
# Hybrid: score = WEIGHT_KEYWORD * bm25 / best bm25 + WEIGHT_SEMANTIC * scaled similarity.
WEIGHT_KEYWORD = 0.7
WEIGHT_SEMANTIC = 0.3
DEPTH = 50  # results each side contributes to fusion, per group
SNIPPET_CHARS = 220


def _analyzer(stems: bool) -> tantivy.TextAnalyzer:
    builder = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
               .filter(tantivy.Filter.remove_long(40))
               .filter(tantivy.Filter.lowercase())
               .filter(tantivy.Filter.ascii_fold()))
    if stems:
        builder = (builder.filter(tantivy.Filter.stopword("english"))
                   .filter(tantivy.Filter.stemmer("english")))
    return builder.build()


ANALYZERS = {TEXT: _analyzer(True), NAMES: _analyzer(False)}
# Words that alone match a name by accident ("of" in "Tree of heaven"): as in the text
# analyzer's English list, plus French, Dutch and German articles and prepositions.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with de du des la le les et en het van een der "
    "die das und von".split())


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("collection", stored=True, tokenizer_name="raw", fast=True)
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("names", stored=True, tokenizer_name=NAMES)
    builder.add_text_field("title", stored=True, tokenizer_name=TEXT)
    builder.add_text_field("text", stored=True, tokenizer_name=TEXT)
    return builder.build()


SCHEMA = schema()


def passage_schema() -> tantivy.Schema:
    """A passage of a library PDF: its row in the group's passages.json, and its text."""
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row", stored=True, fast=True)
    builder.add_text_field("text", stored=False, tokenizer_name=TEXT)
    return builder.build()


PASSAGE_SCHEMA = passage_schema()


def _register(index: tantivy.Index) -> tantivy.Index:
    for name, analyzer in ANALYZERS.items():
        index.register_tokenizer(name, analyzer)
    return index


@dataclass(frozen=True)
class Doc:
    """What search knows of one record."""

    collection: str
    id: str
    names: str  # the record's names (`x-fednode.search.names`), one per line
    title: str
    text: str  # every other text field, then the body

    def embedding_text(self) -> str:
        return f"{self.title}\n{self.names}\n{self.text}"[:EMBED_CHARS]


def document(collection: str, record_id: str, title: str, fields: dict[str, Any],
             name_fields: Sequence[str], text_fields: Sequence[str]) -> Doc:
    """A record's searchable text: its names, its title, and its other text fields."""
    names = "\n".join(_strings(fields.get(name)) for name in name_fields)
    texts = [_strings(fields.get(name)) for name in text_fields]
    return Doc(collection, record_id, names.strip(), title,
               "\n".join(text for text in texts if text))


def _strings(value: Any) -> str:
    """The text of a field: a string, the strings of a list, or, for a list of tables
    (a species' distributions, descriptions, vernacular names), the strings in each."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_strings(item) for item in value
                         if isinstance(item, (str, dict)) and item)
    if isinstance(value, dict):
        return " ".join(text for key, item in value.items()
                        if key not in _CODES and (text := _strings(item)))
    return ""


# Terms of a table whose values are codes (en, BE), not words anyone searches for.
_CODES = frozenset({"language", "countryCode"})


# ---- building (export side) -------------------------------------------------------------

def create(folder: Path, schema: tantivy.Schema = SCHEMA) -> tantivy.Index:
    folder.mkdir(parents=True, exist_ok=True)
    return _register(tantivy.Index(schema, path=str(folder)))


def open_index(folder: Path) -> tantivy.Index:
    return _register(tantivy.Index.open(str(folder)))


# An `add_document` that took this long waited: tantivy's queue of documents was full.
WAITED = 50e-6
DRAIN = 0.02  # seconds this thread then sleeps, with nothing else to do, while it drains


def write(index: tantivy.Index, add: Iterable[tantivy.Document],
          remove: Iterable[str] = (), alongside: Iterable[object] = ()) -> None:
    """Remove records by id, add documents, commit once, and leave no merge running. One
    indexing thread: the same documents make the same segments, whatever the machine.

    Documents reach tantivy's indexing thread through a queue of 10,000 that this thread
    fills faster than that one empties it. Once it is full, each add would wait for a place
    and be woken for it: two context switches a document, 1.5 s of the 8.6 s of CPU that
    indexing 100,000 records took (session 29). So an add that waited is taken as the sign
    to step aside while the queue drains: the next step of `alongside` (the export's other
    work in this process: the record vectors) is done then, or, with none left, this thread
    sleeps a moment; the documents after are added in a burst, without waiting. The
    documents, and their order, are the same either way."""
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for record_id in remove:
        writer.delete_documents_by_term("id", record_id)
    clock, steps = time.perf_counter, iter(alongside)
    for doc in add:
        started = clock()
        writer.add_document(doc)
        if clock() - started > WAITED and next(steps, _DONE) is _DONE:
            time.sleep(DRAIN)
    writer.commit()
    writer.wait_merging_threads()


_DONE = object()


def record_document(doc: Doc) -> tantivy.Document:
    return tantivy.Document(collection=doc.collection, id=doc.id, names=doc.names,
                            title=doc.title, text=doc.text)


def passage_document(row: int, text: str) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_unsigned("row", row)  # a plain int would be taken as signed
    doc.add_text("text", text)
    return doc


def link_tree(source: Path, target: Path) -> None:
    """`target` becomes a copy of the index folder `source`, made of hard links: tantivy
    never writes into a file it has written, so the two can share them."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith(".tantivy-"):
            os.link(entry.path, target / entry.name)


def save_vectors(path: Path, matrix: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32))


def seal(folder: Path) -> None:
    """An index folder as the bundle keeps it: tantivy's empty lock files gone, every file
    0600, the folder 0700."""
    for entry in os.scandir(folder):
        if entry.name.startswith(".tantivy-"):
            os.unlink(entry.path)
        else:
            os.chmod(entry.path, 0o600)
    os.chmod(folder, 0o700)


class Embedder:
    """wordllama's 256-dimension model (`l2_supercat`), read from the installed package's own
    files (the wheel ships the weights and the tokenizer), never from the network.

    The model is a table of word vectors: a text's vector is the mean of its tokens' rows,
    made unit length. That is all wordllama's `WordLlamaInference.embed` does for this
    model, and `WordVectors` does the same here without importing the `wordllama` package,
    whose import pulls in requests and pydantic for its downloader: 0.3 to 0.7 s of every
    export that embeds a record. tests/test_search.py checks the vectors equal wordllama's."""

    _lock = threading.Lock()
    _model: WordVectors | None = None
    _serving: WordVectors | None = None

    @classmethod
    def model(cls) -> WordVectors:
        """The model as an export uses it: it remembers the pieces of the texts it embeds."""
        with cls._lock:
            if cls._model is None:
                cls._model = WordVectors.load()
            return cls._model

    @classmethod
    def serving(cls) -> WordVectors:
        """The model as the sidecar uses it on callers' words (queries, questions, and the
        sentences of the passages a question retrieves, restricted ones included): it keeps
        nothing from one call to the next, so no caller's call is faster or slower for what
        another asked or was shown."""
        with cls._lock:
            if cls._serving is None:
                cls._serving = WordVectors.load(remember=False)
            return cls._serving

    @classmethod
    def embed(cls, texts: Sequence[str], *, serving: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSIONS), np.float32)
        return (cls.serving() if serving else cls.model()).embed(list(texts))

    @classmethod
    def groups(cls, texts: Sequence[str]) -> Iterator[tuple[int, np.ndarray]]:
        """`embed` (as an export does) a group of texts at a time (`WordVectors.groups`)."""
        return cls.model().groups(list(texts))


SPACE = "\u2581"  # what the model's normalizer makes of a space, and puts before a text
# A text cut before each run of SPACE that follows another character: "▁Fallopia▁▁japonica"
# is "▁Fallopia", "▁▁japonica".
_PIECES = re.compile(f"{SPACE}+[^{SPACE}]*|[^{SPACE}]+")
# The model's normalizer, as `WordVectors` splits texts by it (anything else: whole texts).
_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": SPACE},
    {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}


def _pieces(text: str) -> list[str]:
    """A text as the model's normalizer makes it, cut into `_PIECES`."""
    if not text:
        return []  # the normalizer leaves an empty text empty
    if "  " in text or text[0] == " " or SPACE in text:  # runs of SPACE: rare
        return _PIECES.findall(SPACE + text.replace(" ", SPACE))
    return (SPACE + text).replace(" ", " " + SPACE).split(" ")


# BPE settings under which a text's tokens may not be its pieces' tokens: none may be set.
_BPE_OFF = ("ignore_merges", "continuing_subword_prefix", "end_of_word_suffix", "dropout")


class WordVectors:
    """Word vectors and their tokenizer; `embed` averages a text's tokens' vectors.

    The tokenizer (Llama's BPE) has no pre-tokenizer: it merges over a whole text at once,
    with nothing to remember between texts, at about 0.2 ms of CPU a record-sized text, most
    of embedding's time. But no token of its vocabulary has SPACE after another character,
    so no merge ever joins a character to a SPACE after it: a text's tokens are its pieces'
    tokens (`_PIECES`), one after the other. Pieces (words, mostly) repeat, so each is
    tokenized once and remembered (up to `PIECE_CHARS` characters, `PIECES_KEPT` of them):
    the same ids, for less CPU the more a node's texts repeat their words (docs/search.md:
    about half on the 100,000-record bench node, whose records are clones; nothing on a real
    checklist of 2,617 taxa). Where that reasoning does not hold (another vocabulary or
    normalizer, a text holding a special token such as `<s>`, which the tokenizer cuts out
    before normalizing), the whole text is tokenized as before. tests/test_search.py
    compares the ids, and the vectors with wordllama's."""

    WEIGHTS = f"weights/{MODEL['config']}_{DIMENSIONS}.safetensors"
    TOKENIZER = f"tokenizers/{MODEL['config']}_tokenizer_config.json"
    BATCH = 256  # texts tokenized together
    SUM_TEXTS = 2048  # texts summed together (`embed`)
    PIECES_KEPT = 200_000  # pieces remembered (their ids), at most: some tens of megabytes
    # A longer piece is tokenized, not remembered: text without spaces (CJK, URLs) is one
    # piece a text, seldom seen twice, and would fill memory.
    PIECE_CHARS = 40

    def __init__(self, table: np.ndarray, tokenizer: Any, *, pieces: bool = True,
                 remember: bool = True) -> None:
        """`pieces=False` tokenizes whole texts (bench/embed_speed.py's reference).
        `remember=False` keeps nothing from one call to the next: no pieces, and the
        tokenizer's own cache of words off (`Embedder.serving`)."""
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.tokenizer = tokenizer
        self.remember = remember
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        # the same ids without the character offsets, which nothing here reads (about a
        # tenth less work; where the installed tokenizers has it)
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        self._bare = self._piece_tokenizer(tokenizer) if pieces else None
        if self._bare is not None:
            self._encode_pieces = getattr(self._bare, "encode_batch_fast",
                                          self._bare.encode_batch)
        self._specials = tuple(token.content for token in
                               tokenizer.get_added_tokens_decoder().values())
        # piece -> its ids; replaced, never cleared, when full: a thread embedding meanwhile
        # keeps the one it took
        self._pieces: dict[str, list[int]] = {}
        if not remember:
            for each in (tokenizer, self._bare):  # (the two share a model; either way)
                if each is not None:  # BPE remembers the words it merged, unless told not to
                    each.model._resize_cache(0)

    @staticmethod
    def _piece_tokenizer(tokenizer: Any) -> Any:
        """A tokenizer of the same model without the normalizer and template, for pieces;
        None where a text's tokens may not be its pieces' tokens. (Read from the parts, not
        the whole tokenizer's 1.2 MB of JSON: that took half a second of every start.)"""
        normalizer, model = tokenizer.normalizer, tokenizer.model
        if (normalizer is None or json.loads(normalizer.__getstate__()) != _NORMALIZER
                or tokenizer.pre_tokenizer is not None or type(model).__name__ != "BPE"
                # merges applied by rank, words ending and going on unmarked, no randomness
                or any(getattr(model, name, True) for name in _BPE_OFF)
                or any(SPACE in token.lstrip(SPACE) for token in tokenizer.get_vocab())):
            return None
        return type(tokenizer)(tokenizer.model)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, as `tokenizer.encode(text, add_special_tokens=False)`
        gives them."""
        if self._bare is None:
            return [e.ids for e in self._encode(texts, is_pretokenized=False,
                                                add_special_tokens=False)]
        if not self.remember:
            known: dict[str, list[int]] = {}  # this call's own
        else:
            if len(self._pieces) > self.PIECES_KEPT:
                self._pieces = {}
            known = self._pieces
        whole = [n for n, text in enumerate(texts)
                 if any(special in text for special in self._specials)]
        split = [_pieces(text) for text in texts]
        for n in whole:
            split[n] = []
        new = list(set().union(*split).difference(known))
        made: dict[str, list[int]] = {}
        if new:
            encoded = self._encode_pieces(new, is_pretokenized=False, add_special_tokens=False)
            made = dict(zip(new, (e.ids for e in encoded), strict=True))
            known.update((piece, found) for piece, found in made.items()
                         if len(piece) <= self.PIECE_CHARS)
        ids = []
        for pieces in split:
            try:
                ids.append(list(chain.from_iterable(map(known.__getitem__, pieces))))
            except KeyError:  # a piece too long to keep: this batch's own
                ids.append([token for piece in pieces
                            for token in (made[piece] if piece in made else known[piece])])
        if whole:
            for n, encoding in zip(whole, self._encode([texts[n] for n in whole],
                                                       is_pretokenized=False,
                                                       add_special_tokens=False),
                                   strict=True):
                ids[n] = encoding.ids
        return ids

    @classmethod
    def load(cls, *, pieces: bool = True, remember: bool = True) -> WordVectors:
        import importlib.util

        from safetensors import safe_open
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("wordllama")  # where it is, without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ExportError("the wordllama package is not installed: reinstall fednode "
                              "(pip install -e .) to get it")
        folder = Path(list(spec.submodule_search_locations)[0])
        with safe_open(str(folder / cls.WEIGHTS), framework="np", device="cpu") as weights:
            table = weights.get_tensor("embedding.weight")
        return cls(table, Tokenizer.from_file(str(folder / cls.TOKENIZER)), pieces=pieces,
                   remember=remember)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, a row a text, as wordllama's
        `embed(texts, norm=True)` gives them (equal to the bit: the rows of a text are
        added in the same order, and wordllama's padding adds only zeros after them).

        wordllama pads a batch to its longest text and multiplies a (texts, tokens, 256)
        array by the padding mask; a batch with one long text made hundreds of megabytes
        of zeros. Here the texts of a group (`SUM_TEXTS`) are summed a token position at a
        time: the longest first, so that the texts that still have a token at a position
        are the first rows, and one gather and one add take that token's row for each of
        them. Each text's rows are still added one after the other, as wordllama's sum
        adds them; and no padding is made. (A text at a time, gathering and summing its
        own rows, took a second more at 100,000 records: two numpy calls a text.)"""
        out = np.empty((len(texts), self.table.shape[1]), np.float32)
        for start, vectors in self.groups(texts):
            out[start:start + len(vectors)] = vectors
        return out

    def groups(self, texts: list[str]) -> Iterator[tuple[int, np.ndarray]]:
        """`embed`, `SUM_TEXTS` texts at a time: where each group starts in `texts`, and its
        vectors (a step of work another can be done between: `search_index`)."""
        for start in range(0, len(texts), self.SUM_TEXTS):
            group = texts[start:start + self.SUM_TEXTS]
            tokens = list(chain.from_iterable(
                self.token_ids(group[at:at + self.BATCH])
                for at in range(0, len(group), self.BATCH)))
            yield start, self._mean_rows(tokens)

    def _mean_rows(self, tokens: list[list[int]]) -> np.ndarray:
        """The unit-length mean of each text's token rows (ids past the table: its last
        row). A text without tokens stays zero, and is NaN once made unit length, as
        wordllama's is."""
        count = len(tokens)
        lengths = np.fromiter(map(len, tokens), np.int64, count)
        ends = np.cumsum(lengths)
        ids = np.fromiter(chain.from_iterable(tokens), np.int64, int(ends[-1]))
        np.clip(ids, 0, self.table.shape[0] - 1, out=ids)
        longest_first = np.argsort(-lengths, kind="stable")
        firsts = (ends - lengths)[longest_first]  # where each text's ids begin, in that order
        # how many texts have a token at each position: the first that many rows
        having = count - np.cumsum(np.bincount(lengths, minlength=int(lengths.max()) + 1))
        summed = np.zeros((count, self.table.shape[1]), np.float32)
        for position, rows in enumerate(having[:-1].tolist()):
            if position == 0:  # the first row as it is (as a sum begins), then each added
                summed[:rows] = self.table[ids[firsts[:rows]]]
            else:
                summed[:rows] += self.table[ids[firsts[:rows] + position]]
        pooled = np.empty_like(summed)
        pooled[longest_first] = summed
        pooled /= np.maximum(lengths, 1).astype(np.float32)[:, np.newaxis]
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled


# ---- asking (sidecar side) ----------------------------------------------------------------

HEADING_CHARS = 60
_CONTINUES = tuple(",;:-–—(\"“'‘/")  # a line ending so goes on in the next
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[A-Z0-9“\"(‘'])")


def sentences(text: str) -> list[str]:
    """Text as sentences, with the line breaks of a PDF's layout undone. A short line (a
    heading, a paragraph's last line) ends what came before it, so a heading is a sentence
    of its own."""
    return [sentence for sentence, _ in marked_sentences(text)]


def marked_sentences(text: str, headings: frozenset[str] = frozenset()
                     ) -> list[tuple[str, bool]]:
    """`sentences`, each with whether it is (a piece of) one of `headings`: lines of the
    text set as headings (`library._read` finds them by their size on the page)."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in (line.strip() for line in text.splitlines()):
        if not line:
            continue
        current.append(line)
        if len(line) < HEADING_CHARS and not line.endswith(_CONTINUES):
            blocks.append(current)
            current = []
    blocks.append(current)
    out = []
    for lines in blocks:
        joined = " ".join(" ".join(lines).split())
        heading = " ".join(lines[-1].split()) if lines and lines[-1] in headings else ""
        # where the heading stands in the block: its end (the line that ended the block)
        from_ = len(joined) - len(heading) if heading and joined.endswith(heading) else None
        at = 0
        for piece in _SENTENCE_END.split(joined):
            begin = joined.index(piece, at)
            at = begin + len(piece)
            if piece.strip():
                out.append((piece.strip(), from_ is not None and begin >= from_))
    return out


def statements(passage: str, headings: Sequence[Sequence[int]] = ()) -> list[tuple[str, str]]:
    """A library passage's sentences, each as weighed and as quoted. `headings` are the
    spans (start, end) of the passage's heading sentences (`library.passages`). Weighed, a
    heading is read with the sentence under it, whose subject it names (its words count for
    that sentence, as in the running text); quoted, the sentence stands without it: a
    heading is not part of what the page says."""
    spans = {int(begin): int(end) for begin, end in headings}
    out, cursor = [], 0
    for sentence in sentences(passage):
        begin = passage.find(sentence, cursor)
        if begin < 0:  # (a sentence is a piece of the text; should it not be, it is quoted whole)
            out.append((sentence, sentence))
            continue
        end = begin + len(sentence)
        cursor = end
        while spans.get(begin, end) < end:  # a heading, with the sentence after it
            begin = spans[begin] + 1
        out.append((sentence, passage[begin:end]))
    return out


def as_asked(text: str) -> str:
    """A caller's words as the library and the records are written, for matching: NFKC
    (full-width letters, ligatures and other compatibility forms as their plain letters),
    and a text without one lower-case letter ("WHEN IS BALSAM PULLED?") in lower case but
    its first letter. The word vectors are case-sensitive, and every capital inside a
    question would otherwise read as a name (`sidecar.library.unknown_names`)."""
    text = unicodedata.normalize("NFKC", text)
    if text.upper() == text and text.lower() != text:  # cased letters, none lower case
        text = text.lower()
        first = next((n for n, c in enumerate(text) if c.isalpha()), None)
        if first is not None:
            text = text[:first] + text[first].upper() + text[first + 1:]
    return text


def words(text: str) -> list[str]:
    """The query's words as the names analyzer sees them (lower case, ASCII-folded)."""
    return ANALYZERS[NAMES].analyze(text)[:QUERY_WORDS]  # type: ignore[no-any-return]


def stems(text: str) -> list[str]:
    """The query's stems (at most QUERY_WORDS: a query's cost grows with its words)."""
    return all_stems(text)[:QUERY_WORDS]


def all_stems(text: str) -> list[str]:
    """Every stem of a text as the text analyzer sees it: for weighing a passage or a
    sentence against a query, where every word counts."""
    return ANALYZERS[TEXT].analyze(text)  # type: ignore[no-any-return]


def keyword_query(text: str) -> tantivy.Query | None:
    """A user's words as one query: each word in names, title and text (stemmed), a name one
    typo away, and the whole phrase in names. None when no word is left to search."""
    names, terms = words(text), stems(text)
    should: list[tantivy.Query] = []
    for word in dict.fromkeys(w for w in names if w not in STOPWORDS):
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "names", word), BOOST_NAMES))
        if len(word) >= FUZZY_MIN:
            should.append(_boost(tantivy.Query.fuzzy_term_query(
                SCHEMA, "names", word, distance=1, transposition_cost_one=True), BOOST_FUZZY))
    for term in dict.fromkeys(terms):
        should.append(_boost(tantivy.Query.term_query(SCHEMA, "title", term), BOOST_TITLE))
        should.append(tantivy.Query.term_query(SCHEMA, "text", term))
    if len(names) > 1:
        phrase: list[str | tuple[int, str]] = list(names)
        should.append(_boost(tantivy.Query.phrase_query(SCHEMA, "names", phrase), BOOST_PHRASE))
    if not should:
        return None
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in should])


def _boost(query: tantivy.Query, boost: float) -> tantivy.Query:
    return tantivy.Query.boost_query(query, boost)


def _within(query: tantivy.Query, collections: Sequence[str]) -> tantivy.Query:
    if list(collections) == list(COLLECTIONS):
        return query
    among = tantivy.Query.boolean_query([
        (tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "collection", name))
        for name in collections])
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, query),
                                        (tantivy.Occur.Must, among)])


@dataclass(frozen=True)
class Hit:
    collection: str
    id: str
    score: float
    group: str


class Group:
    """One access group's index and vectors, opened read-only for one bundle."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        state = json.loads((folder / STATE).read_bytes())
        rows: list[list[str]] = state["rows"]
        self.index = open_index(folder)
        self.searcher = self.index.searcher()
        self.vectors = np.load(folder / VECTORS, mmap_mode="r")
        rank = {name: n for n, name in enumerate(COLLECTIONS)}
        self.rows = rows  # [collection, id, content hash], one per row of `vectors`
        self.codes = np.array([rank[row[0]] for row in rows], np.int8)
        if len(rows) != self.vectors.shape[0]:
            raise ValueError(f"search/{name}: {len(rows)} rows but "
                             f"{self.vectors.shape[0]} vectors")

    def keyword(self, query: tantivy.Query, collections: Sequence[str],
                limit: int) -> list[Hit]:
        """The best `limit` matches within `collections`."""
        hits = []
        found = self.searcher.search(_within(query, collections), limit=limit, count=False)
        for score, address in found.hits:
            doc = self.searcher.doc(address)
            hits.append(Hit(doc["collection"][0], doc["id"][0], float(score), self.name))
        return hits

    def counts(self, query: tantivy.Query, collections: Sequence[str]) -> dict[str, int]:
        """How many records match `query`, in each of `collections`."""
        found = self.searcher.aggregate(_within(query, collections), {"by": {"terms": {
            "field": "collection", "size": len(COLLECTIONS)}}})
        buckets = {bucket["key"]: int(bucket["doc_count"]) for bucket in found["by"]["buckets"]}
        return {name: buckets.get(name, 0) for name in collections}

    def semantic(self, vector: np.ndarray, collections: Sequence[str],
                 limit: int) -> tuple[list[Hit], dict[str, int]]:
        """The records whose cosine with `vector` reaches SEMANTIC_FLOOR: the best `limit`,
        and how many there are in each collection."""
        if not self.rows:
            return [], dict.fromkeys(collections, 0)
        scores = np.asarray(self.vectors @ vector, dtype=np.float32)
        wanted = np.array([COLLECTIONS.index(name) for name in collections], np.int8)
        matches = (scores >= SEMANTIC_FLOOR) & np.isin(self.codes, wanted)
        rows = np.flatnonzero(matches)
        found = np.bincount(self.codes[rows], minlength=len(COLLECTIONS))
        counts = {name: int(found[code]) for name, code in zip(collections, wanted, strict=True)}
        if len(rows) > limit:
            rows = rows[np.argpartition(-scores[rows], limit - 1)[:limit]]
        # Best first; equal scores by row, so the order never depends on the sort's mood.
        rows = rows[np.lexsort((rows, -scores[rows]))]
        return [Hit(self.rows[r][0], self.rows[r][1], float(scores[r]), self.name)
                for r in rows], counts

    def either(self, query: tantivy.Query | None, ids: Sequence[str],
               collections: Sequence[str]) -> dict[str, int]:
        """Per collection, the records matching `query` or among `ids`, each once."""
        parts: list[tuple[tantivy.Occur, tantivy.Query]] = []
        if query is not None:
            parts.append((tantivy.Occur.Should, query))
        if ids:
            parts.append((tantivy.Occur.Should,
                          tantivy.Query.term_set_query(SCHEMA, "id", list(ids))))
        if not parts:
            return dict.fromkeys(collections, 0)
        return self.counts(tantivy.Query.boolean_query(parts), collections)

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
            for field in ("text", "names", "title"):
                generator = tantivy.SnippetGenerator.create(self.searcher, query, SCHEMA, field)
                generator.set_max_num_chars(SNIPPET_CHARS)
                generators.append(generator)
        shown = {}
        for _, address in found.hits:
            doc = self.searcher.doc(address)
            first = {name: (doc[name] or [""])[0] for name in ("names", "title", "text")}
            title = first["title"] or first["names"].split("\n")[0]
            shown[doc["id"][0]] = (title, _snippet(doc, first, generators))
        return shown


def _snippet(doc: tantivy.Document, first: dict[str, str],
             generators: list[tantivy.SnippetGenerator]) -> str:
    for generator in generators:
        snippet = generator.snippet_from_doc(doc)
        if snippet.highlighted():
            return _marked(snippet.fragment(), snippet.highlighted())
    text = " ".join((first["text"] or first["names"]).split())
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
        if not (self.vectors.shape == (len(self.rows), DIMENSIONS)
                and self.senses.shape == (len(self.rows), encoder.DIMENSIONS)):
            raise ValueError(f"passages/{name}: {len(self.rows)} rows but vectors of shape "
                             f"{self.vectors.shape} and senses of shape {self.senses.shape}")

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

    def semantic(self, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(row, cosine) of the passages closest in meaning."""
        if not self.rows:
            return []
        scores = np.asarray(self.vectors @ vector, dtype=np.float32)
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(int(r), float(scores[r])) for r in best]
