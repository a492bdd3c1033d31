"""What a newcomer meets after `fednode new`: a CSV row started with its id, an id error
that says how to make one, whole numbers never written as text, and the placeholder body
a warning until it is replaced."""

from __future__ import annotations

import csv
import shutil
import uuid
from pathlib import Path

from builders import REPO, Node
from click.testing import CliRunner, Result

from cli.main import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_new_csv_adds_a_row_with_a_fresh_id_to_the_collections_table(tmp_path: Path) -> None:
    node = Node(tmp_path)
    table = node.root / "content" / "germination" / "results.csv"
    table.parent.mkdir(parents=True)
    shutil.copy(REPO / "content" / "germination" / "results.csv", table)
    before = _rows(table)
    made = run("new", "germination", "--csv", "Cowslip trial", "--project", str(node.root))
    assert made.exit_code == 0, made.output
    rows = _rows(table)
    assert rows[:-1] == before
    assert uuid.UUID(rows[-1]["id"]).version == 4 and rows[-1]["title"] == "Cowslip trial"
    assert made.stdout.strip() == f"{table}:{len(table.read_text().splitlines())}"
    check = run("check", "--project", str(node.root))
    assert check.exit_code == 1
    assert f"results.csv:{len(rows) + 1}: species: required" in check.output


def test_new_csv_makes_the_table_when_there_is_none(tmp_path: Path) -> None:
    node = Node(tmp_path)
    for _ in range(2):
        assert run("new", "treatments", "--csv", "--project", str(node.root)).exit_code == 0
    rows = _rows(node.root / "content" / "treatments" / "treatments.csv")
    assert len(rows) == 2 and rows[0]["id"] != rows[1]["id"]
    assert list(rows[0])[:2] == ["id", "title"] and list(rows[0])[-1] == "body"


def test_new_csv_refuses_to_guess_between_two_tables(tmp_path: Path) -> None:
    node = Node(tmp_path)
    folder = node.root / "content" / "germination"
    folder.mkdir(parents=True)
    for name in ("a.csv", "b.csv"):
        (folder / name).write_text("id,title\n")
    made = run("new", "germination", "--csv", "--project", str(node.root))
    assert made.exit_code == 1 and "several CSV files (a.csv, b.csv)" in made.output
    assert (folder / "a.csv").read_text() == "id,title\n"


def test_an_id_error_on_a_csv_row_says_how_to_make_one(tmp_path: Path) -> None:
    node = Node(tmp_path)
    folder = node.root / "content" / "team"
    folder.mkdir(parents=True)
    (folder / "team.csv").write_text("id,name,role\n,Ann,Lead\nABC,Bo,Lead\n")
    check = run("check", "--project", str(node.root))
    assert check.exit_code == 1
    for line in (2, 3):
        shown = next(s for s in check.output.splitlines() if s.startswith(
            f"content/team/team.csv:{line}: id:"))
        assert "python3 -c 'import uuid; print(uuid.uuid4())'" in shown
        assert "fednode new team --csv" in shown


def test_scaffold_leaves_whole_numbers_commented_out(tmp_path: Path) -> None:
    node = Node(tmp_path)
    made = run("new", "germination", "Cowslip trial", "--project", str(node.root))
    text = Path(made.stdout.strip()).read_text()
    assert 'seedsSown = ""' not in text and "# seedsSown =" in text
    assert "a whole number" in text


def test_a_placeholder_body_left_in_place_is_a_warning(tmp_path: Path) -> None:
    node = Node(tmp_path)
    made = run("new", "species", "Impatiens glandulifera", "--project", str(node.root))
    path = Path(made.stdout.strip())
    assert "Describe Impatiens glandulifera here" in path.read_text()
    check = run("check", "--project", str(node.root))
    assert check.exit_code == 0, check.output
    assert "body: still the placeholder text" in check.output
    exported = run("export", "--project", str(node.root))
    assert exported.exit_code == 0, exported.output
    assert "Warning: content/species/impatiens-glandulifera.md:" in exported.output
    # Every run warns while the placeholder is there, the file read or not (the export's
    # cache remembers the record): the same line each time.
    line = next(x for x in exported.output.splitlines() if "placeholder" in x)
    for _ in range(2):
        again = run("export", "--project", str(node.root))
        assert line in again.output.splitlines(), again.output
        check = run("check", "--project", str(node.root))
        assert line.removeprefix("Warning: ") in check.output.splitlines(), check.output
    path.write_text(path.read_text().replace("Describe Impatiens glandulifera here, in "
                                             "Markdown.", "An annual balsam of riverbanks."))
    assert "placeholder" not in run("export", "--project", str(node.root)).output
    assert "placeholder" not in run("check", "--project", str(node.root)).output
