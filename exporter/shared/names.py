"""Splitting a scientific name into the name and its authorship, with GBIF's name parser
(`gbif-name-parser` on PyPI: the Rust port of GBIF's own parser, importable as `nameparser`;
it runs offline). The Darwin Core import splits a checklist's names with it
(`exporter/darwincore/names.py`), and the sidecar groups the records that name one taxon by
the same canonical name (`sidecar/taxa.py`), so a name is read the same way on both sides.

The name is the parser's canonical form without authorship ("Spiraea × brachybotrys"),
whatever the case it was written in. The authorship is the source's own text where the
parser's authorship is found, spaces aside, at the end of the verbatim name ("R.
Nordenstam", not the parser's "R.Nordenstam"); otherwise the parser's. A name the parser
cannot read whole (hybrid formulas, "Hosta spec.", a partly parsed name) is kept whole,
without an authorship, and reported. The verbatim name is always kept beside the split."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import nameparser


@dataclass(frozen=True)
class SplitName:
    name: str  # dwc:scientificName without authorship
    authorship: str  # dwc:scientificNameAuthorship, or ""
    verbatim: str  # the name as the source wrote it
    note: str = ""  # why the name was kept whole, when it was
    rank: str = ""  # the parser's rank of a name it read whole (SPECIES, VARIETY), or ""


def split_names(verbatim: Sequence[str]) -> list[SplitName]:
    """Split every name, in one call of the parser. Should the parser fail on the batch,
    each name is parsed alone, and a name it fails on is kept whole with a note: one name
    never stops the others."""
    cleaned = [" ".join(name.split()) for name in verbatim]
    try:
        parsed: list[object] = list(nameparser.parse_all(cleaned, code="BOTANICAL"))
    except Exception:  # the parser's own errors: find the name, keep the rest
        parsed = [_parsed_alone(name) for name in cleaned]
    return [_split(name, result) for name, result in zip(verbatim, parsed, strict=True)]


def canonical_names(verbatim: Sequence[str]) -> list[str]:
    """Each name without its authorship, as `split_names` splits it: the canonical name of
    its taxon ("Fallopia japonica" for "fallopia japonica (Houtt.) Ronse Decr.")."""
    return [split.name for split in split_names(verbatim)]


def _parsed_alone(name: str) -> object:
    try:
        return nameparser.parse_all([name], code="BOTANICAL")[0]
    except Exception as exc:
        return f"the parser failed ({type(exc).__name__}): kept whole"


def _split(verbatim: str, result: object) -> SplitName:
    text = " ".join(verbatim.split())
    if isinstance(result, str):
        return SplitName(text, "", verbatim, result)
    if result is None:
        return SplitName(text, "", verbatim, "not a name the parser reads (a hybrid formula?)")
    if not isinstance(result, nameparser.ParsedName):
        return SplitName(text, "", verbatim, "an informal name: kept whole")
    if result.state != "COMPLETE" or result.unparsed:
        return SplitName(text, "", verbatim, f"parsed only in part (left: "
                                             f"{result.unparsed or '?'}): kept whole")
    name = result.canonical_name_without_authorship() or text
    authorship = result.authorship_complete() or ""
    return SplitName(name, _verbatim_tail(text, authorship) or authorship, verbatim,
                     rank=str(result.rank or ""))


def _verbatim_tail(text: str, authorship: str) -> str:
    """The end of `text` that is `authorship` but for spaces, or ""."""
    wanted = "".join(authorship.split())
    if not wanted:
        return ""
    count = 0
    for index in range(len(text) - 1, -1, -1):
        if not text[index].isspace():
            count += 1
        if count == len(wanted):
            tail = text[index:]
            return tail if "".join(tail.split()) == wanted else ""
    return ""
