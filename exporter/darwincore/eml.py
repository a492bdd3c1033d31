"""The provenance of an archive, from its EML metadata (eml.xml, as the IPT writes it): the
dataset's title, licence, citation and DOI. The import keeps them on every record it writes
(`datasetName`, `license`, `bibliographicCitation`) where the core has no such term, so that
a record says where it came from and under what terms, even moved or edited alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

EML_MAX = 8 * 1024 * 1024  # bytes: an EML document is metadata, not data


@dataclass(frozen=True)
class Provenance:
    title: str = ""
    licence: str = ""  # a URL where the EML gives one, else its text
    citation: str = ""
    doi: str = ""  # https://doi.org/..., when the EML names one

    def line(self) -> str:
        """The provenance in one line, for the import's summary."""
        parts = [f"source: {self.title or '(untitled)'}"]
        if self.licence:
            parts.append(f"licence: {self.licence}")
        if self.citation:
            parts.append(f"cite as: {self.citation}")
        return "; ".join(parts)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _text(element: ElementTree.Element | None) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _first(root: ElementTree.Element, *path: str) -> ElementTree.Element | None:
    """The first element along `path` (local names, any namespace), depth first."""
    found = [root]
    for name in path:
        found = [child for parent in found for child in parent.iter()
                 if child is not parent and _local(child.tag) == name]
        if not found:
            return None
    return found[0]


def read_eml(folder: Path, name: str | None) -> tuple[Provenance | None, str]:
    """The provenance the archive's EML document gives (`name` is meta.xml's `metadata`
    attribute, eml.xml by default), and a note when it could not be read ("" otherwise).
    No EML is no provenance, not an error: a folder of CSV files has none."""
    path = folder / (name or "eml.xml")
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(folder.resolve()) or not resolved.is_file():
            return None, ""
        if resolved.stat().st_size > EML_MAX:
            return None, f"{name or 'eml.xml'}: over {EML_MAX >> 20} MiB: not read"
        root = ElementTree.parse(resolved).getroot()
    except (ElementTree.ParseError, OSError, ValueError) as exc:
        return None, f"{name or 'eml.xml'}: not readable EML ({exc}): no provenance kept"
    dataset = _first(root, "dataset")
    if dataset is None:
        dataset = root
    rights = _first(dataset, "intellectualRights")
    link = _first(rights, "ulink") if rights is not None else None
    licence = (link.get("url", "") if link is not None else "") or _text(rights)
    doi = ""
    for element in dataset.iter():
        if _local(element.tag) == "alternateIdentifier":
            value = _text(element)
            if value.lower().startswith(("https://doi.org/", "http://doi.org/", "doi:", "10.")):
                doi = "https://doi.org/" + value.split("doi.org/", 1)[-1].removeprefix("doi:")
                break
    citation = _text(_first(root, "additionalMetadata", "citation")) \
        or _text(_first(dataset, "citation"))
    return Provenance(_text(_first(dataset, "title")), licence, citation, doi), ""
