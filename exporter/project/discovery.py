"""Find the record files under content/: which files and folders are read, in a stable
order, and what is wrong with the layout (an unknown collection, a folder inside one, a
library PDF without its record)."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from exporter.project.records import SourceFile
from exporter.project.schemas import Collection
from exporter.shared.errors import Problem
from exporter.shared.fileversion import version_of


def is_read(name: str) -> bool:
    """Whether the export reads a file or folder of this name in content/: not one kept out
    ("." or "_" first: hidden, or set aside by the publisher), and not an editor's backup or
    autosave ("name~", "#name#"), which would otherwise stop every export while it is there."""
    return not (name.startswith((".", "_")) or name.endswith("~")
                or (len(name) > 1 and name.startswith("#") and name.endswith("#")))


# content/library/: the document library. Each PDF has its record beside it, a resources
# record of kind "document" named like it (`guide.pdf` and `guide.md`).
LIBRARY = "library"


def discover(content: Path, known: dict[str, Collection]
             ) -> tuple[list[SourceFile], list[Problem]]:
    """Every record file under content/, in a stable order, and problems of layout.
    Symbolic links are followed (a collection folder may be a link to another checkout);
    one that loops or points nowhere is a problem, as is a folder inside a collection."""
    files: list[SourceFile] = []
    problems: list[Problem] = []
    if not content.is_dir():
        what = ("a symbolic link that cannot be followed: point it at the content folder"
                if content.is_symlink() else "missing: the content folder does not exist")
        return files, [Problem("content", 0, "", what)]
    for entry in sorted(os.scandir(content), key=lambda e: e.name):
        if not is_read(entry.name):
            continue
        kind = _kind(entry)
        if kind == "broken":
            problems.append(_broken(f"content/{entry.name}"))
        if kind != "folder":
            continue
        collection = "resources" if entry.name == LIBRARY else entry.name
        if collection not in known:
            guess = difflib.get_close_matches(entry.name, [*known, LIBRARY], n=1)
            hint = f"; did you mean {guess[0]}?" if guess else ""
            problems.append(Problem(f"content/{entry.name}", 0, "",
                                    f"unknown collection (expected one of "
                                    f"{', '.join(known)}){hint}"))
            continue
        _discover_collection(entry, collection, files, problems)
    return files, problems


def _discover_collection(entry: os.DirEntry[str], collection: str, files: list[SourceFile],
                         problems: list[Problem]) -> None:
    """The record files of one collection's folder, added to `files`, and the problems of
    what else it holds, added to `problems`."""
    names = set(os.listdir(entry.path)) if entry.name == LIBRARY else set()
    for item in sorted(os.scandir(entry.path), key=lambda e: e.name):
        if not is_read(item.name):
            continue
        rel = f"content/{entry.name}/{item.name}"
        if entry.name == LIBRARY:
            passed_over, problem = _in_library(item.name, rel, names)
            if problem is not None:
                problems.append(problem)
            if passed_over:
                continue
        try:
            info = item.stat()  # one call a file: its mtime and size are needed anyway
        except OSError:
            info = None
        problem = _not_a_record_file(item.name, rel, info)
        if problem is not None:
            problems.append(problem)
            continue
        assert info is not None
        files.append(SourceFile(collection, item.path, rel, *version_of(info)))


def _in_library(name: str, rel: str, names: set[str]) -> tuple[bool, Problem | None]:
    """For an item of content/library/ (whose folder holds `names`): whether it is passed
    over, and the problem that says why, if any. A PDF is read with its record, so passed
    over without a problem; a PDF or a record without the other beside it, and a CSV table,
    are problems (the library holds PDFs, each described by its own record)."""
    if names and name.endswith((".pdf", ".md")):
        stem, _, suffix = name.rpartition(".")
        other = f"{stem}.{'md' if suffix == 'pdf' else 'pdf'}"
        if other not in names:
            needed = "record" if suffix == "pdf" else "PDF"
            return True, Problem(rel, 0, "", f"a library {suffix.upper()} needs its "
                                             f"{needed} beside it: {other}")
        return suffix == "pdf", None  # a PDF is read with its record
    if name.endswith(".csv"):
        return True, Problem(rel, 0, "", "the library holds PDFs, each with its "
                                         "record as a .md file beside it")
    return False, None


def _not_a_record_file(name: str, rel: str, info: os.stat_result | None) -> Problem | None:
    """Why an item of a collection's folder (`info`: its stat result, None if a link that
    loops or points nowhere) is not read as a record file, or None if it is one."""
    kind = _kind_of(info)
    if kind == "broken":
        return _broken(rel)
    if kind == "folder":
        return Problem(rel, 0, "", "a folder inside a collection is not read: "
                                   "move its records up a level, or start its "
                                   "name with _ to keep it out")
    if kind != "file":
        return Problem(rel, 0, "", "not a regular file: records are .md or "
                                   ".csv files")
    if not name.endswith((".md", ".csv")):
        return Problem(rel, 0, "", "not a record file: use .md (one record) "
                                   "or .csv (a table of records)")
    return None


def _kind(entry: os.DirEntry[str]) -> str:
    """`_kind_of` a folder entry, following a symbolic link."""
    try:
        info = entry.stat()
    except OSError:
        info = None
    return _kind_of(info)


def _kind_of(info: os.stat_result | None) -> str:
    """folder, file, other (a device, a pipe) or broken (a link that loops or points nowhere:
    no stat result)."""
    if info is None:
        return "broken"
    mode = info.st_mode
    return "folder" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _broken(rel: str) -> Problem:
    """The problem of a symbolic link that cannot be followed."""
    return Problem(rel, 0, "", "a symbolic link that loops or points nowhere: remove it or "
                               "point it at a file or folder that exists")

