"""A sentence about a species from its Darwin Core terms, for an imported taxon that has no
text of its own: its page opens with it and search shows it as the record's snippet.

    An alien plant of the Poaceae, introduced in Belgium (Flemish Region and Walloon
    Region) by seed contamination and transport on animals, casual (recorded 1888–2004);
    native to Northern America.

It says only what the record holds: a term the record lacks leaves its words out, and a
record with nothing to say beyond its name has no sentence. Places where the taxon is
absent or its presence uncertain are left to the page's list of places."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from exporter.project.labels import value_label
from exporter.site.dates import date_text

_ABSENT = frozenset({"absent", "excluded", "doubtful", "presence uncertain"})
_ALIEN = frozenset({"introduced", "introducedAssistedColonisation"})
# a code after a region's name: "Europe (WGSRPD:1)"
_CODE = re.compile(r"\s*\([A-Za-z_-]+:[^)]*\)")


def joined(words: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    listed = [word for word in dict.fromkeys(words) if word]
    if len(listed) <= 1:
        return "".join(listed)
    return ", ".join(listed[:-1]) + " and " + listed[-1]


def _lower(label: str) -> str:
    return label[:1].lower() + label[1:] if not label[:2].isupper() else label


def entries(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's distributions, each a dict."""
    return [d for d in fields.get("distributions") or [] if isinstance(d, dict)]


def place_name(entry: dict[str, Any]) -> str:
    """A distribution's place: its locality, else its location or country code."""
    return str(entry.get("locality") or entry.get("locationID") or entry.get("countryCode")
               or "")


def _present(fields: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in entries(fields) if place_name(d)
            and str(d.get("occurrenceStatus") or "present").casefold() not in _ABSENT]


def _places(present: list[dict[str, Any]]) -> str:
    """Places, each region named in brackets after the place that holds it (by location
    code: `ISO_3166-2:BE-VLG` within `ISO_3166-2:BE`)."""
    codes = [str(d.get("locationID") or "") for d in present]
    inside: dict[int, list[str]] = {}
    tops = []
    for n, entry in enumerate(present):
        holder = next((m for m, code in enumerate(codes) if code and m != n and codes[n]
                       .startswith(code + "-")), None)
        if holder is None:
            tops.append(n)
        else:
            inside.setdefault(holder, []).append(place_name(entry))
    return joined(place_name(present[n]) + (f" ({joined(inside[n])})" if n in inside else "")
                  for n in tops)


# The types of a species' imported texts that say one of its terms, as checklists of the
# TrIAS and GRIIS families write them: the page and the sentence read them as that term.
TERM_TYPES = {"native range": "nativeRange", "pathway": "pathway"}


def described(fields: dict[str, Any], kind: str) -> list[str]:
    """The record's imported texts of one type (`native range`, `pathway`)."""
    return [str(d.get("description") or "") for d in fields.get("descriptions") or []
            if isinstance(d, dict) and str(d.get("type") or "").casefold() == kind]


def native_range(fields: dict[str, Any]) -> list[str]:
    """Where the taxon is native: its `nativeRange`, or its descriptions of that type,
    without the codes of their regions."""
    ranges = [str(fields.get("nativeRange") or ""), *described(fields, "native range")]
    return [r for r in dict.fromkeys(_CODE.sub("", text).strip() for text in ranges) if r]


def pathways(fields: dict[str, Any], present: list[dict[str, Any]]) -> list[str]:
    """How the taxon was introduced: its places' pathways, else the record's own, else its
    descriptions of that type (each a CBD pathway term)."""
    found = [str(p) for d in present for p in d.get("pathway") or [] if p]
    if not found and fields.get("pathway"):
        found = [str(fields["pathway"])]
    return found or [p for p in described(fields, "pathway") if p]


def _native_clause(ranges: list[str]) -> str:
    origins = [r for r in ranges if r.casefold().endswith(" origin")]
    traits = [r for r in ranges if r not in origins and " " not in r
              and r.casefold().endswith(("an", "al"))]  # pan-American, pantropical
    places = [r for r in ranges if r not in origins and r not in traits]
    clauses = [f"of {joined(origins)}" if origins else "",
               f"native to {joined(places)}" if places else "",
               f"{joined(t.lower() for t in traits)} in its native range" if traits else ""]
    return ", ".join(c for c in clauses if c)


