"""The bundle, loaded: its records for reads by id and by page (`records`), the ledger in
DuckDB for the changes feed, and the one way to query DuckDB: `Store.query(fn)`.

The caller passes a function; the store picks the snapshot (the newest loaded bundle) and a
connection on a worker thread, runs the function there, and on a timeout interrupts that
same connection (datasette's `execute_fn`). DuckDB never runs on the event loop. A new
export is picked up without a restart: the build the bundle path shows is checked at most
once a second (`contract.builds.identity`) and a fresh snapshot swapped in; queries already
running finish on the old one. Each snapshot pins its build (`contract.builds.pin`) for as
long as anything holds the snapshot, so the export never writes into a build being read."""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from exporter.contract import builds, bundle
from exporter.contract.errors import FednodeError
from exporter.contract.wire import PUBLIC
from exporter.shared import encoder, word_vectors
from exporter.shared.errors import ExportError

from . import ranking
from .changes import Feeds
from .errors import Unavailable
from .records import Records

log = logging.getLogger("fednode.sidecar")
T = TypeVar("T")
G = TypeVar("G")


class BundleMissing(FednodeError):
    """No usable bundle at the configured path."""


def _quote(text: str) -> str:
    return text.replace("'", "''")


# The ledger's events, each with the state of its record just before it (for the visibility
# rule in `service`): `source` is a table of `feed.Event` rows. A view: it is read once per
# snapshot and kind of caller (`changes.Feeds`), and the window's columns are not kept.
EVENTS_VIEW = """
    CREATE VIEW events AS
    SELECT *, coalesce(lag(op <> 'delete') OVER w, false) AS prev_live,
           lag(access) OVER w AS prev_access, lag(collection) OVER w AS prev_collection
    FROM {source} WINDOW w AS (PARTITION BY id ORDER BY seq)
    ORDER BY seq"""


class Snapshot:
    """One bundle, loaded. Immutable once built, but for the inverted files a deferred load
    makes afterwards (`complete`); replaced whole on reload."""

    def __init__(self, path: Path, earlier: Snapshot | None = None, *,
                 defer: bool = False) -> None:
        """The bundle at `path`. A search group's inverted file (`sidecar.lists`) is taken
        from `earlier` where its vectors are the same file (an export links a group it did
        not change), else brought up to date from `earlier`'s or made; with `defer`, those
        of the restricted groups are made by `complete` instead, so that the lists, the
        costliest part of a large load, never make a load that requests wait for last
        longer for a larger restricted group."""
        # The build the bundle path shows now, pinned: no export writes into it while this
        # snapshot lives (`contract.builds`), so every file read from it later, pages, PDFs
        # and downloads, is the published build's.
        try:
            self.pin = builds.pin(path)
        except builds.PinFailed as exc:
            raise BundleMissing(f"{exc}; retrying") from None
        weakref.finalize(self, self.pin.release)
        try:
            self._load(self.pin.folder, earlier, defer)
        except BaseException:
            self.pin.release()
            raise

    def _load(self, path: Path, earlier: Snapshot | None, defer: bool) -> None:
        self.identity = builds.identity(path)
        meta_path = path / bundle.META
        try:
            self.meta = bundle.Meta.from_json(meta_path.read_bytes())
            self.manifest = (path / bundle.MANIFEST).read_bytes()
            self.schema = (path / bundle.SCHEMA).read_bytes()
            self.openapi = (path / bundle.OPENAPI).read_bytes()
            self.index = (path / bundle.INDEX).read_bytes()
            self.public_changes = (path / bundle.CHANGES).read_bytes()
        except (OSError, bundle.BundleError) as exc:
            raise BundleMissing(f"no usable bundle at {path}: {exc}. Run `fednode export` "
                                f"first.") from None
        self.base_url = self.meta.base_url
        self.build = self.meta.build
        try:
            self.records = Records(path / bundle.RECORDS)
        except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
            raise BundleMissing(f"the records at {path / bundle.RECORDS} are unusable ({exc}); "
                                f"run `fednode export` again") from None
        self._db = duckdb.connect(":memory:")
        self._db.execute("ATTACH ':memory:' AS snapshot (COMPRESS)")
        self._db.execute("USE snapshot")
        events = _quote(str(path / bundle.EVENTS))
        self._db.execute(f"CREATE TABLE ledger AS SELECT * FROM read_parquet('{events}')")
        self._db.execute(EVENTS_VIEW.format(source="ledger"))
        self.search = _open_groups(path / bundle.SEARCH, functools.partial(
            _search_group, earlier=earlier, defer=defer), "search index")
        self.passages = _open_groups(path / bundle.PASSAGES, ranking.Passages, "library index")
        self.path = path
        self.feeds = Feeds()  # the changes feed, by caller kind, as first asked for
        self._local = threading.local()
        try:
            unchanged = bundle.Meta.from_json(meta_path.read_bytes()).build == self.build
        except (OSError, bundle.BundleError):
            unchanged = False
        if not unchanged:  # an export replaced the folder's files while they were read
            raise BundleMissing(f"the bundle at {path} changed while it was loaded; retrying")

    def complete(self, earlier: Snapshot | None = None) -> None:
        """Make the inverted files a deferred load left to make (until then those groups'
        searches compare every vector), from those of `earlier` where it has them."""
        for name, group in self.search.items():
            group.make_lists(_group_in(earlier, name))

    def page(self, relative: str) -> bytes | None:
        """A page the export wrote for people (`relative` is made of checked segments)."""
        try:
            return (self.path / bundle.SITE / relative).read_bytes()
        except OSError:
            return None

    def groups(self, held: Sequence[str]) -> list[ranking.Group]:
        """The search index of each access group a caller holds, and of no other."""
        return [self.search[name] for name in held if name in self.search]

    def passage_groups(self, held: Sequence[str]) -> list[ranking.Passages]:
        """The library's passages of each access group a caller holds, and of no other."""
        return [self.passages[name] for name in held if name in self.passages]

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's own connection to the snapshot."""
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self._db.cursor()
            cursor.execute("USE snapshot")
        return cursor


