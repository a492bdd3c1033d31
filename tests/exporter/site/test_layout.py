"""The public tree at scale: no folder over the CDN's limit, and an export that would break
it stops, before it writes anything, with a message that says which folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from builders import copy_sample, multiply

from exporter.contract.layout import FOLDER_LIMIT
from exporter.pipeline.build import build
from exporter.project.config import Project
from exporter.shared.errors import ExportError
from exporter.site.folders import entries_per_folder

NOW_LEDGER = "ledger.jsonl"


def tree_counts(site: Path) -> dict[str, int]:
    return {str(folder.relative_to(site)): len(os.listdir(folder))
            for folder in [site, *(p for p in site.rglob("*") if p.is_dir())]}


def test_the_counts_the_check_makes_are_those_of_the_tree_written(sample_root: Path) -> None:
    site = (sample_root / "site_out").resolve()
    files = [str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()]
    counted = {folder or ".": count for folder, count in entries_per_folder(files).items()}
    assert counted == tree_counts(site)
    # Records are spread over shard folders: no collection folder holds them all.
    assert max(counted.values()) < 300


@pytest.mark.slow
def test_an_export_over_the_folder_limit_stops_before_writing_anything(tmp_path: Path) -> None:
    root = copy_sample(tmp_path / "node")
    multiply(root / "content", 400)  # about 200 species: over 100 shard folders of them
    ledger = (root / NOW_LEDGER).read_bytes()
    with pytest.raises(ExportError) as failure:
        build(Project(root), folder_limit=100)
    message = str(failure.value)
    assert "site_out/api/species/ would hold" in message
    assert "more than 100 in one folder, so nothing was written" in message
    assert "docs/operations.md" in message
    assert (root / NOW_LEDGER).read_bytes() == ledger  # the ledger was not written
    assert not (root / "site_out").exists() and not (root / ".fednode" / "current").exists()
    report = build(Project(root), folder_limit=FOLDER_LIMIT)  # within Netlify's limit: fine
    assert report.site is not None and report.site.written > 0
