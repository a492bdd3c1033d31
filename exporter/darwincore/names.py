"""A checklist's scientific names, split into the name and its authorship by GBIF's name
parser: the split every part of fednode shares (`exporter/shared/names.py`), so the names
the import writes are the canonical names the sidecar groups a taxon's records by."""

from __future__ import annotations

from exporter.shared.names import SplitName, split_names

__all__ = ["SplitName", "split_names"]
