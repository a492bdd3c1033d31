"""`fednode`: thin click commands that parse options and call one function each.

Errors become one clear message and an exit code here, nowhere else."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter.build import build, load
from exporter.config import Project, load_node_config
from exporter.errors import ContentError, ExportError
from exporter.scaffold import new_record
from sidecar import keys as keyring

F = TypeVar("F", bound=Callable[..., Any])


class ContentProblems(click.ClickException):
    """Every content problem on its own line, then one summary line."""

    def __init__(self, error: ContentError) -> None:
        super().__init__(str(error))
        self.error = error

    def show(self, file: Any = None) -> None:
        for problem in self.error.problems:
            click.echo(str(problem), err=True)
        click.echo(f"Error: {self.error}", err=True)


def reports_errors(command: F) -> F:
    """Turn the exporter's and sidecar's exceptions into click's error output."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ContentError as exc:
            raise ContentProblems(exc) from None
        except (ExportError, keyring.KeyError_) as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


project_option = click.option(
    "--project", "project_dir", type=click.Path(file_okay=False, path_type=Path),
    default=Path("."), show_default=True,
    help="The node's folder: it holds content/, ledger.jsonl and .fednode/.")


@click.group()
@click.version_option(package_name="fednode")
def main() -> None:
    """Run one node of a federated network of conservation records."""


@main.command()
@click.argument("collection")
@click.argument("title")
@project_option
@reports_errors
def new(collection: str, title: str, project_dir: Path) -> None:
    """Scaffold a record file with a fresh UUID, e.g. fednode new species "Giant hogweed"."""
    path = new_record(Project(project_dir).content, collection, title)
    click.echo(path)


@main.command()
@project_option
@reports_errors
def check(project_dir: Path) -> None:
    """Validate content/ against the collection schemas; list every problem."""
    content = load(Project(project_dir))
    click.echo(f"ok: {len(content.records)} records valid", err=True)


class _Progress:
    """A one-line progress display on standard error, shown only on long runs."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if total < 5000:
            return
        self.shown = True
        click.echo(f"\r{stage}: {done}/{total}", nl=False, err=True)

    def end(self) -> None:
        if self.shown:
            click.echo("\r" + " " * 40 + "\r", nl=False, err=True)


@main.command()
@project_option
@click.option("--frozen", is_flag=True,
              help="Fail instead of adding ledger events (for CDN builds: the ledger must be "
                   "committed up to date).")
@click.option("--base-url", help="Override node.base_url from content/node.toml.")
@reports_errors
def export(project_dir: Path, frozen: bool, base_url: str | None) -> None:
    """Write site_out/ (public) and the private bundle in .fednode/."""
    progress = _Progress()
    try:
        report = build(Project(project_dir), frozen=frozen, base_url=base_url,
                       progress=progress)
    finally:
        progress.end()
    click.echo(report.summary())


@main.command()
@project_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--anonymous-rate", default=600, show_default=True, type=click.IntRange(min=0),
              help="Requests a minute allowed per client address without a key (0: no limit).")
@reports_errors
def serve(project_dir: Path, host: str, port: int, anonymous_rate: int) -> None:
    """Start the sidecar on the last export's bundle."""
    from aiohttp import web

    from sidecar.app import SidecarConfig, create_app
    from sidecar.store import BundleMissing, Snapshot

    project = Project(project_dir)
    try:
        Snapshot(project.bundle)
    except BundleMissing as exc:
        raise click.ClickException(f"{exc}\nRun `fednode export` first.") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        stream=sys.stderr)
    app = create_app(SidecarConfig(bundle=project.bundle, private=project.private,
                                   anonymous_rate=anonymous_rate))
    click.echo(f"fednode sidecar on http://{host}:{port}/api/manifest", err=True)
    web.run_app(app, host=host, port=port, access_log=None, print=None)


def _registry(project_dir: Path) -> keyring.Registry:
    return keyring.Registry.load(Project(project_dir).private / "keys.json")


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


@main.group()
def keys() -> None:
    """Issue, list, show and revoke API keys."""


