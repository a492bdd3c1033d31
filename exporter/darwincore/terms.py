"""The Darwin Core terms fednode reads and writes, once, for the importer and the archive.

A checklist is a core of taxa (`dwc:Taxon`) with extensions joined on `taxonID`. Each
extension fednode keeps is a list field of a species record (one entry per row;
distribution rows that differ only in `pathway` are one entry whose `pathway` lists them),
except the species profile, whose habitat flags are fields of the record itself.

Which terms and extensions exist at all is data, not code: vocabulary.json beside this
module lists every Darwin Core and Dublin Core term IRI and GBIF's core and extension
definitions (its `about` names the sources and versions). A standard term fednode has no
field for is recognised and left out with a note, never refused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DWC = "http://rs.tdwg.org/dwc/terms/"
DC = "http://purl.org/dc/terms/"
GBIF = "http://rs.gbif.org/terms/1.0/"

TAXON_ROW = DWC + "Taxon"
TAXON_ID = "taxonID"

# Core terms, each the species field of the same name. scientificName is split on import
# (dwc_names); the others are copied as they are.
CORE_TERMS: dict[str, str] = {
    "taxonID": DWC, "scientificName": DWC, "scientificNameAuthorship": DWC,
    "scientificNameID": DWC, "vernacularName": DWC, "kingdom": DWC, "phylum": DWC,
    "class": DWC, "order": DWC, "family": DWC, "genus": DWC, "taxonRank": DWC,
    "nomenclaturalCode": DWC, "taxonomicStatus": DWC, "taxonRemarks": DWC,
    "datasetID": DWC, "datasetName": DWC, "language": DC, "license": DC, "rightsHolder": DC,
    "bibliographicCitation": DC, "references": DC,
}

# Core terms read and not kept: the node keeps its own time of change (updated_at), and
# publishes it as dcterms:modified.
IGNORED: dict[str, str] = {"modified": DC}

# Core terms read to attach a synonym to its accepted taxon, and not kept as fields: a
# synonym is kept as a name on its accepted taxon's record (`synonyms`).
LINKS: dict[str, str] = {"acceptedNameUsageID": DWC, "acceptedNameUsage": DWC}


@dataclass(frozen=True)
class Extension:
    kind: str  # the file name without .csv / .txt, lowercase
    row_type: str
    field: str | None  # the species field holding its entries; None: fields of the record
    terms: dict[str, str]  # term -> namespace, taxonID aside
    lists: tuple[str, ...] = ()  # terms whose values of several rows make one list


EXTENSIONS: dict[str, Extension] = {e.kind: e for e in (
    Extension("distribution", GBIF + "Distribution", "distributions", {
        "locationID": DWC, "locality": DWC, "countryCode": DWC, "occurrenceStatus": DWC,
        "establishmentMeans": DWC, "degreeOfEstablishment": DWC, "pathway": DWC,
        "eventDate": DWC, "source": DC, "occurrenceRemarks": DWC}, lists=("pathway",)),
    Extension("description", GBIF + "Description", "descriptions", {
        "description": DC, "type": DC, "language": DC, "source": DC}),
    Extension("vernacularname", GBIF + "VernacularName", "vernacularNames", {
        "vernacularName": DWC, "language": DC, "countryCode": DWC, "source": DC}),
    Extension("speciesprofile", GBIF + "SpeciesProfile", None, {
        "isMarine": GBIF, "isFreshwater": GBIF, "isTerrestrial": GBIF}),
)}
BY_ROW_TYPE: dict[str, Extension] = {e.row_type: e for e in EXTENSIONS.values()}
FLAGS = tuple(EXTENSIONS["speciesprofile"].terms)

VOCABULARY = Path(__file__).with_name("vocabulary.json")


@dataclass(frozen=True)
class RowType:
    iri: str
    file: str  # the table's name in a folder of CSV files
    title: str
    terms: frozenset[str]  # short names


@cache
def _vocabulary() -> dict[str, object]:
    data: dict[str, object] = json.loads(VOCABULARY.read_text("utf-8"))
    return data


@cache
def standard_terms() -> frozenset[str]:
    """The short name of every Darwin Core and Dublin Core term, and of every term of a
    GBIF core or extension definition: what a column may be named without being a
    mistake."""
    iris = _vocabulary()["terms"]
    rows = _vocabulary()["rowTypes"]
    assert isinstance(iris, list) and isinstance(rows, dict)
    names = {short(iri) for iri in iris}
    names.update(short(iri) for row in rows.values() for iri in row["terms"])
    return frozenset(names)


@cache
def row_types() -> dict[str, RowType]:
    """GBIF's core and extension definitions by row type IRI (Taxon, Distribution,
    Description, SpeciesProfile, VernacularName, Reference, TypesAndSpecimen, Multimedia,
    Image, Identifier)."""
    rows = _vocabulary()["rowTypes"]
    assert isinstance(rows, dict)
    return {iri: RowType(iri, row["file"], row["title"],
                         frozenset(short(t) for t in row["terms"]))
            for iri, row in rows.items()}


@cache
def value_synonyms() -> dict[str, dict[str, str]]:
    """By controlled term (`establishmentMeans`, `taxonRank`), the other ways checklists
    write its values, each with the vocabulary's value it names (`alien`: `introduced`,
    `subsp`: `subspecies`)."""
    values = _vocabulary()["values"]
    assert isinstance(values, dict)
    return {term: dict(synonyms) for term, synonyms in values.items()}


def other_extensions() -> dict[str, RowType]:
    """The standard extensions fednode reads no field from, by file name (`references`,
    `multimedia`, ...): named in the import's notes and left out."""
    return {row.file: row for iri, row in row_types().items()
            if iri != TAXON_ROW and iri not in BY_ROW_TYPE}


def short(term: str) -> str:
    """`http://rs.tdwg.org/dwc/terms/locality` -> `locality`; a short name stays as it is."""
    return term.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1].rsplit(":", 1)[-1]
