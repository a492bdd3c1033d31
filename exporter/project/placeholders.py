"""Warnings for a new record's placeholder body ("Describe … here, in Markdown.") left in
place: the record is valid, but its page and API answer would publish the instruction."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from exporter.project.records import SourceRecord
from exporter.project.scaffold import PLACEHOLDER_BODY
from exporter.shared.errors import Problem

PATTERN = re.compile(re.escape(PLACEHOLDER_BODY).replace(re.escape("{title}"), ".+"))


def placeholder_line(record: SourceRecord) -> int | None:
    """The line of a record's body, read from its file, if it is still the placeholder."""
    body = record.fields.get("body")
    if isinstance(body, str) and PATTERN.fullmatch(body.strip()):
        return record.line_of("body")
    return None


def placeholder_bodies(records: Iterable[SourceRecord], remembered: Mapping[str, int]
                       ) -> list[Problem]:
    """A warning for each record whose body is still the placeholder `fednode new` wrote,
    on every run while it is there: a record read this time is looked at; one restored from
    the export's cache (whose fields stay unread) is found in `remembered`, the line of the
    placeholder body of each record that held one when its file was read, by content hash
    (`Cache.placeholders`)."""
    found = []
    for record in records:
        line = placeholder_line(record) if record.loader is None else \
            remembered.get(record.hash)
        if line is not None:
            found.append(Problem(record.path, line, "body",
                                 "still the placeholder text: describe the record (it is "
                                 "published as written)"))
    return found
