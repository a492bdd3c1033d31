"""The project folder and the node's identity (content/node.toml)."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter.contract.addresses import networks
from exporter.shared.errors import ContentError, Problem, control_character, control_problem

NODE_FILE = "node.toml"
REQUIRED = ("id", "name", "description", "publisher", "contact", "licence", "base_url",
            "key_request")
# Optional settings that are text when given, with an example of each.
OPTIONAL = {"sidecar_url": "https://api.example.org", "language": "en"}


@dataclass(frozen=True)
class Project:
    """Where a node's files live. Everything private stays under `.fednode/`."""

    root: Path

    @property
    def content(self) -> Path:
        return self.root / "content"

    @property
    def site_out(self) -> Path:
        return self.root / "site_out"

    @property
    def private(self) -> Path:
        return self.root / ".fednode"

    @property
    def bundle(self) -> Path:
        return self.private / "bundle"

    @property
    def cache(self) -> Path:
        return self.private / "cache"

    @property
    def ledger(self) -> Path:
        """The ledger sits beside the content and is committed with it."""
        return self.root / "ledger.jsonl"


@dataclass(frozen=True)
class NodeConfig:
    id: str
    name: str
    description: str
    publisher: str
    contact: str
    licence: str
    base_url: str
    sidecar_url: str
    key_request: str
    language: str
    # Browser origins allowed to call the tool interface (besides the node's own).
    mcp_origins: tuple[str, ...] = ()
    # A hub's members and their licences: node.toml's [network] table, which `fednode hub
    # export` writes, served as the manifest's `network` (docs/hub-reference.md); None for a node.
    network: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def allowed_origins(self) -> list[str]:
        """The node's own origins (base_url's and sidecar_url's), then `mcp_origins`."""
        own = [origin_of(self.base_url), origin_of(self.sidecar_url)]
        return list(dict.fromkeys([*own, *self.mcp_origins]))


def load_node_config(project: Project, base_url: str | None = None) -> NodeConfig:
    """Read content/node.toml; raise ContentError naming every problem."""
    path = project.content / NODE_FILE
    data = _node_file(path)
    node = _node_table(data)
    network = data.get("network")
    problems = [*_text_problems(path, node), *_address_problems(path, node, base_url),
                *_network_problems(path, network)]
    if problems:
        raise ContentError(problems)
    base = (base_url or node.get("base_url", "")).rstrip("/")
    # The sidecar's own address, when it is configured apart from base_url; otherwise it
    # is the base URL, and follows --base-url.
    sidecar = str(node.get("sidecar_url", ""))
    if sidecar.rstrip("/") == str(node.get("base_url", "")).rstrip("/"):
        sidecar = ""  # the same as base_url: not apart
    return NodeConfig(
        id=node["id"], name=node["name"], description=node["description"],
        publisher=node["publisher"], contact=node["contact"], licence=node["licence"],
        base_url=base, sidecar_url=(sidecar or base).rstrip("/"),
        key_request=node["key_request"], language=str(node.get("language", "en")),
        mcp_origins=tuple(node.get("mcp_origins", [])), network=network,
    )


def _node_file(path: Path) -> dict[str, Any]:
    """content/node.toml, read, or the one problem that stops reading it."""
    rel = f"content/{NODE_FILE}"
    if not path.is_file():
        raise ContentError([Problem(rel, 0, "", "missing: every node needs content/node.toml "
                                                "(see the sample in the fednode repository)")])
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ContentError([Problem(rel, 0, "", f"not valid TOML: {exc}")]) from None


def _node_table(data: dict[str, Any]) -> dict[str, Any]:
    """The [node] table of content/node.toml, or the one problem that stops reading it."""
    node = data.get("node")
    if not isinstance(node, dict):
        raise ContentError([Problem(f"content/{NODE_FILE}", 1, "node",
                                    "missing the [node] table")])
    return node


