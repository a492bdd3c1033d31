"""The wire format shared by the static export and the sidecar.

Every byte a client can read comes from these functions, so the CDN's files and the
sidecar's answers are equal by construction (DESIGN.md invariant 4). The names and limits
every side agrees on (collections, scopes, page sizes) are here too.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

API_VERSION = "1"
COLLECTIONS: tuple[str, ...] = ("species", "resources", "treatments", "germination", "team")
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200
SEARCH_LIMIT_DEFAULT = 10
SEARCH_LIMIT_MAX = 50
SEARCH_QUERY_MAX = 500  # characters of a search query
TOOL_LIMIT_DEFAULT = 20
CHANGES_LIMIT_DEFAULT = 200
CHANGES_LIMIT_MAX = 1000
BODY_LIMIT = 1024 * 1024  # bytes of a POST body
QUESTION_MAX = 2000  # characters of a library question
ASK_LIMIT_DEFAULT = 3  # passages an answer from the library returns
ASK_LIMIT_MAX = 10
# The version of POST /api/library/ask's answer (and the ask_library tool's), which the
# manifest names: "passages-1" always returns the closest passages, and an answer only
# where one sentence clearly states it (docs/library.md).
LIBRARY_CONTRACT = "passages-1"
PUBLIC = "public"  # the access of a record every caller may read
SCOPES: tuple[str, ...] = ("read", "search", "changes", "mcp", "library")
# The forms of ids and times on the wire, in ASCII digits only (`\d` would take any script's).
UUID_PATTERN = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
TIME_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"


def encode(obj: Any) -> bytes:
    """Canonical JSON: UTF-8, compact, key order as given (callers fix the order)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode(data: bytes | str, *, long_numbers: bool = True) -> Any:
    """JSON as the node takes it from others (request bodies; a hub, a node's answers):
    I-JSON (RFC 7493), so that every reader sees the same value: UTF-8, no member named
    twice in one object (Python keeps the last, DuckDB the first), no string holding a
    surrogate escape that is not half of a pair (it is no character, and cannot be written
    back as UTF-8), no NaN or Infinity. (A UTF-8 byte-order mark is passed over, as RFC 8259
    allows; UTF-16 and UTF-32, which Python's reader would take, are refused.) A whole
    number of more digits than Python reads is a LongNumber, for the field's own check to
    refuse, or, without `long_numbers` (a value of free fields, such as a record), TooLong.
    Raises ValueError saying what was wrong."""
    if isinstance(data, bytes) and json.detect_encoding(data) not in ("utf-8", "utf-8-sig"):
        raise ValueError(f"the JSON is {json.detect_encoding(data).upper()}, not UTF-8: send "
                         f"it as UTF-8")
    value = json.loads(data, object_pairs_hook=_members, parse_constant=_not_a_number,
                       parse_int=_whole_number if long_numbers else _readable_number)
    # Half a pair reaches the value through a \\u escape, or as the text holds it (json reads
    # bytes with surrogatepass): a text without an escape is checked as text, a fraction of
    # the cost of writing the value back (a hub reads every record through here).
    try:
        if isinstance(data, str) and "\\u" not in data:
            data.encode("utf-8")
        elif isinstance(data, bytes) and b"\\u" not in data and \
                json.detect_encoding(data) == "utf-8":
            data.decode("utf-8")
        else:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _lone(exc.object[exc.start]) from None
    except UnicodeDecodeError as exc:  # surrogatepass lets nothing else through
        raise _lone(exc.object[exc.start:exc.start + 3].decode("utf-8", "surrogatepass")
                    ) from None
    return value


def _lone(half: str) -> ValueError:
    return ValueError(f"\\u{ord(half):04x} is a lone surrogate, no character: send valid "
                      f"Unicode")


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ValueError(f"the member {name[:40]!r} appears twice in one object; "
                                 f"send it once")
            seen.add(name)
    return found


class LongNumber(int):
    """A whole number of more digits than Python reads from text (4,300): no field takes
    one, so it is kept as the smallest number of as many digits, with its length, and
    refused by the field's own check, whose message says it by its length (`shown`)."""

    digits: int


READABLE_DIGITS = 4000  # of a whole number read from text (Python reads 4,300)


