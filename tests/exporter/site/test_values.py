"""A record's values and body as HTML (`exporter.site.values`): nested records as tables,
booleans as yes/no, URLs as links, and Markdown rendered as CommonMark with nothing from
content able to add a tag, an attribute or a script URL."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.site.values import markdown_html, safe_url, scalar_html, value_html


def test_nested_records_are_tables_with_a_column_per_key() -> None:
    """Each column by its field's label, each controlled value by its own (a key the table
    does not know, readably)."""
    shown = value_html([
        {"locationID": "ISO_3166-2:BE-WAL", "locality": "Walloon Region",
         "pathway": ["horticulture", "seedContaminant"]},
        {"locationID": "ISO_3166-2:BE", "isNative": False}])
    assert "{" not in shown and "'" not in shown
    assert shown.count("<tr>") == 3  # the header and a row per record
    assert '<th scope="col">Place code</th>' in shown
    assert '<th scope="col">Is native</th>' in shown
    assert "<td>Horticulture, Seed contamination</td>" in shown
    assert "<td>no</td>" in shown and "<td></td>" in shown  # a key one record lacks


def test_one_record_is_a_table_of_its_names_and_values() -> None:
    shown = value_html({"vernacularName": "Himalayan balsam", "language": "en", "note": ""})
    assert '<th scope="row">Common name</th><td>Himalayan balsam</td>' in shown
    assert "Note" not in shown  # an empty value has no row


def test_booleans_are_yes_or_no_and_urls_are_links() -> None:
    assert (value_html(True), value_html(False)) == ("yes", "no")
    assert value_html("https://example.org/a?b=1&c=2") == (
        '<a href="https://example.org/a?b=1&amp;c=2">https://example.org/a?b=1&amp;c=2</a>')
    cited = scalar_html("Checklist dataset https://doi.org/10.15468/guejza.")
    assert cited == ('Checklist dataset <a href="https://doi.org/10.15468/guejza">'
                     "https://doi.org/10.15468/guejza</a>.")
    assert scalar_html("javascript:alert(1)") == "javascript:alert(1)"
    assert scalar_html('<b title="x">') == "&lt;b title=&#34;x&#34;&gt;"


def test_markdown_is_commonmark_with_headings_below_the_title() -> None:
    shown = markdown_html("# Control\n\nPull *before* seeding, **twice**.\n\n"
                          "- by hand\n- by [scythe](https://example.org/scythe)\n\n"
                          "### Aftercare\n")
    assert "<h2>Control</h2>" in shown and "<h4>Aftercare</h4>" in shown
    assert "<em>before</em>" in shown and "<strong>twice</strong>" in shown
    assert "<ul>\n<li>by hand</li>" in shown
    assert '<a href="https://example.org/scythe">scythe</a>' in shown
    assert "<h2>Steps</h2>" in markdown_html("### Steps\n")  # no level skipped after <h1>
    assert markdown_html("  \n") == ""


# What CommonMark makes, with the attributes it writes: anything else came from content.
TAGS = {"p": set(), "em": set(), "strong": set(), "ul": set(), "ol": {"start"},
        "li": set(), "h2": set(), "h3": set(), "h4": set(), "h5": set(), "h6": set(),
        "blockquote": set(), "pre": set(), "code": {"class"}, "hr": set(), "br": set(),
        "a": {"href", "title"}, "img": {"src", "alt", "title"}}
SCRIPT_URLS = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)",
               "java\tscript:alert(1)", "&#106;avascript:alert(1)", "javascript&#58;alert(1)",
               "&#x6A;avascript:x", "vbscript:msgbox(1)", "data:text/html,<script>x</script>",
               "\x01javascript:x", "javascript%3Aalert(1)", "file:///etc/passwd"]
SAFE_URLS = ["https://example.org/a", "http://example.org", "mailto:a@example.org",
             "/species/", "#top", "notes.html"]
HTML = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
        '<a href="javascript:alert(1)">x</a>', "<div style=\"x\">", "<iframe src=//e.org>",
        "<!-- c -->", "<svg onload=alert(1)>", "</p><p onclick=x>", "<b title='t'>b</b>",
        '<a href="https://example.org" onmouseover="x">y</a>', "<SCRIPT SRC=//e.org/x.js>"]


@st.composite
def hostile_markdown(draw: st.DrawFn) -> str:
    """Markdown mixing CommonMark syntax with raw HTML and script URLs in every place a URL
    may go: inline links, images, autolinks, reference definitions."""
    url = st.sampled_from(SCRIPT_URLS + SAFE_URLS)
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
    piece = st.one_of(
        st.sampled_from(HTML), text,
        st.builds("[{}]({})".format, text, url), st.builds("![{}]({})".format, text, url),
        st.builds("<{}>".format, url), st.builds("[r]\n\n[r]: {}\n".format, url),
        st.builds('[{}]({} "{}")'.format, text, url, st.sampled_from(HTML)),
        st.sampled_from(["# ", "- ", "1. ", "> ", "**", "*", "`", "```\n", "\n\n", "    "]))
    return "".join(draw(st.lists(piece, max_size=12)))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(body=hostile_markdown())
def test_no_tag_attribute_or_script_url_from_content_reaches_the_page(body: str) -> None:
    shown = markdown_html(body)
    parser = _Tags()
    parser.feed(shown)
    parser.close()
    assert not re.search(r"<(script|iframe|svg|div|b|!--)[\s>/]", shown, re.I), shown
    for tag, attrs in parser.found:
        assert tag in TAGS, (tag, shown)
        for name, value in attrs:
            assert name in TAGS[tag], (tag, name, shown)
            if name in ("href", "src"):
                assert safe_url(value or ""), (value, shown)
                squeezed = re.sub(r"[\x00-\x20\x7f]+", "", value or "").lower()
                assert not squeezed.startswith(("javascript:", "vbscript:", "data:",
                                                "file:")), (value, shown)


def test_only_http_https_mailto_and_relative_urls_are_safe() -> None:
    assert all(safe_url(url) for url in SAFE_URLS)
    assert not any(safe_url(url) for url in ["javascript:x", " JAVASCRIPT:x", "java\nscript:x",
                                             "data:x", "vbscript:x", "file:///x"])
