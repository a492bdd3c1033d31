"""How a page writes a scientific name: in italics, its rank words, the hybrid sign and
the marks of an informal name upright (`<i>Aster amellus</i> subsp. <i>bessarabicus</i>`).
The export's pages, the sidecar's search results and the search page's script
(exporter/site/templates/search.js, given UPRIGHT by the page) all write names this way."""

from __future__ import annotations

from markupsafe import escape

UPRIGHT = frozenset({"subsp.", "ssp.", "var.", "subvar.", "f.", "forma", "nothosubsp.",
                     "nsubsp.", "nothovar.", "cv.", "x", "×", "agg.", "s.l.", "s.str.", "sp.",
                     "spec.", "spp.", "aff.", "cf.", "sect.", "subg.", "ser."})


def is_upright(word: str) -> bool:
    """Whether a word of a name is not italic: a rank word, `×`, or a bracketed part."""
    return word.casefold() in UPRIGHT or word.startswith(("(", "["))


def name_html(name: str) -> str:
    """A scientific name as HTML: runs of italic words in one `<i>` each, escaped."""
    runs: list[tuple[bool, list[str]]] = []
    for word in name.split():
        italic = not is_upright(word)
        if runs and runs[-1][0] == italic:
            runs[-1][1].append(word)
        else:
            runs.append((italic, [word]))
    return " ".join(f"<i>{escape(' '.join(words))}</i>" if italic
                    else str(escape(" ".join(words))) for italic, words in runs)
