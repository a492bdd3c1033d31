"""What keeps exports of large nodes fast and visible: each content file is parsed at most
once per export, and a long export says which phase it is in. Figures: bench/export_speed.py."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import REPO, Node, copy_sample, multiply

import exporter.pipeline.build
import exporter.project.content
from exporter.pipeline.build import BuildReport
from exporter.project.content import SourceFile

Export = Callable[..., BuildReport]


def species_table(rows: int) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "scientificName", "family", "category", "establishmentMeans"])
    for n in range(rows):
        writer.writerow([str(uuid.UUID(int=n + 1, version=4)), f"Genus{n:05d} species",
                         "Apiaceae", "introduced", "introduced"])
    return out.getvalue()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count every parse of a content file by the real `content.read`."""
    counts: Counter[str] = Counter()
    real = exporter.project.content.read

    def counted(source: SourceFile, *args: object, **kwargs: object) -> object:
        counts[source.rel] += 1
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(exporter.project.content, "read", counted)  # reading, one file at a time
    return counts


@pytest.mark.slow
def test_a_base_url_change_parses_each_file_once(node: Node, export: Export,
                                                 reads: Counter[str]) -> None:
    table = node.root / "content" / "species" / "checklist.csv"
    table.parent.mkdir(parents=True)
    table.write_text(species_table(1500))
    export(node.root)
    assert reads == {"content/species/checklist.csv": 1}
    reads.clear()
    export(node.root)  # nothing changed: nothing is parsed
    assert reads == {}
    export(node.root, base_url="https://mirror.example.net")  # every record is rendered again
    assert reads == {"content/species/checklist.csv": 1}
    page = json.loads((node.root / "site_out" / "api" / "species" / "index.json").read_bytes())
    assert page["total"] == 1500
    assert page["items"][0]["url"].startswith("https://mirror.example.net/api/species/")
    assert page["items"][0]["scientificName"] == "Genus00000 species"


@pytest.mark.parametrize("before, after", [
    ("Genus00001", "Genus99999"),
    ("introduced,introduced", "introducex,introduced"),  # no longer valid
])
def test_an_edit_during_the_export_is_an_error_not_a_mix(node: Node, export: Export,
                                                         before: str, after: str) -> None:
    """A cached file re-read because its records are rendered again must still be the file
    that was cached; if it changed in between, the export stops and says so. (It is parsed,
    not validated, again: a record that is no longer valid is no longer the same record.)"""
    table = node.root / "content" / "species" / "checklist.csv"
    table.parent.mkdir(parents=True)
    table.write_text(species_table(3))
    export(node.root)

    def edit_once_read(phase: str, done: int, total: int) -> None:
        if phase == "ledger" and done == 0:  # the files are read; their fields not yet
            table.write_text(species_table(3).replace(before, after, 1))
    with pytest.raises(exporter.pipeline.build.ExportError, match="changed while the export ran"):
        export(node.root, base_url="https://mirror.example.net", progress=edit_once_read)


@pytest.mark.slow
def test_a_long_export_names_each_phase(tmp_path: Path) -> None:
    root = copy_sample(tmp_path)
    multiply(root / "content", 2500)
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "export", "--project", str(root)],
        env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr  # not a terminal: one line per phase
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("base URL "), lines  # which one the export used
    shown = [line.split(":")[0] for line in lines[:-1]]
    # Phases show once the export has run 2 s: those from then on, each once, in order.
    phases = ["reading", "ledger", "rendering", "writing site", "indexing",
              "encoding library", "writing bundle"]
    assert shown == phases[len(phases) - len(shown):]
    assert len(shown) >= 3, result.stderr
