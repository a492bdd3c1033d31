"""The licences a hub knows by name (`exporter.contract.licences`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.contract.licences import KNOWN, licence_id

SPELLINGS = [
    ("CC-BY-4.0", "CC-BY-4.0"),
    ("cc0-1.0", "CC0-1.0"),
    ("  odbl-1.0\n", "ODbL-1.0"),
    ("https://creativecommons.org/licenses/by/4.0/", "CC-BY-4.0"),
    ("http://creativecommons.org/licenses/by/4.0", "CC-BY-4.0"),
    ("http://creativecommons.org/licenses/by/4.0/legalcode", "CC-BY-4.0"),
    ("https://creativecommons.org/licenses/by-nc-sa/4.0/legalcode/", "CC-BY-NC-SA-4.0"),
    ("HTTPS://www.CreativeCommons.org/licenses/by-sa/3.0/", "CC-BY-SA-3.0"),
    ("https://creativecommons.org/publicdomain/zero/1.0/", "CC0-1.0"),
    ("http://creativecommons.org/publicdomain/zero/1.0/legalcode", "CC0-1.0"),
    ("https://opendatacommons.org/licenses/odbl/1-0/", "ODbL-1.0"),
    ("http://opendatacommons.org/licenses/by/1.0/", "ODC-By-1.0"),
    ("https://opendatacommons.org/licenses/pddl/1-0", "PDDL-1.0"),
]
NOT_KNOWN = ["", "   ", "CC-BY", "CC BY 4.0", "CC-BY-4.0 or later", "MIT",
             "https://creativecommons.org/licenses/by/4.0/deed.fr",
             "https://example.org/licenses/by/4.0/", "ftp://creativecommons.org/licenses/by/4.0/",
             "https://creativecommons.org/licenses/by/2.0/", "x" * 1000,
             "CC-BY-4.0" + " " * 10_000]


@pytest.mark.parametrize("text, name", SPELLINGS)
def test_a_known_licence_is_its_spdx_id_however_it_is_spelt(text: str, name: str) -> None:
    assert licence_id(text) == name


@pytest.mark.parametrize("text", NOT_KNOWN)
def test_anything_else_is_no_known_licence(text: str) -> None:
    assert licence_id(text) is None


def test_every_id_and_url_of_the_table_names_its_licence() -> None:
    for name, urls in KNOWN.items():
        assert licence_id(name) == licence_id(name.lower()) == name
        for url in urls:
            for spelt in (f"https://{url}", f"http://{url}/", f"https://www.{url}/legalcode"):
                assert licence_id(spelt) == name


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=2000), st.sampled_from([t for t, _ in SPELLINGS]),
                 st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3)))
def test_any_value_is_a_known_id_or_none(value: object) -> None:
    """Whatever a member sends, a hub carries one of a dozen short ids, or nothing."""
    found = licence_id(value)
    assert found is None or (found in KNOWN and len(found) <= 16)
    if isinstance(value, str) and found is not None:
        assert licence_id(found) == found
