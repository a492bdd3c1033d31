"""`fednode hub ...`: a hub following a network of nodes, kept in one folder whose hub.toml
lists them (hub/members.py); `hub sync` keeps a copy of each (hub/network.py).

Each command imports the hub's machinery when it runs, so `fednode --help` stays quick."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from exporter.shared.errors import printable

if TYPE_CHECKING:
    from hub.export import HubExport

hub_option = click.option(
    "--hub", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
    show_default=True, help="The hub's folder: it holds hub.toml, members/ and private/.")


@click.group("hub")
def hub() -> None:
    """Follow a network of nodes: hub.toml lists the members, `fednode hub sync` keeps a
    copy of each, `fednode hub serve` serves their public records as one node. docs/hub.md
    ("A network hub: members", "Serving the network") describes the folder."""


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
@click.option("--fingerprint", metavar="SHA256:...",
              help="The node's key fingerprint, as its publisher gave it: the node's signed "
                   "manifest must match it. Default: pin the key the manifest shows.")
def hub_add(url: str, folder: Path, name: str | None, key_env: str | None,
            private: bool, fingerprint: str | None) -> None:
    """Add the node at URL to hub.toml, pinning its node id and signing key (a name,
    address, id or key listed already is refused)."""
    from hub.members import add_member, locked

    node_id, pinned, said = _identify(url, fingerprint)
    with locked(folder):
        member = add_member(folder, url, name=name, key_env=key_env, private=private,
                            node_id=node_id, fingerprint=pinned)
    where = folder / member.folder / f"{member.name}.duckdb"
    click.echo(f"added {member.name} ({printable(member.url)}) to "
               f"{printable(str(folder / 'hub.toml'))}; its copy will be "
               f"{printable(str(where))}", err=True)
    click.echo(said, err=True)
    if key_env is not None and not os.environ.get(key_env):
        click.echo(f"note: {key_env} is not set in this shell; `fednode hub sync` reads the "
                   f"key from it", err=True)


def _identify(url: str, fingerprint: str | None) -> tuple[str | None, str | None, str]:
    """The node id and key fingerprint to pin for the node at `url`, and what to tell the
    operator of them."""
    import asyncio

    from exporter.contract.errors import FednodeError
    from hub.members import HubError
    from hub.network import identify

    try:
        manifest = asyncio.run(identify(url))
    except FednodeError as exc:
        if fingerprint is not None:
            return None, fingerprint, (f"its key is pinned to {fingerprint} (its manifest "
                                       f"could not be read now: {printable(str(exc))})")
        return None, None, (f"note: its manifest could not be read now "
                            f"({printable(str(exc))}); its key will be pinned at its first "
                            f"sync (trust on first use): check the fingerprint that sync "
                            f"prints with its publisher")
    assert manifest.signed is not None
    shown = manifest.signed.key.fingerprint
    if fingerprint is not None and fingerprint != shown:
        raise HubError(f"the node at {printable(url)} signs with the key {shown}, not "
                       f"{fingerprint}: check the fingerprint with its publisher; not added")
    return manifest.node_id, shown, (
        f"its node: {printable(manifest.name)} ({manifest.node_id}); its key: {shown}, "
        f"pinned: check this fingerprint with its publisher (`fednode identity` prints it)")


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
    from hub.network import key_notes, sync_members, warnings_after, warnings_before
    from hub.status import total_line
    from hub.terminal import reporting

    loaded = load_hub(folder)
    if not loaded.members:
        click.echo("no members in hub.toml yet; `fednode hub add URL` adds one", err=True)
    for warning in warnings_before(loaded):
        click.echo(warning, err=True)
    with reporting(sys.stderr, log_file):
        statuses = asyncio.run(sync_members(loaded, concurrency=concurrency))
    for warning in [*key_notes(statuses), *warnings_after(statuses)]:
        click.echo(printable(warning), err=True)
    for status in statuses:
        click.echo(printable(status.line()))
    click.echo(total_line(statuses))
    from hub.export import exported_before

    if exported_before(folder):  # served: what changed is exported for the sidecar to pick up
        # (licences said above; a status file that could not be written: read every copy)
        report = _exported(folder, None, after_sync=True,
                           quick=all(status.saved for status in statuses))
        click.echo(printable(f"hub export: {report.summary}"))
    if not all(status.ok for status in statuses):
        click.get_current_context().exit(1)


def _exported(folder: Path, base_url: str | None, *, after_sync: bool = False,
              quick: bool = False) -> HubExport:
    """`export_hub`, its progress and warnings on standard error (but after a sync, which
    said them, the members whose node names no licence)."""
    from cli.progress import Progress
    from hub.export import export_hub

    progress = Progress()
    try:
        report = export_hub(folder, base_url=base_url, progress=progress,
                            quick=quick)
    finally:
        progress.end()
    for warning in (*(() if after_sync else report.warnings), *report.notes):
        click.echo(printable(f"Warning: {warning}"), err=True)
    return report


base_url_option = click.option(
    "--base-url", help="The address every link of the hub's node starts with (default: "
                       "<hub>/node.toml's base_url); later exports keep it until that "
                       "file's changes.")


@hub.command("export")
@hub_option
@base_url_option
def hub_export(folder: Path, base_url: str | None) -> None:
    """Make the members' public records the hub's own node, and export it.

    Writes <hub>/node/ (a fednode project: each record with the member node it comes from,
    its licence and its URL there) from hub.toml's members that are not private, read from
    members/ (private/ never is), and exports it as `fednode export` does: site_out/ and
    the bundle that `fednode hub serve` serves. <hub>/node.toml, made with a fresh id the
    first time, holds the hub's identity as a node."""
    report = _exported(folder, base_url)
    for line in report.members:
        click.echo(printable(line), err=True)
    click.echo(report.summary)
    click.echo(report.base_url, err=True)


@hub.command("serve")
@hub_option
@base_url_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--anonymous-rate", default=600, show_default=True, type=click.IntRange(min=0),
              help="Requests a minute allowed per client address without a key (0: no limit).")
def hub_serve(folder: Path, base_url: str | None, host: str, port: int,
              anonymous_rate: int) -> None:
    """Serve the network: the members' public records, as one node's API, pages and tools.

    Exports the hub first where its members changed since its last export (`fednode hub
    export`), then runs the sidecar `fednode serve` runs on <hub>/node/; each later `hub
    sync` exports what changed, and the running sidecar picks it up. Without --base-url, a
    hub whose base URL is this machine's on another port is exported with this server's
    address, so its links stay on --port. Workers, Redis and
    trusted proxies are set in <hub>/node.toml's [serve] table."""
    from cli.main import serve_project
    from hub.export import hub_project, served_base_url

    report = _exported(folder, base_url or served_base_url(folder, host, port), quick=True)
    for line in report.members:
        click.echo(printable(line), err=True)
    click.echo(printable(f"hub export: {report.summary}"), err=True)
    command = f"fednode hub export --hub {printable(str(folder))}"
    serve_project(hub_project(folder).root, host=host, port=port,
                  anonymous_rate=anonymous_rate, export_command=command)
