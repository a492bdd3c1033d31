"""Keeping every member of a hub up to date: `fednode hub sync`.

Each member is synced by `hub.sync.sync` into its own copy, on a thread of its own with an
event loop of its own, so that one member's work (parsing a large file, writing to DuckDB)
never holds up another's requests; at most `concurrency` members at once. Each member's
run is bounded by its timeout (`asyncio.timeout`): a member still running then is
cancelled at its next wait, which leaves its copy at its last complete state (every write
of `hub.sync` is one transaction, and a full load is swapped in at once or dropped). Whatever
happens to one member (down, slow, hostile, restored from a backup, a key refused) is its own
status and line; nothing of it reaches the others.

Before a member's copy is written, its node's manifest is read (its licence, kept in the
status) and, with a key, what the key holds (`/api/keys/me`): a key holding access groups
reads restricted records, which only a member marked `private = true` may keep; for any
other the sync is refused before it starts. A copy in members/ that nevertheless holds a
record not marked public is deleted."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from exporter.contract.errors import FednodeError
from exporter.contract.signing import NodeKey
from exporter.contract.wire import format_time
from exporter.project.config import Project

from .errors import SyncError, one_line
from .index import discard
from .members import PRIVATE_DIR, PUBLIC_DIR, Hub, Member, delete_files, locked
from .messages import Manifest, decode_json, parse_manifest
from .node import Limits, Node, connect, exposed_key, parse_address
from .project import NODE_DIR, read_identity
from .report import SyncReport
from .status import Status, copy_version, read_status, write_status
from .sync import sync
from .trust import Claims, MemberTrust

log = logging.getLogger("fednode.hub")
MEMBER: contextvars.ContextVar[str | None] = contextvars.ContextVar("member", default=None)
T = TypeVar("T")


class Cut(Exception):
    """A member's run reached its timeout and was cancelled."""


@dataclass(frozen=True)
class Facts:
    """What the node says of itself and of the key, read before its copy is written."""

    node_id: str
    node_name: str
    licence: str | None
    groups: tuple[str, ...]  # the key's access groups (none without a key)
    base_url: str | None  # the node's base URL, as its signed manifest names it
    manifest: Manifest


async def sync_members(hub: Hub, *, concurrency: int | None = None,
                       limits: Limits | None = None) -> list[Status]:
    """Sync every member of `hub`, `concurrency` at once (default: hub.toml's); return
    each member's status, in hub.toml's order. No member's failure raises: it is in its
    status. Cancelling this stops every member's run at its next wait."""
    width = concurrency or hub.concurrency
    statuses: list[Status] = []
    if not hub.members:
        return statuses
    for sub in (PUBLIC_DIR, PRIVATE_DIR):
        (hub.folder / sub).mkdir(exist_ok=True)
    (hub.folder / PRIVATE_DIR).chmod(0o700)
    loop = asyncio.get_running_loop()
    with locked(hub.folder), _owner_only(), _named_progress():
        claims = _claims(hub)
        runs = [Run(hub, member, limits or Limits(), claims) for member in hub.members]
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="hub-member") as pool:
            # The pool's threads are the bound: a member's timeout starts with its thread.
            waiting = [loop.run_in_executor(pool, run.run) for run in runs]
            try:
                statuses = list(await asyncio.gather(*waiting))
            except asyncio.CancelledError:
                for run in runs:
                    run.stop()
                raise
    return statuses


def _claims(hub: Hub) -> Claims:
    """The node ids and keys held before the members run: the hub's own (its key made
    now if its first export has not), and the members' (`trust.Claims.of`)."""
    identity = read_identity(hub)["node"]
    hub_key = NodeKey.load(Project(hub.folder / NODE_DIR).private, create=True)
    statuses = {member.name: read_status(hub.status_file(member), member.name, member.url,
                                         member.private) for member in hub.members}
    hub_id = identity.get("id")
    return Claims.of(hub, statuses, hub_id if isinstance(hub_id, str) else None, hub_key)


