"""The export a publisher runs (`fednode export`, `fednode hub export`): first what changed
since the last export (`inputs`), then, if anything did, the build (`build`), which records
what it read once it is published. Light to import: the pipeline is loaded only when there is
something to export."""

from __future__ import annotations

import time
from datetime import datetime

from exporter.contract.layout import FOLDER_LIMIT
from exporter.pipeline import inputs
from exporter.pipeline.report import BuildReport, Progress
from exporter.project.config import Project


def export(project: Project, *, now: datetime | None = None, frozen: bool = False,
           base_url: str | None = None, progress: Progress | None = None,
           folder_limit: int = FOLDER_LIMIT, keep: bool = False) -> BuildReport:
    """Export the project, unless nothing it reads changed since the last export published
    (then say so, having read no file). The arguments are `build.build`'s."""
    started = time.perf_counter()
    last = inputs.Last.read(project)
    looked = inputs.look(project, last, base_url=base_url, folder_limit=folder_limit)
    report = inputs.unchanged(project, last, looked)
    if report is not None:
        report.seconds = time.perf_counter() - started
        return report
    from exporter.pipeline.build import build

    return build(project, now=now, frozen=frozen, base_url=base_url,
                 progress=progress, folder_limit=folder_limit, keep=keep, looked=looked)
