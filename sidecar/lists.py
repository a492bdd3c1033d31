"""An inverted file over one access group's record vectors, for searching a large index by
meaning without comparing the query with every record.

Comparing a query with every vector reads them all: 500,000 records × 256 float32 is 512 MB
a search, about 25 ms at this machine's memory bandwidth, half of a hub's whole budget for
a search. An inverted file (IVF, as FAISS's `IndexIVFFlat`) files each record under the
closest of some centroids (k-means over a sample of the vectors); a search compares the
query with the centroids, then with the records of the PROBE closest lists alone, some 3 %
of them. It can miss a record whose list was not probed: measured against the whole
comparison, see docs/search.md.

A group's lists are made from its own vectors alone, and only for a group of FROM records
or more: every smaller index is compared whole, as is every search that must count all its
matches by meaning (semantic mode) or keep to some nodes' records. When they are made, and
when a reload takes them from the snapshot before, is `sidecar.store.Snapshot`'s.

After an export that changed or added some of a group's records, a reload brings the lists
it had up to date (`updated`) rather than make them again: the centroids stay, a record
whose vector is the same stays in its list, and only the others are filed. Making them is
most of a large reload (3.9 s of a 5.5 s load at 500,000 records), which the requests that
meet an export changing public records wait for. Centroids learnt before a fifth of the
records changed (REFRESH) are learnt again, and so are those of a group that a record left
(`ranking.Group.kept_rows`). So a sidecar that has reloaded may file a few records under
other lists than a fresh start would; both find the closest records as docs/search.md
measures."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

FROM = 200_000  # records in a group from which its hybrid searches go through lists
PER_LIST = 500  # records a list holds on average
PROBE = 32  # lists compared with a query
SAMPLE = 50_000  # vectors the centroids are learnt from
ROUNDS = 8  # k-means rounds
CHUNK = 10_000  # vectors read, or compared with every centroid, at once (transient memory:
# CHUNK x lists floats, 40 MB at 500,000 records, and a CHUNK-th of the vectors' pages)
REFRESH = 0.2  # share of the records changed or added since the centroids were learnt, or
# of growth or shrinkage, past which an update learns them again


class Lists:
    """The centroids of one group's vectors and, for each, the rows filed under it."""

    def __init__(self, vectors: np.ndarray, release: Callable[[], None] = lambda: None
                 ) -> None:
        """`release` is called after each part of `vectors` is read (a mapped file's pages
        let go of: `sidecar.vectors`), so that making the lists never holds them all."""
        count = max(1, len(vectors) // PER_LIST)
        self.centroids = _centroids(vectors, count, release)
        self.learnt = len(vectors)  # the records the centroids were learnt among
        self.moved = 0  # records filed since, changed or added
        filed = np.empty(len(vectors), np.int32)
        for start in range(0, len(vectors), CHUNK):
            part = np.asarray(vectors[start:start + CHUNK], np.float32)
            filed[start:start + len(part)] = _nearest(part, self.centroids)
            release()
        self._filed(filed)

    def _filed(self, filed: np.ndarray) -> None:
        self.filed = filed  # each row's list
        self.rows = np.argsort(filed, kind="stable").astype(np.int64)  # list by list
        self.bounds = np.searchsorted(filed[self.rows], np.arange(len(self.centroids) + 1))

    @classmethod
    def updated(cls, earlier: Lists, kept: np.ndarray, vectors: np.ndarray,
                release: Callable[[], None] = lambda: None) -> Lists | None:
        """The lists of `vectors` under `earlier`'s centroids: row n stays in the list of
        `earlier`'s row `kept[n]`, which held the very same vector, and a row whose `kept`
        is negative (a record changed or added) is filed now. None where the centroids were
        learnt before too much changed (REFRESH): then they are made afresh."""
        changed = np.flatnonzero(kept < 0)
        moved = earlier.moved + len(changed)
        if moved > REFRESH * earlier.learnt or \
                abs(len(vectors) - earlier.learnt) > REFRESH * earlier.learnt:
            return None
        filed = np.empty(len(vectors), np.int32)
        same = kept >= 0
        filed[same] = earlier.filed[kept[same]]
        for start in range(0, len(changed), CHUNK):
            rows = changed[start:start + CHUNK]
            filed[rows] = _nearest(np.asarray(vectors[rows], np.float32), earlier.centroids)
            release()
        lists = cls.__new__(cls)
        lists.centroids, lists.learnt, lists.moved = earlier.centroids, earlier.learnt, moved
        lists._filed(filed)
        return lists

    def near(self, vector: np.ndarray, probe: int | None = None) -> np.ndarray:
        """The rows filed under the `probe` (PROBE) centroids closest to `vector`,
        ascending."""
        probe = PROBE if probe is None else probe
        closeness = self.centroids @ vector
        if probe < len(closeness):
            closest = np.argpartition(-closeness, probe - 1)[:probe]
        else:
            closest = np.arange(len(closeness))
        found = [self.rows[self.bounds[c]:self.bounds[c + 1]] for c in closest]
        return np.sort(np.concatenate(found)) if found else np.zeros(0, np.int64)


def _nearest(part: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each vector's closest centroid, CHUNK vectors at a time."""
    return np.concatenate([np.argmax(part[start:start + CHUNK] @ centroids.T, axis=1)
                           for start in range(0, len(part), CHUNK)] or [np.zeros(0, np.int64)])


def _centroids(vectors: np.ndarray, count: int, release: Callable[[], None]) -> np.ndarray:
    """`count` unit centroids by spherical k-means over a sample of the vectors (seeded:
    the same vectors give the same lists)."""
    rng = np.random.default_rng(0)
    picked = np.sort(rng.choice(len(vectors), min(SAMPLE, len(vectors)), replace=False))
    sample = np.empty((len(picked), vectors.shape[1]), np.float32)
    for start in range(0, len(picked), CHUNK // 2):  # (a sample row every few pages)
        sample[start:start + CHUNK // 2] = vectors[picked[start:start + CHUNK // 2]]
        release()
    centroids = sample[rng.choice(len(sample), count, replace=False)].copy()
    for _ in range(ROUNDS):
        nearest = _nearest(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, sample)
        filled = np.bincount(nearest, minlength=count) > 0
        centroids[filled] = sums[filled]  # an empty list keeps its centroid
        centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    return centroids
