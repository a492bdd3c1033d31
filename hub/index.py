"""The hub's DuckDB file: the records of one node as one caller sees them.

`records` holds each record's JSON as the node served it (DuckDB's JSON type, so
`json->>'family'` works), with the node's id; `hub` holds the file's identity (layout,
node, caller) and how far the sync got; a view per collection (hub/views.py) gives each
field its own column. Records arrive in bulk, a chunk per statement from an Arrow table,
never row by row: a batch of changes is merged with a few set statements; a full load fills
a table of its own, a chunk per transaction (memory holds a chunk, not the node), and
replaces `records` with it in one transaction, so the index changes all at once or not at
all. (collection, id) is unique by construction; `records` has no primary key, because
DuckDB rewrites a key index whole at every checkpoint (1.5 s a sync at 100,000 records)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from exporter.contract.wire import COLLECTIONS

from .errors import SyncError, one_line
from .messages import Record
from .views import all_views

if TYPE_CHECKING:  # (pyarrow is imported where records are written: a sync that finds
    import pyarrow as pa  # nothing new, the usual run from cron, never needs it, 0.1 s)

LAYOUT = "2"
COLUMNS = """(
    collection VARCHAR NOT NULL, id VARCHAR NOT NULL, node_id VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL, updated_at VARCHAR NOT NULL, json JSON NOT NULL)"""
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS records {COLUMNS};
CREATE TABLE IF NOT EXISTS hub (name VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
"""
SAME_KEY = "r.collection = i.collection AND r.id = i.id"
MEMORY_LIMIT = 128 * 2**20  # bytes of DuckDB's buffers; beyond it, it spills to disk
# ... but a record's JSON is one value, which DuckDB holds whole (and copies to parse it):
# a statement holding one over a MiB gets this many times its size more (a 16 MiB record
# needed 256 MiB in all, a 60 MiB one 512 MiB; 128 MiB failed both, measured).
RECORD_ROOM = 8


def _arrow(records: Sequence[Record]) -> pa.Table:
    import pyarrow as pa

    latest = {(r.collection, r.id): r for r in records}  # the last of repeats wins
    rows = list(latest.values())
    return pa.table({
        "collection": [r.collection for r in rows], "id": [r.id for r in rows],
        "content_hash": [r.content_hash for r in rows],
        "updated_at": [r.updated_at for r in rows], "text": [r.text for r in rows]})


STATEMENT_TEXT = 16 * 2**20  # characters of records' JSON one statement takes, at most


def _pieces(records: Sequence[Record]) -> Iterator[Sequence[Record]]:
    """The records in runs of at most STATEMENT_TEXT characters of JSON (one record, if
    larger): DuckDB parses a statement's JSON in memory, and 5,000 records of 20 kB in one
    went past its limit."""
    start = size = 0
    for n, record in enumerate(records):
        if size and size + len(record.text) > STATEMENT_TEXT:
            yield records[start:n]
            start, size = n, 0
        size += len(record.text)
    if start < len(records):
        yield records[start:]


def _keys(keys: Sequence[tuple[str, str]]) -> pa.Table:
    import pyarrow as pa

    return pa.table({"collection": [k[0] for k in keys], "id": [k[1] for k in keys]})