@contextlib.contextmanager
def _owner_only() -> Iterator[None]:
    """Files made while members sync are their owner's alone. `hub.sync.sync` sets the same
    mask around each run and restores the one it found; set here for the whole while, the
    runs of several threads each find and restore this one."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


class _Named(logging.Filter):
    """Each progress message of a member's run starts with the member's name; the member's
    latest message is kept (`said`), to tell what a run cut at its timeout was doing."""

    def __init__(self) -> None:
        super().__init__()
        self.said: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        name = MEMBER.get()
        if name is not None:
            message = record.getMessage()
            self.said[name] = message
            record.msg, record.args = f"{name}: {message}", None
        return True


NAMED = _Named()


@contextlib.contextmanager
def _named_progress() -> Iterator[None]:
    logger = logging.getLogger("fednode.hub")
    previous = logger.level
    if logger.getEffectiveLevel() > logging.INFO:  # progress is kept even when not shown
        logger.setLevel(logging.INFO)
    logger.addFilter(NAMED)
    try:
        yield
    finally:
        logger.removeFilter(NAMED)
        logger.setLevel(previous)


class Run:
    """One member's run, on a thread of the pool with an event loop of its own; `stop`
    cancels it from another thread."""

    def __init__(self, hub: Hub, member: Member, limits: Limits, claims: Claims) -> None:
        self.hub = hub
        self.member = member
        self.limits = limits
        self.claims = claims
        self._lock = threading.Lock()
        self._stopped = False
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self) -> Status:
        """Sync the member; its status, also written to its status file."""
        member, hub = self.member, self.hub
        token = MEMBER.set(member.name)
        try:
            NAMED.said.pop(member.name, None)
            status = read_status(hub.status_file(member), member.name, member.url,
                                 member.private)
            status.last_attempt = format_time(datetime.now(UTC))
            _save(hub.status_file(member), status)
            started, before = time.monotonic(), copy_version(hub.copy(member))
            # A copy in members/ changed since its last run ended (one killed after writing,
            # before its status was saved): its records may have changed unrecorded.
            unrecorded = not member.private and before != status.checked
            trust = MemberTrust(member, status, self.claims)
            try:
                report, facts, status.checked = asyncio.run(self._bounded(sync_member(
                    hub, member, self.limits, status.checked, trust)))
            except BaseException as exc:  # each member's failure is its own
                trust.release()
                _failed(status, self._failure(exc), hub.copy(member), member.private)
                if unrecorded or copy_version(hub.copy(member)) != before:  # (or this one)
                    _changed(status)
            else:
                counted = status.changes
                _succeeded(status, report, facts)
                _trusted(hub, member, status, trust, report)
                if unrecorded and status.changes == counted:
                    _changed(status)
                _moved(hub, member)
            status.seconds = round(time.monotonic() - started, 3)
            status.saved = _save(hub.status_file(member), status)
            return status
        finally:
            MEMBER.reset(token)

    async def _bounded(self, work: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._stopped:
                work.close()
                raise asyncio.CancelledError
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        try:
            async with asyncio.timeout(self.hub.bound(self.member)) as bound:
                return await work
        except TimeoutError:
            if bound.expired():
                raise Cut from None
            raise
        finally:
            with self._lock:
                self._loop = self._task = None

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._loop is not None and self._task is not None:
                with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                    self._loop.call_soon_threadsafe(self._task.cancel)

    def _failure(self, exc: BaseException) -> str:
        if isinstance(exc, Cut):
            bound = self.hub.bound(self.member)
            said = NAMED.said.get(self.member.name)
            return (f"stopped at its timeout of {bound:g} s; it was at: "
                    + (one_line(said, 160) if said else "its first request"))
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            return "stopped before it finished (the hub sync was interrupted)"
        if isinstance(exc, FednodeError):
            return one_line(str(exc), 1000)
        log.exception("unexpected error")  # its traceback, in the log file if there is one
        return f"unexpected error (a fednode bug): {type(exc).__name__}: {one_line(str(exc))}"


def _moved(hub: Hub, member: Member) -> None:
    """A member synced into members/ has no files left in private/, and the reverse (its
    `private` changed since they were made)."""
    try:
        delete_files(hub.folder, member.name, (PUBLIC_DIR if member.private else PRIVATE_DIR,))
    except OSError as exc:
        log.error("cannot delete %s's files from its former folder: %s", member.name,
                  one_line(str(exc)))


def _save(path: Path, status: Status) -> bool:
    """Write the member's status file; a machine's error (a full disk) is logged, and the
    member's line still says how its run went. Whether it was written."""
    try:
        write_status(path, status)
    except OSError as exc:
        log.error("cannot write %s: %s", path, one_line(str(exc)))
        return False
    return True


