"""`fednode hub export`: the members' public records as the hub's own node, exported.

Under the hub folder's lock (no `hub sync` writes a copy meanwhile), each member of hub.toml
that is not private is read from members/ (hub/republish.py: only the records whose JSON
changed since the last export are made again), the project in <hub>/node/ is
brought to what they hold (hub/project.py: a file written only where its text changed, a
record file that is no longer a member's public record deleted), and the project is exported
by the node's pipeline (`exporter.pipeline.build.build`) unless nothing changed since the
last export that succeeded. A running `fednode hub serve` picks the new build up as
`fednode serve` picks up a node's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from exporter.contract.builds import CURRENT
from exporter.contract.wire import COLLECTIONS
from exporter.project.config import NODE_FILE, Project, load_node_config
from exporter.shared.errors import ContentError

from .errors import one_line
from .members import HUB_FILE, PUBLIC_DIR, Hub, HubError, Member, load_hub, locked
from .project import (
    DEFAULT_BASE_URL,
    IDENTITY,
    NODE_DIR,
    Served,
    identity_file,
    no_licence,
    node_toml,
    read_identity,
    warnings,
)
from .republish import (
    ENTRY_SIZE,
    CopyUnreadable,
    Entry,
    Source,
    copy_identity,
    memo_key,
    node_licence,
    republish,
    rules,
)
from .status import copy_version, read_status

EXPORTED = "hub-export.json"  # in the project's .fednode/: what the last export was made of
Progress = Callable[[str, int, int], None]


@dataclass
class HubExport:
    """What a hub export did: a line a member, the warnings, and the export's summary."""

    members: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # members whose node names no licence
    notes: list[str] = field(default_factory=list)  # the export's own warnings
    summary: str = ""
    base_url: str = ""  # the base URL used, in words (`baseurl.BaseUrl.said`)
    exported: bool = False  # False: nothing changed since the last export


def hub_project(folder: Path) -> Project:
    """The project the hub is served from."""
    return Project(folder / NODE_DIR)


def exported_before(folder: Path) -> bool:
    """Whether the hub has a published export (it is served, or was)."""
    return os.path.lexists(hub_project(folder).private / CURRENT)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def served_base_url(folder: Path, host: str, port: int) -> str | None:
    """The base URL `hub serve` exports with when given none: the address it listens on,
    where the hub's base URL (the last --base-url given, else <hub>/node.toml's) is this
    machine's on another port, so that its links lead back to it; else None (the hub's
    own)."""
    from exporter.project.baseurl import chosen_base_url

    current = chosen_base_url(hub_project(folder), None).given or _identity_base_url(folder)
    try:
        parts = urlsplit(current)
        if parts.hostname not in LOOPBACK or parts.port == port:
            return None
    except ValueError:  # (a port out of range: the export names that problem)
        return None
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _identity_base_url(folder: Path) -> str:
    """<hub>/node.toml's base_url (as first written where the file is not made yet)."""
    try:
        node = tomllib.loads((folder / IDENTITY).read_text("utf-8")).get("node")
    except FileNotFoundError:
        return DEFAULT_BASE_URL
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ""
    url = node.get("base_url") if isinstance(node, dict) else None
    return url if isinstance(url, str) else ""


def export_hub(folder: Path, *, base_url: str | None = None, now: datetime | None = None,
               progress: Progress | None = None, quick: bool = False) -> HubExport:
    """Bring <hub>/node/ to the members' public records and export it (`fednode hub
    export`). HubError for a hub.toml or <hub>/node.toml that is wrong; a member that cannot
    be served is a line of its own, never an error. `quick` (the export that ends `hub
    sync` when every status file was written, and the one `hub serve` starts with): where
    no member's state changed since the last export (`_states`), nothing is read and the
    report has no member lines, only the members whose node names no licence."""
    from exporter.project.baseurl import chosen_base_url, remember_base_url

    hub = load_hub(folder)
    project = hub_project(folder)
    with locked(folder):
        identity = read_identity(hub)  # (made here, with a fresh id, the first time)
        states = _states(hub, chosen_base_url(project, base_url).given)
        if quick and states == _last(project, "states") and exported_before(folder):
            return HubExport(warnings=_unlicensed(hub),
                             summary="no member changed since the last export: nothing to "
                                     "export")
        from exporter.pipeline.export import export
        present = _present(project.content)
        given_id = identity["node"].get("id")
        hub_id = given_id if isinstance(given_id, str) else None
        served = [_served(hub, member, project, present, hub_id) for member in hub.members
                  if not member.private]
        _once_a_node(served)
        try:
            node_text = node_toml(hub, identity, served)
        except ValueError as exc:
            raise HubError(f"{identity_file(hub)}: a value the hub cannot write: {exc}") \
                from None
        files, kept = {NODE_FILE: node_text}, set()
        for one in served:
            if one.records is not None:
                files.update(one.records.files)
                kept |= one.records.kept
        _forget(project, served)
        write_content(project.content, files, kept)
        _check_node(hub, project)
        chosen = chosen_base_url(project, base_url)
        report = HubExport([one.line() for one in served], warnings(served),
                           base_url=chosen.said)
        made_of = _digest(node_text, served, chosen.given)
        if made_of == _last(project, "digest") and exported_before(folder):
            _remember(project, made_of, states, served)
            report.summary = "unchanged since the last export: nothing to export"
            return report
        done = export(project, now=now, base_url=chosen.given, progress=progress)
        remember_base_url(project, chosen.given)
        _remember(project, made_of, states, served)
    report.summary, report.exported = done.summary(), True
    report.notes += done.warnings
    return report


