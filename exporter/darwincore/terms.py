"""The Darwin Core terms fednode reads and writes, once, for the importer and the archive.

A checklist is a core of taxa (`dwc:Taxon`) with extensions joined on `taxonID`. Each
extension is a list field of a species record (one entry per row; distribution rows that
differ only in `pathway` are one entry whose `pathway` lists them), except the species
profile, whose habitat flags are fields of the record itself."""

from __future__ import annotations

from dataclasses import dataclass

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


def short(term: str) -> str:
    """`http://rs.tdwg.org/dwc/terms/locality` -> `locality`; a short name stays as it is."""
    return term.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1]
