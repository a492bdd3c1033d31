"""Work an export hands aside (exporter/pipeline/forks.py): a forked process in a one-thread
process, a thread elsewhere; its result or its exception comes back; a child that dies leaves
the work to the parent; a killed export takes its child along and leaves its lock free."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from builders import REPO

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def run(code: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh one-thread Python process."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *arguments], env=ENV,
                          capture_output=True, text=True, timeout=60)


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state  # a zombie not reaped yet: it runs nothing


def test_work_aside_runs_in_a_forked_process_and_returns_or_raises() -> None:
    done = run("""
        import os
        from exporter.pipeline import forks as aside
        assert aside.forks()
        parent = os.getpid()
        assert aside.Aside(os.getpid).result() != parent
        assert aside.Aside(sorted, [3, 1, 2]).result() == [1, 2, 3]
        try:
            aside.Aside(int, "not a number").result()
        except ValueError as error:
            assert "not a number" in str(error)
        else:
            raise AssertionError("the child's exception was lost")
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_a_child_that_dies_leaves_the_work_to_the_parent() -> None:
    done = run("""
        import os, signal
        from exporter.pipeline import forks as aside
        parent = os.getpid()
        def dies_aside():
            if os.getpid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
            return "done here"
        assert aside.Aside(dies_aside).result() == "done here"
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_cancel_stops_the_child() -> None:
    done = run("""
        import os, time
        from exporter.pipeline import forks as aside
        work = aside.Aside(time.sleep, 60)
        pid = work._child[0]
        started = time.monotonic()
        work.cancel()
        work.cancel()
        assert time.monotonic() - started < 5
        assert not os.path.exists(f"/proc/{pid}")
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_a_killed_export_takes_its_child_along_and_frees_the_lock(tmp_path: Path) -> None:
    done = run("""
        import os, signal, sys, time
        from pathlib import Path
        from exporter.pipeline import forks as aside
        from exporter.pipeline import switch as writer
        with writer.exclusive(Path(sys.argv[1])):
            work = aside.Aside(time.sleep, 60)
            print(work._child[0], flush=True)
            time.sleep(0.2)  # the child is under way
            os.kill(os.getpid(), signal.SIGKILL)
    """, str(tmp_path / "private"))
    assert done.returncode == -9, done.stderr
    child = int(done.stdout)
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(child)
    with open(tmp_path / "private" / "export.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if anyone still holds it


def test_the_child_does_not_hold_the_export_lock(tmp_path: Path) -> None:
    done = run("""
        import fcntl, sys, time
        from pathlib import Path
        from exporter.pipeline import forks as aside
        from exporter.pipeline import switch as writer
        private = Path(sys.argv[1])
        with writer.exclusive(private):
            work = aside.Aside(time.sleep, 60)
        # The export ended: the lock is free once the child has let go of its copy, long
        # before its work (60 s) ends.
        deadline = time.monotonic() + 20
        with open(private / "export.lock", "wb") as lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, "the child holds the export lock"
                    time.sleep(0.05)
        work.cancel()
        print("ok")
    """, str(tmp_path / "private"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_with_other_threads_the_work_runs_on_a_thread() -> None:
    from exporter.pipeline import forks as aside

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not aside.forks()
        assert aside.Aside(os.getpid).result() == os.getpid()
    finally:
        stop.set()
        other.join()
