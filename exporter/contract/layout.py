"""Where a record's JSON file sits under site_out/, and the folder limit the layout keeps to.

Netlify refuses a deploy in which one folder holds more than 54,000 files. A collection's
records are therefore spread over 256 folders named by the first byte of the SHA-256 of
their id, in hex (`api/species/3e/7a3c752f-....json`): even for ids that share a prefix
(time-ordered UUIDv7, or made in sequence). docs/operations.md ("At scale") says how the URL
`/api/{collection}/{id}` still reaches that file."""

from __future__ import annotations

import functools
import hashlib

FOLDER_LIMIT = 54_000  # files (and subfolders) in one folder of site_out/
RECORD_RULES_MAX = 10_000  # records routed one rule each in _redirects, at most


@functools.lru_cache(maxsize=1 << 18)
def shard(record_id: str) -> str:
    """The record's shard folder: the first byte of the SHA-256 of its id, in hex.
    (Remembered: an export asks for each record's several times, for its file, its page and
    every link to it: about a second of CPU at 100,000 records.)"""
    return hashlib.sha256(record_id.encode()).hexdigest()[:2]


def record_file(collection: str, record_id: str) -> str:
    """The file under site_out/ that answers /api/{collection}/{id}."""
    return f"api/{collection}/{shard(record_id)}/{record_id}.json"
