"""Charts drawn at export, as SVG inside the page: no script, no library, nothing fetched.

`germination_chart` draws a species' germination results: the share of seeds germinated for
each setting (nursery, field) and pretreatment, one bar each, summed over the results of
that setting and pretreatment (counts by name, a hub's records by member, are
`exporter.shared.bars`'). A chart is a picture (`role="img"`, named by its title); the
numbers it draws are in a table beside it, which screen readers read and anyone can copy.

Each drawing's size is fixed (`WIDTH`); the page's style sheet shrinks it to a narrow
screen. Labels longer than a bar's width are shortened in the picture, never in the table."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from markupsafe import escape

from exporter.site.served import Rendered, json_of

GERMINATION = "Germination results"  # the species page's section the chart goes in
WIDTH = 360  # the drawing's width, in CSS pixels at its largest
TRACK = 300  # a bar's length at 100%
LABEL_CHARS = 52  # the longest label drawn (at 12 px, about WIDTH)
ROW = 46  # height of one bar with its label above it
COLOURS = {"nursery": "#1f5f2e", "field": "#8a4f00"}
OTHER = "#4a5a4a"
SETTINGS = {"nursery": "Nursery", "field": "Field"}


class Group(NamedTuple):
    """The results of one setting and pretreatment, summed."""

    setting: str
    pretreatment: str
    results: int
    sown: int
    germinated: int

    @property
    def label(self) -> str:
        setting = SETTINGS.get(self.setting, self.setting.capitalize() or "Unknown setting")
        return f"{setting}: {self.pretreatment or 'no pretreatment given'}"

    @property
    def share(self) -> float:
        return self.germinated / self.sown

    @property
    def percent(self) -> str:
        return f"{100 * self.share:.0f}%"


def groups(records: Iterable[Mapping[str, Any]]) -> list[Group]:
    """The germination results summed by setting and pretreatment, nursery first, then by
    pretreatment. A result without seeds sown (or with a count that is not a whole number)
    has no share and is left out."""
    summed: dict[tuple[str, str], list[int]] = {}
    for record in records:
        sown, germinated = _count(record.get("seedsSown")), _count(record.get("seedsGerminated"))
        if sown is None or germinated is None or sown < 1:
            continue
        key = (str(record.get("setting") or ""), " ".join(str(record.get("pretreatment")
                                                             or "").split()))
        found = summed.setdefault(key, [0, 0, 0])
        found[0] += 1
        found[1] += sown
        found[2] += germinated
    order = list(SETTINGS)
    return [Group(setting, pretreatment, *numbers) for (setting, pretreatment), numbers in
            sorted(summed.items(), key=lambda item: (
                order.index(item[0][0]) if item[0][0] in order else len(order), item[0]))]


def _count(value: object) -> int | None:
    """A count of seeds, or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def germination_chart(records: Iterable[Mapping[str, Any]]) -> str:
    """A species' germination results (their fields, as served) as a figure: an SVG bar
    chart of the share germinated by setting and pretreatment, and a table of the same
    numbers. "" when no result has seeds sown."""
    found = groups(records)
    if not found:
        return ""
    results = sum(g.results for g in found)
    caption = (f"Share of seeds germinated, by setting and pretreatment, over {results} "
               f"result{'s' if results != 1 else ''}.")
    return (f'<figure class="chart">\n<figcaption>{escape(caption)}</figcaption>\n'
            f"{_svg(found)}\n{_table(found)}\n</figure>\n")


def _svg(found: list[Group]) -> str:
    height = ROW * len(found) + 4
    bars = []
    for n, g in enumerate(found):
        top = ROW * n + 4
        colour = COLOURS.get(g.setting, OTHER)
        label = g.label if len(g.label) <= LABEL_CHARS else g.label[:LABEL_CHARS - 1] + "…"
        length = round(TRACK * min(g.share, 1.0), 1)
        bars.append(
            f'<text x="0" y="{top + 12}">{escape(label)}</text>'
            f'<rect x="0" y="{top + 18}" width="{TRACK}" height="16" fill="#e4ebe4"/>'
            f'<rect x="0" y="{top + 18}" width="{length:g}" height="16" fill="{colour}"/>'
            f'<text x="{TRACK + 6}" y="{top + 31}">{g.percent}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" role="img" '
            f'aria-labelledby="germination-chart-title" font-family="system-ui, sans-serif" '
            f'font-size="12" fill="#1d2a1d">'
            f'<title id="germination-chart-title">Bar chart: share of seeds germinated, by '
            f"setting and pretreatment; the table below gives the numbers</title>"
            + "".join(bars) + "</svg>")


def _table(found: list[Group]) -> str:
    rows = "".join(f'<tr><th scope="row">{escape(g.label)}'
                   f"{f' ({g.results} results)' if g.results > 1 else ''}</th>"
                   f"<td>{g.sown:,}</td><td>{g.germinated:,}</td><td>{g.percent}</td></tr>\n"
                   for g in found)
    return ('<table class="numbers">\n<caption>Seeds sown and germinated, by setting and '
            'pretreatment</caption>\n<thead><tr><th scope="col">Setting and pretreatment</th>'
            '<th scope="col">Sown</th><th scope="col">Germinated</th>'
            '<th scope="col">Share</th></tr></thead>\n'
            f"<tbody>\n{rows}</tbody>\n</table>")


def species_charts(links: list[tuple[str, Rendered]]) -> dict[str, str]:
    """The charts of a species page, by the section they open (`pages.NAMES_SPECIES`),
    from its related records (`links`): its germination results' chart."""
    results = [other for section, other in links if section == GERMINATION]
    chart = germination_chart(json.loads(served) for served in json_of(results))
    return {GERMINATION: chart} if chart else {}


def chart_prints(links: list[tuple[str, Rendered]]) -> list[str]:
    """What a page's charts are drawn from, for its fingerprint: the render key of each
    germination result it links to (which changes with its numbers), and this module."""
    keys = [other.key for section, other in links if section == GERMINATION]
    return [_digest(), *keys] if keys else []


@functools.cache
def _digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
