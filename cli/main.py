"""`fednode`: thin click commands that parse options and call one function each.

Errors become one clear message and an exit code here, nowhere else."""

from __future__ import annotations

import gc
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from cli.darwincore import import_
from cli.hub import hub
from cli.identity import identity, verify
from cli.options import project_option
from cli.progress import Progress
from exporter.contract.errors import FednodeError
from exporter.contract.wire import PUBLIC, SCOPES
from exporter.pipeline.ledger import Ledger
from exporter.project.baseurl import chosen_base_url, remember_base_url
from exporter.project.config import Project, load_node_config, load_serve_config
from exporter.project.names import SPECIES, duplicates, species_records, suspects
from exporter.project.placeholders import placeholder_bodies
from exporter.project.scaffold import new_record
from exporter.project.tomltext import toml_string
from exporter.shared.errors import ContentError, Problem, printable
from exporter.shared.process import without_pandas

# Each command imports what it alone needs (the export machinery: pyarrow, jinja2; keys: jwt;
# the sidecar: aiohttp), so `--help` and the small commands start at once.
if TYPE_CHECKING:
    from sidecar import keys as keyring


class ContentProblems(click.ClickException):
    """Every content problem on its own line, then one summary line."""

    def __init__(self, error: ContentError) -> None:
        super().__init__(str(error))
        self.error = error

    def show(self, file: Any = None) -> None:
        for line in _error_lines(self.error):
            click.echo(line, err=True)


def _error_lines(error: FednodeError) -> list[str]:
    """How an error a user can cause is shown: each content problem on its own line, then
    `Error: ...`."""
    problems = error.problems if isinstance(error, ContentError) else []
    return [*map(str, problems), f"Error: {error}"]


