"""Which base URL an export uses: the one the publisher gave last, in this folder.

`fednode export --base-url URL` is remembered in the private .fednode/ folder, so that the
next `fednode export` (without the option) does not move every link back to node.toml's
base_url behind the publisher's back. Editing node.toml's base_url afterwards is also the
publisher's choice: the file's new value wins over what was remembered."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass

from exporter.project.config import NODE_FILE, Project

REMEMBERED = "base-url.json"


@dataclass(frozen=True)
class BaseUrl:
    """The base URL to export with (None: node.toml's) and where it comes from, in words."""

    given: str | None
    said: str


def chosen_base_url(project: Project, given: str | None) -> BaseUrl:
    """`given` (--base-url) if any, else the last one given here while node.toml held the
    base_url it holds now, else node.toml's."""
    if given:
        return BaseUrl(given, f"base URL {given} (--base-url; later exports keep it)")
    file_url = _node_base_url(project)
    kept = _remembered(project)
    if kept is not None and kept.get("node_base_url") == file_url and kept.get("base_url"):
        url = str(kept["base_url"])
        return BaseUrl(url, f"base URL {url} (the last --base-url given here; "
                            f"--base-url changes it)")
    shown = file_url or "(none)"
    return BaseUrl(None, f"base URL {shown} (content/{NODE_FILE})")


def remember_base_url(project: Project, given: str | None) -> None:
    """After an export that succeeded with `given` (--base-url): keep it for the next."""
    if not given:
        return
    project.private.mkdir(parents=True, exist_ok=True)
    data = {"base_url": given, "node_base_url": _node_base_url(project)}
    path = project.private / REMEMBERED
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data) + "\n", encoding="utf-8")
    temporary.replace(path)


def _node_base_url(project: Project) -> str | None:
    """node.toml's base_url as written, or None where it cannot be read (the export then
    names that problem itself)."""
    try:
        node = tomllib.loads((project.content / NODE_FILE).read_text("utf-8")).get("node")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    url = node.get("base_url") if isinstance(node, dict) else None
    return url if isinstance(url, str) else None


def _remembered(project: Project) -> dict[str, object] | None:
    """What `remember_base_url` kept, or None (never given, or a file not ours to read)."""
    try:
        data = json.loads((project.private / REMEMBERED).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None
