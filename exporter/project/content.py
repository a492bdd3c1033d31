"""Load content files into source records, collecting every problem on the way.

A record is `content/<collection>/<slug>.md` (TOML front matter between `+++` lines, Markdown
body) or a row of a CSV table in a collection folder. Nothing here writes anything."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from exporter.pipeline.forks import cores
from exporter.project.discovery import LIBRARY, discover, is_read
from exporter.project.frontmatter import parse_markdown
from exporter.project.records import SourceFile, SourceRecord
from exporter.project.schemas import Collection, collections
from exporter.project.tables import parse_csv
from exporter.project.validation import validate
from exporter.shared.errors import BIDI, ExportError, Problem
from exporter.shared.fileversion import version_of

# What reading content offers, wherever each part lives.
__all__ = ["CHUNK", "LIBRARY", "PARALLEL_FROM", "RULES", "SourceFile", "SourceRecord",
           "discover", "is_read", "read", "read_all", "reload", "version_of"]

# The version of the rules of reading and validating content: a change of them drops
# caches of records read under older rules (exporter.pipeline.cache), since they may now be invalid.
RULES = 3  # bumped when the rules change (3: control characters refused in any field)


# `errors.CONTROL` in a text whose line ends are "\n" (any CR left is a lone one): one
# class of characters, which `re` scans three times as fast as CONTROL's alternative (0.8 s
# of CPU over the 90,000 Markdown files of bench/export_speed.py's node).
_CONTROL_OR_CR = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}]")


def read(source: SourceFile, collection: Collection, *, validated: bool = True
         ) -> tuple[list[SourceRecord], list[Problem]]:
    """Parse and validate one file (only parse it: `validated=False`). Returns its records
    and its problems."""
    try:
        with open(source.path, "rb") as handle:
            text = handle.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [Problem(source.rel, 0, "", f"not UTF-8 text ({exc.reason} at byte "
                                                f"{exc.start}); save the file as UTF-8")]
    except OSError as exc:
        return [], [Problem(source.rel, 0, "", f"cannot read: {exc.strerror}")]
    text = text.replace("\r\n", "\n")
    parse = parse_csv if source.rel.endswith(".csv") else parse_markdown
    records, problems = parse(text, source, collection)
    said = {(p.line, p.field) for p in problems}  # a cell refused already: not "required"
    # A field can hold a control character only where the file does, or writes one as an
    # escape (TOML's \u0007): a file with neither needs no look at each field (most files).
    controls = "\\" in text or _CONTROL_OR_CR.search(text) is not None
    for record in records:
        found = validate(record, collection, controls=controls) if validated else []
        if not found:
            record.seal()
        problems.extend(p for p in found if p.message != "required"
                        or (p.line, p.field) not in said)
    return records, problems


# Reading is shared among worker processes, one a core, from this many files: below it,
# starting them costs more than they save.
PARALLEL_FROM = 256
CHUNK = 128  # files a worker reads in one go


def read_all(files: Sequence[SourceFile]) -> Iterator[tuple[list[SourceRecord], list[Problem]]]:
    """`read` of each file, in order. Many files are read by worker processes, one a core
    (parsing and validating is Python's work, one core's at a time in one process): forked
    on Linux, so they start at once with the schemas loaded and their validators compiled
    (here, once), and handed files in chunks. Should a worker die, what it had not read is
    read here."""
    workers = cores(8)
    if len(files) < PARALLEL_FROM or workers < 2:
        yield from _read_chunk(files)
        return
    import multiprocessing  # here: an export reading few files starts without it
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    known = collections()
    for name in {source.collection for source in files}:
        known[name].fast  # noqa: B018 (compiled now, not in each worker)
    chunks = [files[start:start + CHUNK] for start in range(0, len(files), CHUNK)]
    done = 0
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for results in pool.map(_read_chunk, chunks):
                yield from results
                done += 1
    except BrokenProcessPool:
        for chunk in chunks[done:]:
            yield from _read_chunk(chunk)


def _read_chunk(files: Sequence[SourceFile]) -> list[tuple[list[SourceRecord], list[Problem]]]:
    known = collections()
    return [read(source, known[source.collection]) for source in files]


def reload(source: SourceFile, collection: Collection) -> dict[str, SourceRecord]:
    """Every record of an unchanged, previously valid file, by id: one read of the file,
    however many of its records are needed. The file is parsed, not validated again: a record
    whose hash is the one remembered (the caller checks) has the very fields found valid
    then, under the same schemas (the cache is tied to them)."""
    records, problems = read(source, collection, validated=False)
    if problems:
        raise ExportError(f"{problems[0]}: the file changed while the export ran; run the "
                          f"export again")
    return {record.id: record for record in records}
