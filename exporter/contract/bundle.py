"""The private bundle: the one contract between the exporter (which writes it) and the
sidecar (which reads it). It lives under `.fednode/bundle/`, never under `site_out/`, and
holds restricted records, so its folder is 0700 and its files 0600.

- `meta.json`     `Meta`: format version, build id, node id, base and sidecar URLs
- `manifest.json` `schema.json` `openapi.json` `index.html` `changes.ndjson`: the exact bytes
  of the static files `api/manifest.json`, `api/schema.json`, `api/openapi.json`,
  `index.html` and `api/sync/changes.ndjson`
- `records/00000.arrow`, `00001.arrow`... the records table, one row per live record
  (public and restricted), `RECORD_COLUMNS`, by collection, then access group, then list
  order (`position`), cut into segments (`segments`): each holds rows of one collection and
  access group, at most `SEGMENT_ROWS`, cut where the group's own rows reach a multiple of it,
  so that an edit rewrites one segment, not the whole table (226 MB at 100,000 records). Each
  is an uncompressed Arrow IPC file, so that the next export maps it into memory and reads it
  without copying, and the sidecar reads a record's bytes at their offset in the file; each
  row's `item` is its served bytes and a comma, so a run of rows of one segment is a list
  page's items. A page for a caller is cut from runs that the records it may see decide,
  never the ones it may not
- `events.parquet` the ledger, one row per `feed.Event`, `EVENT_COLUMNS`
- `search/<group>/` the search index of one access group's records (`exporter.shared.search`):
  tantivy's files, `vectors.npy` and `state.json`
- `passages/<group>/` the library's passages of one access group (`exporter.library.documents`):
  tantivy's files, `vectors.npy`, `senses.npy` (`exporter.shared.encoder`) and `passages.json`
- `library/<group>/<id>.pdf` every PDF of the library, in the folder of its access group
  (`public` too): a sidecar answering from an older snapshot reads the folder that snapshot
  knows the document by, never a PDF of another group written since into the same build
- `../site/` not the bundle's own: the public tree of the same build, whose pages for people
  the sidecar serves as they are
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa

from .builds import META
from .feed import EVENT_FIELDS

# Bumped when the bundle changes shape; a sidecar refuses a bundle of another format (8: the
# records table in segments, the library's PDFs by access group, passages' senses).
FORMAT = 8
MANIFEST = "manifest.json"
SCHEMA = "schema.json"
OPENAPI = "openapi.json"
INDEX = "index.html"
CHANGES = "changes.ndjson"
RECORDS = "records"  # the records table's folder: its segments, in order
SEGMENT_ROWS = 2048  # rows a segment of the records table holds at most
EVENTS = "events.parquet"
SEARCH = "search"
PASSAGES = "passages"
LIBRARY = "library"
# The build's public tree, beside the bundle in the same build folder: the sidecar serves
# the pages for people (exporter/site/pages.py) from it, the very bytes the CDN serves.
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
    one chunk, as the export writes it (the sidecar and the next export read each segment
    of the records table this way, mapped)."""
    found = table.column(name)
    return found.chunk(0) if found.num_chunks == 1 else found.combine_chunks()


_ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "large_binary": pa.large_binary(),
                "digest": pa.binary(DIGEST_SIZE)}


def arrow_schema(columns: tuple[tuple[str, str], ...]) -> pa.Schema:
    return pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in columns])


def segment_path(number: int) -> str:
    """Where a segment of the records table is, in the bundle."""
    return f"{RECORDS}/{number:05d}.arrow"


def segments(collections: Sequence[str], access: Sequence[str], size: int = SEGMENT_ROWS
             ) -> list[tuple[int, int]]:
    """The rows (first, stop) of each segment of a records table stored in order
    (collection, access group, list order), from each row's collection and group: a segment
    never holds two groups' rows, and where a group's rows are cut depends on its rows alone
    (a page's runs, and so its cost, must not tell a caller about rows it may not see)."""
    found: list[tuple[int, int]] = []
    start = begin = 0  # where the segment, and its group's rows, began
    for row in range(1, len(collections) + 1):
        if row == len(collections) or collections[row] != collections[begin] \
                or access[row] != access[begin]:
            found.append((start, row))
            start = begin = row
        elif (row - begin) % size == 0:
            found.append((start, row))
            start = row
    return found


class SegmentFile(NamedTuple):
    """A segment's file, open for reading, and the addresses its map spans."""

    file: BinaryIO
    start: int
    end: int