class Fednode(click.Group):
    """The command group; the one place where errors a user can cause become one line
    `Error: ...` and exit code 1. Anything else is a bug and shows its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContentError as exc:
            raise ContentProblems(exc) from None
        except FednodeError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:  # the machine's, not fednode's: a full disk, a permission
            where = f": {printable(str(exc.filename))}" if exc.filename else ""
            raise click.ClickException(f"{exc.strerror or exc}{where}; free space or fix the "
                                       f"permissions, then run the command again") from None


@click.group(cls=Fednode)
@click.version_option(package_name="fednode")
def main() -> None:
    """Run one node of a federated network of conservation records."""


@main.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=Path))
def init(folder: Path) -> None:
    """Start a node in FOLDER (default: here): content/node.toml with a fresh id, a folder per
    collection and a README.md. Never overwrites an existing node."""
    from exporter.contract.signing import KEY_ENV, KEY_FILE, NodeKey
    from exporter.project.init import init_node

    for path in init_node(folder):
        click.echo(f"wrote {printable(str(path))}", err=True)
    key = NodeKey.load(Project(folder).private, create=True)
    assert key is not None
    where = (f"the environment variable {KEY_ENV}" if os.environ.get(KEY_ENV, "").strip()
             else f"{printable(str(Project(folder).private / KEY_FILE))}")
    click.echo(f"the node's signing key: {key.public.fingerprint}, in {where} (keep it and a "
               f"backup private; never commit it)", err=True)
    click.echo(f"next: edit {printable(str(folder / 'content' / 'node.toml'))}, then "
               f"`fednode check` and `fednode export` in {printable(str(folder))}", err=True)


@main.command()
@click.argument("collection")
@click.argument("title", required=False)
@project_option
@click.option("--csv", "as_row", is_flag=True,
              help="Add a row with a fresh id to the collection's CSV file instead (TITLE, "
                   "if given, fills its title); the file is made if there is none.")
def new(collection: str, title: str | None, project_dir: Path, as_row: bool) -> None:
    """Scaffold a record file with a fresh UUID, e.g. fednode new species "Giant hogweed".

    For species, a Latin name ("Impatiens glandulifera") fills scientificName and a common
    name ("Himalayan balsam") vernacularName; the field it filled is shown."""
    project = Project(project_dir)
    if as_row:
        from exporter.project.csvrow import new_csv_row

        row = new_csv_row(project.content, collection, title)
        click.echo(f"added a row with id {row.id}; fill in its other cells", err=True)
        click.echo(printable(f"{row.path}:{row.line}"))
        return
    made = new_record(project.content, collection, title or "", project.cache)
    for warning in made.warnings:
        click.echo(printable(warning), err=True)
    if collection == SPECIES:
        click.echo("filled " + ", ".join(f"{name} = {toml_string(value)}" for name, value in
                                         made.filled.items()), err=True)
    click.echo(printable(str(made.path)))


@main.command()
@project_option
def check(project_dir: Path) -> None:
    """Validate content/ against the collection schemas; list every problem.

    Warnings (a scientificName used by two species) are listed too; they do not fail."""
    from exporter.pipeline.build import load

    project = Project(project_dir)
    try:
        content = load(project)  # through the export's cache
    except ContentError:  # the warnings still come first, from every file that can be read
        _warn(duplicates(species_records(project.content)))
        raise
    _warn(duplicates(species_records(project.content, suspects(content.records,
                                                               content.sort_keys))))
    _warn(placeholder_bodies(content.records, content.cache.placeholders))
    click.echo(f"ok: {len(content.records)} records valid", err=True)


def _warn(warnings: list[Problem]) -> None:
    for warning in warnings:
        click.echo(str(warning), err=True)


@main.command()
@project_option
@click.option("--frozen", is_flag=True,
              help="Fail instead of adding ledger events (for CDN builds: the ledger must be "
                   "committed up to date).")
@click.option("--base-url", help="Override node.base_url from content/node.toml; later "
                                 "exports in this folder keep it until node.toml's changes.")
@click.option("--watch", is_flag=True,
              help="Stay running and export again each time something in content/ changes "
                   "(a failed export is reported and the last good one kept); Ctrl-C stops.")
def export(project_dir: Path, frozen: bool, base_url: str | None, watch: bool) -> None:
    """Write site_out/ (public) and the private bundle in .fednode/."""
    if watch:
        # Before pyarrow is loaded: its allocator (mimalloc) keeps the memory an export frees
        # for the next one rather than give it back, so that a delta export's copy of the
        # records table (200 MB at 100,000 records) does not fault in fresh pages each time.
        os.environ.setdefault("MIMALLOC_PURGE_DELAY", "-1")
    from exporter.pipeline.export import export as export_project
    from exporter.pipeline.report import BuildReport

    project = Project(project_dir)
    chosen = chosen_base_url(project, base_url)
    base_url = chosen.given

    def said(report: BuildReport) -> None:
        remember_base_url(project, base_url)
        click.echo(report.summary())
        click.echo(chosen.said, err=True)
        for warning in report.warnings:
            click.echo(f"Warning: {warning}", err=True)

    if not watch:
        progress = Progress()
        if _ENDS_WITH_COMMAND:  # what the export leaves is never freed (`run`)
            gc.disable()
        try:
            report = export_project(project, frozen=frozen, base_url=base_url,
                                    progress=progress, keep=_ENDS_WITH_COMMAND)
        finally:
            progress.end()
        said(report)
        if _ENDS_WITH_COMMAND:
            _LEFT_IN_MEMORY.append(report)
        return
    from exporter.pipeline.delta import Session
    from exporter.pipeline.watch import ContentWatch

    session = Session(project, frozen=frozen, base_url=base_url)
    with ContentWatch(project.content) as changes:  # made first: no edit is ever missed
        click.echo(f"watching {project.content} (Ctrl-C stops)", err=True)
        try:
            while True:
                progress = Progress()
                try:
                    said(session.export(changes.taken(), progress))
                except FednodeError as exc:
                    for line in _error_lines(exc):
                        click.echo(line, err=True)
                    click.echo("the last good export is still in place; waiting for a fix",
                               err=True)
                finally:
                    progress.end()
                session.prepare()  # (after a whole export: work the first edit would wait for)
                changes.wait()
        except KeyboardInterrupt:
            click.echo("stopped", err=True)


def _proxy_networks(context: click.Context, parameter: click.Parameter,
                    values: tuple[str, ...]) -> tuple[str, ...]:
    from exporter.contract.addresses import networks
    try:
        networks(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return values


@main.command()
@project_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--anonymous-rate", default=600, show_default=True, type=click.IntRange(min=0),
              help="Requests a minute allowed per client address without a key (0: no limit).")
@click.option("--workers", type=click.IntRange(1, 64),
              help="Worker processes sharing the port (default: [serve] workers in "
                   "content/node.toml, else 1). Above 1 needs --redis.")
@click.option("--redis", "redis_url", metavar="URL",
              help="Keep rate-limit windows in this Redis (redis://host:port/db), shared by "
                   "every worker and host. Default: FEDNODE_REDIS_URL, else [serve] redis in "
                   "content/node.toml, else in the process.")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDRESS",
              callback=_proxy_networks,
              help="A proxy in front of the sidecar (an address, or a network such as "
                   "10.0.0.0/8) whose X-Forwarded-For is believed: anonymous requests through "
                   "it are counted by the client address it forwards. Repeatable. Default: "
                   "[serve] trusted_proxies in content/node.toml, else none (every request "
                   "counts against the address that connected).")
def serve(project_dir: Path, host: str, port: int, anonymous_rate: int, workers: int | None,
          redis_url: str | None, trusted_proxies: tuple[str, ...]) -> None:
    """Start the sidecar on the last export's bundle."""
    serve_project(project_dir, host=host, port=port, anonymous_rate=anonymous_rate,
                  workers=workers, redis_url=redis_url, trusted_proxies=trusted_proxies)


