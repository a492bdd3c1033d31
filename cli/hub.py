"""`fednode hub ...`: a hub following a network of nodes, kept in one folder whose hub.toml
lists them (hub/members.py); `hub sync` keeps a copy of each (hub/network.py).

Each command imports the hub's machinery when it runs, so `fednode --help` stays quick."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from exporter.shared.errors import printable

hub_option = click.option(
    "--hub", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
    show_default=True, help="The hub's folder: it holds hub.toml, members/ and private/.")


@click.group("hub")
def hub() -> None:
    """Follow a network of nodes: hub.toml lists the members, `fednode hub sync` keeps a
    copy of each. docs/hub.md ("A network hub: members") describes the folder."""


@hub.command("init")
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="The hub's name (default: the folder's).")
def hub_init(folder: Path, name: str | None) -> None:
    """Start a hub in FOLDER (default: here): a commented hub.toml, members/ and private/.
    Never overwrites a hub.toml."""
    from hub.members import init_hub

    for path in init_hub(folder, name):
        click.echo(f"wrote {printable(str(path))}", err=True)
    click.echo(f"next: `fednode hub add URL --hub {printable(str(folder))}` for each node, "
               f"then `fednode hub sync --hub {printable(str(folder))}`", err=True)


@hub.command("add")
@click.argument("url")
@hub_option
@click.option("--name", help="A short name for the member (lowercase letters, digits, '-'); "
                             "it names its files. Default: from the address's host.")
@click.option("--key-env", metavar="VAR",
              help="The environment variable that holds the member's key when the hub "
                   "syncs (the key itself is never written in hub.toml).")
@click.option("--private", is_flag=True,
              help="Keep the member's copy in private/, which the hub never serves: "
                   "required when its key holds access groups.")
def hub_add(url: str, folder: Path, name: str | None, key_env: str | None,
            private: bool) -> None:
    """Add the node at URL to hub.toml (a name or address listed already is refused)."""
    from hub.members import add_member

    member = add_member(folder, url, name=name, key_env=key_env, private=private)
    where = folder / member.folder / f"{member.name}.duckdb"
    click.echo(f"added {member.name} ({printable(member.url)}) to "
               f"{printable(str(folder / 'hub.toml'))}; its copy will be "
               f"{printable(str(where))}", err=True)
    if key_env is not None and not os.environ.get(key_env):
        click.echo(f"note: {key_env} is not set in this shell; `fednode hub sync` reads the "
                   f"key from it", err=True)


@hub.command("remove")
@click.argument("name")
@hub_option
def hub_remove(name: str, folder: Path) -> None:
    """Remove the member NAME from hub.toml, and delete its copy and status file."""
    from hub.members import locked, remove_member

    with locked(folder):
        gone = remove_member(folder, name)
    files = ", ".join(printable(str(path)) for path in gone) or "none"
    click.echo(f"removed {name} from {printable(str(folder / 'hub.toml'))}; files deleted: "
               f"{files}", err=True)


@hub.command("sync")
@hub_option
@click.option("--concurrency", type=click.IntRange(1, 64),
              help="Members synced at once (default: hub.toml's [hub] concurrency, else 4).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Append what each member's run did and waited for to this file, each "
                   "line naming its member.")
def hub_sync(folder: Path, concurrency: int | None, log_file: Path | None) -> None:
    """Bring every member's copy up to date, several at once.

    One line a member (`name: ok: ...` or `name: failed: ...; stale since ...`), then a
    total. Exit code 0 when every member synced, 1 when any failed (each failed member
    keeps its last good copy)."""
    import asyncio

    from hub.members import load_hub
    from hub.network import sync_members, warnings_after, warnings_before
    from hub.status import total_line
    from hub.terminal import reporting

    loaded = load_hub(folder)
    if not loaded.members:
        click.echo("no members in hub.toml yet; `fednode hub add URL` adds one", err=True)
    for warning in warnings_before(loaded):
        click.echo(warning, err=True)
    with reporting(sys.stderr, log_file):
        statuses = asyncio.run(sync_members(loaded, concurrency=concurrency))
    for warning in warnings_after(statuses):
        click.echo(warning, err=True)
    for status in statuses:
        click.echo(printable(status.line()))
    click.echo(total_line(statuses))
    if not all(status.ok for status in statuses):
        click.get_current_context().exit(1)