def _failed(status: Status, error: str, copy: Path, private: bool) -> None:
    status.ok, status.stale, status.last_error = False, status.last_success is not None, error
    if not private and copy.exists():  # what a run cut midway applied is checked as well
        with contextlib.suppress(SyncError, duckdb.Error):
            status.checked = checked_open(copy, status.checked)
    if not copy.exists():
        status.records = None
    elif (held := _count(copy)) is not None:  # a run cut midway may have applied changes
        status.records = held


def _changed(status: Status) -> None:
    status.last_change, status.changes = status.last_attempt, status.changes + 1


def _succeeded(status: Status, report: SyncReport, facts: Facts) -> None:
    status.ok, status.stale, status.last_error = True, False, None
    status.last_success = status.last_attempt
    if report.added or report.updated or report.removed or report.total != status.records \
            or facts.node_id != status.node_id or status.last_change is None:
        _changed(status)
    status.records, status.notes = report.total, list(report.notes)
    status.added, status.updated, status.removed = report.added, report.updated, report.removed
    status.node_id, status.node_name, status.licence = (facts.node_id, facts.node_name,
                                                       facts.licence)
    status.base_url = facts.base_url


def _trusted(hub: Hub, member: Member, status: Status, trust: MemberTrust,
             report: SyncReport) -> None:
    """Keep who the member was found to be: its key (pinned), and the signed manifest its
    run followed, which the hub republishes (`hub export`)."""
    status.key_fingerprint, status.key_anchor = trust.key, member.fingerprint
    status.key_notes = list(trust.notes)
    path = hub.manifest_file(member)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_bytes(report.manifest)
        os.replace(temporary, path)
    except OSError as exc:  # (a full disk): the export serves it once a sync writes this
        log.error("cannot write %s: %s", path, one_line(str(exc)))


def _count(copy: Path) -> int | None:
    """The records a member's copy holds; None when there is no copy or it cannot be read."""
    if not copy.exists():
        return None
    try:
        with duckdb.connect(str(copy), read_only=True) as db:
            row = db.execute("SELECT count(*) FROM records").fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row else None


def member_key(member: Member) -> str | None:
    """The member's key, from the environment variable its key_env names."""
    if member.key_env is None:
        return None
    key = os.environ.get(member.key_env, "").strip()
    if not key:
        raise SyncError(f"the environment variable {member.key_env} (its key_env) is not set; "
                        f"set it to the member's key before `fednode hub sync`")
    return key


async def sync_member(hub: Hub, member: Member, limits: Limits, checked: str | None,
                      trust: MemberTrust) -> tuple[SyncReport, Facts, str | None]:
    """Check the node (who signed its manifest: `trust`) and its key, then sync the
    member's copy; and for a copy in members/, the version at which it was found to hold
    open records only (`checked_open`: `checked` is the last such version)."""
    key = member_key(member)
    async with connect(parse_address(member.url), key, limits) as node:
        facts = await read_facts(node, key)
    if facts.groups and not member.private:
        raise SyncError(
            f"its key (from {member.key_env}) holds the access group"
            f"{'s' * (len(facts.groups) > 1)} {', '.join(facts.groups)}, whose restricted "
            f"records stay with whoever holds the key, and members/ is what the hub serves: "
            f"set private = true for {member.name} in hub.toml to keep its copy in private/ "
            f"(never served), or give it a key without groups")
    trust(facts.manifest)
    copy = hub.copy(member)
    before = copy_version(copy)
    report = await sync(member.url, copy, key, limits=limits, trust=trust)
    if member.private:
        return report, facts, None
    same = checked == before and not (report.added or report.updated or report.removed)
    return report, facts, checked_open(copy, copy_version(copy) if same else None)


