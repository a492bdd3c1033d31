"""`fednode new`: a record file with a fresh UUID and the fields to fill in."""

from __future__ import annotations

import os
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.project import names
from exporter.project.schemas import Collection, collections
from exporter.project.tomltext import toml_string
from exporter.shared.errors import ExportError, control_character, control_problem


@dataclass
class Scaffolded:
    """The file written, which field took the title, and what the author should know."""

    path: Path
    filled: dict[str, str]
    warnings: list[str] = field(default_factory=list)


def slugify(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:80] or "record"


def new_record(content: Path, collection_name: str, title: str,
               cache: Path | None = None) -> Scaffolded:
    """Write content/<collection>/<slug>.md and say what was done. Never overwrites. The
    export's `cache` folder, if given, spares reading most files to find a name's users."""
    known = collections()
    if collection_name not in known:
        raise ExportError(f"unknown collection {collection_name!r}; choose one of "
                          f"{', '.join(known)}")
    collection = known[collection_name]
    title = _checked_title(title)
    filled = _title_fields(collection, title)
    folder = content / collection_name
    if os.path.lexists(folder) and not folder.is_dir():
        raise ExportError(f"content/{collection_name} is not a folder; move that file away "
                          f"(the records of {collection_name} live in a folder of that name)")
    folder.mkdir(parents=True, exist_ok=True)
    warnings = []
    if names.FIELD in filled:
        warnings += [f"warning: scientificName {filled[names.FIELD]!r} is also used by "
                     f"{r.path}:{r.line_of(names.FIELD)}"
                     for r in names.users_of(filled[names.FIELD], content, cache)]
    slug = slugify(title)
    path = folder / f"{slug}.md"
    counter = 2
    while os.path.lexists(path):  # a link, even to nothing, is taken: never written through
        path = folder / f"{slug}-{counter}.md"
        counter += 1
    if counter > 2:
        warnings.append(f"warning: {folder / slug}.md exists; wrote {path.name} beside it "
                        f"(delete it if you meant to edit the existing record)")
    with path.open("x", encoding="utf-8") as handle:  # made here, never an existing file
        handle.write(_front_matter(collection, title, filled))
    return Scaffolded(path, filled, warnings)


def _checked_title(title: str) -> str:
    title = title.strip()
    if not title:
        raise ExportError("give the record a title, e.g. fednode new species \"Giant hogweed\"")
    for char in title:
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise ExportError(f"the title holds {ascii(char)}, which is not a printable "
                              f"character: give a title on one line of plain text")
    if (found := control_character(title)) is not None:  # what `check` refuses in a field
        raise ExportError(f"the title {control_problem(found)}")
    return title


def _title_fields(collection: Collection, title: str) -> dict[str, str]:
    """Which fields the title fills. For species, a Latin name goes to scientificName
    (its authorship, if given, to scientificNameAuthorship) and a common name to
    vernacularName; any other collection puts the title in its title field."""
    if collection.name != names.SPECIES:
        filled = {collection.title_field: title}
    elif (latin := names.latin_name(title)) is not None:
        filled = {names.FIELD: latin.name}
        if latin.authorship:
            filled["scientificNameAuthorship"] = latin.authorship
    else:
        filled = {"vernacularName": title}
    for name, value in filled.items():
        spec: dict[str, Any] = collection.property(name) or {}
        low, high = spec.get("minLength", 0), spec.get("maxLength", len(value))
        if not low <= len(value) <= high:
            what = ("a title" if name == collection.title_field
                    else f"a title that becomes {name}")
            raise ExportError(f"{what} of {collection.name} takes {low} to {high} "
                              f"characters; this one has {len(value)}: give a title of "
                              f"that length")
    return filled


# The body a new record starts with; `placeholders` warns while it is left in place.
PLACEHOLDER_BODY = "Describe {title} here, in Markdown."


def _front_matter(collection: Collection, title: str, filled: dict[str, str]) -> str:
    """The new file: its id, the fields the title filled, each other required field to fill
    in, those the collection asks for though a record may lack them (`x-fednode.prompt`: a
    species' family) commented out, and the optional fields named."""
    required = [name for name in collection.schema["required"] if name != "id"]
    asked = [name for name in collection.schema["x-fednode"].get("prompt", [])
             if name not in required and name not in filled]
    lines = ["+++", f"id = {toml_string(str(uuid.uuid4()))}",
             *(f"{name} = {toml_string(value)}" for name, value in filled.items())]
    for name in required:
        if name not in filled:
            lines += _field_lines(name, collection.schema["properties"][name], asked=False)
    for name in asked:
        lines += _field_lines(name, collection.schema["properties"][name], asked=True)
    lines.append("# optional: " + ", ".join(
        name for name in collection.content_fields
        if name not in (*required, *asked, "id", "body", *filled)))
    lines += ["+++", "", PLACEHOLDER_BODY.format(title=title), ""]
    return "\n".join(lines)


def _field_lines(name: str, spec: dict[str, Any], *, asked: bool) -> list[str]:
    """A field to fill in. Text and lists get an empty value, which `fednode check` reports
    as "empty: fill it in"; a number or a yes/no has no empty value that is not a wrong one
    (0 may be a true count), so it is written commented out, as is a field only asked for."""
    note = "recommended" if asked else "required"
    kind = spec.get("type")
    if "enum" in spec:
        lines = [f"# {note}, one of: {', '.join(map(str, spec['enum']))}"]
    elif kind in ("integer", "number", "boolean"):
        form = {"integer": "a whole number", "number": "a number",
                "boolean": "true or false"}[kind]
        return [f"# {note}, {form}: remove the # and give it", f"# {name} ="]
    else:
        lines = [f"# {note}: remove the # and fill it in"] if asked else []
    value = "[]" if kind == "array" else '""'
    return [*lines, f"{'# ' if asked else ''}{name} = {value}"]