@keys.command("create")
@project_option
@click.option("--name", required=True, help="Who or what the key is for.")
@click.option("--scopes", default="read", show_default=True,
              help=f"Comma-separated, from: {', '.join(keyring.SCOPES)}.")
@click.option("--collections", default="", help="Comma-separated collections it may read "
                                                "(default: all).")
@click.option("--groups", default="", help="Comma-separated access groups whose restricted "
                                           "records it may read (default: none).")
@click.option("--rate", default=120, show_default=True, type=int,
              help="Requests per minute.")
@click.option("--expires", help="Last valid day (2027-06-30) or an RFC 3339 time.")
@reports_errors
def keys_create(project_dir: Path, name: str, scopes: str, collections: str, groups: str,
                rate: int, expires: str | None) -> None:
    """Issue a key. The key alone goes to standard output, once; details to standard error."""
    project = Project(project_dir)
    node = load_node_config(project)
    secret, where = keyring.load_secret(project.private, create=True)
    assert secret is not None
    registry = _registry(project_dir)
    token, record = keyring.issue(
        registry, secret, node.id, name=name, scopes=_split(scopes),
        collections=_split(collections), groups=_split(groups), rate=rate, expires=expires,
        now=datetime.now(UTC))
    click.echo(f"issued {record.id} ({record.name}): scopes {', '.join(record.scopes)}; "
               f"signed with the secret in {where}. The key is shown once:", err=True)
    click.echo(token)


def _key_line(key: keyring.KeyRecord) -> str:
    data = key.describe()
    return "  ".join([key.id, key.name, ",".join(data["scopes"]), ",".join(data["collections"]),
                      ",".join(data["groups"]) or "-", f"{key.rate}/min",
                      key.expires_at or "never", f"revoked {key.revoked_at}"
                      if key.revoked_at else "active"])


@keys.command("list")
@project_option
@reports_errors
def keys_list(project_dir: Path) -> None:
    """Every issued key: id, name, scopes, collections, groups, rate, expiry, state."""
    registry = _registry(project_dir)
    if not registry.keys:
        click.echo("no keys issued yet; `fednode keys create --name NAME` issues one", err=True)
    for key in registry.keys.values():
        click.echo(_key_line(key))


@keys.command("show")
@click.argument("key_id")
@project_option
@reports_errors
def keys_show(key_id: str, project_dir: Path) -> None:
    """One key's details, as JSON (never the key itself)."""
    registry = _registry(project_dir)
    click.echo(json.dumps(registry.get(key_id).describe(), indent=2))


@keys.command("revoke")
@click.argument("key_id")
@project_option
@reports_errors
def keys_revoke(key_id: str, project_dir: Path) -> None:
    """Revoke a key; a running sidecar refuses it from its next request."""
    registry = _registry(project_dir)
    key = registry.revoke(key_id, datetime.now(UTC))
    click.echo(f"revoked {key.id} ({key.name}) at {key.revoked_at}", err=True)


@main.command()
@click.argument("base_url")
@click.option("--key", envvar="FEDNODE_KEY", help="A key of the node (or set FEDNODE_KEY), "
              "with the scopes read and changes. With a key, give the sidecar's address "
              "(the manifest's node.sidecar_url).")
@click.option("--into", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The hub's DuckDB file; created on the first run. One file follows one "
                   "node, as one caller (open, or one key).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Append what the run did and waited for to this file (for runs from "
                   "cron; on a terminal, progress shows as it happens).")
def sync(base_url: str, key: str | None, into: Path, log_file: Path | None) -> None:
    """Bring a hub's index of the node at BASE_URL up to date.

    Without a key the index holds the node's public records; with a key, what that key
    may read. The key needs the scopes read and changes (the node's publisher makes one
    with `fednode keys create --scopes read,changes`). docs/hub.md describes the file,
    its views and the limits."""
    import asyncio

    from hub.sync import SyncError
    from hub.sync import sync as run_sync
    from hub.terminal import reporting

    try:
        with reporting(sys.stderr, log_file):
            report = asyncio.run(run_sync(base_url, into, key))
    except SyncError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(report.summary())


if __name__ == "__main__":
    main()
