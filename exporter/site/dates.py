"""Dates as people read them: `2026-11-21T09:08:14Z` is "21 November 2026", `2016-05` is
"May 2016", an ISO 8601 interval `1888/2004` is "1888–2004". On a page each date is a
`<time>` whose `datetime` keeps the machine's form; a text that is no date is left as it
is."""

from __future__ import annotations

import re

from markupsafe import escape

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
# a year, a year and month, or a day, each perhaps followed by a time
_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(T[0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?)?)?",
                   re.ASCII)


def _one(text: str) -> str | None:
    """One date or time as words, or None when `text` is none."""
    found = _DATE.fullmatch(text.strip())
    if found is None:
        return None
    year, month, day, _ = found.groups()
    if month is None:
        return year
    if not 1 <= int(month) <= 12 or (day is not None and not 1 <= int(day) <= 31):
        return None
    named = f"{MONTHS[int(month) - 1]} {year}"
    return named if day is None else f"{int(day)} {named}"


def date_text(value: str) -> str:
    """A date, time or interval as words; any other text as it is."""
    parts = value.split("/")
    shown = [_one(part) for part in parts]
    if len(parts) > 2 or any(part is None for part in shown):
        return value
    return "–".join(part for part in shown if part)


def is_date(value: str) -> bool:
    """Whether `value` is a date, time or interval that `date_text` writes as words."""
    return date_text(value) != value or _one(value) is not None


def date_html(value: str) -> str:
    """A date, time or interval as words in `<time datetime>` (one for each end of an
    interval); any other text escaped as it is. A time's `datetime` is the value itself."""
    parts = value.split("/")
    if not is_date(value):
        return str(escape(value))
    times = [f'<time datetime="{escape(part.strip())}">{escape(_one(part) or "")}</time>'
             for part in parts]
    return "–".join(times)
