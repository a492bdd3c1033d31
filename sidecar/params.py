"""Query-parameter parsing: every bad value is a 400 invalid_parameter saying how to fix it."""

from __future__ import annotations

from datetime import timedelta

from multidict import MultiMapping

from exporter.contract.wire import format_time, parse_time

from .errors import InvalidParameter


def check_known(query: MultiMapping[str], allowed: tuple[str, ...]) -> None:
    for name in query:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise InvalidParameter(f"unknown parameter {name!r}; this endpoint takes: {expected}")
        if len(query.getall(name)) > 1:
            raise InvalidParameter(f"parameter {name!r} is given more than once; give it once")


def integer(query: MultiMapping[str], name: str, *, default: int, low: int,
            high: int | None = None) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise InvalidParameter(f"{name} must be a whole number, got {raw!r}") from None
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidParameter(f"{name} must be {span}, got {value}")
    return value


def timestamp(query: MultiMapping[str], name: str) -> str | None:
    """An RFC 3339 time, normalised to the ledger's whole-second UTC form. A fraction of a
    second rounds up, so `>=` against whole-second times stays exact."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        moment = parse_time(raw)
    except ValueError as exc:
        raise InvalidParameter(f"{name}: {exc}, got {raw!r}") from None
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + timedelta(seconds=1)
    return format_time(moment)
