"""The sentence encoder's vectors, kept on this machine beyond one node's builds.

An export takes a passage's vector from the live build when its text is unchanged
(`documents._senses`). A node's very first export, a fresh clone of its repository, an
export after `.fednode/` was removed, or a second node holding the same documents have no
live build to take them from, and would encode every passage and sentence again (about
10 ms each on one core). This cache keeps each vector made, by the SHA-256 of the encoder's
version and the text, in one SQLite file:

- `$FEDNODE_CACHE_DIR/senses.sqlite3`, else `$XDG_CACHE_HOME/fednode/...`, else
  `~/.cache/fednode/...`; `FEDNODE_CACHE_DIR=` (empty) keeps no cache;
- the folder is the user's alone (0700) and the file too (0600): the vectors are of
  restricted documents' text as well as public;
- a vector is what the encoder made for that text, to the bit; another version of the
  encoder has other keys, so its vectors are never taken;
- an entry is taken only when it is a vector the encoder could have made (`sound`): one
  of another length or type, or holding NaN or an infinity (a NaN passage is near no
  question: the library would answer nothing), is passed by, its text encoded again and
  the entry written anew;
- the cache never stops an export: a file that cannot be opened, read or written (damaged,
  locked, a full disk, a read-only home) is passed by, and the texts are encoded."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from contextlib import closing, suppress
from pathlib import Path

import numpy as np

from exporter.shared import encoder

FILE = "senses.sqlite3"
ENV = "FEDNODE_CACHE_DIR"
WAIT = 5.0  # seconds to wait for another process's write
_ROW_BYTES = encoder.DIMENSIONS * 4
_CHUNK = 500  # keys a query asks for at once (SQLite's limit on parameters is higher)


def folder() -> Path | None:
    """Where the cache is, or None when the user keeps none."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fednode"


def _key(text: str) -> bytes:
    return hashlib.sha256(f"{encoder.VERSION}\0{text}".encode()).digest()


def _connect(where: Path) -> sqlite3.Connection:
    """The cache's file, the folder and the file made the user's alone (0700, 0600) if they
    were made otherwise; a folder or file of another user, or a link, is not used."""
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _own(folder, 0o700)
        descriptor = os.open(FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600,
                             dir_fd=folder)
    finally:
        os.close(folder)
    try:
        _own(descriptor, 0o600)
    finally:
        os.close(descriptor)
    connection = sqlite3.connect(where / FILE, timeout=WAIT)
    connection.execute("CREATE TABLE IF NOT EXISTS vectors "
                       "(key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
    return connection


def _own(descriptor: int, mode: int) -> None:
    if os.fstat(descriptor).st_uid != os.geteuid():
        raise OSError("the vector cache belongs to another user")
    os.fchmod(descriptor, mode)


def look_up(texts: Sequence[str]) -> dict[int, np.ndarray]:
    """The vectors the cache holds for these texts, by the text's position."""
    where = folder()
    if where is None or not texts:
        return {}
    positions: dict[bytes, list[int]] = {}
    for n, text in enumerate(texts):
        positions.setdefault(_key(text), []).append(n)
    keys = list(positions)
    found: dict[int, np.ndarray] = {}
    with suppress(OSError, sqlite3.Error), closing(_connect(where)) as connection:
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            rows = connection.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                chunk).fetchall()
            for key, blob in rows:
                vector = _vector(blob)
                if vector is not None:
                    for n in positions[key]:
                        found[n] = vector
    return found


def _vector(blob: object) -> np.ndarray | None:
    """The vector an entry holds, or None when it is not one the encoder could make."""
    if not isinstance(blob, bytes) or len(blob) != _ROW_BYTES:
        return None
    vector = np.frombuffer(blob, "<f4").astype(np.float32)
    return vector if sound(vector[np.newaxis])[0] else None


def sound(vectors: np.ndarray) -> np.ndarray:
    """Which rows of `vectors`, read back from this cache or from a build, are vectors the
    encoder could have made: float32, of its DIMENSIONS, every value finite. None are when
    the matrix is of another shape or type."""
    if vectors.ndim != 2 or vectors.shape[1] != encoder.DIMENSIONS or \
            vectors.dtype != np.float32:
        return np.zeros(len(vectors) if vectors.ndim else 0, bool)
    # a row's sum is finite when all its values are (a float64 sum of float32 values cannot
    # overflow), and needs no copy of the matrix
    return np.isfinite(vectors.sum(axis=1, dtype=np.float64))


def keep(texts: Sequence[str], vectors: np.ndarray) -> None:
    """Keep the vectors the encoder made for these texts (a row a text), over any entry
    they had (one `look_up` passed by as damaged)."""
    where = folder()
    if where is None or not texts:
        return
    rows = [(_key(text), np.ascontiguousarray(vector, "<f4").tobytes())
            for text, vector in zip(texts, vectors, strict=True)]
    with suppress(OSError, sqlite3.Error), closing(_connect(where)) as connection:
        with connection:  # one transaction
            connection.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