async def read_facts(node: Node, key: str | None) -> Facts:
    """The node's id, name and licence (its manifest) and the key's access groups."""
    where = f"{node.base}/api/manifest"
    log.info("reading %s", where)
    body = await node.get(node.url("/api/manifest"), cap=node.limits.manifest_bytes)
    assert body is not None
    manifest = parse_manifest(body, where)
    licence = decode_json(body, where, "the manifest")["node"].get("licence")
    groups: tuple[str, ...] = ()
    if key is not None:
        where = f"{node.base}/api/keys/me"
        body = await node.get(node.url("/api/keys/me"), cap=node.limits.json_bytes)
        assert body is not None
        data = decode_json(body, where, "the key's description")
        found = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(found, list) or not all(isinstance(g, str) for g in found):
            raise SyncError(f"{where}: groups: expected a list of access groups; without it "
                            f"the hub cannot tell whether the key reads restricted records")
        groups = tuple(one_line(group, 60) for group in found)
    return Facts(manifest.node_id, manifest.name,
                 one_line(licence, 200) if isinstance(licence, str) and licence.strip()
                 else None, groups, manifest.roots[0] or None, manifest)


async def identify(url: str) -> Manifest:
    """The signed manifest of the node at `url` (one try, 10 s to connect): who `hub add`
    pins. SyncError when it cannot be read or is not signed."""
    limits = Limits(attempts=1, read_timeout=30.0, request_timeout=60.0)
    async with connect(parse_address(url), None, limits) as node:
        where = f"{node.base}/api/manifest"
        body = await node.get(node.url("/api/manifest"), cap=limits.manifest_bytes)
        assert body is not None
        manifest = parse_manifest(body, where)
    if manifest.signed is None:
        raise SyncError(f"{where}: the manifest is not signed; a hub serves nodes whose "
                        f"manifests are signed with their key (fednode signs at every export)")
    return manifest


def checked_open(copy: Path, checked: str | None) -> str:
    """The version of a copy in members/ (its file and DuckDB log) once found to hold open
    records only (`_only_open`), which is read again unless it is `checked`: the version
    of a copy whose records are those last found open. Only the hub writes its copies; a
    sync that changed no record (it still writes when it synced) need not read every
    record again."""
    version = copy_version(copy)
    if version != checked:
        _only_open(copy)  # (read only: the version stays)
    return version


def _only_open(copy: Path) -> None:
    """A copy in members/ holds public records only; one that holds any other is deleted."""
    with duckdb.connect(str(copy), read_only=True) as db:
        row = db.execute("SELECT count(*), min(coalesce(json->>'access', '(none)')) FROM "
                         "records WHERE coalesce(json->>'access', '') <> 'public'").fetchone()
    if row and row[0]:
        discard(copy)
        raise SyncError(f"the node served {row[0]} records not marked public (access "
                        f"{one_line(str(row[1]), 40)}, ...) to a caller without access "
                        f"groups; the copy was deleted, as members/ holds open records only")


def warnings_before(hub: Hub) -> list[str]:
    """What the operator should know before the run: a key sent over plain http://."""
    said = []
    for member in hub.members:
        if member.key_env is None:
            continue
        warning = exposed_key(parse_address(member.url), os.environ.get(member.key_env))
        if warning:
            said.append(f"Warning: {member.name}: {warning.removeprefix('Warning: ')}")
    return said


def key_notes(statuses: list[Status]) -> list[str]:
    """What the operator should check of the members' keys: one pinned on first use, or a
    rotation followed."""
    return [f"Note: {status.member}: {note}" + (
                ": check this fingerprint with its publisher (`fednode identity` prints it)"
                if "first use" in note else "")
            for status in statuses if status.ok for note in status.key_notes]


def warnings_after(statuses: list[Status]) -> list[str]:
    """What the operator should know of the copies: a member whose node names no licence."""
    return [f"Warning: {status.member}: the node's manifest names no licence; its records "
            f"will be served with a warning that their terms of reuse are unknown"
            for status in statuses if status.unlicensed()]
