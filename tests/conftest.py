from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import BaseTestServer, TestClient, TestServer
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

import builders  # noqa: E402
from builders import Node, app_for, exported_sample  # noqa: E402

from exporter.pipeline.build import BuildReport, build  # noqa: E402
from exporter.project.config import Project  # noqa: E402
from sidecar.app import NodeRunner  # noqa: E402

# Hypothesis keeps no example database in the checkout (no test writes there); a failure
# prints the example and the seed that reproduce it.
settings.register_profile("default", database=None, print_blob=True)
settings.register_profile("thorough", database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    """One cache of the sentence encoder's vectors for the test runs on this machine (set by
    the controller; the test processes it starts inherit it): an export of a library takes
    the vectors an earlier one made (`exporter.library.vector_cache`: keyed by the
    encoder's version and the text, so a vector found is the one the encoder makes). It is
    the tests' own folder, `fednode-tests` in the user's cache folder, never the user's
    fednode cache; where that cannot be made, a folder of this run's. A test that needs an
    export to encode sets FEDNODE_CACHE_DIR empty; tests of the cache give it a folder of
    their own."""
    if not hasattr(config, "workerinput") and "FEDNODE_CACHE_DIR" not in os.environ:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = base / "fednode-tests"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            import atexit
            import shutil
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix="fednode-vectors-"))
            atexit.register(shutil.rmtree, folder, True)
        os.environ["FEDNODE_CACHE_DIR"] = str(folder)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run's folder on /dev/shm (`scripts/test --basetemp`) is removed when the run
    ends: it holds some 2.5 GB of exports, and /dev/shm is memory until the machine
    restarts. FEDNODE_KEEP_TEST_FILES=1 keeps it, to look into a failure. Only the
    controller removes it, once its test processes are done."""
    basetemp = session.config.option.basetemp
    if hasattr(session.config, "workerinput") or not basetemp or \
            os.environ.get("FEDNODE_KEEP_TEST_FILES") == "1":
        return
    folder = Path(basetemp)
    if folder.parent == Path("/dev/shm") and folder.name.startswith("fednode-tests-"):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


class Clock:
    """Export time the tests control: each call moves it on one minute."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

    def tick(self, minutes: int = 1) -> datetime:
        self.now += timedelta(minutes=minutes)
        return self.now


class NodeTestServer(TestServer):
    """pytest-aiohttp's test server, running the sidecar's application as `fednode serve`
    does: with `NodeRunner`."""

    async def _make_runner(self, **kwargs: object) -> NodeRunner:
        return NodeRunner(self.app, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def aiohttp_client(aiohttp_client: Callable[..., Awaitable[TestClient]]
                   ) -> Callable[..., Awaitable[TestClient]]:
    """pytest-aiohttp's client fixture, serving an application with `NodeRunner`."""
    async def client(served: web.Application | BaseTestServer,
                     server_kwargs: dict[str, Any] | None = None, **kwargs: object
                     ) -> TestClient:
        if isinstance(served, web.Application):
            served = NodeTestServer(served, **(server_kwargs or {}))
        return await aiohttp_client(served, **kwargs)
    return client


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path / "node")


@pytest.fixture
def export(clock: Clock) -> Callable[..., BuildReport]:
    def run(root: Path, **kwargs: object) -> BuildReport:
        return build(Project(root), now=clock.tick(), **kwargs)  # type: ignore[arg-type]
    return run


@pytest.fixture(scope="session", autouse=True)
def _one_sample_a_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The folder this run's processes share (the parent of each xdist worker's own), where
    `exported_sample` keeps the one export of the sample they all copy."""
    base = tmp_path_factory.getbasetemp()
    builders.SAMPLE_HOME[:] = [base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base]


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, exported (`exported_sample`: once a test run), in a folder of
    the session's that tests read and do not change."""
    return exported_sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture
async def sample_client(sample_root: Path, aiohttp_client: Callable[..., object]
                        ) -> AsyncIterator[TestClient]:
    client = await aiohttp_client(app_for(sample_root))  # type: ignore[operator]
    yield client
