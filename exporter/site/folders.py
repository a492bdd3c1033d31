"""The folder limit of the CDN, checked on the whole public tree before an export writes it
(the layout itself: `contract.layout`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from exporter.contract.layout import FOLDER_LIMIT
from exporter.shared.errors import ExportError


def entries_per_folder(paths: Iterable[str]) -> Counter[str]:
    """How many entries (files and subfolders) each folder of a tree of `paths` holds ("" is
    the tree's root)."""
    counts: Counter[str] = Counter()
    folders: set[str] = set()
    for path in paths:
        folder = path.rpartition("/")[0]
        counts[folder] += 1
        while folder and folder not in folders:
            folders.add(folder)
            parent = folder.rpartition("/")[0]
            counts[parent] += 1
            folder = parent
    return counts


def check_folders(paths: Iterable[str], limit: int = FOLDER_LIMIT) -> None:
    """Refuse a public tree that the CDN would refuse: a folder over `limit` entries."""
    over = sorted(((folder, count) for folder, count in entries_per_folder(paths).items()
                   if count > limit), key=lambda item: -item[1])
    if over:
        named = "; ".join(f"site_out/{folder + '/' if folder else ''} would hold {count:,}"
                          for folder, count in over[:5])
        raise ExportError(
            f"{named} files and folders: Netlify refuses a deploy with more than {limit:,} "
            f"in one folder, so nothing was written. docs/operations.md (At scale) describes "
            f"the layout and its limits")
