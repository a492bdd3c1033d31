"""The one error of the hub client."""

from __future__ import annotations

from exporter.contract.errors import FednodeError


class SyncError(FednodeError):
    """The sync could not go on; the message (one line) says why and what to do. The index
    keeps its last complete state."""


def one_line(text: str, limit: int = 200) -> str:
    """Text from the network or a library, fit for a one-line message."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
