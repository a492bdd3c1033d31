"""A network hub's members: the folder and its `hub.toml`.

A hub folder holds `hub.toml` (the hub's name, its bounds and one `[[member]]` table per
node it follows), `members/<name>.duckdb` for each member the hub may serve, and
`private/<name>.duckdb` for each member marked `private = true` (synced with a key whose
restricted records stay with whoever holds it; nothing that serves the hub reads that
folder). Beside each copy, `<name>.status.json` says how its last sync went (hub/status.py).

A key is never written in `hub.toml`: a member names the environment variable that holds
it (`key_env`), read when the hub syncs. `add_member` appends a table to the file and
`remove_member` takes one out, each leaving the rest of the text (comments included) as it
was, and checking by reading the file again that exactly that member changed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter.contract.errors import FednodeError
from exporter.project.tomltext import toml_string
from exporter.shared.errors import printable

HUB_FILE = "hub.toml"
PUBLIC_DIR = "members"  # the copies the hub may serve
PRIVATE_DIR = "private"  # the copies it never serves
NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
CONCURRENCY = 4  # members synced at once, unless hub.toml or --concurrency says otherwise
TIMEOUT = 300.0  # seconds one member's sync may take, all its requests included
HUB_FIELDS = ("name", "concurrency", "timeout")
MEMBER_FIELDS = ("name", "url", "key_env", "private", "timeout", "node_id", "fingerprint")
FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
NODE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_MEMBER_HEADER = re.compile(r"\s*\[\[\s*member\s*\]\]\s*(#.*)?")
_HEADER = re.compile(r"\s*\[")


class HubError(FednodeError):
    """hub.toml, or a command on it, is wrong; the message says what to change."""


@dataclass(frozen=True)
class Member:
    """One node the hub follows."""

    name: str
    url: str
    key_env: str | None = None  # the environment variable holding its key, if it has one
    private: bool = False  # True: kept in private/, never served by the hub
    timeout: float | None = None  # its own bound, instead of the hub's
    # Who it is (hub/trust.py): its node's id and its signing key's fingerprint, as `hub
    # add` pinned them (or the operator wrote them). None: pinned at its first sync.
    node_id: str | None = None
    fingerprint: str | None = None

    @property
    def folder(self) -> str:
        return PRIVATE_DIR if self.private else PUBLIC_DIR


@dataclass(frozen=True)
class Hub:
    """A hub folder as its hub.toml describes it."""

    folder: Path
    name: str
    concurrency: int
    timeout: float
    members: tuple[Member, ...]

    def copy(self, member: Member) -> Path:
        """The member's DuckDB file (hub/index.py), in members/ or private/."""
        return self.folder / member.folder / f"{member.name}.duckdb"

    def status_file(self, member: Member) -> Path:
        return self.folder / member.folder / f"{member.name}.status.json"

    def manifest_file(self, member: Member) -> Path:
        """The member's signed manifest, as its last successful sync followed it."""
        return self.folder / member.folder / f"{member.name}.manifest.json"

    def bound(self, member: Member) -> float:
        return member.timeout if member.timeout is not None else self.timeout


def load_hub(folder: Path) -> Hub:
    """Read and check FOLDER/hub.toml; HubError naming the field and what to change."""
    path = folder / HUB_FILE
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise HubError(f"no {HUB_FILE} in {folder}; `fednode hub init {folder}` makes one, "
                       f"or give the hub's folder with --hub") from None
    except UnicodeDecodeError:
        raise HubError(f"{path}: not UTF-8 text") from None
    return parse_hub(text, folder)


