"""What the hub accepts from a node: the manifest, the key's description, list and feed
pages, change-list lines and records, each checked field by field before anything of it is
used or stored. A message that does not fit is a SyncError of one line naming where it came
from, the field and what was wrong with it."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exporter.contract.signing import SignatureError, Signed, check_manifest
from exporter.contract.wire import (
    COLLECTIONS,
    TIME_PATTERN,
    UUID_PATTERN,
    TooLong,
    decode,
    encode,
    shown,
)

from .errors import SyncError, one_line

_UUID = re.compile(UUID_PATTERN)
_TIME = re.compile(TIME_PATTERN)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,200}")  # a node id, key id or content hash
OPS = ("upsert", "delete")
SYNC_SCOPES = ("read", "changes")
# The largest count or position the hub takes from a node: the index keeps them as DuckDB's
# BIGINT. A node has far fewer events than this; a larger number is a broken or hostile node.
LARGEST = 2**63 - 1


def decode_json(body: bytes, where: str, what: str, hint: str = "", *,
                free: bool = False) -> Any:
    """Strict JSON (`wire.decode`): UTF-8, no member twice, no lone surrogate, no NaN or
    Infinity. A whole number too long to read is refused by the check of its field
    (`_integer`), or here in a message with `free` fields (a record's own)."""
    try:
        return decode(body.decode("utf-8"), long_numbers=not free)
    except TooLong as exc:
        raise SyncError(f"{where}: {what} holds {exc.args[0]}: tell the node's publisher"
                        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SyncError(f"{where}: {what} is not JSON ({one_line(str(exc), 80)})"
                        + (f"; {hint}" if hint else "")) from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SyncError(f"{where}: expected a JSON object, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _text(obj: dict[str, Any], name: str, where: str, pattern: re.Pattern[str] | None = None,
          *, optional: bool = False, hint: str = "") -> str | None:
    value = obj.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise SyncError(f"{where}: {name}: expected a string, got {_kind(value)}")
    if pattern is not None and not pattern.fullmatch(value):
        raise SyncError(f"{where}: {name}: {one_line(repr(value), 80)} is not {hint}")
    return value


def _integer(obj: dict[str, Any], name: str, where: str, low: int = 0) -> int:
    """A whole number from `low` to LARGEST; a number of any length (10**5000, which
    Python cannot even print) is refused in words, by its length."""
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        got = shown(value) if isinstance(value, float) else _kind(value)
        raise SyncError(f"{where}: {name}: expected a whole number, got {got}")
    if value < low:
        raise SyncError(f"{where}: {name}: {shown(value)} is below {low}")
    if value > LARGEST:
        raise SyncError(f"{where}: {name}: {shown(value)}, past the largest a hub takes "
                        f"({LARGEST}); no node counts that high: tell its publisher")
    return value


def _list(obj: dict[str, Any], name: str, where: str) -> list[Any]:
    value = obj.get(name)
    if not isinstance(value, list):
        raise SyncError(f"{where}: {name}: expected a list, got {_kind(value)}")
    return value


def _collection(obj: dict[str, Any], name: str, where: str) -> str:
    value = _text(obj, name, where)
    if value not in COLLECTIONS:
        raise SyncError(f"{where}: {name}: {one_line(repr(value), 60)} is not one of "
                        f"{', '.join(COLLECTIONS)}")
    return value


@dataclass(frozen=True)
class SnapshotFile:
    collection: str
    url: str
    records: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    node_id: str
    name: str
    roots: tuple[str, ...]  # the node's base_url and sidecar_url, as it names them
    updated_at: str | None  # the time of the last event visible without a key
    seq: int  # how many events are visible without a key
    snapshots: tuple[SnapshotFile, ...]
    changes_url: str
    changes_sha256: str
    counts: dict[str, int] | None  # public records per collection, when the node says
    signed: Signed | None = None  # who signed it (None: a manifest without a signature)
    body: bytes = b""  # as the node sent it


def parse_manifest(body: bytes, where: str) -> Manifest:
    hint = ("check the address: it is the node's base URL, the one whose /api/manifest "
            "describes it")
    data = decode_json(body, where, "the manifest", hint)
    if not isinstance(data, dict) or not isinstance(data.get("node"), dict):
        raise SyncError(f"{where}: not a fednode manifest (no node object); {hint}")
    node = data["node"]
    spot = f"{where}: node"
    node_id = _text(node, "id", spot, _TOKEN, hint="a node id")
    name = node.get("name") if isinstance(node.get("name"), str) else ""
    roots = tuple(_text(node, key, spot, optional=True) or "" for key in
                  ("base_url", "sidecar_url"))
    updated_at = _text(node, "updated_at", spot, _TIME, optional=True,
                       hint="an RFC 3339 time in UTC")
    if not isinstance(data.get("sync"), dict):
        raise SyncError(f"{where}: the manifest has no sync section: this node does not offer "
                        f"sync (a fednode node of another version, or not a fednode)")
    section = data["sync"]
    spot = f"{where}: sync"
    seq = _integer(section, "seq", spot)
    snapshots = []
    for n, item in enumerate(_list(section, "snapshots", spot)):
        at = f"{spot}: snapshots[{n}]"
        entry = _object(item, at)
        snapshots.append(SnapshotFile(
            _collection(entry, "collection", at), str(_text(entry, "url", at)),
            _integer(entry, "records", at),
            str(_text(entry, "sha256", at, _SHA256, hint="a SHA-256 in hex"))))
    changes = _object(section.get("changes"), f"{spot}: changes")
    return Manifest(
        str(node_id), one_line(name, 80), roots, updated_at, seq, tuple(snapshots),
        str(_text(changes, "url", f"{spot}: changes")),
        str(_text(changes, "sha256", f"{spot}: changes", _SHA256, hint="a SHA-256 in hex")),
        _counts(data, where), _signed(data, where), body)


def _signed(data: dict[str, Any], where: str) -> Signed | None:
    """Who signed the manifest (`signing.check_manifest`); a signature that does not check
    is an error, whatever else the manifest says."""
    try:
        return check_manifest(data)
    except SignatureError as exc:
        raise SyncError(f"{where}: {one_line(str(exc), 200)}; nothing of it is used") from None


def _counts(data: dict[str, Any], where: str) -> dict[str, int] | None:
    if data.get("collections") is None:
        return None
    counts = dict.fromkeys(COLLECTIONS, 0)
    for n, item in enumerate(_list(data, "collections", where)):
        at = f"{where}: collections[{n}]"
        entry = _object(item, at)
        counts[_collection(entry, "name", at)] = _integer(entry, "public_count", at)
    return counts


@dataclass(frozen=True)
class KeyInfo:
    id: str
    scopes: tuple[str, ...]
    collections: tuple[str, ...]

    @property
    def caller(self) -> str:
        return f"key:{self.id}"


def parse_key(body: bytes, where: str) -> KeyInfo:
    data = _object(decode_json(body, where, "the key's description"), where)
    key_id = str(_text(data, "id", where, _TOKEN, hint="a key id"))
    scopes = tuple(str(s) for s in _list(data, "scopes", where))
    collections = tuple(_collection({"collection": c}, "collection", f"{where}: collections")
                        for c in _list(data, "collections", where))
    missing = [scope for scope in SYNC_SCOPES if scope not in scopes]
    if missing:
        raise SyncError(
            f"the key {key_id} lacks the scope{'s' * (len(missing) > 1)} {', '.join(missing)}: "
            f"fednode sync needs {' and '.join(SYNC_SCOPES)}; ask the node for a key made "
            f"with `fednode keys create --scopes {','.join(SYNC_SCOPES)}`")
    return KeyInfo(key_id, scopes, collections)


@dataclass(frozen=True, slots=True)
class Item:
    """A change the node reports: a record to fetch (upsert) or to drop (delete)."""

    collection: str
    id: str
    op: str
    content_hash: str | None
    updated_at: str
    url: str | None
    seq: int = 0  # the public change list's number; 0 in the keyed feed


def parse_item(value: Any, where: str, *, numbered: bool) -> Item:
    obj = _object(value, where)
    op = _text(obj, "op", where)
    if op not in OPS:
        raise SyncError(f"{where}: op: {one_line(repr(op), 40)} is not upsert or delete")
    return Item(
        _collection(obj, "collection", where),
        str(_text(obj, "id", where, _UUID, hint="a lowercase UUID")), op,
        _text(obj, "content_hash", where, _TOKEN, optional=op == "delete",
              hint="a content hash"),
        str(_text(obj, "updated_at", where, _TIME, hint="an RFC 3339 time in UTC")),
        _text(obj, "url", where, optional=True),
        _integer(obj, "seq", where, low=1) if numbered else 0)


def changes_after(body: bytes, where: str, position: int) -> tuple[list[Item], Item | None]:
    """The change list's items numbered after `position`, in order, and the last item at
    or before it (None if there is none). Lines are read from the end, so the work grows
    with the changes, not with the node; their `seq` must rise line by line."""
    lines = body.split(b"\n")
    pending: list[Item] = []
    for n in range(len(lines) - 1, -1, -1):
        if not lines[n].strip():
            continue
        at = f"{where}:{n + 1}"
        item = parse_item(decode_json(lines[n], at, "the line"), at, numbered=True)
        if pending and item.seq >= pending[-1].seq:
            raise SyncError(f"{at}: seq {item.seq} is not below the next line's "
                            f"{pending[-1].seq}; the change list is out of order")
        if item.seq <= position:
            return pending[::-1], item
        pending.append(item)
    return pending[::-1], None


@dataclass(frozen=True)
class FeedPage:
    items: list[Item]
    next: str | None
    until: str


def parse_feed_page(body: bytes, where: str) -> FeedPage:
    data = _object(decode_json(body, where, "the changes page"), where)
    items = [parse_item(item, f"{where}: items[{n}]", numbered=False)
             for n, item in enumerate(_list(data, "items", where))]
    return FeedPage(items, _text(data, "next", where, optional=True),
                    str(_text(data, "until", where, _TIME, hint="an RFC 3339 time in UTC")))


@dataclass(frozen=True)
class ListPage:
    records: list[Record]
    next: str | None
    total: int


def parse_list_page(body: bytes, where: str, collection: str) -> ListPage:
    data = _object(decode_json(body, where, "the list page", free=True), where)
    records = [record_of(item, f"{where}: items[{n}]", collection)
               for n, item in enumerate(_list(data, "items", where))]
    return ListPage(records, _text(data, "next", where, optional=True),
                    _integer(data, "total", where))


@dataclass(frozen=True, slots=True)
class Record:
    """A record as the node served it, with the fields the index keeps beside it."""

    collection: str
    id: str
    content_hash: str
    updated_at: str
    text: str  # its JSON, as served


def record_of(value: Any, where: str, collection: str, record_id: str | None = None,
              text: str | None = None) -> Record:
    """Check a record object: it must be of `collection` (and be `record_id` when the item
    that named it says so)."""
    obj = _object(value, where)
    found = _collection(obj, "collection", where)
    if found != collection:
        raise SyncError(f"{where}: collection: {found!r} where {collection!r} was expected")
    own_id = str(_text(obj, "id", where, _UUID, hint="a lowercase UUID"))
    if record_id is not None and own_id != record_id:
        raise SyncError(f"{where}: id: {own_id} where {record_id} was expected")
    return Record(found, own_id,
                  str(_text(obj, "content_hash", where, _TOKEN, hint="a content hash")),
                  str(_text(obj, "updated_at", where, _TIME, hint="an RFC 3339 time in UTC")),
                  text if text is not None else encode(obj).decode("utf-8"))


def parse_record(body: bytes, where: str, collection: str,
                 record_id: str | None = None) -> Record:
    """A record from its bytes (a fetched record, a snapshot line), kept as served."""
    value = decode_json(body, where, "the record", free=True)
    return record_of(value, where, collection, record_id, body.decode("utf-8"))


def parse_snapshot(body: bytes, where: str, collection: str) -> Iterator[Record]:
    """A snapshot file's records, one line at a time: a caller holds a chunk of them, not
    the file's (a 512 MiB file as Records and their line copies was gigabytes)."""
    for n, line in enumerate(io.BytesIO(body), start=1):
        if line.strip():
            yield parse_record(line.strip(), f"{where}:{n}", collection)
