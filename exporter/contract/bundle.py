"""The private bundle: the one contract between the exporter (which writes it) and the
sidecar (which reads it). It lives under `.fednode/bundle/`, never under `site_out/`, and
holds restricted records, so its folder is 0700 and its files 0600.

- `meta.json`     `Meta`: format version, build id, node id, base and sidecar URLs
- `manifest.json` `schema.json` `openapi.json` `index.html` `changes.ndjson`: the exact bytes
  of the static files `api/manifest.json`, `api/schema.json`, `api/openapi.json`,
  `index.html` and `api/sync/changes.ndjson`
- `records.arrow` one row per live record (public and restricted), `RECORD_COLUMNS`, by
  collection, then access group, then list order (`position`): an uncompressed Arrow IPC
  file, so that both the sidecar and the next export map it into memory and read it without
  copying; each row's `item` is its served bytes and a comma, so a run of rows is a list
  page's items. A group's rows of a collection are one run: a page for a caller is cut from
  runs that the records it may see decide, never the ones it may not
- `events.parquet` the ledger, one row per `feed.Event`, `EVENT_COLUMNS`
- `search/<group>/` the search index of one access group's records (`exporter.search`):
  tantivy's files, `vectors.npy` and `state.json`
- `passages/<group>/` the library's passages of one access group (`exporter.library`):
  tantivy's files, `vectors.npy`, `senses.npy` (`exporter.encoder`) and `passages.json`
- `library/<group>/<id>.pdf` every PDF of the library, in the folder of its access group
  (`public` too): a sidecar answering from an older snapshot reads the folder that snapshot
  knows the document by, never a PDF of another group written since into the same build
- `../site/` not the bundle's own: the public tree of the same build, whose pages for people
  the sidecar serves as they are
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow as pa

from .feed import EVENT_FIELDS

FORMAT = 7  # 6: the library's PDFs by access group (session 22); 7: passages' senses
META = "meta.json"
MANIFEST = "manifest.json"
SCHEMA = "schema.json"
OPENAPI = "openapi.json"
INDEX = "index.html"
CHANGES = "changes.ndjson"
RECORDS = "records.arrow"
EVENTS = "events.parquet"
SEARCH = "search"
PASSAGES = "passages"
LIBRARY = "library"
# The build's public tree, beside the bundle in the same build folder: the sidecar serves
# the pages for people (exporter/pages.py) from it, the very bytes the CDN serves.
SITE = "../site"
# Whole-collection downloads, at the same path in site_out/ and in the bundle.
DOWNLOADS = "download"
DWCA_FILE = "species-dwca.zip"

# (column, type): "string", "int64", "large_binary", or "digest" (16 bytes, fixed width)
RECORD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("collection", "string"),
    ("id", "string"),
    ("access", "string"),
    ("title", "string"),
    ("created_at", "string"),
    ("updated_at", "string"),
    ("content_hash", "string"),
    ("position", "int64"),  # list order within its collection
    ("render_key", "string"),  # what `item` was rendered from
    # The served bytes, then a comma: consecutive rows are, as one slice, the items of a
    # JSON list but for the last comma (a list page is cut from the map, not joined).
    ("item", "large_binary"),
    ("digest", "digest"),  # the first 16 bytes of the served bytes' SHA-256 (their ETag's)
)
ITEM_END = b","  # after each row's served bytes in `item`
DIGEST_SIZE = 16
_EVENT_TYPES = {"seq": "int64"}
EVENT_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (name, _EVENT_TYPES.get(name, "string")) for name in EVENT_FIELDS)


class BundleError(Exception):
    """meta.json is missing, unreadable or of another format."""


@dataclass(frozen=True)
class Meta:
    format: int
    build: str  # changes exactly when any file of the bundle changes
    node_id: str
    base_url: str
    sidecar_url: str
    search: str  # changes exactly when the search index does
    origins: list[str]  # browser origins allowed to call the tool interface

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=2).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Meta:
        try:
            raw = json.loads(data)
            found = raw.get("format") if isinstance(raw, dict) else None
        except ValueError as exc:
            raise BundleError(f"{META} is not JSON ({exc})") from None
        if found != FORMAT:
            raise BundleError(f"the bundle has format {found}, this fednode reads format "
                              f"{FORMAT}; run `fednode export` again")
        try:
            meta = cls(**raw)
        except TypeError as exc:
            raise BundleError(f"{META} is damaged ({exc}); run `fednode export` again") from None
        return meta


def column(table: pa.Table, name: str) -> pa.Array:
    """One column of a table read from the bundle, as one array: without a copy when it is
    one chunk, as the export writes it (the sidecar and the next export read
    `records.arrow` this way, mapped)."""
    found = table.column(name)
    return found.chunk(0) if found.num_chunks == 1 else found.combine_chunks()
