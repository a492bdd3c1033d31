"""Options several commands share."""

from __future__ import annotations

from pathlib import Path

import click

project_option = click.option(
    "--project", "project_dir", type=click.Path(file_okay=False, path_type=Path),
    default=Path("."), show_default=True,
    help="The node's folder: it holds content/, ledger.jsonl and .fednode/.")
