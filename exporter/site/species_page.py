"""The parts of a species page that make it read like a field-guide entry (as GBIF, POWO and
iNaturalist lay out a taxon): the name in italics with its authorship, the names it is
also known by, its common name, family and status; the publisher's text or, for an
imported taxon without one, a sentence made from its terms (`sentence`); its distribution
as a list of places, each with its status; its common names by language; the other texts
it was imported with. Each part is HTML, every text from content escaped."""

from __future__ import annotations

import re
from typing import Any

from exporter.contract.scientific_names import name_html
from exporter.project.labels import field_label, value_label
from exporter.site.dates import date_html
from exporter.site.sentence import (
    TERM_TYPES,
    described,
    entries,
    joined,
    native_range,
    place_name,
    species_sentence,
)
from exporter.site.values import escaped, is_shown, markdown_html, scalar_html

# Fields a species page shows in its opening lines or its own sections, not among its facts.
OWN_FIELDS = frozenset({"scientificName", "scientificNameAuthorship", "vernacularName",
                        "family", "category", "synonyms", "distributions", "vernacularNames",
                        "descriptions"})
_LANGUAGE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*", re.ASCII)


def common_name(fields: dict[str, Any]) -> str:
    """A species' common name: its `vernacularName`, or else the first English (or else the
    first) of its imported `vernacularNames`."""
    name = fields.get("vernacularName")
    if isinstance(name, list):
        name = next((n for n in name if isinstance(n, str) and n), "")
    if not name:
        listed = [n for n in fields.get("vernacularNames") or [] if isinstance(n, dict)]
        english = [n for n in listed if n.get("language") == "en"]
        name = next((str(n.get("vernacularName") or "") for n in english or listed), "")
    return str(name or "")


def heading_html(fields: dict[str, Any], title: str) -> str:
    """The page's <h1>: the scientific name in italics, its authorship upright."""
    name = str(fields.get("scientificName") or title)
    author = fields.get("scientificNameAuthorship")
    shown = name_html(name)
    if isinstance(author, str) and author:
        shown += f' <span class="authorship">{escaped(author)}</span>'
    return shown


def _synonym_html(synonym: Any) -> str:
    if isinstance(synonym, dict):
        name = str(synonym.get("scientificName") or "")
        author = str(synonym.get("scientificNameAuthorship") or "")
    else:
        name, author = str(synonym or ""), ""
    if not name:
        return ""
    return name_html(name) + (f" {escaped(author)}" if author else "")


def status_words(fields: dict[str, Any]) -> list[str]:
    """The family and status a species page names under its heading: `Family Poaceae`,
    `Introduced`, `Casual` (its degree of establishment, or its distributions' when they
    share one)."""
    words = []
    if fields.get("family"):
        words.append(f"Family {fields['family']}")
    if isinstance(fields.get("category"), str):
        words.append(value_label("category", fields["category"]))
    degree = fields.get("degreeOfEstablishment")
    if not degree:
        degrees = {str(d["degreeOfEstablishment"]) for d in entries(fields)
                   if d.get("degreeOfEstablishment")}
        degree = degrees.pop() if len(degrees) == 1 else ""
    if isinstance(degree, str) and degree:
        said = value_label("degreeOfEstablishment", degree)
        # ("Invasive alien" says "Invasive", and "Native" says "Native")
        if not words or said.casefold() not in words[-1].casefold().split():
            words.append(said)
    return list(dict.fromkeys(words))


def lead_html(fields: dict[str, Any]) -> str:
    """The lines under the heading: other names, the common name, family and status."""
    out = []
    synonyms = fields.get("synonyms")
    shown = [s for s in map(_synonym_html, synonyms if isinstance(synonyms, list) else [])
             if s]
    if shown:
        said = joined(shown)
        stop = "" if said.endswith(".") else "."
        out.append(f'<p class="synonyms">Also called {said}{stop}</p>\n')
    common = common_name(fields)
    if common:
        out.append(f'<p class="common">{escaped(common)}</p>\n')
    words = status_words(fields)
    if words:
        out.append(f'<p class="status">{" · ".join(escaped(w) for w in words)}</p>\n')
    return "".join(out)


def body_html(fields: dict[str, Any]) -> str:
    """The publisher's text, or the sentence made from the record's terms."""
    body = markdown_html(str(fields.get("body") or ""))
    if body:
        return body
    said = species_sentence(fields)
    return f'<p class="generated">{escaped(said)}</p>\n' if said else ""


