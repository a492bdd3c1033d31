"""The one base class of everything a user can cause and fix."""

from __future__ import annotations


class FednodeError(Exception):
    """A problem the user can act on: the message says what went wrong and how to fix it.

    The CLI prints it as one line `Error: ...` and exits non-zero; anything else that
    escapes is a bug and shows a traceback."""
