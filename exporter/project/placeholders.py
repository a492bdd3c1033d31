"""Warnings for a new record's placeholder body ("Describe … here, in Markdown.") left in
place: the record is valid, but its page and API answer would publish the instruction."""

from __future__ import annotations

import re
from collections.abc import Iterable

from exporter.project.records import SourceRecord
from exporter.project.scaffold import PLACEHOLDER_BODY
from exporter.shared.errors import Problem

PATTERN = re.compile(re.escape(PLACEHOLDER_BODY).replace(re.escape("{title}"), ".+"))


def placeholder_bodies(records: Iterable[SourceRecord]) -> list[Problem]:
    """A warning for each record read this time (not restored from the export's cache, whose
    fields stay unread) whose body is still the placeholder `fednode new` wrote."""
    found = []
    for record in records:
        if record.loader is not None:
            continue  # unchanged since the export that read it, and warned then
        body = record.fields.get("body")
        if isinstance(body, str) and PATTERN.fullmatch(body.strip()):
            found.append(Problem(record.path, record.line_of("body"), "body",
                                 "still the placeholder text: describe the record (it is "
                                 "published as written)"))
    return found
