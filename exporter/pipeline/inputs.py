"""What the last export read, kept on disk: an export whose inputs are all as the last
published export read them has nothing to do, and says so having read no file.

The record, `.fednode/inputs.marshal` (0600), names the build it describes and holds, for
every file the export reads, its version (`fileversion.version_of`: time, size, change time,
inode) and the SHA-256 of its bytes: content/node.toml and every entry of content/ and of
each folder in it that the export reads (`discovery.is_read`: the records, the CSV tables,
the library's PDFs), ledger.jsonl, the key rotations and the node's signing key. Beside
them, what else decides the outputs: fednode's own code and templates (each file's
version), the base URL given, the signing key given in the environment (its digest) and the
folder limit.

An export looks first (`look`): it lists those folders and takes each file's version. A
file whose version is the record's is not read; one whose version differs is read and
hashed, so a file touched or checked out again with the same bytes counts as unchanged.
The names are kept in the order the folders list them, the versions and digests packed
beside them, so that a look that finds them all as they were compares two lists and two
byte strings, and a record of 100,000 files loads in a few hundredths of a second. A
file changed within `RACY` before a look is hashed at every look until a look finds it
older: an edit in the same tick of the file system's clock, of the same size, keeps its
version. When every input is the record's and the build published is the one the record
names, the export has nothing to do (`unchanged`). Otherwise it runs whole, and, once its
build is published and its ledger events appended, writes the record of what it read
(`remember`). A file whose version moved while the export ran is recorded with a digest
equal to none, so that the next export reads it again. An export brought up to date under
`--watch` (`delta`) renews the record with the files it read and the ledger (`renew`).

A record missing, damaged, of another format, or of another build than the one published
(an export killed after it published, a `.fednode/` restored from a backup) means a whole
export: the record only ever lets an export skip work."""

from __future__ import annotations

import array
import hashlib
import marshal
import os
import stat
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import exporter
from exporter.contract.builds import identity
from exporter.pipeline.locks import PASSAGE, private_folder, replace_private
from exporter.pipeline.report import BuildReport, TreeStats
from exporter.project.config import Project
from exporter.project.discovery import is_read
from exporter.shared.fileversion import version_of

FILE = "inputs.marshal"  # in .fednode/
FORMAT = 3
# A file whose change time is this close before a look (or after it) is hashed at the next
# look whatever its version: within one tick of a file system's clock (2 s on FAT) an edit
# of the same size keeps the version. (Any edit, and setting a file's time back, moves its
# change time to the clock's tick: a file changed before that window cannot keep it.)
RACY = 2_000_000_000
# Besides content/, by their names in the project; the export itself writes the ledger and
# (the first time) the signing key: their version and digest are taken again once it has.
OTHERS = ("ledger.jsonl", "key_rotations.json", ".fednode/signing_key.pem")
WRITTEN = ("ledger.jsonl", ".fednode/signing_key.pem")
KEY_ENV = "FEDNODE_SIGNING_KEY"  # `contract.signing.KEY_ENV`, read without loading it
WIDTH = 4  # numbers a version packs: time, size, change time, inode (`version_of`)
# What stands for a folder, a link that cannot be followed and anything else (a pipe, a
# device: the export refuses it, and it is never read), as versions and as digests (so that
# comparing digests compares kinds too).
FOLDER, BROKEN, OTHER = (-1, 0, 0, 0), (-2, 0, 0, 0), (-3, 0, 0, 0)
KINDS = {kind: hashlib.sha256(name).digest()
         for kind, name in ((FOLDER, b"folder"), (BROKEN, b"broken"), (OTHER, b"other"))}
SIZE = 32  # bytes of a SHA-256


# The build published: its bundle's real folder and its meta.json's time, size and inode
# (`builds.identity` without the change time, which moves whenever the other build links
# the file; meta.json is only ever replaced, never written in place).
Build = tuple[str, tuple[int, ...] | None]