def _present(content: Path) -> frozenset[str]:
    """The record files content/ holds ("collection/file.md")."""
    found = []
    for name in COLLECTIONS:
        with contextlib.suppress(FileNotFoundError), os.scandir(content / name) as entries:
            found += [f"{name}/{entry.name}" for entry in entries
                      if entry.is_file(follow_symlinks=False)]
    return frozenset(found)


def _served(hub: Hub, member: Member, project: Project, present: frozenset[str],
            hub_id: str | None) -> Served:
    """A member as the hub serves it: its copy in members/ read, or why it is not."""
    status = read_status(hub.folder / PUBLIC_DIR / f"{member.name}.status.json", member.name,
                         member.url, member.private)
    copy = hub.folder / PUBLIC_DIR / f"{member.name}.duckdb"
    one = Served(member, status)
    if not copy.exists():
        one.note = "no copy yet; `fednode hub sync` makes it"
        return one
    one.manifest = republished_manifest(hub, member)
    if status.key_fingerprint is None or one.manifest is None:
        one.note = "its key is not checked yet; `fednode hub sync` checks and pins it"
        return one
    try:
        node_id, node_name = copy_identity(copy)
        if node_id is None:
            one.note = "its copy names no node (not synced to the end)"
            return one
        if node_id != status.node_id or node_id == hub_id:
            one.note = (f"its copy names the node {one_line(node_id, 80)}, not the one its "
                        f"key was checked for; `fednode hub sync` checks it again")
            return one
        # (a node's name and licence as one line of printable text: they go into records,
        # node.toml and the operator's terminal; a known licence as its id)
        name = one_line(status.node_name or node_name or member.name, 200)
        licence = status.licence if status.node_id == node_id else None
        one.source = Source(member.name, node_id, name, node_licence(licence),
                            status.base_url)
        one.records = republish(one.source, copy, _memo(project, one.source), present)
    except CopyUnreadable as exc:
        one.source, one.note = None, f"its copy cannot be read ({exc})"
    return one


def republished_manifest(hub: Hub, member: Member) -> str | None:
    """The member's signed manifest as its last successful sync followed it, written in
    ASCII (its signature covers the canonical form of its value, `signing.canonical`, not
    its bytes); None where there is none to read."""
    try:
        data = json.loads(hub.manifest_file(member).read_bytes())
    except (OSError, ValueError):
        return None
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"))


def _once_a_node(served: list[Served]) -> None:
    """A node listed twice (at two addresses) is served once, as its first member: its
    records would have the same ids twice."""
    first: dict[str, str] = {}
    for one in served:
        if one.source is None:
            continue
        held = first.setdefault(one.source.node_id, one.member.name)
        if held != one.member.name:
            one.source = one.records = None
            one.note = f"the same node as {held}, which serves its records"


def write_content(content: Path, files: dict[str, str],
                  kept: set[str] | frozenset[str] = frozenset()) -> int:
    """Make content/ hold exactly `files` (paths relative to it) and the files `kept` as
    they are, in the collections' folders and node.toml: a file is written only where its
    text changed (so the export's cache keeps what it read), each at once; any other file
    there is deleted. The files written or deleted."""
    changed = 0
    for name in COLLECTIONS:
        (content / name).mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = content / rel
        data = text.encode("utf-8")
        try:
            if path.read_bytes() == data:
                continue
        except FileNotFoundError:
            pass
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        changed += 1
    for name in COLLECTIONS:
        for entry in os.scandir(content / name):
            rel = f"{name}/{entry.name}"
            if rel not in files and rel not in kept and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                changed += 1
    return changed


def _check_node(hub: Hub, project: Project) -> None:
    """The node.toml made of <hub>/node.toml: its problems named as that file's settings."""
    try:
        load_node_config(project)
    except ContentError as exc:
        said = "; ".join(f"{problem.field}: {problem.message}" for problem in exc.problems)
        raise HubError(f"{identity_file(hub)}: {said}") from None


