"""Labels and values as people read them: one table (`exporter/project/schemas/labels.json`)
names every field and controlled value of every schema; dates are words in `<time>`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from exporter.contract.scientific_names import name_html
from exporter.project.labels import field_label, labels, readable, value_label
from exporter.project.schemas import collections
from exporter.site.dates import date_html, date_text
from exporter.site.values import plain_text


def _properties(properties: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field of a schema, nested ones (a distribution's) included."""
    for name, spec in properties.items():
        yield name, spec
        nested = (spec.get("items") or {}).get("properties")
        if nested:
            yield from _properties(nested)


def test_every_field_and_controlled_value_of_every_schema_has_a_label() -> None:
    table = labels()
    missing = []
    for collection in collections().values():
        for name, spec in _properties(collection.schema["properties"]):
            if name not in table.fields:
                missing.append(f"{collection.name}.{name}")
            for value in spec.get("enum") or (spec.get("items") or {}).get("enum") or []:
                if value not in table.values.get(name, {}):
                    missing.append(f"{collection.name}.{name} = {value}")
    assert not missing, missing
    known = {name for c in collections().values()
             for name, _ in _properties(c.schema["properties"])}
    assert table.data <= known and set(table.values) <= known


def test_values_read_as_words_and_unknown_ones_readably() -> None:
    assert value_label("degreeOfEstablishment", "widespreadInvasive") == "Widespread invasive"
    assert value_label("establishmentMeans", "introduced") == "Introduced"
    for written in ("horticulture", "escape:horticulture", "cbd_2014_pathway:escape_horticulture",
                    "Horticulture"):
        assert value_label("pathway", written) == "Horticulture", written
    assert value_label("pathway", "escape:somethingNew") == "Something new"
    assert value_label("habitat", "riverBanks") == "riverBanks"  # free text stays as it is
    assert field_label("nativeRange") == "Native range"
    assert field_label("someNewTerm") == readable("someNewTerm") == "Some new term"
    assert readable("ISO_code") == "ISO code"


def test_dates_are_words_with_the_machine_time_kept() -> None:
    assert date_text("2026-11-21T09:08:14Z") == "21 November 2026"
    assert date_text("2016-05") == "May 2016" and date_text("1888/2004") == "1888–2004"
    assert date_text("spring 2019") == "spring 2019" and date_text("2019-13-01") == "2019-13-01"
    assert date_html("2026-11-21T09:08:14Z") == (
        '<time datetime="2026-11-21T09:08:14Z">21 November 2026</time>')
    assert date_html("1888/2004") == ('<time datetime="1888">1888</time>–'
                                      '<time datetime="2004">2004</time>')
    assert date_html("<b>") == "&lt;b&gt;"


def test_scientific_names_are_italic_but_their_rank_words() -> None:
    assert name_html("Impatiens glandulifera") == "<i>Impatiens glandulifera</i>"
    assert name_html("Mentha x piperita") == "<i>Mentha</i> x <i>piperita</i>"
    assert name_html("Aster amellus subsp. bessarabicus") == (
        "<i>Aster amellus</i> subsp. <i>bessarabicus</i>")
    assert name_html("<script>") == "<i>&lt;script&gt;</i>"


def test_markdown_as_plain_text() -> None:
    text = plain_text("# Control\n\n**Phase 1:** pull *before* [seeding](https://x.org).\n"
                      "Next line.\n\n- by hand\n- `twice`\n")
    assert text == "Control\nPhase 1: pull before seeding. Next line.\nby hand\ntwice"