def serve_project(project_dir: Path, *, host: str, port: int, anonymous_rate: int,
                  workers: int | None = None, redis_url: str | None = None,
                  trusted_proxies: tuple[str, ...] = (),
                  export_command: str = "fednode export") -> None:
    """The sidecar on a project's last export (`fednode serve`, `fednode hub serve`);
    `export_command` is what its warnings tell to run to export it again."""
    from sidecar import access_log
    from sidecar.serve import Options, run

    access_log.configure()
    project = Project(project_dir)
    settings = load_serve_config(project)
    options = Options(project.bundle, project.private, host, port, anonymous_rate,
                      redis_url or os.environ.get("FEDNODE_REDIS_URL") or settings.redis,
                      trusted_proxies or settings.trusted_proxies, export_command)
    run(options, workers=workers or settings.workers,
        say=lambda line: click.echo(line, err=True))


@main.command()
@click.argument("question")
@project_option
@click.option("--limit", default=3, show_default=True, type=click.IntRange(1, 10),
              help="Passages to show, closest first.")
@click.option("--group", "groups", multiple=True,
              help="Answer as a key holding this access group would (repeatable); without "
                   "it, from public documents only.")
def ask(question: str, project_dir: Path, limit: int, groups: tuple[str, ...]) -> None:
    """Answer QUESTION from the library of the last export: the closest passages, each
    with its page, and an answer where one sentence clearly states it."""
    from sidecar.library import answer
    from sidecar.store import Snapshot

    found = answer(Snapshot(Project(project_dir).bundle), [PUBLIC, *groups],
                   " ".join(question.split()), limit)
    # The library's words (titles, labels) as the terminal should show them: a title may
    # hold an escape sequence
    click.echo(printable(found["answer"] if found["grounded"] else found["message"]))
    for citation in found["citations"]:
        click.echo(printable(f"[{citation['n']}] {citation['title']}, page "
                             f"{citation['page_label']} (PDF page {citation['page']}): "
                             f"{citation['url']}"))
    if found["passages"]:
        click.echo("\nThe closest passages:")
    for passage in found["passages"]:
        click.echo(printable(f"({passage['n']}) {passage['title']}, page "
                             f"{passage['page_label']} (PDF page {passage['page']}), score "
                             f"{passage['score']}: {passage['quote']} {passage['url']}"))


def _registry(project_dir: Path) -> keyring.Registry:
    from sidecar import keys as keyring

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
              help=f"Comma-separated, from: {', '.join(SCOPES)}.")
@click.option("--collections", default="", help="Comma-separated collections it may read "
                                                "(default: all).")
@click.option("--groups", default="", help="Comma-separated access groups whose restricted "
                                           "records it may read (default: none).")
@click.option("--rate", default=120, show_default=True, type=int,
              help="Requests per minute.")
@click.option("--expires", help="Last valid day (2027-06-30) or an RFC 3339 time.")
def keys_create(project_dir: Path, name: str, scopes: str, collections: str, groups: str,
                rate: int, expires: str | None) -> None:
    """Issue a key. The key alone goes to standard output, once; details to standard error."""
    from sidecar import keys as keyring

    project = Project(project_dir)
    node = load_node_config(project)
    secret, where = keyring.load_secret(project.private, create=True)
    assert secret is not None
    registry = _registry(project_dir)
    token, record = keyring.issue(
        registry, secret, node.id, name=name, scopes=_split(scopes),
        collections=_split(collections), groups=_split(groups), rate=rate, expires=expires,
        now=datetime.now(UTC))
    in_use = _groups_in_use(project)
    for group in record.groups:
        if group not in in_use:
            click.echo(f"warning: no record is in the group {group!r}; the groups in use are "
                       f"{', '.join(in_use) or 'none'} (names are case-sensitive)", err=True)
    click.echo(f"issued {record.id} ({printable(record.name)}): scopes {', '.join(record.scopes)}; "
               f"signed with the secret in {where}. The key is shown once:", err=True)
    click.echo(token)