def _digest(node_text: str, served: list[Served], base_url: str | None) -> str:
    """What the export is made of: node.toml, each member's records (`Republished.digest`:
    its source, the rules and every record's JSON) and the base URL."""
    made = hashlib.sha256(json.dumps([base_url, node_text]).encode())
    for one in served:
        made.update(f"\0{one.member.name}\0{one.records.digest if one.records else ''}"
                    .encode())
    return made.hexdigest()


MEMOS = "hub-records"  # in the project's .fednode/: `<member>.json`, what each record made


def _memo(project: Project, source: Source) -> dict[str, Entry] | None:
    """The memo the last export left of the member's records, if it is for this source
    and these rules (`republish.memo_key`)."""
    try:
        data = json.loads((project.private / MEMOS / f"{source.name}.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != memo_key(source) or \
            not isinstance(data.get("records"), dict):
        return None
    records = data["records"]
    if not all(isinstance(entry, list) and len(entry) == ENTRY_SIZE and
               all(isinstance(part, str) for part in entry) for entry in records.values()):
        return None
    return records


def _states(hub: Hub, base_url: str | None) -> str:
    """What an export is made of, told without reading a member's copy: hub.toml, the hub's
    node.toml, the base URL, fednode's version and rules (`republish.rules`), and each
    served member's state as its status file holds it (its result, node, licence, records,
    how many runs changed its copy and when the last did, its key and base URL) and its
    signed manifest's digest, with its copy's inode (a copy
    replaced by hand) and whether the copy is still at the version its last sync left
    (`checked`: a copy written by anything else since). A sync that brings nothing new
    changes none of them; one that changes a member's records counts one more `changes`."""
    made = hashlib.sha256(json.dumps([base_url, rules()]).encode())
    for path in (hub.folder / HUB_FILE, identity_file(hub)):
        try:
            made.update(path.read_bytes())
        except FileNotFoundError:
            made.update(b"\0absent")
        made.update(b"\0")
    for member in hub.members:
        if member.private:
            continue
        status = read_status(hub.folder / PUBLIC_DIR / f"{member.name}.status.json",
                             member.name, member.url, member.private)
        try:
            inode: int | None = (hub.folder / PUBLIC_DIR / f"{member.name}.duckdb").stat().st_ino
        except OSError:
            inode = None
        as_left = copy_version(hub.folder / PUBLIC_DIR / f"{member.name}.duckdb") == \
            status.checked
        try:  # its signed manifest, which the hub republishes (hub/trust.py)
            signed = hashlib.sha256(hub.manifest_file(member).read_bytes()).hexdigest()
        except OSError:
            signed = None
        made.update(json.dumps([member.name, member.url, status.ok, status.stale,
                                status.node_id, status.node_name, status.licence,
                                status.records, status.changes, status.last_change,
                                inode, as_left, status.key_fingerprint, status.base_url,
                                signed]).encode())
    return made.hexdigest()


def _unlicensed(hub: Hub) -> list[str]:
    """The served members whose node names no licence, as their status files say."""
    said = []
    for member in hub.members:
        status = read_status(hub.folder / PUBLIC_DIR / f"{member.name}.status.json",
                             member.name, member.url, member.private)
        if not member.private and status.unlicensed():
            said.append(no_licence(member.name, status.node_name or ""))
    return said


def _last(project: Project, name: str) -> str | None:
    """What the last export that succeeded was made of: its "digest" (`_digest`) or its
    "states" (`_states`)."""
    try:
        data = json.loads((project.private / EXPORTED).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _forget(project: Project, served: list[Served]) -> None:
    """Before content/ is written: the memos of members whose records are made again are
    deleted, so that an export that then fails leaves no memo that vouches for a file it
    did not write (the next export makes that member's records again)."""
    for one in served:
        if one.records is not None and one.records.remade:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(project.private / MEMOS / f"{one.member.name}.json")


def _remember(project: Project, digest: str, states: str, served: list[Served]) -> None:
    """After an export that succeeded: what it was made of, and each member's memo where it
    changed (the memos of members no longer served deleted)."""
    folder = project.private / MEMOS
    folder.mkdir(parents=True, exist_ok=True)
    names = set()
    for one in served:
        if one.source is None or one.records is None:
            continue
        names.add(f"{one.member.name}.json")
        if one.records.remade or not (folder / f"{one.member.name}.json").exists():
            _replace(folder / f"{one.member.name}.json", json.dumps(
                {"key": memo_key(one.source), "records": one.records.memo}))
    for entry in os.scandir(folder):
        if entry.name not in names and entry.name.endswith(".json"):
            os.unlink(entry.path)
    _replace(project.private / EXPORTED, json.dumps({"digest": digest, "states": states}))


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text + "\n", "utf-8")
    os.replace(temporary, path)
