"""The parts of a species page: its opening lines, its places, its common names."""

from __future__ import annotations

from exporter.site.species_page import lead_html, names_html, places_html


def test_the_opening_names_the_species_its_synonyms_family_and_status() -> None:
    lead = lead_html({
        "scientificName": "Reynoutria japonica", "vernacularName": "Japanese knotweed",
        "family": "Polygonaceae", "category": "invasive",
        "degreeOfEstablishment": "widespreadInvasive",
        "synonyms": ["Fallopia japonica",
                     {"scientificName": "Polygonum cuspidatum",
                      "scientificNameAuthorship": "Siebold & Zucc."}]})
    assert lead == (
        '<p class="synonyms">Also called <i>Fallopia japonica</i> and <i>Polygonum '
        "cuspidatum</i> Siebold &amp; Zucc.</p>\n"
        '<p class="common">Japanese knotweed</p>\n'
        '<p class="status">Family Polygonaceae · Invasive alien · Widespread invasive</p>\n')
    assert lead_html({"scientificName": "Aus bus"}) == ""


def test_places_are_a_list_with_regions_under_their_country() -> None:
    shown = places_html({"distributions": [
        {"locationID": "ISO_3166-2:BE-VLG", "locality": "Flemish Region",
         "establishmentMeans": "introduced"},
        {"locationID": "ISO_3166-2:BE", "locality": "Belgium", "establishmentMeans":
         "introduced", "degreeOfEstablishment": "casual", "eventDate": "2019",
         "pathway": ["seedContaminant"]},
        {"locationID": "ISO_3166-2:BE", "locality": "Belgium", "occurrenceStatus": "absent"},
        {"locationID": "ISO_3166-2:BE-VLG", "locality": "Flemish Region",
         "occurrenceStatus": "absent"},
        {"locality": "<Brussels>", "occurrenceStatus": "absent"}]})
    assert ("<li><strong>Belgium</strong>: introduced, casual, recorded "
            '<time datetime="2019">2019</time>, by seed contamination\n'
            "<ul><li><strong>Flemish Region</strong>: introduced</li></ul></li>") in shown
    assert ("<li><strong>Belgium</strong>: absent\n"
            "<ul><li><strong>Flemish Region</strong>: absent</li></ul></li>") in shown
    assert "<li><strong>&lt;Brussels&gt;</strong>: absent</li>" in shown


def test_common_names_carry_their_language() -> None:
    shown = names_html({"vernacularNames": [
        {"vernacularName": "Reuzenbalsemien", "language": "nl"},
        {"vernacularName": "Balsam", "language": "not a code"}]})
    assert '<li><span lang="nl">Reuzenbalsemien</span> (nl)</li>' in shown
    assert "<li>Balsam (not a code)</li>" in shown