def parse_hub(text: str, folder: Path) -> Hub:
    """The hub that hub.toml's `text` describes."""
    path = folder / HUB_FILE
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HubError(f"{path}: not valid TOML: {printable(str(exc))}") from None
    table = data.get("hub")
    if not isinstance(table, dict):
        raise HubError(f"{path}: no [hub] table; `fednode hub init` writes a hub.toml with one")
    _known(table, HUB_FIELDS, f"{path}: [hub]")
    name = table.get("name", folder.resolve().name)
    if not isinstance(name, str) or not name.strip():
        raise HubError(f"{path}: [hub] name: expected a text, e.g. name = \"Our hub\"")
    concurrency = _number(table, "concurrency", CONCURRENCY, f"{path}: [hub]", 1, 64,
                          whole=True)
    timeout = _number(table, "timeout", TIMEOUT, f"{path}: [hub]", 0.1, 86400)
    listed = data.get("member", [])
    if not isinstance(listed, list) or not all(isinstance(m, dict) for m in listed):
        raise HubError(f"{path}: members are [[member]] tables (two brackets), one a member")
    others = [key for key in data if key not in ("hub", "member")]
    if others:
        raise HubError(f"{path}: unknown table or setting {printable(others[0])!r}; hub.toml "
                       f"holds [hub] and [[member]] tables")
    members = tuple(_member(table, n, path) for n, table in enumerate(listed, start=1))
    _unique(members, path)
    return Hub(folder, name, int(concurrency), float(timeout), members)