def _network_problems(path: Path, network: object) -> list[Problem]:
    """What is wrong with node.toml's [network] table, if it has one: a hub's members, as
    `fednode hub export` writes them, served as they are in the manifest (so JSON's values
    only: no dates, no NaN)."""
    if network is None or isinstance(network, dict) and _plain(network):
        return []
    return [Problem(f"content/{NODE_FILE}", _line_of(path, "[network]"), "network",
                    "must be a table of texts, numbers, true or false, lists and tables, "
                    "as `fednode hub export` writes it")]


def _plain(value: Any) -> bool:
    """Whether a TOML value is JSON's too (no dates or times, no NaN or infinity), with no
    control character in its texts."""
    if isinstance(value, dict):
        return all(_plain(key) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(map(_plain, value))
    if isinstance(value, str):
        return control_character(value) is None
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, bool | int)


def _text_problems(path: Path, node: dict[str, Any]) -> list[Problem]:
    """The node's texts: present where required, text, without control characters."""
    rel = f"content/{NODE_FILE}"
    problems = []
    for key in REQUIRED:
        if not isinstance(node.get(key), str) or not node[key].strip():
            problems.append(Problem(rel, _line_of(path, key), f"node.{key}", "required text"))
    for key in (*REQUIRED, *OPTIONAL):
        value = node.get(key)
        if isinstance(value, str) and (found := control_character(value)):
            # These go into pages, the Darwin Core archive's eml.xml (where XML forbids
            # control characters: GBIF would refuse the archive) and the terminal.
            problems.append(Problem(rel, _line_of(path, key), f"node.{key}",
                                    control_problem(found)))
    for key, example in OPTIONAL.items():
        if key in node and not isinstance(node[key], str):
            problems.append(Problem(rel, _line_of(path, key), f"node.{key}",
                                    f"must be text in quotes, e.g. {key} = \"{example}\""))
    node_id = node.get("id")
    if isinstance(node_id, str) and node_id.strip() and not NODE_ID.fullmatch(node_id):
        # it names the node to hubs and in every key: hubs read it as such a token
        problems.append(Problem(rel, _line_of(path, "id"), "node.id",
                                "must be letters, digits and . _ : - only (at most 200), "
                                "e.g. a UUID: python3 -c 'import uuid; print(uuid.uuid4())'"))
    return problems


def _address_problems(path: Path, node: dict[str, Any], base_url: str | None
                      ) -> list[Problem]:
    """The node's addresses: base_url (or --base-url), sidecar_url, mcp_origins."""
    rel = f"content/{NODE_FILE}"
    problems = []
    url = base_url or node.get("base_url", "")
    if isinstance(url, str) and url and (wrong := _url_problem(url) or _path_problem(url)):
        problems.append(Problem(rel, _line_of(path, "base_url"), "node.base_url", wrong))
    sidecar = node.get("sidecar_url", "")
    if isinstance(sidecar, str) and sidecar and (wrong := _url_problem(sidecar)):
        problems.append(Problem(rel, _line_of(path, "sidecar_url"), "node.sidecar_url",
                                f"{wrong}, or left out when the sidecar answers at base_url"))
    origins = node.get("mcp_origins", [])
    if not isinstance(origins, list) or not all(
            isinstance(o, str) and not _url_problem(o) and origin_of(o) == o for o in origins):
        problems.append(Problem(rel, _line_of(path, "mcp_origins"), "node.mcp_origins",
                                "must be a list of origins (scheme and host, no path), e.g. "
                                "mcp_origins = [\"https://agents.example.org\"]"))
    return problems


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, as a browser's Origin header writes it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


NODE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")  # as a hub reads a node id


