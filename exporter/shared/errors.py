"""What can go wrong in an export, in words a publisher can act on."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from exporter.contract.errors import FednodeError


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the content: `content/species/hogweed.md:7: family: required`."""

    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        """One line, whatever the file's name or content holds: a character that would
        break or disguise it (a line break, an escape sequence, a right-to-left mark) is
        written as its escape."""
        where = f"{self.path}:{self.line}" if self.line else self.path
        field = f" {self.field}:" if self.field else ""
        return _shown(f"{where}:{field} {self.message}")


LINE_MAX = 1000  # characters of a problem as printed: a value quoted whole may be megabytes


def _shown(text: str) -> str:
    if len(text) > LINE_MAX:
        text = f"{text[:LINE_MAX - 40]}... ({len(text):,} characters in all)"
    return printable(text)


def printable(text: str) -> str:
    """Text as a terminal should show it: every character that would break or disguise the
    line (a line break, an escape sequence, a right-to-left mark) written as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


# C0 and C1 control characters, and DEL, but the tab and line breaks (LF, CRLF; a lone CR
# sends a terminal back to the line's start, over what it printed): in a published record
# they reach CSV downloads, archives and pages as they are (a terminal runs ESC sequences; XML
# refuses most of them).
# And the bidirectional formatting characters that reorder text (embeddings, overrides and
# isolates; CVE-2021-42574, "Trojan Source"): a text holding one displays in another order
# than it is stored, so a page, a spreadsheet and an agent reading the JSON each see another
# text ("knotweed" shown where "deewtonk" is stored). Right-to-left scripts display in their
# own order without them; the marks U+200E and U+200F, which reorder nothing, are text.
BIDI = "\u202a-\u202e\u2066-\u2069"
# Content, node.toml and Darwin Core terms are all checked with this one rule.
CONTROL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{BIDI}]|\r(?!\n)")  # (a lone CR too)
_REORDERING = re.compile(f"[{BIDI}]")


def control_character(text: str) -> str | None:
    """The first control character text may not hold (`CONTROL`), if any."""
    found = CONTROL.search(text)
    return found.group() if found else None


def without_controls(text: str) -> str:
    """Text with every character removed that `control_character` finds: a text of this
    form passes the check that content and node.toml are held to."""
    return CONTROL.sub("", text)


def control_problem(found: str) -> str:
    if _REORDERING.match(found):
        return (f"holds U+{ord(found):04X} ({unicodedata.name(found).lower()}), which makes "
                f"text display in another order than it is stored, so that readers and "
                f"programs see different texts: remove it (right-to-left text displays "
                f"correctly without it)")
    return (f"holds the control character U+{ord(found):04X}, which no reader shows and a "
            f"terminal may act on: remove it (text copied from a terminal or a word processor "
            f"can carry one)")


class ExportError(FednodeError):
    """An export could not complete; the previous output is untouched."""


class ContentError(ExportError):
    """The content has problems; every one of them is listed."""

    def __init__(self, problems: list[Problem], outcome: str = "nothing was written") -> None:
        self.problems = sorted(problems)
        files = len({p.path for p in self.problems})
        super().__init__(
            f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''} "
            f"in {files} file{'s' if files != 1 else ''}; {outcome}"
        )
