"""The germination chart of a species page (`exporter.site.charts`): a well-formed SVG drawn at
export with one bar per setting and pretreatment, the numbers it draws in a table beside it,
nothing where there is nothing to draw; on the exported sample, the numbers of the records."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from exporter.contract.page_urls import record_href
from exporter.contract.wire import PUBLIC
from exporter.pipeline.build import load
from exporter.project.config import Project
from exporter.site.charts import TRACK, germination_chart

SVG = "{http://www.w3.org/2000/svg}"


def drawn(markup: str) -> ET.Element:
    """The chart's SVG, parsed as XML (it must be well-formed on its own)."""
    found = re.search(r"<svg .*?</svg>", markup, re.S)
    assert found, markup
    svg = ET.fromstring(found.group())
    assert svg.tag == f"{SVG}svg" and svg.get("role") == "img"
    title = svg.find(f"{SVG}title")
    assert title is not None and svg.get("aria-labelledby") == title.get("id")
    return svg


def bars(svg: ET.Element) -> list[tuple[str, float, str]]:
    """Each bar drawn: its label, its length and the share written after it."""
    texts = [t.text or "" for t in svg.iter(f"{SVG}text")]
    rects = [float(r.get("width", "")) for r in svg.iter(f"{SVG}rect")]
    # each bar: its label, a track of full length, the bar, its share
    assert len(texts) == 2 * (len(rects) // 2) and rects[0::2] == [TRACK] * (len(rects) // 2)
    return list(zip(texts[0::2], rects[1::2], texts[1::2], strict=True))


def rows(markup: str) -> list[list[str]]:
    """The table's rows: the heading cell, then the numbers."""
    body = re.search(r"<tbody>(.*?)</tbody>", markup, re.S)
    assert body, markup
    return [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1))]


def test_each_setting_and_pretreatment_is_a_bar_with_its_numbers_in_the_table() -> None:
    records = [
        {"setting": "field", "pretreatment": "None", "seedsSown": 1000, "seedsGerminated": 64},
        {"setting": "nursery", "pretreatment": "Cold <moist> & dark", "seedsSown": 200,
         "seedsGerminated": 118},
        {"setting": "nursery", "pretreatment": "Cold <moist>  & dark", "seedsSown": 100,
         "seedsGerminated": 32},
        {"setting": "nursery", "pretreatment": "None", "seedsSown": 50, "seedsGerminated": 50},
        {"setting": "field", "seedsSown": 0, "seedsGerminated": 0},  # no share: left out
        {"setting": "field", "seedsSown": "many", "seedsGerminated": 3},  # the same
    ]
    markup = germination_chart(records)
    svg = drawn(markup)
    assert bars(svg) == [("Nursery: Cold <moist> & dark", 150.0, "50%"),
                         ("Nursery: None", 300.0, "100%"),
                         ("Field: None", 19.2, "6%")]
    assert rows(markup) == [["Nursery: Cold &lt;moist&gt; &amp; dark (2 results)", "300", "150",
                             "50%"],
                            ["Nursery: None", "50", "50", "100%"],
                            ["Field: None", "1,000", "64", "6%"]]
    assert "over 4 results" in markup
    assert "<script" not in markup and "href" not in markup  # nothing fetched, nothing run


def test_a_long_label_is_shortened_in_the_picture_only() -> None:
    long = "Sixty days of cold moist stratification in sand, then two weeks warm, " * 3
    markup = germination_chart([{"setting": "nursery", "pretreatment": long, "seedsSown": 10,
                                 "seedsGerminated": 20}])
    (label, length, share), = bars(drawn(markup))
    assert label.endswith("…") and len(label) < 60 and long.startswith(label[9:-1])
    assert (length, share) == (TRACK, "200%")  # more than sown: drawn full, written as is
    assert rows(markup)[0][0] == f"Nursery: {' '.join(long.split())}"


def test_no_result_with_seeds_sown_draws_nothing() -> None:
    assert germination_chart([]) == ""
    assert germination_chart([{"setting": "field", "seedsSown": 0, "seedsGerminated": 0},
                              {"setting": "nursery", "pretreatment": "None"}]) == ""


def test_each_species_page_charts_its_public_germination_results(sample_root: Path) -> None:
    """The chart sums the public results only: a restricted one of the sample names a public
    species with no public result, whose page has no chart."""
    content = load(Project(sample_root))
    public = [r for r in content.records if r.access == PUBLIC]
    named = {str(r.fields["scientificName"]) for r in public if r.collection == "species"}
    hidden = {str(r.fields["species"]) for r in content.records
              if r.collection == "germination" and r.access != PUBLIC} & named
    assert hidden
    results: dict[str, list[dict[str, object]]] = defaultdict(list)
    for r in public:
        if r.collection == "germination":
            results[str(r.fields["species"])].append(r.fields)
    charted = 0
    for r in public:
        if r.collection != "species":
            continue
        page = (sample_root / "site_out" / record_href("species", r.id).lstrip("/")).read_text()
        found = results.get(str(r.fields["scientificName"]), [])
        if not found:
            assert "<svg" not in page and 'class="chart"' not in page
            hidden.discard(str(r.fields["scientificName"]))
            continue
        charted += 1
        figure = re.search(r'<figure class="chart">.*?</figure>', page, re.S)
        assert figure, r.path
        # the table's numbers are the records' sums, by setting and pretreatment
        sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for fields in found:
            setting = str(fields["setting"]).capitalize()
            key = f"{setting}: {' '.join(str(fields.get('pretreatment') or '').split())}"
            sums[key][0] += int(str(fields["seedsSown"]))
            sums[key][1] += int(str(fields["seedsGerminated"]))
        table = {re.sub(r" \(\d+ results\)$", "", head): [int(sown.replace(",", "")),
                                                          int(germinated.replace(",", ""))]
                 for head, sown, germinated, _ in rows(figure.group())}
        assert {html.unescape(k): v for k, v in table.items()} == dict(sums), r.path
        assert len(bars(drawn(figure.group()))) == len(sums)
    assert charted >= 5
    assert hidden == set()  # each species of a restricted result was looked at
