"""What a running sidecar holds: the records it served and the vectors it searched stay in
the kernel's page cache, not in the process (bench/sidecar_memory.py measures it at 500,000
records); the records' files are held open instead, under a raised limit on open files; the
memory a replaced snapshot freed is handed back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from builders import ServerThread, app_for, exported_sample, http_get
from processes import ENV, FEDNODE, free_port, wait_for

from exporter.contract.wire import COLLECTIONS
from exporter.pipeline.build import build
from exporter.project.config import Project
from sidecar import store
from sidecar.vectors import Vectors


def resident(pid: int) -> dict[str, int]:
    """KiB resident of each file the process maps."""
    found: dict[str, int] = {}
    path = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split(maxsplit=5)
            path = parts[5] if len(parts) > 5 else ""
        elif line.startswith("Rss:") and path.startswith("/"):
            found[path] = found.get(path, 0) + int(line.split()[1])
    return found


@pytest.mark.slow
def test_a_running_sidecar_keeps_no_page_of_the_records_and_vectors_it_read(
        sample_root: Path) -> None:
    """Every record read by id and by page, and a search in each mode: then no records file
    is mapped into the process, the search vectors it maps hold no page, and pandas, which
    DuckDB would import at its first bound parameter, is not loaded
    (`exporter.shared.process.without_pandas`)."""
    port = free_port()
    process = subprocess.Popen([*FEDNODE, "serve", "--project", str(sample_root), "--port",
                                str(port), "--anonymous-rate", "1000000"], env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/api/manifest", process, 90)
        read = 0
        for collection in COLLECTIONS:
            items = json.loads(http_get(f"{base}/api/{collection}?limit=200")[2])["items"]
            for item in items:
                assert http_get(f"{base}/api/{collection}/{item['id']}")[0] == 200
                read += 1
        for mode in ("keyword", "semantic", "hybrid"):
            found = json.loads(http_get(f"{base}/api/search?q={quote('knotweed')}"
                                        f"&mode={mode}")[2])
            assert found["items"]
        maps = resident(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert read > 50
    assert not [path for path in maps if "/bundle/records/" in path]
    assert not [path for path in maps if "/site-packages/pandas/" in path]
    vectors = {path: kib for path, kib in maps.items() if path.endswith("/vectors.npy")
               and "/bundle/search/" in path}
    assert vectors and set(vectors.values()) == {0}


def test_a_process_without_pandas_still_binds_parameters_and_reads_arrow() -> None:
    """`without_pandas` (the `fednode` command's first step): pandas cannot be imported,
    and DuckDB and pyarrow, which take that as "not installed", work as before."""
    program = """
import sys
from exporter.shared.process import without_pandas
without_pandas()
import duckdb, pyarrow as pa
db = duckdb.connect()
assert db.execute("SELECT ?, ?", ["a'b", 3]).fetchone() == ("a'b", 3)
numbers = pa.table({"n": [1, 2]})
assert db.execute("SELECT sum(n) FROM numbers").fetchone() == (3,)
assert db.execute("SELECT 1 AS n").arrow().read_all().to_pylist() == [{"n": 1}]
try:
    import pandas
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("pandas was imported")
assert "pandas" not in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", program], env=ENV, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_vectors_are_the_array_numpy_saved(tmp_path: Path, version: tuple[int, int]) -> None:
    saved = np.random.default_rng(0).random((37, 5)).astype(np.float32)
    path = tmp_path / "vectors.npy"
    with open(path, "wb") as file:
        np.lib.format.write_array(file, saved, version=version)
    vectors = Vectors(path)
    assert vectors.array.dtype == np.float32 and np.array_equal(vectors.array, saved)
    vectors.release()  # unmapped pages are mapped again from the file when read
    assert np.array_equal(vectors.array @ saved[3], saved @ saved[3])


def test_vectors_not_whole_or_not_in_c_order_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npy"
    np.save(path, np.asfortranarray(np.ones((4, 3), np.float32)))
    with pytest.raises(ValueError, match="not a whole array in C order"):
        Vectors(path)
    np.save(path, np.ones((400, 3), np.float32))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ValueError, match="not a whole array in C order"):
        Vectors(path)


@pytest.mark.slow
def test_the_sidecar_raises_its_soft_limit_on_open_files(sample_root: Path) -> None:
    """A loaded bundle holds each records segment's file open: `fednode serve` started
    under a soft limit of 256 open files runs under the hard limit."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"this machine's hard limit on open files is {hard}")

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    port = free_port()
    process = subprocess.Popen([*FEDNODE, "serve", "--project", str(sample_root), "--port",
                                str(port)], env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=low)
    try:
        wait_for(f"http://127.0.0.1:{port}/api/manifest", process, 90)
        limits = Path(f"/proc/{process.pid}/limits").read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)
    soft = re.search(r"Max open files\s+(\S+)", limits)
    assert soft is not None
    expected = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    assert int(soft.group(1)) == expected


def test_a_scan_compares_every_vector_a_part_at_a_time(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`compare` over every row, in parts of SCAN rows (each part's pages let go of), and
    over some rows, gives what one product gives."""
    from sidecar import vectors as module

    saved = np.random.default_rng(1).random((1_000, 8)).astype(np.float32)
    np.save(tmp_path / "vectors.npy", saved)
    vectors = Vectors(tmp_path / "vectors.npy")
    query = saved[17]
    monkeypatch.setattr(module, "SCAN", 37)
    np.testing.assert_allclose(vectors.compare(query), saved @ query, rtol=1e-6)
    rows = np.array([3, 999, 500])
    np.testing.assert_allclose(vectors.compare(query, rows), saved[rows] @ query, rtol=1e-6)
    vectors.release(990)  # the last rows' pages alone
    np.testing.assert_allclose(vectors.compare(query), saved @ query, rtol=1e-6)


def test_memory_is_given_back_once_a_replaced_snapshot_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a reload, the sidecar hands the heap's free memory back once the snapshot it
    replaced is gone."""
    given_back: list[float] = []
    monkeypatch.setattr(store, "give_back_memory", lambda: given_back.append(time.time()))
    root = exported_sample(tmp_path / "node")
    with ServerThread(app_for(root, reload_interval=0, anonymous_rate=0)) as server:
        assert http_get(server.url + "/api/manifest")[0] == 200
        server.settle()
        time.sleep(1)
        before = len(given_back)  # (a reload may come at start too)
        edited = root / "content" / "species" / "calluna-vulgaris.md"
        edited.write_text(edited.read_text("utf-8") + "\nA line more.\n", "utf-8")
        build(Project(root))
        server.settle()
        deadline = time.monotonic() + 30
        while len(given_back) == before and time.monotonic() < deadline:
            time.sleep(0.1)
    assert len(given_back) > before