def _known(table: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in fields:
            raise HubError(f"{where}: unknown setting {printable(key)!r}; the settings are "
                           f"{', '.join(fields)}")


def _number(table: dict[str, Any], key: str, default: float, where: str, low: float,
            high: float, *, whole: bool = False) -> float:
    value = table.get(key, default)
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "a whole number" if whole else "a number of seconds"
        raise HubError(f"{where} {key}: expected {kind} from {low:g} to {high:g}, got "
                       f"{printable(repr(value))}")
    return value


def _member(table: dict[str, Any], n: int, path: Path) -> Member:
    name = table.get("name")
    where = f"{path}: [[member]] {n}" + (f" ({printable(name)})" if isinstance(name, str)
                                         else "")
    if "key" in table:
        raise HubError(f"{where}: a key is never written in {HUB_FILE}; put it in an "
                       f"environment variable and name that variable with key_env = "
                       f"\"{_env_example(name)}\" (then remove the key from the file)")
    _known(table, MEMBER_FIELDS, where)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise HubError(f"{where}: name: expected a short name of lowercase letters, digits "
                       f"and '-' (at most 40), e.g. name = \"weed-watch\"")
    url = table.get("url")
    if not isinstance(url, str):
        raise HubError(f"{where}: url: expected the node's address, e.g. url = "
                       f"\"https://node.example.org\"")
    key_env = table.get("key_env")
    if key_env is not None and (not isinstance(key_env, str) or not ENV_NAME.fullmatch(key_env)):
        raise HubError(f"{where}: key_env: expected the name of an environment variable, "
                       f"e.g. key_env = \"{_env_example(name)}\"")
    private = table.get("private", False)
    if not isinstance(private, bool):
        raise HubError(f"{where}: private: expected true or false")
    timeout = _number(table, "timeout", 0, where, 0.1, 86400) if "timeout" in table else None
    node_id = table.get("node_id")
    if node_id is not None and (not isinstance(node_id, str) or not NODE_ID.fullmatch(node_id)):
        raise HubError(f"{where}: node_id: expected the node's id, as its manifest's node.id "
                       f"gives it")
    fingerprint = table.get("fingerprint")
    if fingerprint is not None and (not isinstance(fingerprint, str)
                                    or not FINGERPRINT.fullmatch(fingerprint)):
        raise HubError(f"{where}: fingerprint: expected the node's key fingerprint, e.g. "
                       f"fingerprint = \"SHA256:...\" (43 characters after SHA256:), as "
                       f"`fednode hub add` or `fednode verify URL` shows it")
    return Member(name, _address(url, where), key_env, private,
                  None if timeout is None else float(timeout), node_id, fingerprint)


def _env_example(name: object) -> str:
    stem = re.sub(r"[^A-Za-z0-9]", "_", name).upper() if isinstance(name, str) else "NODE"
    return f"{stem}_KEY"


def _address(url: str, where: str) -> str:
    """The node's address as the hub writes it (hub/node.py's reading of it)."""
    from .node import parse_address  # (aiohttp: only where an address is read)

    try:
        return str(parse_address(url))
    except FednodeError as exc:
        raise HubError(f"{where}: url: {exc}") from None


def _unique(members: tuple[Member, ...], path: Path) -> None:
    names: set[str] = set()
    urls: dict[str, str] = {}
    for member in members:
        if member.name in names:
            raise HubError(f"{path}: two members are named {member.name!r}; each needs a name "
                           f"of its own (it names its files)")
        names.add(member.name)
        held = urls.setdefault(member.url.lower(), member.name)
        if held != member.name:
            raise HubError(f"{path}: members {held!r} and {member.name!r} have the same url "
                           f"{printable(member.url)}; list a node once")


TEMPLATE = """\
# A fednode hub: the nodes it follows. `fednode hub sync` brings every member's copy up
# to date; `fednode hub add URL` and `fednode hub remove NAME` edit this file (keeping its
# comments). docs/hub-reference.md ("hub.toml") explains each setting.

[hub]
name = {name}
# Members synced at once.
concurrency = {concurrency}
# Seconds one member's sync may take, all its requests included: a member still syncing
# then is stopped, reported as failed and keeps its last good copy. A member may set its own.
timeout = {timeout:g}

# One table a member, as `fednode hub add` writes them:
#
# [[member]]
# name = "weed-watch"                 # its files: members/weed-watch.duckdb (+ .status.json)
# url = "https://weeds.example.org"   # the node's address (its sidecar's, with a key)
# key_env = "WEED_WATCH_KEY"          # optional: the environment variable holding its key;
#                                     # a key is never written in this file
# private = false                     # true: kept in private/, never served by the hub.
#                                     # A member whose key holds access groups must be true.
# node_id = "..."                     # who it is: its node's id and its signing key's
# fingerprint = "SHA256:..."          # fingerprint, pinned by `hub add` (docs/hub.md, Trust)
"""


def init_hub(folder: Path, name: str | None = None) -> list[Path]:
    """Make a hub folder: a commented hub.toml, members/ and private/ (its owner's alone).
    Never overwrites a hub.toml."""
    path = folder / HUB_FILE
    if path.exists():
        raise HubError(f"{path} exists already; `fednode hub add URL --hub {folder}` adds a "
                       f"member to it")
    title = name if name is not None else folder.resolve().name
    if not title.strip():
        raise HubError("give the hub a name with --name")
    folder.mkdir(parents=True, exist_ok=True)
    made = [folder / PUBLIC_DIR, folder / PRIVATE_DIR]
    for sub in made:
        sub.mkdir(exist_ok=True)
    (folder / PRIVATE_DIR).chmod(0o700)
    _write(path, TEMPLATE.format(name=toml_string(title), concurrency=CONCURRENCY,
                                 timeout=TIMEOUT))
    return [path, *made]


def derived_name(url: str) -> str:
    """A member's name from its address: the host (and a port given), as a short name."""
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    text = f"{host}-{parts.port}" if parts.port else host
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")
    return slug or "node"


def add_member(folder: Path, url: str, *, name: str | None = None,
               key_env: str | None = None, private: bool = False,
               node_id: str | None = None, fingerprint: str | None = None) -> Member:
    """Append a [[member]] table to FOLDER/hub.toml, with the node's id and key fingerprint
    when given (pinned: `hub add` reads them from the node's signed manifest); refuse a
    name, address, node id or key it holds."""
    hub = load_hub(folder)
    path = folder / HUB_FILE
    table: dict[str, Any] = {"name": name or derived_name(url), "url": url,
                             "private": private}
    if key_env is not None:
        table["key_env"] = key_env
    if node_id is not None:
        table["node_id"] = node_id
    if fingerprint is not None:
        table["fingerprint"] = fingerprint
    member = _member(table, len(hub.members) + 1, path)
    for held in hub.members:
        if held.name == member.name:
            raise HubError(f"{path} has a member named {member.name!r} already (at "
                           f"{printable(held.url)}); give another with --name")
        if held.url.lower() == member.url.lower():
            raise HubError(f"{path} lists {printable(member.url)} already, as "
                           f"{held.name!r}; `fednode hub remove {held.name}` first to "
                           f"list it otherwise")
        for what, mine, theirs in (("node id", member.node_id, held.node_id),
                                   ("key", member.fingerprint, held.fingerprint)):
            if mine is not None and mine == theirs:
                raise HubError(f"the node at {printable(member.url)} claims the {what} "
                               f"{mine}, which the member {held.name!r} holds: a hub serves "
                               f"each node once, under its own key; not added")
    lines = ["[[member]]", f"name = {toml_string(member.name)}",
             f"url = {toml_string(member.url)}"]
    if member.key_env is not None:
        lines.append(f"key_env = {toml_string(member.key_env)}")
    lines.append(f"private = {'true' if member.private else 'false'}")
    if member.node_id is not None:
        lines.append(f"node_id = {toml_string(member.node_id)}")
    if member.fingerprint is not None:
        lines.append(f"fingerprint = {toml_string(member.fingerprint)}  # its signing key")
    text = path.read_text("utf-8")
    _replace(folder, text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n",
             [*hub.members, member])
    return member


def remove_member(folder: Path, name: str) -> list[Path]:
    """Take the member's table out of FOLDER/hub.toml and delete its files (its copy, what
    DuckDB keeps beside it, its status), in members/ and private/; the files deleted."""
    hub = load_hub(folder)
    path = folder / HUB_FILE
    names = [member.name for member in hub.members]
    if name not in names:
        raise HubError(f"{path} has no member named {printable(name)!r}; its members: "
                       f"{', '.join(names) or 'none'}")
    lines = path.read_text("utf-8").splitlines(keepends=True)
    headers = [n for n, line in enumerate(lines) if _MEMBER_HEADER.fullmatch(line.rstrip("\n"))]
    if len(headers) != len(names):
        raise HubError(f"{path}: its [[member]] tables are written in a way `fednode hub "
                       f"remove` does not edit; remove the member {name!r} by hand")
    header = start = headers[names.index(name)]
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1  # comments right above a table are the table's
    end = next((n for n in range(header + 1, len(lines)) if _HEADER.match(lines[n])),
               len(lines))
    while end > header + 1 and (not lines[end - 1].strip() or
                                lines[end - 1].lstrip().startswith("#")):
        end -= 1  # blank lines and comments before the next table are kept
    text = "".join(lines[:start] + lines[end:])
    text = re.sub(r"\n{3,}", "\n\n", text)
    _replace(folder, text, [m for m in hub.members if m.name != name])
    return delete_files(folder, name)


def delete_files(folder: Path, name: str,
                 places: tuple[str, ...] = (PUBLIC_DIR, PRIVATE_DIR)) -> list[Path]:
    """Every file of the member `name` in `places` (members/ and private/); the ones
    deleted."""
    gone = []
    for sub in places:
        for suffix in (".duckdb", ".duckdb.wal", ".status.json", ".manifest.json"):
            path = folder / sub / f"{name}{suffix}"
            if path.exists():
                path.unlink()
                gone.append(path)
        spill = folder / sub / f"{name}.duckdb.tmp"  # DuckDB's spill folder
        if spill.is_dir():
            shutil.rmtree(spill)
            gone.append(spill)
    return gone


def _replace(folder: Path, text: str, expected: list[Member]) -> None:
    """Write hub.toml's new text once it reads back as exactly the `expected` members."""
    path = folder / HUB_FILE
    try:
        members = list(parse_hub(text, folder).members)
    except HubError:
        members = []
    if members != expected:
        raise HubError(f"{path} is written in a way fednode does not edit safely; make the "
                       f"change by hand")
    _write(path, text)


def _write(path: Path, text: str) -> None:
    """Replace the file at once (a reader sees the old text or the new, never half)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, "utf-8")
    if path.exists():
        temporary.chmod(path.stat().st_mode & 0o777)
    os.replace(temporary, path)


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """The hub folder for one command that writes hub.toml or members' files (add, remove,
    sync, export, serve); a second one is refused at once rather than writing the same
    files."""
    if not folder.is_dir():
        raise HubError(f"the hub folder {folder} does not exist")
    with open(folder / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HubError(f"another `fednode hub` command (sync, export, serve, add or "
                           f"remove) is running on {folder}; wait for it to finish") from None
        yield