def published(project: Project) -> Build:
    """The build published now, as the record names it."""
    folder, version = identity(project.bundle)
    return folder, None if version is None else (version[0], version[1], version[3])


def _unknown() -> bytes:
    """The digest of a file that could not be hashed as the version found: equal to none."""
    return os.urandom(SIZE)


@dataclass
class Looked:
    """What an export found before reading anything: every input's name, version and
    digest, in the order the folders list them."""

    options: tuple[str, ...]
    names: list[str]
    versions: array.array[int]  # WIDTH numbers a name
    digests: bytes  # SIZE bytes a name
    at: int  # time.time_ns() when the look began


@dataclass
class Last:
    """The record of the last published export's inputs, and what it said."""

    build: Build
    looked: Looked
    racy: list[int]  # the files (by their place in `looked.names`) to hash at the next look
    public: dict[str, int]
    restricted: dict[str, int]
    files: int  # the site's files
    warnings: list[str]  # said again by every export that finds nothing changed

    @classmethod
    def read(cls, project: Project) -> Last | None:
        """The record, or None if there is none or it cannot be read as one."""
        try:
            data = marshal.loads((project.private / FILE).read_bytes())
            if data["format"] != FORMAT:
                return None
            versions = array.array("q")
            versions.frombytes(data["versions"])
            looked = Looked(tuple(data["options"]), data["names"], versions, data["digests"],
                            data["at"])
            count = len(looked.names)
            if len(versions) != WIDTH * count or len(looked.digests) != SIZE * count or \
                    not all(isinstance(n, int) and 0 <= n < count for n in data["racy"]):
                return None
            return cls(tuple(data["build"]), looked, data["racy"], data["public"],
                       data["restricted"], data["files"], list(data["warnings"]))
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            return None

    def write(self, project: Project) -> None:
        folder = private_folder(project.private, PASSAGE)  # (as the builds leave it)
        looked = self.looked
        data = marshal.dumps({
            "format": FORMAT, "build": self.build, "options": looked.options,
            "names": looked.names, "versions": looked.versions.tobytes(),
            "digests": bytes(looked.digests), "at": looked.at, "racy": self.racy,
            "public": self.public, "restricted": self.restricted, "files": self.files,
            "warnings": self.warnings})
        replace_private(folder / FILE, data)

    def report(self) -> BuildReport:
        """What an export that finds nothing changed says: the last export's counts."""
        return BuildReport(Counter(self.public), Counter(self.restricted),
                           site=TreeStats(0, self.files, 0), warnings=list(self.warnings),
                           unchanged=True)


def look(project: Project, last: Last | None, *, base_url: str | None,
         folder_limit: int) -> Looked:
    """Every input's version, and its digest: the record's where the version is the
    record's (the file is not read), else read now."""
    at = time.time_ns()
    names, versions = _versions(project)
    root = project.root
    if last is not None and names == last.looked.names and versions == last.looked.versions:
        digests = bytearray(last.looked.digests)  # as they were: only the racy are read
        for n in last.racy:
            digests[n * SIZE:(n + 1) * SIZE] = _digest(root / names[n], _version(versions, n))
    else:
        digests = _digests(root, names, versions, last)
    return Looked(_options(base_url, folder_limit), names, versions, bytes(digests), at)


def _digests(root: Path, names: list[str], versions: array.array[int],
             last: Last | None) -> bytearray:
    """Each file's digest: the record's where its version is the record's and it was not
    racy, else its bytes hashed now."""
    before = last.looked if last is not None else Looked((), [], array.array("q"), b"", 0)
    known = {name: n for n, name in enumerate(before.names)}
    racy = set(last.racy) if last is not None else set()
    digests = bytearray()
    for n, name in enumerate(names):
        version = _version(versions, n)
        at = known.get(name)
        if version in KINDS:
            digests += KINDS[version]
        elif at is not None and at not in racy and _version(before.versions, at) == version:
            digests += before.digests[at * SIZE:(at + 1) * SIZE]
        else:
            digests += _digest(root / name, version)
    return digests


