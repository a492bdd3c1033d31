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

import marshal
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from exporter.contract.builds import BUILDS, CURRENT, NAMES, hold_exclusive
from exporter.pipeline.locks import PASSAGE, exclusive, hold, let_go, private_folder
from exporter.pipeline.outputs import Data, OutputFile, constant
from exporter.pipeline.report import TreeStats
from exporter.pipeline.slots import (
    LEGACY_OUTPUTS,
    OUTPUTS,
    current_build,
    free_build,
    read_outputs,
    record_version,
    remove_tree,
    wait_exclusive,
)
from exporter.pipeline.writes import Writes, make_folders, remove_file, safe_join, write_file
from exporter.shared.errors import ExportError

# What writing an export's builds offers, wherever each part lives.
__all__ = ["Data", "OutputFile", "Release", "TreeStats", "checkpoint", "constant", "exclusive",
           "published_pending"]

PENDING = "ledger.pending"  # in a build: the ledger events it publishes (`Pending`)
# Each tree's folder name in a build, and the mode of its files.
TREES = {"site": 0o644, "bundle": 0o600}


def checkpoint(name: str) -> None:
    """Fault injection for the kill tests: FEDNODE_EXPORT_KILL_AT=<name> kills the export
    with SIGKILL at that point, as a power cut or `kill -9` would."""
    if os.environ.get("FEDNODE_EXPORT_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


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
        hold(lock)
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
            let_go(self._lock)
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
        else another (`free_build`)."""
        private_folder(private, PASSAGE)
        builds = private_folder(private / BUILDS, PASSAGE)
        live = current_build(private)
        free = free_build(private, live)
        if free is None:
            raise ExportError(f"every build folder under {builds} is being read by a sidecar "
                              f"({len(NAMES)} of them); restart the sidecars that serve old "
                              f"builds, then export again")
        release = cls(private, links, free[0], live, free[1])
        _sweep(release)
        kept = read_outputs(release.folder)
        for record in (OUTPUTS, LEGACY_OUTPUTS, PENDING):
            (release.folder / record).unlink(missing_ok=True)
        if kept is None:
            remove_tree(release.folder)
            kept = {}
        private_folder(release.folder, PASSAGE)
        release._kept = kept
        if live:
            release._versions[live] = record_version(builds / live)
            release._previous = read_outputs(builds / live) or {}
        return release

    @classmethod
    def resume(cls, last: Release) -> Release | None:
        """The build after `last`, which this process published: the one `last` replaced,
        made ready to be brought up to date from what `last` knew both builds to hold,
        without reading either. None where either is not as `last` left it (another export
        ran since, or was killed), there is no such build, or a sidecar still reads it after
        `WAIT_FOR_READERS` seconds."""
        if last.live is None or current_build(last.private) != last.name or any(
                record_version(last.builds / name) != last._versions.get(name)
                for name in (last.name, last.live)):
            return None
        lock = wait_exclusive(last.private, last.live)
        if lock is None:
            return None
        release = cls(last.private, last.links, last.live, last.name, lock)
        if record_version(release.folder) != last._versions.get(release.name):
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
        self._versions[other.name] = record_version(other.folder)
        return True

    def _second(self) -> Release | None:
        """The build beside this one, the first a node published, made empty and ready to
        be brought up to date as `resume` makes the build before; None where this one is
        not current as it was published (another export ran since)."""
        if current_build(self.private) != self.name or \
                record_version(self.folder) != self._versions.get(self.name):
            return None
        free = free_build(self.private, self.name)
        if free is None:
            return None
        release = Release(self.private, self.links, free[0], self.name, free[1])
        remove_tree(release.folder)  # nothing of a build is trusted without its record
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
        with Writes() as writes:
            for path in sorted(stale | given.keys()):
                want, have = outputs.get(path), kept.get(path)
                if want == have:
                    continue
                if want is None:
                    remove_file(stage, path)
                    continue
                destination = safe_join(stage, path)
                if have is not None:
                    os.unlink(destination)  # never write into a file: another build may share it
                else:
                    make_folders(destination.rpartition("/")[0],
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
        with Writes() as writes:
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
                        make_folders(folder, 0o700 if tree == "bundle" else 0o777)
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
            remove_file(stage, path)
        self.outputs[tree] = recorded
        return TreeStats(written, reused, len(set(previous or kept) - set(recorded)))

    def _write_record(self) -> None:
        """This build's record of its outputs: each tree's as its own marshalled bytes
        (`_recorded`), read by `read_outputs`."""
        record = self.folder / OUTPUTS
        write_file(str(record) + ".tmp", marshal.dumps({
            tree: self._records[tree].result() if tree in self._records else marshal.dumps(each)
            for tree, each in self.outputs.items()}), 0o600, replace=True)
        os.replace(str(record) + ".tmp", record)

    def publish(self, pending: bytes = b"") -> None:
        """Switch both trees in with one rename, then make sure the links point through
        the switch. `pending`: the ledger events this build publishes, kept in the build
        (`PENDING`) until the ledger holds them. The build that was current stays, as the
        next export's starting point; other builds no reader pins are removed."""
        write_file(str(self.folder / PENDING), pending, 0o600)
        self._write_record()
        self._versions[self.name] = record_version(self.folder)
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
                remove_tree(leftover)
            elif leftover.name not in (self.name, self.live):
                lock = hold_exclusive(self.private, leftover.name)
                if lock is not None:  # (one a sidecar reads stays, until a later export)
                    remove_tree(leftover)
                    os.close(lock)


def published_pending(private: Path) -> bytes | None:
    """The ledger events the current build published (`Release.publish`'s `pending`), or
    None where there is no current build or it keeps none."""
    try:
        return (private / CURRENT / PENDING).read_bytes()
    except OSError:
        return None


def _sweep(release: Release) -> None:
    """Remove what killed runs left: temporary links, builds of the old layout, stray
    folders under builds/. A tree an older fednode had retired but not replaced goes back."""
    for link in (release.private / CURRENT, *release.links.values()):
        for temporary in link.parent.glob(f"{link.name}.tmp-*"):
            temporary.unlink(missing_ok=True)
        for leftover in link.parent.glob(f"{link.name}.staging-*"):
            remove_tree(leftover)
        for retired in sorted(link.parent.glob(f"{link.name}.retired-*")):
            if not os.path.lexists(link):
                os.rename(retired, link)
            else:
                remove_tree(retired)
    for entry in release.builds.iterdir():
        if entry.name not in NAMES:
            remove_tree(entry)


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
