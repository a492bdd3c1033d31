"""How long to wait before asking a node again: its Retry-After, or a bounded back-off."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait according to a Retry-After header, in either of its forms (RFC 9110:
    delay-seconds or an HTTP-date); None when the header is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value) if len(value) < 16 else math.inf
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max((moment - now).total_seconds(), 0.0)


def backoff(failures: int, base: float, cap: float = 10.0) -> float:
    """The pause after the `failures`-th failure in a row: base, 2·base, 4·base, ... ≤ cap."""
    return min(base * 2 ** max(failures - 1, 0), cap)
