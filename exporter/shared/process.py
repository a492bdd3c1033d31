"""What a fednode process sets about itself before it does any work."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

KEPT_OUT = "pandas"


class _KeptOut(importlib.abc.MetaPathFinder):
    """Finds no `pandas`: an import of it raises ModuleNotFoundError, as if not installed."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name == KEPT_OUT or name.startswith(KEPT_OUT + "."):
            raise ModuleNotFoundError(f"No module named {name!r} (kept out of fednode's "
                                      f"processes)", name=name)
        return None


def without_pandas() -> None:
    """Keep pandas out of this process. DuckDB's Python client imports pandas, where it is
    installed (a dependency of the library's encoder package pulls it in), the first time
    it binds a query parameter, to tell pandas' own values from others: 0.27 s and some
    35 MiB in every process, a quarter of a `hub sync` that finds nothing new. fednode
    hands DuckDB and pyarrow no pandas value, so an import of pandas here fails as if it
    were not installed, which both take as "no pandas" (unless something imported it
    already). Only an import is refused: `importlib.util.find_spec("pandas")` raises the
    same error rather than answer None, and `importlib.metadata` still lists the package;
    nothing fednode runs asks either. Called by processes that run fednode alone: the
    `fednode` command and the sidecar's workers, not a test run or a program that imports
    fednode."""
    if KEPT_OUT not in sys.modules and not any(isinstance(finder, _KeptOut)
                                               for finder in sys.meta_path):
        sys.meta_path.insert(0, _KeptOut())
