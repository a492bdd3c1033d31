"""A bar chart of counts by name, as SVG inside a page (no script, nothing fetched), with
the same numbers in a table beside it: a hub's public records by member, drawn by the
export on the hub's home page and by the sidecar on each taxon's page. The picture is
named by its title (`role="img"`), which says every count; the table is what screen
readers read and anyone can copy. Names longer than LABEL_CHARS are shortened in the
picture only."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH = 360  # the drawing's width, in CSS pixels at its largest (a page's style shrinks it)
TRACK = 300  # the longest bar's length
LABEL_CHARS = 52  # the longest name drawn (at 12 px, about WIDTH)
ROW = 46  # height of one bar with its name above it
COLOUR = "#4a5a4a"


def count_chart(counts: Sequence[tuple[str, int]], about: str, about_html: str,
                column: str, chart_id: str) -> str:
    """A bar for each (name, count), the longest TRACK wide, its name and count above it,
    with the same numbers in a table beside it. `about` says what is counted, as text (the
    picture's title) and as HTML (its caption and the table's); `column` heads the names;
    `chart_id` names the picture's title, unique on its page."""
    most = max((count for _, count in counts), default=1) or 1
    height = ROW * len(counts) + 4
    said = "; ".join(f"{name}: {count}" for name, count in counts)
    bars = []
    for n, (name, count) in enumerate(counts):
        top = ROW * n + 4
        label = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
        bars.append(f'<text x="0" y="{top + 12}">{escape(label)} ({count:,})</text>'
                    f'<rect x="0" y="{top + 18}" width="{max(2, round(TRACK * count / most))}" '
                    f'height="16" fill="{COLOUR}"/>')
    rows = "".join(f'<tr><th scope="row">{escape(name)}</th><td>{count:,}</td></tr>\n'
                   for name, count in counts)
    return (f'<figure class="chart">\n<figcaption>{about_html}</figcaption>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" role="img" aria-labelledby="{chart_id}" '
            f'font-family="system-ui, sans-serif" font-size="12" fill="#1d2a1d">'
            f'<title id="{chart_id}">{escape(about)}: {escape(said)}</title>'
            + "".join(bars) + "</svg>\n"
            f'<table class="numbers">\n<caption>{about_html}</caption>\n<thead><tr>'
            f'<th scope="col">{escape(column)}</th><th scope="col">Records</th></tr></thead>\n'
            f"<tbody>\n{rows}</tbody>\n</table>\n</figure>\n")