def _search_group(name: str, folder: Path, *, earlier: Snapshot | None,
                  defer: bool) -> ranking.Group:
    """One group's search index; its inverted file taken or made now (from the group's in
    `earlier` where it has one) unless deferred (a restricted group's, on a deferred
    load)."""
    before = _group_in(earlier, name)
    group = ranking.Group(name, folder, before)
    if not defer or name == PUBLIC:
        group.make_lists(before)
    return group


def _group_in(snapshot: Snapshot | None, name: str) -> ranking.Group | None:
    return None if snapshot is None else snapshot.search.get(name)


def _open_groups(folder: Path, kind: Callable[[str, Path], G], what: str) -> dict[str, G]:
    """Each access group's index under `folder`, opened."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
        return {name: kind(name, folder / name) for name in names}
    except (OSError, ValueError, KeyError) as exc:
        raise BundleMissing(f"the {what} at {folder} is unusable ({exc}); run "
                            f"`fednode export` again") from None


Query = Callable[[Snapshot, duckdb.DuckDBPyConnection], T]
COLLECT_EVERY = 5.0  # seconds between runs of the cyclic collector for a replaced snapshot


def give_back_memory() -> None:
    """Once a replaced snapshot is gone: hand the C heap's free pages back to the system
    (glibc's `malloc_trim`). A snapshot's id index and rows are freed in pieces among
    others the new one allocated meanwhile, and the heap would keep them, some 400 MiB
    at 500,000 records; elsewhere than glibc, nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` among the process's own symbols, looked up once (a search
    of the system's libraries would run on the event loop at every reload)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


class Store:
    """The live snapshot plus the thread pool that queries it."""

    def __init__(self, path: Path, *, query_timeout: float = 10.0, threads: int = 4,
                 reload_interval: float = 1.0,
                 prepare: Callable[[Snapshot, Snapshot], None] | None = None) -> None:
        """`prepare(fresh, replaced)` runs on a worker thread for a reloaded snapshot: what
        callers had made of the one it replaces is made of it ahead of them (the service
        layer's changes feeds); before the swap when it loads aside, after it otherwise
        (`_reload`)."""
        self.path = path
        self.reload_interval = reload_interval
        self.query_timeout = query_timeout
        self.prepare = prepare
        self.snapshot = Snapshot(path)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="duckdb")
        # The embedding model loads in the background: the first search need not wait.
        self._pool.submit(word_vectors.Embedder.serving)
        if self.snapshot.passages:
            # The library's encoder, at once: files that are not the published model stop
            # the start with their message (ExportError), not each question with an error
            # 500. A node with no library never loads it (100 MB); one whose library
            # appears later loads it with that bundle (`_load`).
            encoder.Encoder.shared()
        self._checked = time.monotonic()
        self._reload_lock = asyncio.Lock()
        self._aside: asyncio.Task[None] | None = None
        self._left: list[weakref.ref[Snapshot]] = []  # snapshots replaced, maybe still held
        self._collected = -math.inf  # when `_give_back_once_left` last ran the collector

    async def current(self) -> Snapshot:
        """The snapshot to answer with. Once a newer export has landed: if what it shows
        everyone changed (the public manifest), it is loaded first; if not (only restricted
        records, or nothing a caller reads, changed), it loads aside while callers are
        answered from the snapshot they have. Were that load waited for, the one request
        that met it would be slower after an export that changed only restricted records,
        and any caller could time that something restricted had changed."""
        now = time.monotonic()
        if now - self._checked >= self.reload_interval:
            self._checked = now
            shown = builds.identity(self.path)
            if shown != self.snapshot.identity:
                try:
                    public = (Path(shown[0]) / bundle.MANIFEST).read_bytes()
                except OSError:
                    return self.snapshot  # mid-swap: keep serving what we have
                if public != self.snapshot.manifest:
                    async with self._reload_lock:
                        await self._reload(ahead=False)
                elif self._aside is None or self._aside.done():
                    self._aside = asyncio.ensure_future(self._reload_aside())
        return self.snapshot

    async def follow(self) -> None:
        """Check for a new build every `reload_interval` whether or not requests come (a
        server runs this as a task): an idle sidecar moves to the new build too, and lets
        the one it leaves go to the next export (`contract.builds`)."""
        while True:
            await asyncio.sleep(max(self.reload_interval, 0.25))
            try:
                await self.current()
            except Exception:  # (a reload logs its own failures) keep following
                log.exception("checking for a new build failed")
            self._give_back_once_left()

    def _give_back_once_left(self) -> None:
        """Once every snapshot replaced since is gone, hand their memory back. A request's
        objects may hold one in a reference cycle, freed by the cyclic collector only: it
        is run for them, at most every COLLECT_EVERY seconds while one is held."""
        if not self._left:
            return
        if any(left() is not None for left in self._left):
            now = time.monotonic()
            if now - self._collected < COLLECT_EVERY:
                return
            self._collected = now
            gc.collect()
            if any(left() is not None for left in self._left):
                return
        self._left = []
        give_back_memory()

    async def settled(self) -> Snapshot:
        """The snapshot of the bundle as it is now, once the loads it needs have ended (for
        tests, and tools that must see an export they just made): a second export may land
        while the first is being loaded aside."""
        for _ in range(10):
            self._checked = -math.inf
            await self.current()
            if self._aside is not None:
                await asyncio.shield(self._aside)
            if builds.identity(self.path) == self.snapshot.identity:
                break
        return self.snapshot

    async def _reload_aside(self) -> None:
        try:
            async with self._reload_lock:
                await self._reload(ahead=True)
        except Exception:  # nobody awaits this task: say it here, keep serving the old
            log.exception("loading the new bundle aside failed; still serving build %s",
                          self.snapshot.build)

    async def _reload(self, *, ahead: bool) -> None:
        """Load the bundle as it is now and swap it in. `prepare` runs on it before the
        swap when it loads aside (`ahead`: the first poll of it then makes nothing), and
        after the swap, aside, when a request is waiting for it (that request would
        otherwise wait for the feed of every kind of caller that polled, and its time
        would tell how many kinds had)."""
        loop = asyncio.get_running_loop()
        if builds.identity(self.path) == self.snapshot.identity:
            return  # another reload, waited for on the lock, loaded it
        replaced = self.snapshot
        try:
            fresh = await loop.run_in_executor(self._pool, self._load, replaced, ahead)
        except (BundleMissing, ExportError, duckdb.Error) as exc:
            log.warning("bundle reload failed, still serving build %s: %s",
                        self.snapshot.build, exc)
            return
        if fresh.build != self.snapshot.build:
            log.info("bundle reloaded: build %s", fresh.build)
        self.snapshot = fresh
        self._left.append(weakref.ref(replaced))
        if not ahead:
            loop.run_in_executor(self._pool, self._prepared, fresh, replaced)

    def _load(self, replaced: Snapshot, ahead: bool) -> Snapshot:
        """The bundle as it is now, loaded; made ready whole when it loads aside (`ahead`),
        else with its restricted groups' inverted files left to `_prepared`."""
        fresh = Snapshot(self.path, replaced, defer=not ahead)
        if fresh.passages:  # a library now: its encoder loads here, not at a question
            encoder.Encoder.shared()
        if ahead:
            self._prepared(fresh, replaced)
        return fresh

    def _prepared(self, fresh: Snapshot, replaced: Snapshot) -> None:
        """The inverted files a deferred load left, and `prepare`, their failures logged:
        a group without its inverted file compares every vector, and the feeds `prepare`
        makes are made on demand anyway."""
        try:
            fresh.complete(replaced)
        except Exception:
            log.exception("making the search lists of build %s failed", fresh.build)
        if self.prepare is None:
            return
        try:
            self.prepare(fresh, replaced)
        except Exception:
            log.exception("making the changes feeds of build %s ahead failed", fresh.build)

    async def query(self, fn: Query[T], *, on: Snapshot | None = None) -> T:
        """Run `fn(snapshot, connection)` on a worker thread under the time limit, on the
        current snapshot or the one given (`on`)."""
        snapshot = on or await self.current()
        used: list[duckdb.DuckDBPyConnection] = []

        def call() -> T:
            cursor = snapshot.cursor()
            used.append(cursor)
            return fn(snapshot, cursor)

        future = asyncio.get_running_loop().run_in_executor(self._pool, call)
        try:
            return await asyncio.wait_for(future, self.query_timeout)
        except TimeoutError:
            for cursor in used:  # the very connection running this query, on its snapshot
                cursor.interrupt()
            raise Unavailable("the query took too long; narrow it and try again") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
