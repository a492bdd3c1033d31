"""`fednode new`: a record file with a fresh UUID and the fields to fill in."""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from pathlib import Path

from .errors import ExportError
from .schemas import collections


def slugify(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:80] or "record"


def new_record(content: Path, collection_name: str, title: str) -> Path:
    """Write content/<collection>/<slug>.md and return its path. Never overwrites."""
    known = collections()
    if collection_name not in known:
        raise ExportError(f"unknown collection {collection_name!r}; choose one of "
                          f"{', '.join(known)}")
    if not title.strip():
        raise ExportError("give the record a title, e.g. fednode new species \"Giant hogweed\"")
    collection = known[collection_name]
    folder = content / collection_name
    folder.mkdir(parents=True, exist_ok=True)
    slug = slugify(title)
    path = folder / f"{slug}.md"
    counter = 2
    while path.exists():
        path = folder / f"{slug}-{counter}.md"
        counter += 1
    props = collection.schema["properties"]
    required = [name for name in collection.schema["required"] if name != "id"]
    # A title given for species is usually the common name; it fills vernacularName.
    filled = "vernacularName" if collection_name == "species" else collection.title_field
    lines = ["+++", f'id = "{uuid.uuid4()}"', f"{filled} = {json.dumps(title.strip())}"]
    for name in required:
        if name == filled:
            continue
        spec = props[name]
        if "enum" in spec:
            lines.append(f"# one of: {', '.join(spec['enum'])}")
        lines.append(f"{name} = {_placeholder(spec)}")
    lines.append("# optional: " + ", ".join(
        name for name in collection.content_fields
        if name not in required and name not in ("id", "body", filled)))
    lines += ["+++", "", f"Describe {title.strip()} here, in Markdown.", ""]
    path.write_text("\n".join(lines), "utf-8")
    return path


def _placeholder(spec: dict[str, object]) -> str:
    kind = spec.get("type")
    if kind == "array":
        return "[]"
    if kind == "integer":
        return "0"
    if kind == "boolean":
        return "false"
    return '""'
