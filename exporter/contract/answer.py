"""What POST /api/library/ask answers, and the ask_library tool returns: one JSON Schema,
read by the tool's `outputSchema` and by OpenAPI (docs/library.md)."""

from __future__ import annotations

from typing import Any

QUOTED: dict[str, Any] = {
    "n": {"type": "integer"}, "document_id": {"type": "string"}, "title": {"type": "string"},
    "page": {"type": "integer", "description": "the PDF's page, 1 for its first"},
    "page_label": {"type": "string", "description": "the page's printed number"},
    "quote": {"type": "string", "description": "the text as it stands on the page"},
    "url": {"type": "string", "description": "the PDF, opened at the page"}}
CITATION: dict[str, Any] = {
    "type": "object", "properties": QUOTED,
    "required": ["n", "document_id", "title", "page", "page_label", "quote", "url"]}
PASSAGE: dict[str, Any] = {
    "type": "object", "properties": {
        **QUOTED,
        "quote": {"type": "string", "description": "the passage's best sentence with the "
                                                   "sentences around it that it needs, as "
                                                   "they stand on the page"},
        "score": {"type": "number", "description": "how close it comes to the question"}},
    "required": ["n", "document_id", "title", "page", "page_label", "quote", "score", "url"]}

ANSWER: dict[str, Any] = {
    "type": "object", "required": ["question", "answer", "grounded", "citations", "passages"],
    "properties": {
        "question": {"type": "string"},
        "answer": {"anyOf": [{"type": "string"}, {"type": "null"}],
                   "description": "the sentence that clearly states the answer, with its "
                                  "marker [1]; null where none does"},
        "grounded": {"type": "boolean"},
        "citations": {"type": "array", "items": CITATION},
        "passages": {"type": "array", "items": PASSAGE,
                     "description": "the passages closest to the question, closest first; "
                                    "none where the library holds nothing near it"},
        "message": {"type": "string", "description": "why there is no answer"}}}