def _url_problem(url: str) -> str | None:
    """Why `url` is not an address pages and rules can be made from, or None. The URL is
    written as given into _redirects, robots.txt, the manifest and every record: a line
    break there (which urlsplit passes over) added a rule of anyone's choosing to
    _redirects, and a user name and password were published with it."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "must be one URL, with no spaces, line breaks or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError:
        return "must be a URL starting with http:// or https://"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be a URL starting with http:// or https://, then a host"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user name or password: it is published on every page"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "must not hold a ?query or #fragment: paths are added to it"
    return None


def _path_problem(url: str) -> str | None:
    """Why `url` cannot be the site's address for its path, or None. Pages link from the
    root of their site (`/species/...`), and so do the CDN's rules and the sidecar's pages:
    under a path, every link of every page pointed past the node's files."""
    if urlsplit(url).path.strip("/"):
        return (f"must be the site's origin, with no path ({origin_of(url)}, not {url}): "
                f"pages and the CDN's rules link from the root of the site; give the node a "
                f"host of its own, such as a subdomain")
    return None


def _line_of(path: Path, key: str) -> int:
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if line.strip().startswith((f"{key} ", f"{key}=")) or line.strip() == key:
            return number
    return 0


@dataclass(frozen=True)
class ServeConfig:
    """How `fednode serve` runs: the `[serve]` table of content/node.toml, read at start."""

    workers: int = 1
    redis: str | None = None  # where rate-limit windows are kept; None: in the process
    # proxies whose X-Forwarded-For gives the client's address (`sidecar.proxies`)
    trusted_proxies: tuple[str, ...] = ()


NOT_STARTED = "the sidecar did not start"


def load_serve_config(project: Project) -> ServeConfig:
    """The `[serve]` table of content/node.toml (all of it optional); ContentError names
    every problem. Keep passwords out of it (it is committed): FEDNODE_REDIS_URL is read
    first, by the CLI. A host without the file (a sidecar host given the build alone, as
    docs/operations.md describes) has no settings: the defaults."""
    path = project.content / NODE_FILE
    rel = f"content/{NODE_FILE}"
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return ServeConfig()
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ContentError([Problem(rel, 0, "", f"cannot read the [serve] settings: "
                                                f"{exc}")], NOT_STARTED) from None
    table = data.get("serve", {})
    if not isinstance(table, dict):
        raise ContentError([Problem(rel, _line_of(path, "serve"), "serve",
                                    "must be a table: a line [serve], then its settings")],
                           NOT_STARTED)
    problems = []
    workers = table.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        problems.append(Problem(rel, _line_of(path, "workers"), "serve.workers",
                                "must be a whole number from 1 to 64, e.g. workers = 2"))
    redis = table.get("redis")
    if redis is not None and (not isinstance(redis, str) or
                              urlsplit(redis).scheme not in ("redis", "rediss", "unix")):
        problems.append(Problem(rel, _line_of(path, "redis"), "serve.redis",
                                "must be a Redis URL in quotes, e.g. "
                                "redis = \"redis://127.0.0.1:6379/0\""))
    # checked here with the other settings (`contract.addresses`); the sidecar uses them
    trusted = table.get("trusted_proxies", [])
    if not isinstance(trusted, list) or not all(isinstance(item, str) for item in trusted):
        problems.append(Problem(rel, _line_of(path, "trusted_proxies"), "serve.trusted_proxies",
                                'must be a list of addresses or networks in quotes, e.g. '
                                'trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]'))
        trusted = []
    for item in trusted:
        try:
            networks([item])
        except ValueError as exc:
            problems.append(Problem(rel, _line_of(path, "trusted_proxies"),
                                    "serve.trusted_proxies", str(exc)))
    for name in sorted(set(table) - {"workers", "redis", "trusted_proxies"}):
        problems.append(Problem(rel, _line_of(path, name), f"serve.{name}",
                                "unknown setting: [serve] takes workers, redis and "
                                "trusted_proxies"))
    if problems:
        raise ContentError(problems, NOT_STARTED)
    return ServeConfig(workers=workers, redis=redis, trusted_proxies=tuple(trusted))