def _whole_number(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits <= READABLE_DIGITS:
        return int(text)
    number = LongNumber(-(10 ** (digits - 1)) if text.startswith("-") else 10 ** (digits - 1))
    number.digits = digits
    return number


class TooLong(ValueError):
    """A whole number of more digits than Python reads, where no field's check is there to
    refuse it by name."""

    def __init__(self, digits: int) -> None:
        super().__init__(f"a whole number of {digits} digits, more than any field holds")
        self.digits = digits


def _readable_number(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > READABLE_DIGITS:
        raise TooLong(digits)
    return int(text)


def _not_a_number(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON; send a number or null")


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with `Z`, second precision (the ledger's resolution)."""
    moment = moment.astimezone(UTC)  # %Y drops leading zeros before the year 1000
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


# RFC 3339's date-time (section 5.6), ASCII only: a time zone (Z or +hh:mm) is required
# below, to say so in words; ISO 8601's other forms (+0100, +01, a comma, a space, spaces
# around it) are not this.
_RFC3339 = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}"
                      r"(?:\.[0-9]+)?)([Zz]|[+-][0-9]{2}:[0-9]{2})?", re.ASCII)


# An inclusive time bound within the last second there is, rounded up: after every time a
# record can have (`exporter.contract.inputs`). No list holds a record updated then, so it is
# never shown in a link.
AFTER_EVERY_TIME = "9999-12-31T23:59:60Z"


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with a time zone; raise ValueError with a reason."""
    found = _RFC3339.fullmatch(text)
    if found is None:
        raise ValueError("expected an RFC 3339 timestamp such as 2026-01-31T12:00:00Z")
    if found.group(2) is None:
        raise ValueError("the timestamp needs a time zone: end it with Z for UTC")
    when, zone = found.groups()
    whole, _, fraction = when.upper().partition(".")
    try:  # (fromisoformat takes at most six digits of a second)
        moment = datetime.fromisoformat(whole + ("." + fraction[:6].ljust(6, "0")
                                                 if fraction else "") + zone.upper())
    except ValueError:
        raise ValueError(
            "expected an RFC 3339 timestamp such as 2026-01-31T12:00:00Z"
        ) from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is outside the years 1 to 9999 once in UTC") from None


_TIME = re.compile(TIME_PATTERN, re.ASCII)


def is_time(value: object) -> bool:
    """Whether a value is a time as a node serves one (`format_time`): RFC 3339 in UTC to
    the second, and one that exists (not 2026-02-30T25:00:00Z)."""
    if not isinstance(value, str) or _TIME.fullmatch(value) is None:
        return False
    try:
        parse_time(value)
    except ValueError:
        return False
    return True


def document_url(base_url: str, record_id: str) -> str:
    """Where a library document's PDF is served (a static file when it is public)."""
    return f"{base_url}/library/{record_id}.pdf"


def record_url(base_url: str, collection: str, record_id: str) -> str:
    return f"{base_url}/api/{collection}/{record_id}"


def list_url(base_url: str, collection: str, *, limit: int, offset: int,
             updated_since: str | None = None) -> str:
    """The canonical URL of a list page. The default limit is left out, so the pages that
    the static export prebuilds are addressed by `offset` alone."""
    params = []
    if limit != LIST_LIMIT_DEFAULT:
        params.append(f"limit={limit}")
    if offset:
        params.append(f"offset={offset}")
    if updated_since is not None:
        params.append(f"updated_since={quote(updated_since, safe=':')}")
    query = "?" + "&".join(params) if params else ""
    return f"{base_url}/api/{collection}{query}"


def list_page(base_url: str, collection: str, items: list[bytes], *, total: int, limit: int,
              offset: int, updated_since: str | None = None) -> bytes:
    """One page of a list: {"collection","items","total","limit","offset","next"}.

    `items` are the records' own JSON bytes, spliced in unchanged."""
    head, tail = list_envelope(base_url, collection, bool(items), total=total, limit=limit,
                               offset=offset, updated_since=updated_since)
    return b"".join([head, b",".join(items), tail])


def list_envelope(base_url: str, collection: str, any_items: bool, *, total: int, limit: int,
                  offset: int, updated_since: str | None = None) -> tuple[bytes, bytes]:
    """The bytes of a list page before its items and after them."""
    following = offset + limit
    next_url = (list_url(base_url, collection, limit=limit, offset=following,
                         updated_since=updated_since)
                if following < total and any_items else None)
    return b'{"collection":' + encode(collection) + b',"items":[', b"".join([
        b'],"total":', str(total).encode(),
        b',"limit":', str(limit).encode(),
        b',"offset":', str(offset).encode(),
        b',"next":', encode(next_url), b"}",
    ])


def error_body(code: str, message: str) -> bytes:
    return encode({"error": {"code": code, "message": message}})


# What a path under /api/ without an endpoint gets, from the sidecar and from the CDN alike:
# the export writes this body to NO_ENDPOINT_FILE, and site_out/_redirects serves it with a
# 404 for any /api/ path no earlier rule or file answers (`exporter.site.redirects`).
NO_ENDPOINT = "no endpoint at this path; see /api/manifest for the endpoints"
NO_ENDPOINT_FILE = "api/404.json"
# What one segment under /api/ that names no collection gets (/api/plants), from the sidecar
# (`Caller.require_collection`) and from the CDN alike (NO_COLLECTION_FILE, served with a 404
# for such a path): the CDN cannot say the name it was given, so neither does the sidecar.
NO_COLLECTION = f"no collection at this path; the collections are {', '.join(COLLECTIONS)}"
NO_COLLECTION_FILE = "api/no-collection.json"


SHOWN_CHARS = 40  # of a value given, echoed back in an error message


def shown(value: Any) -> str:
    """A value a caller sent, as an error message echoes it: a text quoted as Python does
    ('ten'), anything else as its JSON; cut to SHOWN_CHARS, with "…" where cut. A whole
    number too long to read is said by its length (10**400 is not echoed as forty digits
    that look like a number), and a float keeps its own form: 1e308 is "1e+308", not the
    309 digits of the whole number it also is."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 15:
        digits = value.digits if isinstance(value, LongNumber) else len(str(abs(value)))
        return f"a{' negative' * (value < 0)} whole number of {digits} digits"
    if isinstance(value, str):
        return repr(value[:SHOWN_CHARS]) + ("…" if len(value) > SHOWN_CHARS else "")
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