def unchanged(project: Project, last: Last | None, looked: Looked) -> BuildReport | None:
    """What the export says if nothing it reads changed since the last one published, and
    that one is still the build published; None if it must run. Versions that moved with
    the same bytes are written into the record, so that the next look reads none."""
    if last is None or last.looked.options != looked.options or \
            published(project) != last.build or not _site_is(project, last.build):
        return None
    before = last.looked
    if before.names == looked.names:
        same = before.digests == looked.digests
    else:
        same = _by_name(before) == _by_name(looked)
    if not same:
        return None
    if last.racy or before.versions != looked.versions:
        try:
            Last(last.build, looked, _racy(looked), last.public, last.restricted, last.files,
                 last.warnings).write(project)
        except OSError:  # (not renewed: the next look reads those files again)
            pass
    return last.report()


def remember(project: Project, looked: Looked, report: BuildReport,
             warnings: list[str]) -> None:
    """Write the record of an export just published: what it looked at, except files
    whose version moved since (recorded with a digest equal to none: the next export reads
    them again); the ledger and the signing key, which the export writes, looked at again."""
    names, versions = _versions(project)
    now = {name: n for n, name in enumerate(names)}
    digests = bytearray(looked.digests)
    recorded = array.array("q", looked.versions)
    for n, name in enumerate(looked.names):
        at = now.get(name)
        version = _version(looked.versions, n)
        if at is None or _version(versions, at) != version:
            if name in WRITTEN and at is not None:  # (the export's own writing)
                version = _version(versions, at)
                recorded[n * WIDTH:(n + 1) * WIDTH] = array.array("q", version)
                digests[n * SIZE:(n + 1) * SIZE] = _digest(project.root / name, version)
            else:
                digests[n * SIZE:(n + 1) * SIZE] = _unknown()
    names, extra = list(looked.names), [name for name in WRITTEN if name not in looked.names
                                        and name in now]
    for name in extra:  # (a first export makes the signing key)
        version = _version(versions, now[name])
        names.append(name)
        recorded.extend(version)
        digests += _digest(project.root / name, version)
    site = report.site or TreeStats(0, 0, 0)
    done = Looked(looked.options, names, recorded, bytes(digests), looked.at)
    Last(published(project), done, _racy(done), dict(report.public),
         dict(report.restricted), site.written + site.reused, warnings).write(project)


def renew(project: Project, before: Build, read: Iterable[tuple[str, tuple[int, ...]]],
          report: BuildReport) -> None:
    """After an export brought up to date from the build `before` (`delta`, under
    `--watch`), having read the files `read` (each name with the version it read): the
    record of `before`'s inputs, with those files and the ledger as they are now, becomes
    the record of the build now published. Nothing is written where the record is of
    another build or does not hold one of the files (the next export is then whole)."""
    last = Last.read(project)
    if last is None or last.build != before or published(project) == before:
        return
    looked = last.looked
    where = {name: n for n, name in enumerate(looked.names)}
    versions, digests = array.array("q", looked.versions), bytearray(looked.digests)
    try:
        written = [(name, version_of(os.stat(project.root / name))) for name in WRITTEN
                   if name in where]
    except OSError:
        return
    for name, version in [*read, *written]:
        n = where.get(name)
        if n is None:
            return
        versions[n * WIDTH:(n + 1) * WIDTH] = array.array("q", version)
        digests[n * SIZE:(n + 1) * SIZE] = _digest(project.root / name, version)
    renewed = Looked(looked.options, looked.names, versions, bytes(digests), time.time_ns())
    site = report.site or TreeStats(0, 0, 0)
    try:
        Last(published(project), renewed, sorted(set(last.racy) | set(_racy(renewed))),
             dict(report.public), dict(report.restricted), site.written + site.reused,
             last.warnings).write(project)
    except OSError:  # (the record still names `before`: the next export is whole)
        pass


