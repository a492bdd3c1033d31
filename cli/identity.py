"""`fednode identity ...` and `fednode verify`: the node's signing key, and checking what a
node or hub published against the keys that signed it (exporter/contract/signing.py,
hub/verify.py)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from cli.options import project_option
from exporter.shared.errors import printable


@click.group("identity", invoke_without_command=True)
@project_option
@click.pass_context
def identity(context: click.Context, project_dir: Path) -> None:
    """The node's signing key: its fingerprint (the command alone), or `rotate`."""
    context.obj = project_dir
    if context.invoked_subcommand is not None:
        return
    from exporter.contract.signing import NodeKey
    from exporter.project.config import Project, load_node_config

    project = Project(project_dir)
    node = load_node_config(project)
    key = NodeKey.load(project.private, create=True)
    assert key is not None
    click.echo(f"node: {printable(node.name)} ({node.id})")
    click.echo(f"public key: {key.public.text}")
    click.echo(f"fingerprint: {key.public.fingerprint}")
    click.echo(f"the key: {printable(str(project.private))}/signing_key.pem (keep it and a "
               f"backup of it private; never commit it)", err=True)


@identity.command("rotate")
@click.pass_obj
def identity_rotate(project_dir: Path) -> None:
    """Replace the node's signing key with a new one. The next export publishes a statement,
    signed by the old key, that names the new one: hubs that pinned the old key follow it.
    Commit key_rotations.json with the ledger."""
    from exporter.contract.signing import ROTATIONS_FILE, rotate
    from exporter.contract.wire import format_time
    from exporter.project.config import Project, load_node_config

    project = Project(project_dir)
    node = load_node_config(project)
    old, new = rotate(project.private, project.root / ROTATIONS_FILE, node.id,
                      format_time(datetime.now(UTC)))
    click.echo(f"rotated the signing key of {printable(node.name)}: {old.fingerprint} -> "
               f"{new.fingerprint}")
    click.echo("next: `fednode export`, which signs with the new key and publishes the "
               "statement that the old key signed; commit key_rotations.json with the ledger "
               "(and give a CDN's build the new key)", err=True)


@click.command("verify")
@click.argument("url")
@click.option("--fingerprint", metavar="SHA256:...",
              help="The key the node must be signed by, as its publisher gave it.")
def verify(url: str, fingerprint: str | None) -> None:
    """Check a record (URL of /api/{collection}/{id}) or a whole node (its base URL) against
    the keys that signed it: a hub's record back to the node that wrote it, through every
    hub on the way."""
    import asyncio

    from hub.verify import verify as run_verify

    for line in asyncio.run(run_verify(url, fingerprint)):
        click.echo(line)
    sys.stdout.flush()
