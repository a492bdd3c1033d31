"""Write both output trees of an export and switch them in together, in one step.

Layout (everything under the private folder is 0700; bundle files are 0600):

    .fednode/builds/a/site/       a build's public tree
    .fednode/builds/a/bundle/     the same build's private bundle
    .fednode/builds/a/outputs.marshal   what each file of both trees was rendered from
    .fednode/builds/a/ledger.pending    the ledger events this build publishes (`Pending`)
    .fednode/builds/b/...         the other build: the previous one, or the next one
    .fednode/builds/placed-...    an output written ahead (`Placed`), until moved into a tree
    .fednode/readers/a.lock       build a's readers' lock (`contract.builds`)
    .fednode/current -> builds/a  the switch
    site_out -> .fednode/current/site
    .fednode/bundle -> current/bundle

An export writes both trees into the build that is not current, then flips `current` with
one atomic rename of a new symlink over the old one. So `site_out/` and the bundle always
exist and always belong to the same build, whenever the export is killed; readers see the
old pair or the new pair, never a mix.

An export writes only into a build whose readers' lock it holds exclusively: a sidecar pins
the build it reads with a shared lock (`contract.builds.pin`), so no build a sidecar may be
reading is ever written into. Normally two builds take turns; while a sidecar still pins the
build before last, the export takes another free name, and builds no one pins and no export
starts from are removed when a build is published.

The build the export starts from holds the build before last, with its
`outputs.marshal`: files whose fingerprint is unchanged stay, files the current build has are
hard-linked from it, and only the rest are rendered. A file is never written into: it is
replaced by a new one, so the builds can share files through hard links. `outputs.marshal` is
removed before a build is touched and written back only when both trees are complete, so a
build whose export died is rebuilt from scratch, never trusted."""

from __future__ import annotations

import fcntl
import itertools
import json
import marshal
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from exporter.contract.builds import BUILDS, CURRENT, NAMES, hold_exclusive
from exporter.shared.errors import ExportError
from exporter.shared.fileversion import version_at

# Python's marshal, not JSON: 300,000 paths at 100,000 records took 0.3 s to read (twice an
# export) and 0.3 s to write as JSON; marshal reads them in 0.13 s and writes them in 0.01 s.
# Written and read by this fednode only; one it cannot read is not trusted (rebuilt).
OUTPUTS = "outputs.marshal"
LEGACY_OUTPUTS = "outputs.json"  # what earlier versions of fednode wrote: read, never written
PENDING = "ledger.pending"  # in a build: the ledger events it publishes (`Pending`)
WAIT_FOR_READERS = 5.0  # seconds a delta export waits for sidecars to leave its build
# Each tree's folder name in a build, and the mode of its files.
TREES = {"site": 0o644, "bundle": 0o600}
PRIVATE = 0o700  # the bundle and the cache: only the node's own user enters
# The private folder, `builds/` and each build: only the owner lists or changes them, but
# others (a web server's user) may pass through to the public site tree, the one thing in
# them not protected by its own mode. Secret, keys, lock and bundle files are all 0600.
PASSAGE = 0o711


class Placed(NamedTuple):
    """An output's bytes written already, into a file of their own in the builds folder
    (`placed`), with their tree's mode: the writer moves the file into the tree rather than
    write the bytes again (200 MB for the records table at 100,000 records). One the writer
    does not take goes with the next sweep of the builds folder."""

    path: str


def placed(private: Path, name: str) -> str:
    """Where an output is written ahead (`Placed`): beside the builds, never in one."""
    return str(private / BUILDS / f"placed-{os.getpid()}-{name}")


class Pieces(NamedTuple):
    """An output's bytes as the pieces they are made of, written one after the other
    without being joined first (a collection's CSV download: 78 MB at 100,000 records, from
    hundreds of parts the export cache keeps)."""

    pieces: tuple[bytes | memoryview, ...]


Data = bytes | memoryview | Placed | Pieces
_IOV_MAX = 1024  # buffers a writev takes at most (Linux)


class OutputFile(NamedTuple):
    """One file of a tree. (A named tuple: an export at 100,000 records makes 200,000 of
    them, however few it writes.)"""

    path: str  # relative, forward slashes
    fingerprint: str  # equal fingerprints promise equal bytes
    render: Callable[[], Data]