class Index:
    """One hub file, open for a sync run."""

    def __init__(self, path: Path, db: duckdb.DuckDBPyConnection) -> None:
        self.path = path
        self.db = db
        self.limit = MEMORY_LIMIT  # DuckDB's memory limit now (`room`)

    @classmethod
    def open(cls, path: Path) -> Index:
        """Open (or create) the file; SyncError if it is in use, not DuckDB, or not a hub
        index of this layout."""
        try:
            db = duckdb.connect(str(path))
        except duckdb.Error as exc:
            raise SyncError(_unopenable(path, exc)) from None
        index = cls(path, db)
        try:
            db.execute(f"SET memory_limit = '{MEMORY_LIMIT}B'")
            index._check_layout()  # before anything of the file is changed
            for made in (path, path.with_name(path.name + ".wal")):  # an older fednode's
                if made.exists() and made.stat().st_mode & 0o077:  # may be readable by others
                    made.chmod(0o600)
        except duckdb.Error as exc:
            db.close()
            raise SyncError(f"{path} is not a usable hub index ({one_line(str(exc), 120)}); "
                            f"delete it and sync again") from None
        except BaseException:
            db.close()
            raise
        return index

    def _check_layout(self) -> None:
        found = self.db.execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = current_database()").fetchall()
        tables = {name for schema, name, kind in found
                  if schema == "main" and kind == "BASE TABLE"}
        if "hub" in tables:
            layout = self.state("layout")
            if layout != LAYOUT:
                newer = layout is not None and layout.isdigit() and int(layout) > int(LAYOUT)
                raise SyncError(
                    f"{self.path} is a hub index of layout {one_line(str(layout), 20)}, which "
                    + ("a newer fednode made: upgrade fednode to sync into it" if newer else
                       "this fednode does not read; delete it and sync again"))
        elif tables == {"records", "state"}:
            raise SyncError(
                f"{self.path} was made by an older fednode (records stored as bytes, no node "
                f"id); delete it and sync again, e.g. `rm {self.path}` then the same "
                f"`fednode sync`")
        elif found:  # tables or views of someone else's, in any schema: left alone
            names = sorted(f"{schema}.{name}" if schema != "main" else name
                           for schema, name, _ in found)
            raise SyncError(f"{self.path} is a DuckDB database but not a hub index (tables: "
                            f"{one_line(', '.join(names), 80)}); give another --into")
        else:
            self.db.execute(SCHEMA)
            self.set_state({"layout": LAYOUT})
        self._views()

    def _views(self) -> None:
        """The collections' views (`views.all_views`), made again only where they differ
        from those the file holds: a sync that changes nothing leaves the file as it was."""
        wanted = all_views()
        held = {name for (name,) in self.db.execute(
            "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal").fetchall()}
        if self.state("views") == _digest(wanted) and set(COLLECTIONS) <= held:
            return
        for statement in wanted:
            self.db.execute(statement)
        self.set_state({"views": _digest(wanted)})

    def close(self) -> None:
        self.db.close()

    def state(self, name: str) -> str | None:
        row = self.db.execute("SELECT value FROM hub WHERE name = ?", [name]).fetchone()
        return None if row is None else str(row[0])

    def set_state(self, values: dict[str, str | None]) -> None:
        for name, value in values.items():
            self.db.execute("DELETE FROM hub WHERE name = ?", [name])
            if value is not None:
                self.db.execute("INSERT INTO hub VALUES (?, ?)", [name, value])

    def claim(self, node_id: str, node_name: str, caller: str, address: str) -> None:
        """Bind the file to one node and one caller, or refuse another."""
        held = self.state("node_id")
        if held is None:
            self.set_state({"node_id": node_id, "node_name": node_name, "caller": caller,
                            "address": address})
            return
        if held != node_id:
            raise SyncError(
                f"{self.path} holds node {one_line(str(held), 80)} "
                f"({one_line(str(self.state('node_name')), 80)}), not {node_id} "
                f"({node_name}) at {address}: a hub file follows one node; give another "
                f"--into for this one")
        if self.state("caller") != caller:
            raise SyncError(f"{self.path} was synced as {self.state('caller')}, not {caller}; "
                            f"use another file")

    @contextlib.contextmanager
    def transaction(self, size: int = 0) -> Iterator[None]:
        """One transaction; `size`: the characters of records' JSON it will write, which
        DuckDB holds in memory until the commit and checkpoints after it (150 records of
        1 MiB failed to commit within 128 MiB): it gets twice that more room for both."""
        large = size > STATEMENT_TEXT
        with self.room(2 * size if large else 0):
            self.db.begin()
            try:
                yield
            except BaseException:
                self.db.rollback()
                raise
            self.db.commit()
            if large:  # written out now, with the room: a later commit would checkpoint it
                self.db.execute("CHECKPOINT")  # within the usual limit, and fail

    def versions(self, keys: Sequence[tuple[str, str]]
                 ) -> dict[tuple[str, str], tuple[str, str]]:
        """(content_hash, updated_at) of each of these records the index holds: equal pairs
        mean equal bytes (the hash alone does not: a record restricted and made public
        again keeps its hash and gets a new updated_at)."""
        with self._registered("wanted", _keys(keys)):
            rows = self.db.execute(
                "SELECT r.collection, r.id, r.content_hash, r.updated_at FROM records r "
                "JOIN wanted i ON " + SAME_KEY).fetchall()
        return {(c, i): (h, u) for c, i, h, u in rows}

    @contextlib.contextmanager
    def _registered(self, name: str, table: pa.Table) -> Iterator[None]:
        """`table` as a view for the statements within; with room in memory for its largest
        text (a record's JSON), which DuckDB cannot spill in parts."""
        import pyarrow.compute as pc

        largest = pc.max(pc.binary_length(table.column("text"))).as_py() or 0 \
            if "text" in table.column_names and table.num_rows else 0
        with self.room(RECORD_ROOM * largest if largest > 2**20 else 0):
            self.db.register(name, table)
            try:
                yield
            finally:
                self.db.unregister(name)

    @contextlib.contextmanager
    def room(self, extra: int) -> Iterator[None]:
        """DuckDB's memory limit raised by `extra` bytes within."""
        if extra <= 0:
            yield
            return
        before, self.limit = self.limit, self.limit + extra
        self.db.execute(f"SET memory_limit = '{self.limit}B'")
        try:
            yield
        finally:
            self.limit = before
            with contextlib.suppress(duckdb.Error):  # not in a failed transaction
                self.db.execute(f"SET memory_limit = '{before}B'")

    def upsert(self, records: Sequence[Record], node_id: str) -> tuple[int, int]:
        """Add or replace these records, each once (in the caller's transaction): (added,
        updated)."""
        inserted = updated = 0
        for piece in _pieces(records):
            with self._registered("chunk", _arrow(piece)):
                updated += _count(self.db.execute(
                    "DELETE FROM records r USING chunk i WHERE " + SAME_KEY +
                    " AND (r.content_hash <> i.content_hash OR r.json::VARCHAR <> i.text)"))
                inserted += _count(self.db.execute(
                    "INSERT INTO records SELECT i.collection, i.id, ?, i.content_hash, "
                    "i.updated_at, i.text::JSON FROM chunk i WHERE NOT EXISTS (SELECT 1 FROM "
                    "records r WHERE " + SAME_KEY + ")", [node_id]))
        return inserted - updated, updated

    def start_full_load(self) -> None:
        """A full load fills the table `loading`, a chunk per transaction (so memory holds a
        chunk, not the node), and swap_in() replaces `records` with it in one."""
        self.db.execute("DROP TABLE IF EXISTS loading")
        self.db.execute(f"CREATE TABLE loading {COLUMNS}")

    def load(self, records: Sequence[Record], node_id: str) -> None:
        for piece in _pieces(records):
            with self._registered("chunk", _arrow(piece)):
                self.db.execute("INSERT INTO loading SELECT collection, id, ?, content_hash, "
                                "updated_at, text::JSON FROM chunk", [node_id])

    def swap_in(self, state: dict[str, str | None]) -> tuple[int, int, int]:
        """Make `loading` the records, with `state`, at once: (added, updated, removed)."""
        db = self.db
        with self.transaction():
            duplicates = _count(db.execute(
                "SELECT count(*) - count(DISTINCT (collection, id)) FROM loading"))
            if duplicates:  # a list that shifted while it was paged: the last copy wins
                db.execute("CREATE TABLE unique_loading AS SELECT * FROM loading QUALIFY "
                           "row_number() OVER (PARTITION BY collection, id "
                           "ORDER BY rowid DESC) = 1")
                db.execute("DROP TABLE loading")
                db.execute("ALTER TABLE unique_loading RENAME TO loading")
            added = _count(db.execute(
                "SELECT count(*) FROM loading i WHERE NOT EXISTS (SELECT 1 FROM records r "
                "WHERE " + SAME_KEY + ")"))
            removed = _count(db.execute(
                "SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM loading i "
                "WHERE " + SAME_KEY + ")"))
            updated = _count(db.execute(
                "SELECT count(*) FROM records r JOIN loading i ON " + SAME_KEY +
                " WHERE r.content_hash <> i.content_hash "
                "OR md5(r.json::VARCHAR) <> md5(i.json::VARCHAR)"))
            db.execute("DROP TABLE records")
            db.execute("ALTER TABLE loading RENAME TO records")
            for statement in all_views():
                db.execute(statement)
            self.set_state(state)
        return added, updated, removed

    def abandon_full_load(self) -> None:
        self.db.execute("DROP TABLE IF EXISTS loading")

    def remove(self, keys: Sequence[tuple[str, str]]) -> int:
        if not keys:
            return 0
        with self._registered("gone", _keys(keys)):
            return _count(self.db.execute(
                "DELETE FROM records r USING gone i WHERE " + SAME_KEY))

    def counts(self) -> dict[str, int]:
        return {c: int(n) for c, n in self.db.execute(
            "SELECT collection, count(*) FROM records GROUP BY collection").fetchall()}

    def total(self) -> int:
        row = self.db.execute("SELECT count(*) FROM records").fetchone()
        return int(row[0]) if row else 0


def _digest(statements: list[str]) -> str:
    return hashlib.sha256("\0".join(statements).encode()).hexdigest()


def _count(result: duckdb.DuckDBPyConnection) -> int:
    row = result.fetchone()
    return int(row[0]) if row else 0


def _unopenable(path: Path, exc: duckdb.Error) -> str:
    text = str(exc)
    if not path.parent.is_dir():
        return f"the folder {path.parent} does not exist; create it or give another --into"
    if "lock" in text.lower():
        return (f"{path} is in use by another process (another fednode sync?); wait for it "
                f"to finish, or give another --into")
    return (f"{path} cannot be opened as a hub index ({one_line(text, 120)}); give another "
            f"--into, or delete the file if it is a broken hub index")


def discard(path: Path, *, spill: bool = True) -> None:
    """Remove a hub file this run created and never loaded, with DuckDB's side files (its
    spill folder only if `spill`: this run made it)."""
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    if spill:
        shutil.rmtree(path.with_name(path.name + ".tmp"), ignore_errors=True)
