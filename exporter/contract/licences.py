"""The licences a hub knows by name: a short table of the open licences data is published
under, each an SPDX id with the URLs that name it (docs/hub-reference.md, "Licences").

A hub serves a record's own `license` only where it is one of these, written as its id:
anything else a member sends (a text of any length) would be copied into every record and,
through the hub's own licence, into the footer of every page. A node's licence (its
manifest's) is kept as it names it, cut to `LICENCE_MAX` characters, and as an id where it
is one of these."""

from __future__ import annotations

LICENCE_MAX = 200  # characters of a node's licence a hub keeps

_CC = "creativecommons.org/"
_ODC = "opendatacommons.org/licenses/"

# SPDX id -> the URLs that name it, without their scheme (http:// or https://), a leading
# "www.", a closing "/" or "/legalcode"
KNOWN: dict[str, tuple[str, ...]] = {
    "CC0-1.0": (_CC + "publicdomain/zero/1.0",),
    "CC-BY-4.0": (_CC + "licenses/by/4.0",),
    "CC-BY-SA-4.0": (_CC + "licenses/by-sa/4.0",),
    "CC-BY-NC-4.0": (_CC + "licenses/by-nc/4.0",),
    "CC-BY-NC-SA-4.0": (_CC + "licenses/by-nc-sa/4.0",),
    "CC-BY-ND-4.0": (_CC + "licenses/by-nd/4.0",),
    "CC-BY-NC-ND-4.0": (_CC + "licenses/by-nc-nd/4.0",),
    "CC-BY-3.0": (_CC + "licenses/by/3.0",),
    "CC-BY-SA-3.0": (_CC + "licenses/by-sa/3.0",),
    "ODbL-1.0": (_ODC + "odbl/1-0", _ODC + "odbl/1.0"),
    "ODC-By-1.0": (_ODC + "by/1-0", _ODC + "by/1.0"),
    "PDDL-1.0": (_ODC + "pddl/1-0", _ODC + "pddl/1.0"),
}

# Every spelling, casefolded (SPDX ids are matched without regard to case), -> its id
_SPELLINGS = {spelling.casefold(): name for name, urls in KNOWN.items()
              for spelling in (name, *urls)}
_LONGEST = max(map(len, _SPELLINGS)) + len("https://www./legalcode/")


def licence_id(value: object) -> str | None:
    """The SPDX id of a known licence, however it is spelt (its id in any case, or one of
    its URLs); None for anything else."""
    if not isinstance(value, str) or len(value) > _LONGEST + 100:  # (white space around)
        return None
    text = value.strip().casefold()
    for scheme in ("https://", "http://"):
        if text.startswith(scheme):
            text = text.removeprefix(scheme).removeprefix("www.").removesuffix("/")
            text = text.removesuffix("/legalcode")
            break
    return _SPELLINGS.get(text)
