"""`fednode init`: a new node's folder, ready for `fednode check` and `fednode export`.

It writes a commented content/node.toml (with a fresh id), one empty folder per collection
and a short README.md for the publisher, and never overwrites a node that exists."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from exporter.contract.wire import COLLECTIONS
from exporter.project.config import NODE_FILE, Project
from exporter.project.tomltext import toml_string
from exporter.shared.errors import ExportError, without_controls

# Where the sidecar answers by default (`fednode serve`): the first export links there.
LOCAL_URL = "http://127.0.0.1:8000"
# How Python names a byte of a file name that is not UTF-8 (os.fsdecode), or no character.
_SURROGATE = re.compile("[\ud800-\udfff]")

NODE_TEMPLATE = """\
# The node's identity and settings. Edit them, then run `fednode check` and
# `fednode export`. Every setting below is required unless it is commented out.

[node]
# Names the node to hubs and in every key. Keep it: records and keys refer to it.
id = {id}
name = {name}
description = "What this node publishes, for whom, and where (one or two sentences)."
publisher = "The organisation that publishes these records"
contact = "data@example.org"
# The licence of the records, as an SPDX identifier (CC-BY-4.0, CC0-1.0, ...).
licence = "CC-BY-4.0"
# Public address of the static files (the CDN, or the sidecar). Links in every page and
# response start with it. `fednode export --base-url URL` overrides it, and the folder
# remembers the last one given.
base_url = "{base_url}"
# Address of the sidecar that answers keyed requests. Left out, it is base_url.
# sidecar_url = "https://api.example.org"
# How to ask for a key (shown to callers that need one).
key_request = "Write to data@example.org with your organisation and what you need."
language = "en"
"""

README = """\
# {name}

A node of fednode: its records live as plain files in `content/`.

- `content/node.toml`: the node's name, publisher, contact, licence and address; edit it first.
- `content/<collection>/`: one Markdown file per record (germination: rows of a CSV file).
  `fednode new species "Impatiens glandulifera"` writes a record to fill in;
  `fednode new germination --csv` adds a row, with its id, to content/germination's CSV.
- `fednode check` lists every problem; `fednode export` writes `site_out/` (public, for a
  CDN) and the private bundle in `.fednode/` (never publish or commit that folder);
  `fednode serve` answers the API on {base_url}.
- Commit `content/` and `ledger.jsonl` together: the ledger is the records' history.
"""

GITIGNORE = ".fednode/\nsite_out/\n"


def init_node(folder: Path) -> list[Path]:
    """Create a node in `folder` (made if missing) and return the files written. Raises
    ExportError when the folder already holds a node: its id and history must survive."""
    project = Project(folder)
    node_file = project.content / NODE_FILE
    if os.path.lexists(node_file):
        raise ExportError(f"{node_file} exists: this folder already holds a node (its id "
                          f"names it to hubs and keys); edit that file, or run "
                          f"`fednode init` in another folder")
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder} is a file; give `fednode init` a folder")
    for name in (*COLLECTIONS, "library"):
        (project.content / name).mkdir(parents=True, exist_ok=True)
    name = node_name(folder)
    written = [node_file]
    with node_file.open("x", encoding="utf-8") as handle:  # never an existing file
        handle.write(NODE_TEMPLATE.format(id=toml_string(str(uuid.uuid4())),
                                          name=toml_string(name), base_url=LOCAL_URL))
    for path, text in ((folder / "README.md", README.format(name=name, base_url=LOCAL_URL)),
                       (folder / ".gitignore", GITIGNORE)):
        if not os.path.lexists(path):  # the publisher's own file stays as it is
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def node_name(folder: Path) -> str:
    """The node's name from its folder's ("weeds-of-the-north" is "Weeds of the north"), of
    the form `fednode check` takes (`without_controls`): no control character, no
    bidirectional control, no byte that is not UTF-8 (a surrogate in Python's name of it),
    white space made single spaces; "My node" when nothing is left."""
    raw = _SURROGATE.sub("", folder.resolve().name)
    words = without_controls(raw).replace("-", " ").replace("_", " ").split()
    return " ".join(words).capitalize() or "My node"