def constant(path: str, data: Data, fingerprint: str) -> OutputFile:
    """An output whose bytes are already known."""
    return OutputFile(path, fingerprint, lambda: data)


@dataclass(frozen=True)
class TreeStats:
    written: int
    reused: int
    removed: int


def safe_join(root: str, relative: str) -> str:
    """Join under root, refusing absolute paths, `.` and `..` (as pelican's writer does)."""
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        raise ExportError(f"refusing to write outside the output folder: {relative!r}")
    return root + "/" + relative


def checkpoint(name: str) -> None:
    """Fault injection for the kill tests: FEDNODE_EXPORT_KILL_AT=<name> kills the export
    with SIGKILL at that point, as a power cut or `kill -9` would."""
    if os.environ.get("FEDNODE_EXPORT_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


# Fault injection for the kill tests: FEDNODE_EXPORT_KILL_AFTER_WRITES=<n> kills the export
# with SIGKILL once it has written n files into a build (its own process's writes only).
_KILL_AFTER = int(os.environ.get("FEDNODE_EXPORT_KILL_AFTER_WRITES") or 0)
_KILL_PID = os.getpid()
_kill_count = itertools.count(1)


def _counted_write() -> None:
    if next(_kill_count) >= _KILL_AFTER and os.getpid() == _KILL_PID:
        os.kill(os.getpid(), signal.SIGKILL)


_HELD: set[int] = set()  # descriptors of the export locks this process holds


@contextmanager
def exclusive(private: Path) -> Iterator[None]:
    """One export of a node at a time: a second one stops with an error rather than write
    into the same build. The lock goes with the process, however it ends."""
    private_folder(private, PASSAGE)
    descriptor = os.open(private / "export.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportError("another `fednode export` of this node is running; let it "
                              "finish, then export again") from None
        _HELD.add(descriptor)
        yield
    finally:
        _HELD.discard(descriptor)
        os.close(descriptor)


def release_inherited_locks() -> None:
    """In a forked child: close its copies of the lock descriptors, so that the lock is held
    by the exporting process alone and goes when it goes."""
    for descriptor in _HELD:
        os.close(descriptor)
    _HELD.clear()


def private_folder(path: Path, mode: int = PRIVATE) -> Path:
    """Make `path` (and missing parents) a folder only its owner can enter (or, with
    PASSAGE, list)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


class Release:
    """The build being written, and the links that will show it."""

    def __init__(self, private: Path, links: dict[str, Path], name: str, live: str | None,
                 lock: int) -> None:
        self.private = private
        self.builds = private / BUILDS
        self.links = links  # tree -> the path that shows it: site_out, .fednode/bundle
        self.live = live  # the build current when this one was begun
        self.name = name
        self.folder = self.builds / self.name
        self._lock: int | None = lock  # this build's readers' lock, held exclusively
        _HELD.add(lock)
        self.outputs: dict[str, dict[str, str]] = {}
        self._kept: dict[str, dict[str, str]] = {}  # what the build holds already
        self._previous: dict[str, dict[str, str]] = {}  # what the current build holds
        # the version of the current build's record of its outputs when read, and of this
        # build's once written (`resume` checks that neither changed)
        self._versions: dict[str, tuple[int, ...] | None] = {}
        self._records: dict[str, Future[bytes]] = {}  # tree -> its outputs, marshalled

    def close(self) -> None:
        """Let readers and other exports have this build again (after `publish`, or when
        the export fails)."""
        if self._lock is not None:
            _HELD.discard(self._lock)
            os.close(self._lock)
            self._lock = None

    def _recorded(self, tree: str, outputs: dict[str, str]) -> None:
        """A tree brought up to date (`write_changes`) has these outputs: marshalled on a
        thread meanwhile, for `publish` (at 100,000 records, 0.1 s of the end of every
        delta export). Not after `write`: a whole export forks work aside after it, which
        a thread running then would keep in the export's own process (`aside.forks`)."""
        self.outputs[tree] = outputs
        pool = ThreadPoolExecutor(1, thread_name_prefix="fednode-record")
        self._records[tree] = pool.submit(marshal.dumps, outputs)
        pool.shutdown(wait=False)

    @classmethod
    def stage(cls, private: Path, links: dict[str, Path]) -> Release:
        """Sweep what killed runs left, and make a build that is not current, and that no
        reader pins, ready to be brought up to date: the build before last where it is free,
        else another (`_free`)."""
        private_folder(private, PASSAGE)
        builds = private_folder(private / BUILDS, PASSAGE)
        live = _current(private)
        free = _free(private, live)
        if free is None:
            raise ExportError(f"every build folder under {builds} is being read by a sidecar "
                              f"({len(NAMES)} of them); restart the sidecars that serve old "
                              f"builds, then export again")
        release = cls(private, links, free[0], live, free[1])
        _sweep(release)
        kept = _read_outputs(release.folder)
        for record in (OUTPUTS, LEGACY_OUTPUTS, PENDING):
            (release.folder / record).unlink(missing_ok=True)
        if kept is None:
            _rmtree(release.folder)
            kept = {}
        private_folder(release.folder, PASSAGE)
        release._kept = kept
        if live:
            release._versions[live] = _version(builds / live)
            release._previous = _read_outputs(builds / live) or {}
        return release

    @classmethod
    def resume(cls, last: Release) -> Release | None:
        """The build after `last`, which this process published: the one `last` replaced,
        made ready to be brought up to date from what `last` knew both builds to hold,
        without reading either. None where either is not as `last` left it (another export
        ran since, or was killed), there is no such build, or a sidecar still reads it after
        `WAIT_FOR_READERS` seconds."""
        if last.live is None or _current(last.private) != last.name or any(
                _version(last.builds / name) != last._versions.get(name)
                for name in (last.name, last.live)):
            return None
        lock = _wait_exclusive(last.private, last.live)
        if lock is None:
            return None
        release = cls(last.private, last.links, last.live, last.name, lock)
        if _version(release.folder) != last._versions.get(release.name):
            release.close()  # changed while the readers were waited for
            return None
        release._kept, release._previous = last._previous, last.outputs
        release._versions = dict(last._versions)
        (release.folder / OUTPUTS).unlink()  # written back once the build is whole again
        (release.folder / PENDING).unlink(missing_ok=True)
        return release

    def mirror(self, stale: dict[str, set[str]]) -> bool:
        """Make the build this published one replaced hold the same files (hard links of
        this one's, at the `stale` paths of each tree) and record it, without switching:
        the export after it (`resume`) then writes its own changes only. False, touching
        nothing, where the builds are not as this release left them. Between exports, where
        there is time (`delta.Session.prepare`): after an export that changed every file, the
        next one would link 200,000 of them at 100,000 records (4 s). After a node's very
        first export, which had no build before it, the other build is made here, every
        file linked, so that the first edit after it is brought up to date too."""
        other = Release.resume(self) if self.live is not None else self._second()
        if other is None:
            return False
        try:
            for tree, paths in stale.items():
                other.write_changes(tree, [], paths)
            other._write_record()
        finally:
            other.close()
        self.live = other.name
        self._previous = other.outputs
        self._versions[other.name] = _version(other.folder)
        return True

    def _second(self) -> Release | None:
        """The build beside this one, the first a node published, made empty and ready to
        be brought up to date as `resume` makes the build before; None where this one is
        not current as it was published (another export ran since)."""
        if _current(self.private) != self.name or \
                _version(self.folder) != self._versions.get(self.name):
            return None
        free = _free(self.private, self.name)
        if free is None:
            return None
        release = Release(self.private, self.links, free[0], self.name, free[1])
        _rmtree(release.folder)  # nothing of a build is trusted without its record
        private_folder(release.folder, PASSAGE)
        release._previous = self.outputs
        release._versions = dict(self._versions)
        return release

    def stale(self, tree: str) -> set[str]:
        """The paths at which the build before this one differs from this one, once
        published: what `write_changes` of the next build must bring up to date."""
        before, now = self._previous.get(tree, {}), self.outputs.get(tree, {})
        return {path for path, print_ in now.items() if before.get(path) != print_} | (
            before.keys() - now.keys())

    def write_changes(self, tree: str, files: Sequence[OutputFile], stale: set[str]
                      ) -> tuple[TreeStats, set[str]]:
        """Bring one tree of a resumed build (`resume`) to the current build's outputs with
        `files` in place of theirs (a file the current build holds as it is is linked, not
        rendered). The build differs from the current one at the `stale` paths alone (`stale`
        of the last release): only those and `files` are looked at. Returns the stats and the
        paths at which this build differs from the current one."""
        mode = TREES[tree]
        stage = str(self.tree(tree))
        kept, previous = self._kept.get(tree, {}), self._previous.get(tree, {})
        live = str(self.builds / self.live / tree) if self.live else ""
        given = {item.path: item for item in files}
        if len(given) != len(files):
            raise ExportError("two outputs claim the same path")
        outputs = dict(previous)
        outputs.update((path, item.fingerprint) for path, item in given.items())
        written = 0
        with _Writes() as writes:
            for path in sorted(stale | given.keys()):
                want, have = outputs.get(path), kept.get(path)
                if want == have:
                    continue
                if want is None:
                    _remove(stage, path)
                    continue
                destination = safe_join(stage, path)
                if have is not None:
                    os.unlink(destination)  # never write into a file: another build may share it
                else:
                    _makedirs(destination.rpartition("/")[0],
                              0o700 if tree == "bundle" else 0o777)
                if previous.get(path) == want:
                    try:
                        os.link(safe_join(live, path), destination)
                        continue
                    except OSError:
                        if path not in given:
                            raise
                writes.put(destination, given[path].render(), mode)
                written += 1
        self._recorded(tree, outputs)
        differs = {path for path, item in given.items() if previous.get(path) != item.fingerprint}
        return TreeStats(written, len(outputs) - written, 0), differs

    def tree(self, tree: str) -> Path:
        """The folder of one tree of the build being written."""
        root = self.folder / tree
        private_folder(root) if tree == "bundle" else root.mkdir(exist_ok=True)
        return root

    def live_tree(self, tree: str) -> Path | None:
        """The folder of one tree of the current build, if there is one."""
        return self.builds / self.live / tree if self.live else None

    def unchanged(self, tree: str, path: str, fingerprint: str) -> bool:
        """Whether `write` would take this output as it is (from the build, or linked from
        the live one) rather than render it."""
        return fingerprint in (self._kept.get(tree, {}).get(path),
                               self._previous.get(tree, {}).get(path))

    def write(self, tree: str, files: Sequence[OutputFile],
              progress: Callable[[int], None] | None = None) -> TreeStats:
        """Bring one tree of the build to exactly `files`."""
        mode = TREES[tree]
        root = self.tree(tree)
        kept = self._kept.get(tree, {})
        previous = self._previous.get(tree, {})
        live = str(self.builds / self.live / tree) if self.live else ""
        stage = str(root)
        recorded: dict[str, str] = {}
        written = reused = 0
        made: set[str] = set()
        with _Writes() as writes:
            for count, item in enumerate(files, start=1):
                if progress and count % 2000 == 0:
                    progress(count)
                if item.path in recorded:
                    raise ExportError(f"two outputs claim the same path: {item.path}")
                recorded[item.path] = item.fingerprint
                if kept.get(item.path) == item.fingerprint:
                    reused += 1
                    continue
                destination = safe_join(stage, item.path)
                if item.path in kept:
                    os.unlink(destination)  # never write into a file: another build may share it
                else:
                    folder = destination.rpartition("/")[0]
                    if folder not in made:
                        _makedirs(folder, 0o700 if tree == "bundle" else 0o777)
                        made.add(folder)
                if previous.get(item.path) == item.fingerprint:
                    try:
                        os.link(safe_join(live, item.path), destination)
                        reused += 1
                        continue
                    except OSError:
                        pass  # render it again
                writes.put(destination, item.render(), mode)
                written += 1
        gone = [path for path in kept if path not in recorded]
        for path in gone:
            _remove(stage, path)
        self.outputs[tree] = recorded
        return TreeStats(written, reused, len(set(previous or kept) - set(recorded)))

    def _write_record(self) -> None:
        """This build's record of its outputs: each tree's as its own marshalled bytes
        (`_recorded`), read by `_read_outputs`."""
        record = self.folder / OUTPUTS
        _write(str(record) + ".tmp", marshal.dumps({
            tree: self._records[tree].result() if tree in self._records else marshal.dumps(each)
            for tree, each in self.outputs.items()}), 0o600, replace=True)
        os.replace(str(record) + ".tmp", record)

    def publish(self, pending: bytes = b"") -> None:
        """Switch both trees in with one rename, then make sure the links point through
        the switch. `pending`: the ledger events this build publishes, kept in the build
        (`PENDING`) until the ledger holds them. The build that was current stays, as the
        next export's starting point; other builds no reader pins are removed."""
        _write(str(self.folder / PENDING), pending, 0o600)
        self._write_record()
        self._versions[self.name] = _version(self.folder)
        checkpoint("recorded")
        _symlink(f"{BUILDS}/{self.name}", self.private / CURRENT)
        checkpoint("flipped")
        for tree, link in self.links.items():
            target = os.path.relpath(self.private / CURRENT / tree, link.parent)
            if not (link.is_symlink() and os.readlink(link) == target):
                _retire(link, self.builds)
                _symlink(target, link)
        self.close()
        for leftover in self.builds.iterdir():
            if leftover.name not in NAMES:
                _rmtree(leftover)
            elif leftover.name not in (self.name, self.live):
                lock = hold_exclusive(self.private, leftover.name)
                if lock is not None:  # (one a sidecar reads stays, until a later export)
                    _rmtree(leftover)
                    os.close(lock)


def published_pending(private: Path) -> bytes | None:
    """The ledger events the current build published (`Release.publish`'s `pending`), or
    None where there is no current build or it keeps none."""
    try:
        return (private / CURRENT / PENDING).read_bytes()
    except OSError:
        return None


def _free(private: Path, live: str | None) -> tuple[str, int] | None:
    """A build name other than `live` whose readers' lock is had exclusively, with its
    descriptor: the build before last first (the newest record of its outputs), then the
    other builds there are, then a new one; None where sidecars read every one."""
    builds = private / BUILDS

    def newest(name: str) -> tuple[bool, int, bool]:
        record = _version(builds / name)
        return record is None, -(record[0] if record else 0), not (builds / name).exists()

    for name in sorted((n for n in NAMES if n != live), key=newest):
        lock = hold_exclusive(private, name)
        if lock is not None:
            return name, lock
    return None


def _wait_exclusive(private: Path, name: str) -> int | None:
    """Build `name`'s readers' lock held exclusively, once the sidecars that read it have
    moved on (they do within a second or so of a switch), or None after
    `WAIT_FOR_READERS` seconds."""
    deadline = time.monotonic() + WAIT_FOR_READERS
    while True:
        lock = hold_exclusive(private, name)
        if lock is not None or time.monotonic() > deadline:
            return lock
        time.sleep(0.02)


def _current(private: Path) -> str | None:
    try:
        target = os.readlink(private / CURRENT)
    except OSError:
        return None
    name = target.rpartition("/")[2]
    return name if target == f"{BUILDS}/{name}" and name in NAMES else None


def _version(folder: Path) -> tuple[int, ...] | None:
    """The version of a build's record of its outputs, None if it has none."""
    return version_at(folder / OUTPUTS)


def _read_outputs(folder: Path) -> dict[str, dict[str, str]] | None:
    try:
        data = marshal.loads((folder / OUTPUTS).read_bytes())
        if isinstance(data, dict):  # each tree's outputs marshalled apart (`_recorded`)
            data = {tree: marshal.loads(v) if isinstance(v, bytes) else v
                    for tree, v in data.items()}
    except FileNotFoundError:
        try:
            data = json.loads((folder / LEGACY_OUTPUTS).read_bytes())
        except (OSError, ValueError):
            return None
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(data, dict) or not all(
            isinstance(v, dict) and all(isinstance(k, str) and isinstance(f, str)
                                        for k, f in v.items()) for v in data.values()):
        return None
    return data


def _sweep(release: Release) -> None:
    """Remove what killed runs left: temporary links, builds of the old layout, stray
    folders under builds/. A tree an older fednode had retired but not replaced goes back."""
    for link in (release.private / CURRENT, *release.links.values()):
        for temporary in link.parent.glob(f"{link.name}.tmp-*"):
            temporary.unlink(missing_ok=True)
        for leftover in link.parent.glob(f"{link.name}.staging-*"):
            _rmtree(leftover)
        for retired in sorted(link.parent.glob(f"{link.name}.retired-*")):
            if not os.path.lexists(link):
                os.rename(retired, link)
            else:
                _rmtree(retired)
    for entry in release.builds.iterdir():
        if entry.name not in NAMES:
            _rmtree(entry)


def _retire(path: Path, builds: Path) -> None:
    """Move whatever is at `path` (a folder from an older fednode, a stray file, a link
    elsewhere) out of the way, into builds/ where the sweep removes it. A link is simply
    replaced by the rename that follows."""
    if path.is_symlink() or not os.path.lexists(path):
        return
    os.rename(path, builds / f"retired-{os.getpid()}-{path.name}")


def _symlink(target: str, path: Path) -> None:
    """Point `path` at `target` atomically: a new link renamed over the old one."""
    temporary = path.parent / f"{path.name}.tmp-{os.getpid()}"
    temporary.unlink(missing_ok=True)
    os.symlink(target, temporary)
    os.replace(temporary, path)


class _Writes:
    """Files written by a few threads while the caller renders the next ones: creating a
    file is the kernel's work, which runs beside Python's rendering on another core. Files
    go to the threads in batches of `BATCH` (one hand-over a file cost the rendering thread
    more than the write itself: a future, a queue and a semaphore each time). At most
    `PENDING` batches wait, so memory stays small; the first error is raised, once every
    write has ended."""

    THREADS = 3
    BATCH = 64
    PENDING = 8

    def __enter__(self) -> _Writes:
        self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="fednode-write")
        self._slots = threading.BoundedSemaphore(self.PENDING)
        self._errors: list[OSError] = []
        self._batch: list[tuple[str, Data, int]] = []
        return self

    def put(self, path: str, data: Data, mode: int) -> None:
        self._batch.append((path, data, mode))
        if len(self._batch) >= self.BATCH:
            self._send()

    def _send(self) -> None:
        if self._errors:
            raise self._errors[0]
        batch, self._batch = self._batch, []
        self._slots.acquire()
        self._pool.submit(self._run, batch)

    def _run(self, batch: list[tuple[str, Data, int]]) -> None:
        try:
            for path, data, mode in batch:
                _write(path, data, mode)
        except OSError as exc:
            self._errors.append(exc)
        finally:
            self._slots.release()

    def __exit__(self, *failed: object) -> None:
        if self._batch and failed[0] is None and not self._errors:
            self._send()
        # Batches not begun are dropped when the export has failed: it ends sooner.
        self._pool.shutdown(wait=True, cancel_futures=failed[0] is not None)
        if self._errors and failed[0] is None:
            raise self._errors[0]


