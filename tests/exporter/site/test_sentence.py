"""The sentence made from an imported taxon's terms: only what the record holds."""

from __future__ import annotations

from exporter.site.sentence import species_sentence

CENCHRUS = {
    "scientificName": "Cenchrus longispinus", "family": "Poaceae", "kingdom": "Plantae",
    "category": "introduced",
    "distributions": [
        {"locationID": "ISO_3166-2:BE-VLG", "locality": "Flemish Region",
         "occurrenceStatus": "present", "establishmentMeans": "introduced"},
        {"locationID": "ISO_3166-2:BE-BRU", "locality": "Brussels-Capital Region",
         "occurrenceStatus": "absent", "establishmentMeans": "introduced"},
        {"locationID": "ISO_3166-2:BE", "locality": "Belgium", "occurrenceStatus": "present",
         "establishmentMeans": "introduced", "degreeOfEstablishment": "casual",
         "eventDate": "1888/2004", "pathway": ["seedContaminant", "contaminantOnAnimals"]}],
    "descriptions": [{"description": "Northern America (WGSRPD:7)", "type": "native range"}],
}


def test_an_imported_taxon_is_said_in_one_sentence() -> None:
    assert species_sentence(CENCHRUS) == (
        "An alien plant of the Poaceae, introduced in Belgium (Flemish Region) by seed "
        "contamination and transport on animals, casual (recorded 1888–2004); native to "
        "Northern America.")


def test_missing_terms_leave_their_words_out() -> None:
    assert species_sentence({"scientificName": "Aus bus"}) == ""
    assert species_sentence({"family": "Poaceae"}) == "A plant of the Poaceae."
    assert species_sentence({"category": "invasive", "degreeOfEstablishment": "invasive",
                             "pathway": "horticulture"}) == (
        "An invasive alien plant, introduced by horticulture.")
    only_absent = {"distributions": [{"locality": "Flanders", "occurrenceStatus": "absent",
                                      "establishmentMeans": "introduced"}]}
    assert species_sentence(only_absent) == "An alien plant."
    origin = {"descriptions": [{"description": "cultivated origin", "type": "native range"},
                               {"description": "Pantropical", "type": "native range"}]}
    assert species_sentence(origin) == (
        "A plant; of cultivated origin, pantropical in its native range.")


def test_places_that_differ_are_each_said() -> None:
    fields = {"distributions": [
        {"locality": "Flanders", "establishmentMeans": "native"},
        {"locality": "Wallonia", "establishmentMeans": "introduced",
         "degreeOfEstablishment": "casual", "eventDate": "2008/2017"},
        {"locality": "Brussels", "establishmentMeans": "introduced",
         "degreeOfEstablishment": "established", "pathway": ["escape:horticulture"]}]}
    assert species_sentence(fields) == (
        "An alien plant, native in Flanders, introduced in Wallonia and Brussels by "
        "horticulture, casual in Wallonia (recorded 2008–2017), established in Brussels.")


def test_texts_that_say_a_term_are_read_as_it() -> None:
    """A checklist that gives pathways and native ranges as typed descriptions (RINSE,
    GRIIS) is said as one that gives them as terms."""
    fields = {"distributions": [{"locality": "France", "establishmentMeans": "introduced",
                                 "eventDate": "1992/2017"}],
              "descriptions": [{"type": "pathway", "description": "cbd_2014_pathway:release"},
                               {"type": "Native range", "description": "Australia"}]}
    assert species_sentence(fields) == (
        "An alien plant, introduced in France by release in nature, recorded 1992–2017; "
        "native to Australia.")


def test_a_degree_that_goes_without_saying_keeps_its_dates() -> None:
    fields = {"category": "invasive", "family": "Balsaminaceae", "distributions": [
        {"locality": "Belgium", "establishmentMeans": "introduced",
         "degreeOfEstablishment": "invasive", "eventDate": "1891/2025",
         "pathway": ["horticulture"]}]}
    assert species_sentence(fields) == (
        "An invasive alien plant of the Balsaminaceae, introduced in Belgium by horticulture, "
        "recorded 1891–2025.")
