"""wordllama's word vectors, read from the installed package (never the network): a text's
vector is the mean of its tokens' rows. The export embeds each record's text with them for
semantic search; the sidecar embeds the words a caller sends."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from exporter.shared.errors import ExportError
from exporter.shared.search import (
    DIMENSIONS,
    MODEL,
)


class Embedder:
    """wordllama's 256-dimension model (`l2_supercat`), read from the installed package's own
    files (the wheel ships the weights and the tokenizer), never from the network.

    The model is a table of word vectors: a text's vector is the mean of its tokens' rows,
    made unit length. That is all wordllama's `WordLlamaInference.embed` does for this
    model, and `WordVectors` does the same here without importing the `wordllama` package,
    whose import pulls in requests and pydantic for its downloader, which an export never
    uses. tests/sidecar/test_search.py checks the vectors equal wordllama's."""

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
    before normalizing), the whole text is tokenized as before. tests/sidecar/test_search.py
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
        vectors (`search_index` embeds a group at a time between tantivy's adds)."""
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
