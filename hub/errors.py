"""The one error of the hub client."""

from __future__ import annotations

from exporter.contract.errors import FednodeError
from exporter.shared.errors import printable


class SyncError(FednodeError):
    """The sync could not go on; the message (one line) says why and what to do. The index
    keeps its last complete state."""


def one_line(text: str, limit: int = 200) -> str:
    """Text from the network or a library, fit for a one-line message on a terminal or in a
    log: runs of white space made one space, and every character that is not printable (a
    control such as ESC, which would let a node write escape sequences to the operator's
    terminal, a direction override, a zero-width mark) written as its escape."""
    flat = printable(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