def read_records(folder: Path, opened: list[SegmentFile] | None = None) -> list[pa.Table]:
    """The segments of the records table in a bundle's `RECORDS` folder, in order, each
    mapped into memory (not copied). A segment missing, or a file that is not one, raises
    ValueError: the table would not be whole. A bundle of no records has no segment, and so
    no folder (the export writes the segments' files, each made in it): no tables. With
    `opened`, each segment's file is appended to it, open for reading (`StoredItems` reads
    the served bytes from them): the file that was mapped, not another written since."""
    if not folder.exists() and folder.parent.is_dir():
        return []
    names = sorted(os.listdir(folder))
    if names != [segment_path(n).rpartition("/")[2] for n in range(len(names))]:
        raise ValueError(f"{folder} does not hold the records table's segments in order")
    if opened is None:
        return [pa.ipc.open_file(pa.memory_map(str(folder / name))).read_all()
                for name in names]
    tables = []
    for name in names:
        file = open(folder / name, "rb", buffering=0)  # noqa: SIM115 (held by the caller)
        try:
            mapped = pa.py_buffer(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        except ValueError:  # (an empty file: not a segment)
            file.close()
            raise ValueError(f"{folder / name} is not a segment of the records table") \
                from None
        opened.append(SegmentFile(file, mapped.address, mapped.address + mapped.size))
        tables.append(pa.ipc.open_file(mapped).read_all())
    return tables


def records_of(tables: list[pa.Table]) -> pa.Table:
    """The segments as one table (their columns chunked, not copied)."""
    if not tables:
        return arrow_schema(RECORD_COLUMNS).empty_table()
    return pa.concat_tables(tables)


class Items:
    """The `item` column of the records table, from its segments, not copied: each row's
    served bytes (and `ITEM_END`) are a slice of its segment's map. `offsets` are each row's
    start as if the segments' bytes were one after the other, then the end of the last; rows
    of one segment may be sliced together (`span`)."""

    def __init__(self, chunks: Sequence[pa.Array]) -> None:
        starts: list[np.ndarray] = []
        self.data: list[memoryview] = []
        self._buffers: list[tuple[pa.Buffer | None, int]] = []  # chunk -> data, first byte
        bases = [0]
        for chunk in chunks:
            buffers = chunk.buffers()
            local = np.frombuffer(buffers[1], np.int64)[chunk.offset:
                                                        chunk.offset + len(chunk) + 1]
            first, last = (int(local[0]), int(local[-1])) if len(chunk) else (0, 0)
            data = buffers[2] if len(chunk) and buffers[2] is not None else None
            self.data.append(memoryview(data or b"")[first:last])  # type: ignore[arg-type]
            self._buffers.append((data, first))
            starts.append(local[:-1] - first + bases[-1])
            bases.append(bases[-1] + last - first)
        self.offsets = np.concatenate([*starts, np.asarray([bases[-1]], np.int64)])
        self.bases = np.asarray(bases[:-1], np.int64)  # segment -> its first byte's offset
        self.segment = np.repeat(np.arange(len(chunks), dtype=np.int64),
                                 [len(chunk) for chunk in chunks])  # row -> its segment

    def views(self, rows: Sequence[int] | np.ndarray) -> list[memoryview | bytes]:
        """Rows' served bytes (without `ITEM_END`)."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return []
        segment = self.segment[rows]
        base = self.bases[segment]
        starts = (self.offsets[rows] - base).tolist()
        ends = (self.offsets[rows + 1] - base - len(ITEM_END)).tolist()
        cut = self._cut
        return [cut(k, a, b) for k, a, b in zip(segment.tolist(), starts, ends, strict=True)]

    def span(self, first: int, last: int) -> memoryview | bytes:
        """Rows `first` to `last` (included), of one segment, with `ITEM_END` after each."""
        segment = int(self.segment[first])
        base = int(self.bases[segment])
        return self._cut(segment, int(self.offsets[first]) - base,
                         int(self.offsets[last + 1]) - base)

    def _cut(self, segment: int, start: int, end: int) -> memoryview | bytes:
        """Bytes `start` to `end` of a segment's served bytes."""
        return self.data[segment][start:end]


class StoredItems(Items):
    """The same column read from the segments' files (`pread`) rather than their maps: a
    read costs a system call and a copy of its bytes, and the process keeps no page of the
    files. Its resident memory does not grow with the records it has served; the kernel's
    page cache holds them, shared with every process, and gives them up under pressure. The
    maps (and the tables read from them) may be dropped once this is made."""

    def __init__(self, chunks: Sequence[pa.Array], files: Sequence[SegmentFile]) -> None:
        """`chunks` read from the maps `read_records(..., opened)` made of `files`."""
        super().__init__(chunks)
        self.data = []
        self._at: list[tuple[int, int]] = []  # chunk -> its file and where its bytes start
        for data, first in self._buffers:
            self._at.append((-1, 0) if data is None else _located(data, first, files))
        self._buffers = []
        self._files = [one.file for one in files]  # held open as long as this is

    def _cut(self, segment: int, start: int, end: int) -> bytes:
        fd, at = self._at[segment]
        if end <= start:
            return b""
        data = os.pread(fd, end - start, at + start)
        if len(data) != end - start:
            raise OSError(f"a records file ended {end - start - len(data)} bytes early")
        return data


def _located(data: pa.Buffer, first: int, files: Sequence[SegmentFile]) -> tuple[int, int]:
    """The file descriptor and file offset of byte `first` of a buffer mapped from one of
    the files."""
    for file, start, end in files:
        if start <= data.address < end:
            return file.fileno(), data.address - start + first
    raise ValueError("a records segment's bytes are not in its file (compressed?)")
