"""`fednode import dwc`: a Darwin Core checklist into the species collection
(exporter/darwincore; docs/darwin-core.md).

The importer is imported when the command runs, so `fednode --help` stays quick."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.options import project_option
from exporter.project.config import Project
from exporter.project.names import SPECIES

# The exit status of an import that wrote the checklist but left some of its rows out.
ROWS_LEFT_OUT = 3


@click.group("import")
def import_() -> None:
    """Import records from another format (Darwin Core checklists)."""


@import_.command("dwc")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@project_option
@click.option("--collection", default=SPECIES, show_default=True,
              type=click.Choice([SPECIES]), help="The collection the taxa become records of.")
@click.option("--access", help="Give the imported records this access group (default: new "
                               "records are public, existing ones keep theirs).")
@click.option("--dataset", help="The dataset's identifier (a DOI or URL), when the checklist "
                                "has no datasetID column; with taxonID it fixes record ids.")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--prune", is_flag=True, help="Delete the records of taxa that left the "
                                            "checklist (without it they are only listed).")
@click.option("--strict", is_flag=True, help="Refuse the whole checklist, writing nothing, "
                                             "if any row has a problem (without it such rows "
                                             "are left out, listed, and the rest imported).")
def import_dwc(source: Path, project_dir: Path, collection: str, access: str | None,
               dataset: str | None, dry_run: bool, prune: bool, strict: bool) -> None:
    """Import a Darwin Core checklist: an archive (zip, or folder with meta.xml) or a
    folder of CSV files (taxon.csv plus distribution, description, speciesprofile,
    vernacularname) joined on taxonID. docs/darwin-core.md maps the terms.

    A row with a problem is left out (a taxon with its extension rows) and listed as
    file:line: term: reason; the rest is imported, and the summary ends "left out N of M
    rows". Exit status: 0 every row imported; 3 imported with rows left out; 1 refused,
    nothing written (a problem of the checklist itself, or any problem with --strict).
    Synonyms are kept as names of their accepted taxa."""
    from exporter.darwincore.checklist import ChecklistRefused
    from exporter.darwincore.importer import apply_import, plan_import
    from exporter.darwincore.source import read_checklist

    project = Project(project_dir)
    try:
        plan = plan_import(project, read_checklist(source), dataset=dataset, access=access,
                           strict=strict)
    except ChecklistRefused as refused:  # what was read explains the problems: said first
        for line in refused.notes:
            click.echo(line, err=True)
        raise
    for line in [*plan.overlaps, *plan.twins, *plan.notes, *map(str, plan.problems())]:
        click.echo(line, err=True)
    for record in plan.left:
        click.echo(f"{record.path}: taxonID {record.fields['taxonID']} left the checklist"
                   + (" (deleted)" if prune and not dry_run else ""), err=True)
    if not dry_run:
        apply_import(project, plan, prune=prune)
    click.echo(plan.summary(dry_run=dry_run, prune=prune))
    if plan.left_out:
        sys.exit(ROWS_LEFT_OUT)
