"""`fednode new <collection> --csv`: a row with a fresh id added to the collection's table.

A collection kept as a CSV file (germination results, as the sample keeps them) gets its
records as rows; an id is the one cell a publisher cannot make up, so the row is started
here and the rest filled in with a spreadsheet or an editor."""

from __future__ import annotations

import csv
import io
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from exporter.project.schemas import Collection, collections
from exporter.shared.errors import ExportError


@dataclass(frozen=True)
class NewRow:
    """The table written to, the row's line in it and its id."""

    path: Path
    line: int
    id: str


def new_csv_row(content: Path, collection_name: str, title: str | None = None) -> NewRow:
    """Append a row with a fresh id (and `title` in the title field, if given) to the one
    CSV file of content/<collection>/, made with the collection's required columns when
    there is none. Raises ExportError for what the publisher must settle first."""
    known = collections()
    if collection_name not in known:
        raise ExportError(f"unknown collection {collection_name!r}; choose one of "
                          f"{', '.join(known)}")
    collection = known[collection_name]
    folder = content / collection_name
    if os.path.lexists(folder) and not folder.is_dir():
        raise ExportError(f"content/{collection_name} is not a folder; move that file away")
    folder.mkdir(parents=True, exist_ok=True)
    tables = sorted(path for path in folder.glob("*.csv") if path.is_file())
    if len(tables) > 1:
        raise ExportError(f"content/{collection_name} holds several CSV files "
                          f"({', '.join(p.name for p in tables)}); add the row to one of them "
                          f"with the id python3 -c 'import uuid; print(uuid.uuid4())' prints")
    record_id = str(uuid.uuid4())
    if not tables:
        path = folder / f"{collection_name}.csv"
        header = _columns(collection)
        text = _line(header)
    else:
        path = tables[0]
        text = path.read_text("utf-8")
        header = next(csv.reader(io.StringIO(text)), [])
        if "id" not in header:
            raise ExportError(f"{path.name} has no id column in its first line; add one")
    cells = {"id": record_id}
    if title and title.strip():
        cells[collection.title_field] = title.strip()
    ending = "\r\n" if "\r\n" in text else "\n"
    if text and not text.endswith(("\n", "\r")):
        text += ending
    text += _line([cells.get(name, "") for name in header], ending)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return NewRow(path, text.count("\n"), record_id)


def _columns(collection: Collection) -> list[str]:
    """A new table's columns: id, the title, the other required fields, then body."""
    required = [name for name in collection.schema["required"] if name != "id"]
    first = [collection.title_field] if collection.title_field not in required else []
    return ["id", *first, *required, "body"]


def _line(cells: list[str], ending: str = "\n") -> str:
    """One CSV line, quoted where a cell needs it."""
    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerow(cells)
    return out.getvalue()