def _establishment(fields: dict[str, Any], present: list[dict[str, Any]], kind: str) -> str:
    """`introduced in Belgium by horticulture`: how the taxon came to each place, and by
    what pathways; or the record's own terms where it has no distribution."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in present:
        groups.setdefault(str(entry.get("establishmentMeans") or ""), []).append(entry)
    if not groups and fields.get("establishmentMeans"):
        groups[str(fields["establishmentMeans"])] = []
    clauses = []
    for means, where in groups.items():
        verb = _lower(value_label("establishmentMeans", means)) if means and means != \
            "uncertain" else "present"
        clauses.append(f"{verb} in {_places(where)}" if where else
                       "" if verb in ("present", *kind.split()) else verb)
    by = joined(_lower(value_label("pathway", p)) for p in pathways(fields, present))
    if by:
        clauses = clauses or ["introduced"]
        clauses[-1] = f"{clauses[-1]} by {by}".strip()
    return ", ".join(c for c in clauses if c)


def _degree(fields: dict[str, Any], present: list[dict[str, Any]], kind: str) -> str:
    """`casual (recorded 1888–2004)`, or for degrees that differ by place, each with its
    place; `recorded 1888–2004` alone where the degree goes without saying (an invasive
    alien plant is not said to be invasive twice, nor a native one native) or is not
    given."""
    rated = [(place_name(d), str(d["degreeOfEstablishment"]), str(d.get("eventDate") or ""))
             for d in present if d.get("degreeOfEstablishment")]
    if not rated and fields.get("degreeOfEstablishment"):
        rated = [("", str(fields["degreeOfEstablishment"]), "")]
    said = [r for r in rated if _lower(value_label("degreeOfEstablishment", r[1]))
            not in kind.split()]
    if not said:
        dates = {w for _, _, w in rated if w} if rated else {
            str(d["eventDate"]) for d in present if d.get("eventDate")}
        return f"recorded {date_text(dates.pop())}" if len(dates) == 1 else ""
    degrees = {degree for _, degree, _ in said}
    words = []
    for place, degree, when in said if len(degrees) > 1 else said[:1]:
        word = _lower(value_label("degreeOfEstablishment", degree))
        if len(degrees) > 1:
            word += f" in {place}"
        dates = {when} - {""} if len(degrees) > 1 else {w for _, _, w in said if w}
        if len(dates) == 1:
            word += f" (recorded {date_text(dates.pop())})"
        words.append(word)
    return ", ".join(dict.fromkeys(words))


def _kind(fields: dict[str, Any]) -> str:
    """`invasive alien plant`, `alien plant`, `native plant`, `plant`."""
    category = fields.get("category")
    means = {str(d.get("establishmentMeans")) for d in entries(fields)}
    means.add(str(fields.get("establishmentMeans")))
    status = ("invasive alien" if category == "invasive" else
              "alien" if category == "introduced" or means & _ALIEN else
              "native" if category == "native" or "native" in means else "")
    kingdom = str(fields.get("kingdom") or "Plantae")
    return f"{status} {'plant' if kingdom == 'Plantae' else 'organism'}".strip()


def species_sentence(fields: dict[str, Any]) -> str:
    """The sentence (see the module's docstring), or "" when the record's terms say no more
    than that it is a plant."""
    present = _present(fields)
    kind = _kind(fields)
    family = f" of the {fields['family']}" if fields.get("family") else ""
    parts = [_establishment(fields, present, kind), _degree(fields, present, kind)]
    native = _native_clause(native_range(fields))
    said = ", ".join(part for part in parts if part)
    if not (family or said or native or kind != "plant"):
        return ""
    article = "An" if kind[:1] in "aeiou" else "A"
    text = f"{article} {kind}{family}" + (f", {said}" if said else "")
    return text + (f"; {native}" if native else "") + "."
