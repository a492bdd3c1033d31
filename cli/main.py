"""`fednode`: thin click commands that parse options and call one function each.

Errors become one clear message and an exit code here, nowhere else."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter.build import build, load
from exporter.config import Project
from exporter.errors import ContentError, ExportError
from exporter.scaffold import new_record

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
        except ExportError as exc:
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
@reports_errors
def serve(project_dir: Path, host: str, port: int) -> None:
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
    app = create_app(SidecarConfig(bundle=project.bundle))
    click.echo(f"fednode sidecar on http://{host}:{port}/api/manifest", err=True)
    web.run_app(app, host=host, port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
