"""The sentences of a library group's passages, in one order the export and the sidecar
share: the export encodes each (as weighed, with the heading over it) with the sentence
encoder into `SENTENCE_SENSES`, and the sidecar weighs each against a question
(`sidecar.library`). A question is answered by a sentence, not by a passage: a passage's
vector is the mean of what its sentences say, and the sentence that states the answer
stands out only on its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from exporter.shared import search

# per library group: float32 (sentences, encoder.DIMENSIONS), each sentence of `table` by
# the sentence encoder, unit length
SENTENCE_SENSES = "sentences.npy"


class Sentence(NamedTuple):
    """One sentence of a passage: the passage's row, the sentence as weighed (with the
    heading over it) and as quoted (without)."""
    row: int
    weighed: str
    quoted: str


def table(rows: Sequence[Sequence[Any]]) -> list[Sentence]:
    """Every sentence of these passage rows ([document id, page, label, text, headings]),
    row by row, in the order of the passage's text."""
    return [Sentence(n, weighed, quoted) for n, row in enumerate(rows)
            for weighed, quoted in search.statements(str(row[3]), row[4] if len(row) > 4 else ())]