def _version(versions: array.array[int], n: int) -> tuple[int, ...]:
    return tuple(versions[n * WIDTH:(n + 1) * WIDTH])


def _by_name(looked: Looked) -> dict[str, bytes]:
    digests = looked.digests
    return {name: digests[n * SIZE:(n + 1) * SIZE] for n, name in enumerate(looked.names)}


def _racy(looked: Looked) -> list[int]:
    """The files changed so close before the look that their version may hide an edit."""
    since = looked.at - RACY
    changed = looked.versions[2::WIDTH]
    return [n for n, when in enumerate(changed) if when >= since]


def _site_is(project: Project, build: Build) -> bool:
    """Whether site_out/ leads to the site of the build whose bundle is `build`'s."""
    return os.path.realpath(project.site_out) == \
        os.path.join(os.path.dirname(build[0]), "site")


def _versions(project: Project) -> tuple[list[str], array.array[int]]:
    """The name and version of every file the export reads (`FOLDER` for a folder, `BROKEN`
    for a link that cannot be followed), in the order the folders list them."""
    names: list[str] = []
    versions = array.array("q")
    _list(project.content, "content", names, versions, depth=2)
    for name in OTHERS:
        try:
            info = os.stat(project.root / name)
        except OSError:
            continue
        names.append(name)
        versions.extend((info.st_mtime_ns, info.st_size, info.st_ctime_ns, info.st_ino))
    return names, versions


def _list(folder: Path, name: str, names: list[str], versions: array.array[int],
          depth: int) -> None:
    """The entries of `folder` the export reads, and (`depth` 2) of the folders in it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:  # (missing, or not a folder: the export says what is wrong)
        return
    add, extend = names.append, versions.extend
    for entry in entries:
        if not is_read(entry.name):
            continue
        inner = f"{name}/{entry.name}"
        add(inner)
        try:
            info = entry.stat()  # (through a link, as the export reads it)
        except OSError:
            extend(BROKEN)
            continue
        if stat.S_ISREG(info.st_mode):
            extend((info.st_mtime_ns, info.st_size, info.st_ctime_ns, info.st_ino))
        elif stat.S_ISDIR(info.st_mode):
            extend(FOLDER)
            if depth > 1:
                _list(Path(entry.path), inner, names, versions, depth - 1)
        else:
            extend(OTHER)


def _digest(path: Path, version: tuple[int, ...]) -> bytes:
    """The SHA-256 of the file's bytes, if they are those of `version` (else a digest equal
    to none: the file moved on, or cannot be read, and the export reads it again)."""
    try:  # (never waiting on a pipe put where a file was, nor reading a device)
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or version_of(info) != version:
                return _unknown()
            digest = hashlib.file_digest(handle, "sha256").digest()
            if version_of(os.fstat(handle.fileno())) != version:
                return _unknown()
            return digest
    except OSError:
        return _unknown()


def _options(base_url: str | None, folder_limit: int) -> tuple[str, ...]:
    """What besides the files decides the outputs: fednode's code and templates (each
    file's version), the base URL given, the signing key in the environment, the folder
    limit."""
    package = str(Path(exporter.__file__).parent)
    lines = [exporter.__version__]
    for folder, folders, names in os.walk(package):
        folders[:] = [name for name in folders if name != "__pycache__"]
        lines += (f"{folder[len(package):]}/{name} {version_of(os.stat(f'{folder}/{name}'))}"
                  for name in names)
    code = hashlib.sha256("\n".join(sorted(lines)).encode())
    key = hashlib.sha256(os.environ.get(KEY_ENV, "").strip().encode()).hexdigest()
    return (code.hexdigest(), base_url or "", key, str(folder_limit))