def _groups_in_use(project: Project) -> list[str]:
    """The access groups of the records the ledger knows as live."""
    entries = Ledger.load(project.ledger).entries.values()
    return sorted({e.access for e in entries if not e.deleted and e.access != PUBLIC})


KEY_COLUMNS = ("ID", "NAME", "SCOPES", "COLLECTIONS", "GROUPS", "RATE", "EXPIRES", "STATE")


def _key_row(key: keyring.KeyRecord) -> tuple[str, ...]:
    data = key.describe()
    return (key.id, key.name, ",".join(data["scopes"]), ",".join(data["collections"]),
            ",".join(data["groups"]) or "-", f"{key.rate}/min", key.expires_at or "never",
            f"revoked {key.revoked_at}" if key.revoked_at else "active")


@keys.command("list")
@project_option
def keys_list(project_dir: Path) -> None:
    """Every issued key: id, name, scopes, collections, groups, rate, expiry, state."""
    registry = _registry(project_dir)
    if not registry.keys:
        click.echo("no keys issued yet; `fednode keys create --name NAME` issues one", err=True)
        return
    rows = [tuple(map(printable, row))  # a name may hold anything
            for row in (KEY_COLUMNS, *(_key_row(key) for key in registry.keys.values()))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(KEY_COLUMNS))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                      strict=True)).rstrip())


@keys.command("show")
@click.argument("key_id")
@project_option
def keys_show(key_id: str, project_dir: Path) -> None:
    """One key's details, as JSON (never the key itself)."""
    registry = _registry(project_dir)
    click.echo(json.dumps(registry.get(key_id).describe(), indent=2))


@keys.command("revoke")
@click.argument("key_id")
@project_option
def keys_revoke(key_id: str, project_dir: Path) -> None:
    """Revoke a key; a running sidecar refuses it from its next request."""
    registry = _registry(project_dir)
    key = registry.revoke(key_id, datetime.now(UTC))
    click.echo(f"revoked {key.id} ({printable(key.name)}) at {key.revoked_at}", err=True)


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
    with `fednode keys create --scopes read,changes`). docs/hub-reference.md describes the file,
    its views and the limits."""
    import asyncio

    from hub.node import exposed_key, parse_address
    from hub.sync import sync as run_sync
    from hub.terminal import reporting

    with reporting(sys.stderr, log_file):
        warning = exposed_key(parse_address(base_url), key)
        if warning:
            click.echo(warning, err=True)
        report = asyncio.run(run_sync(base_url, into, key))
    click.echo(report.summary())


main.add_command(import_)  # `fednode import dwc`: cli/darwincore.py
main.add_command(identity)  # `fednode identity [rotate]`: cli/identity.py
main.add_command(verify)  # `fednode verify URL`: cli/identity.py
main.add_command(hub)  # `fednode hub ...`: cli/hub.py
# Set by `run`, the `fednode` command, whose process ends with the command; not where the
# commands are invoked in a process that goes on (tests' CliRunner).
_ENDS_WITH_COMMAND = False
_LEFT_IN_MEMORY: list[object] = []  # what an export left: ended with, not freed (`run`)


def run() -> None:
    """The `fednode` command: `main`, in a process that ends with it. After an export that
    succeeded, the process ends at once, its output flushed, without freeing what the export
    left in memory (`_LEFT_IN_MEMORY`): at 100,000 records that is millions of objects, which
    Python frees one by one, and its collector walks, before it exits: 0.9 s on one core
    after the export was done (a compiler's reason for not freeing before it exits, as
    clang's -disable-free). Every other ending is Python's own."""
    global _ENDS_WITH_COMMAND
    _ENDS_WITH_COMMAND = True
    without_pandas()
    try:
        main()
    except SystemExit as ending:
        if _LEFT_IN_MEMORY and not ending.code:
            _end_now()
        raise


def _end_now() -> NoReturn:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader gone: as Python's own exit would, say nothing more
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    run()