def _write(path: str, data: Data, mode: int, replace: bool = False) -> None:
    if isinstance(data, Placed):
        os.rename(data.path, path)  # (no file is at `path`: it was removed if there was)
        return
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
    descriptor = os.open(path, flags, mode)
    try:
        if isinstance(data, Pieces):
            _write_pieces(descriptor, data.pieces)
        else:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)
    if _KILL_AFTER:
        _counted_write()


def _write_pieces(descriptor: int, pieces: Sequence[bytes | memoryview]) -> None:
    """Write the pieces one after the other, `_IOV_MAX` at a time (a write may take part of
    them: it goes on from where it stopped)."""
    for start in range(0, len(pieces), _IOV_MAX):
        batch = [memoryview(piece) for piece in pieces[start:start + _IOV_MAX] if piece]
        first = 0
        while first < len(batch):
            written = os.writev(descriptor, batch[first:])
            while first < len(batch) and written >= len(batch[first]):
                written -= len(batch[first])
                first += 1
            if written:
                batch[first] = batch[first][written:]


def _makedirs(folder: str, mode: int) -> None:
    """`os.makedirs`, but every folder it makes gets `mode` (makedirs gives the parents it
    makes the default mode)."""
    if os.path.isdir(folder):
        return
    _makedirs(folder.rpartition("/")[0], mode)
    try:
        os.mkdir(folder, mode)
    except FileExistsError:
        pass


def _remove(root: str, relative: str) -> None:
    """Remove a file of a tree, and the folders it leaves empty."""
    path = safe_join(root, relative)
    os.unlink(path)
    folder = path.rpartition("/")[0]
    while folder != root:
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = folder.rpartition("/")[0]


def _rmtree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