def _status_of_place(entry: dict[str, Any]) -> str:
    """`introduced, casual, recorded 1888–2004, by seed contamination`."""
    words = []
    for field in ("establishmentMeans", "degreeOfEstablishment", "occurrenceStatus"):
        value = entry.get(field)
        if isinstance(value, str) and value and not (
                field == "occurrenceStatus" and value == "present"):
            label = value_label(field, value)
            words.append(escaped(label[:1].lower() + label[1:]))
    if entry.get("eventDate"):
        words.append(f"recorded {date_html(str(entry['eventDate']))}")
    pathways = [value_label("pathway", str(p)) for p in entry.get("pathway") or [] if p]
    if pathways:
        words.append("by " + escaped(joined(p[:1].lower() + p[1:] for p in pathways)))
    if entry.get("occurrenceRemarks"):
        words.append(scalar_html(entry["occurrenceRemarks"]))
    return ", ".join(words)


def _place_html(entry: dict[str, Any], inside: list[str]) -> str:
    status = _status_of_place(entry)
    nested = f'\n<ul>{"".join(inside)}</ul>' if inside else ""
    return (f"<li><strong>{escaped(place_name(entry))}</strong>"
            + (f": {status}" if status else "") + f"{nested}</li>")


def _holder(listed: list[dict[str, Any]], n: int) -> int | None:
    """The place that holds place `n` (by location code), one of the same occurrence status
    first: a region absent since 2018 goes under its country absent since then."""
    code = str(listed[n].get("locationID") or "")
    holders = [m for m, d in enumerate(listed) if m != n and d.get("locationID")
               and code.startswith(f"{d['locationID']}-")]
    same = [m for m in holders if listed[m].get("occurrenceStatus")
            == listed[n].get("occurrenceStatus")]
    found = same or holders
    return found[0] if found else None


def places_html(fields: dict[str, Any]) -> str:
    """The distribution as a list of places, each with its status; a region in a list
    under the place that holds it (by location code: `ISO_3166-2:BE-VLG` in
    `ISO_3166-2:BE`)."""
    listed = [d for d in entries(fields) if place_name(d)]
    if not listed:
        return ""
    holder = {n: _holder(listed, n) for n in range(len(listed))}
    items = []
    for n, entry in enumerate(listed):
        if holder[n] is None:
            inside = [_place_html(listed[m], []) for m in holder if holder[m] == n]
            items.append(_place_html(entry, inside))
    return ('<section>\n<h2>Where it grows</h2>\n<ul class="places">\n'
            + "\n".join(items) + "\n</ul>\n</section>\n")


def _name_in(entry: dict[str, Any]) -> str:
    name = escaped(str(entry.get("vernacularName") or ""))
    language = str(entry.get("language") or "")
    if not _LANGUAGE.fullmatch(language):
        return name + (f" ({escaped(language)})" if language else "")
    return f'<span lang="{language}">{name}</span> ({language})'


def names_html(fields: dict[str, Any]) -> str:
    """The common names the record was imported with, each with its language."""
    listed = [n for n in fields.get("vernacularNames") or []
              if isinstance(n, dict) and n.get("vernacularName")]
    if not listed:
        return ""
    items = "".join(f"<li>{_name_in(n)}</li>" for n in listed)
    return f'<section>\n<h2>Common names</h2>\n<ul class="names">{items}</ul>\n</section>\n'


def facts_html(fields: dict[str, Any]) -> str:
    """Facts a species' imported texts hold (rows of the facts' <dl>): its pathways and its
    native range, where the record has no `pathway` or `nativeRange` of its own."""
    rows = []
    introduced = described(fields, "pathway")
    if introduced and not fields.get("pathway"):
        labels = [value_label("pathway", p) for p in introduced]
        rows.append(f"<dt>{escaped(field_label('pathway'))}</dt>"
                    f"<dd>{escaped(', '.join(dict.fromkeys(labels)))}</dd>\n")
    ranges = native_range(fields)
    if ranges and not fields.get("nativeRange"):
        rows.append(f"<dt>{escaped(field_label('nativeRange'))}</dt>"
                    f"<dd>{escaped(joined(ranges))}</dd>\n")
    return "".join(rows)


def texts_html(fields: dict[str, Any]) -> str:
    """The texts the record was imported with, each under its type (those that say one of
    its terms, `TERM_TYPES`, are among its facts)."""
    listed = [d for d in fields.get("descriptions") or []
              if isinstance(d, dict) and is_shown(d.get("description"))
              and str(d.get("type") or "").casefold() not in TERM_TYPES]
    if not listed:
        return ""
    rows = "".join(f"<dt>{escaped(str(d.get('type') or 'Description').capitalize())}</dt>"
                   f"<dd>{scalar_html(d['description'])}</dd>\n" for d in listed)
    return f"<section>\n<h2>Descriptions</h2>\n<dl>\n{rows}</dl>\n</section>\n"


def sections_html(fields: dict[str, Any]) -> str:
    """The species' own sections, before those of records that name it."""
    return places_html(fields) + names_html(fields) + texts_html(fields)
