"""GET /api/search on the real sidecar over the exported sample: names, typos, vernacular
names and meaning find their records; filters, modes and counts; every bad input is a 400
naming the fix; keys add their groups and keep to their collections; and restricted
records change nothing for a caller without their group (compared with an export of the
sample from which every restricted record was removed)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np
import pytest
import tantivy
from builders import (
    REPO,
    Node,
    ServerThread,
    app_for,
    copy_sample,
    exported_sample,
    http_get,
    issue_key,
    species,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.contract.wire import COLLECTIONS
from exporter.indexing import writing
from exporter.pipeline.build import build
from exporter.project.config import Project
from exporter.shared import search, word_vectors
from sidecar import intent, lists

KNOTWEED = "c80b1c40-8745-4e4e-9194-7448008fe1a7"
BALSAM = "7a3c752f-2f45-4994-ae2e-28a90bae7ccd"
PARTNER_SURVEY = "e312fd28-7dc8-45bb-bd5a-c64d8125e7de"  # access: partners
STEM_INJECTION = "d1f5a90b-9c65-49a4-bb47-8ab5a68beef4"  # access: sensitive
WHEN = datetime(2026, 3, 1, tzinfo=UTC)


class Site:
    def __init__(self, root: Path) -> None:
        self.root = root
        build(Project(root), now=WHEN)
        self.partners, _ = issue_key(root, "partners", groups=["partners"])
        self.species_only, _ = issue_key(root, "species only", collections=["species"])
        self.no_search, _ = issue_key(root, "no search", scopes=["read"])
        self.server = ServerThread(app_for(root, anonymous_rate=0))
        self.url = self.server.__enter__().url

    def get(self, path: str, key: str | None = None) -> tuple[int, Any]:
        status, _, body = http_get(self.url + path, {"X-API-Key": key} if key else {})
        return status, json.loads(body)

    def close(self) -> None:
        self.server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site = Site(exported_sample(tmp_path_factory.mktemp("search")))
    yield site
    site.close()


@pytest.fixture(scope="module")
def without_restricted(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample with every restricted record removed (files and CSV rows)."""
    root = exported_sample(tmp_path_factory.mktemp("public-only"))
    removed = 0
    for path in (root / "content").rglob("*.md"):
        if re.search(r'^access = "(?!public")', path.read_text(), re.M):
            path.unlink()
            path.with_suffix(".pdf").unlink(missing_ok=True)  # a library document's
            removed += 1
    table = root / "content" / "germination" / "results.csv"
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    with open(table, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(row for row in rows if row["access"].strip() in ("", "public"))
    assert removed + len(rows) - (len(table.read_text().splitlines()) - 1) == 10
    site = Site(root)
    yield site
    site.close()


def top_ids(site: Site, query: str, n: int = 3, **params: str) -> list[str]:
    extra = "".join(f"&{k}={v}" for k, v in params.items())
    status, body = site.get(f"/api/search?q={query}{extra}")
    assert status == 200, body
    return [item["id"] for item in body["items"][:n]]


@pytest.mark.parametrize("query", [
    "Fallopia+japonica", "Fallopia", "Reynoutria+japonica+Houtt.", "Japanese+knotweed",
    "japanese+KNOTWEED", "Fallopia+japnoica", "Falopia+japonica", "knotweed"])
def test_names_vernacular_names_and_typos_find_the_species(site: Site, query: str) -> None:
    assert KNOTWEED in top_ids(site, query)


@pytest.mark.parametrize("query", ["Impatiens+glandulifra", "Impatiens+glandulifera+Royle",
                                   "Himalayan+balsam", "himalayan+blasam"])
def test_balsam_by_name_typo_and_vernacular(site: Site, query: str) -> None:
    assert BALSAM in top_ids(site, query)


def test_knotweed_ranks_the_species_first_then_what_is_about_it(site: Site) -> None:
    status, body = site.get("/api/search?q=knotweed&limit=8")
    assert status == 200
    items = body["items"]
    assert items[0]["id"] == KNOTWEED and items[0]["collection"] == "species"
    assert {"treatments", "resources"} <= {item["collection"] for item in items[1:]}
    for item in items:
        assert set(item) == {"collection", "id", "title", "snippet", "score", "url"}
        assert item["url"].endswith(f"/api/{item['collection']}/{item['id']}")
        assert "<mark>" in item["snippet"], item
    scores = [item["score"] for item in items]
    assert scores == sorted(scores, reverse=True)
    assert body["counts"]["species"] >= 1 and body["counts"]["treatments"] >= 2
    assert set(body["counts"]) == {"species", "resources", "treatments", "germination", "team"}


@pytest.mark.parametrize("query, wanted", [
    ("how do I get rid of himalayan balsam along our stream", "treatments"),
    ("my heather seed won't germinate", "germination"),
    ("who set up the hogweed programme", "team"),
])
def test_a_question_ranks_the_kind_it_asks_for_above_the_species_it_names(
        site: Site, query: str, wanted: str) -> None:
    """"How do I…" asks for a control method, "won't germinate" for a germination result,
    "who" for a person: the first record of that kind comes before the species the
    question names, which keyword mode (no lift) ranks first."""
    status, body = site.get("/api/search?" + urlencode({"q": query, "limit": 10}))
    assert status == 200
    kinds = [item["collection"] for item in body["items"]]
    assert wanted in kinds and "species" in kinds, kinds
    assert kinds.index(wanted) < kinds.index("species"), kinds
    status, plain = site.get("/api/search?" + urlencode({"q": query, "limit": 10,
                                                         "mode": "keyword"}))
    assert plain["items"][0]["collection"] == "species"


def test_a_word_that_names_a_species_weighs_more_than_what_is_asked_about_it(
        site: Site) -> None:
    """"heather" names a species; "seed" and "germinate" only say what about it. The
    heather's germination result comes first, before a shorter one about another species'
    seed that matches the common words alone ("Fresh seed germinated well")."""
    status, body = site.get("/api/search?" + urlencode(
        {"q": "my heather seed won't germinate", "limit": 5}))
    assert status == 200
    assert body["items"][0]["title"] == "Heather, smoke-water treatment, nursery 2025"


def test_a_name_is_ranked_as_it_matched() -> None:
    """Words that ask for nothing (a name, a topic) lift no collection."""
    assert intent.asked_for("Fallopia japonica") == ()
    assert intent.asked_for("giant hogweed sap burns") == ()
    assert intent.asked_for("How do I get rid of knotweed?") == ("treatments",)


def test_meaning_without_shared_words(site: Site) -> None:
    """No word of the query is in the record: only the semantic side can find it."""
    ids = top_ids(site, "volunteers+uprooting+an+annual+weed+by+hand", n=10, mode="semantic")
    status, body = site.get("/api/search?q=volunteers+uprooting+an+annual+weed+by+hand"
                            "&mode=hybrid&limit=10")
    titles = [item["title"] for item in body["items"]]
    assert any("balsam" in title.lower() for title in titles), titles
    assert ids


def test_full_width_and_capital_queries_find_what_plain_ones_do(site: Site) -> None:
    """The word vectors are case-sensitive and know no full-width letters: the query is
    taken as written plainly (`search.as_asked`) before it is embedded."""
    plain = "volunteers uprooting an annual weed by hand"
    wide = plain.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})
    for mode in ("semantic", "hybrid"):
        want = top_ids(site, quote(plain), n=10, mode=mode)
        assert top_ids(site, quote(wide), n=10, mode=mode) == want, mode
        assert top_ids(site, quote(plain.upper()), n=10, mode=mode) == \
            top_ids(site, quote(plain.capitalize()), n=10, mode=mode), mode


def test_filters_modes_and_counts(site: Site) -> None:
    for mode in ("keyword", "semantic", "hybrid"):
        status, body = site.get(f"/api/search?q=giant+hogweed&collections=species,treatments"
                                f"&mode={mode}&limit=50")
        assert status == 200 and body["mode"] == mode
        assert body["collections"] == ["species", "treatments"]
        assert set(body["counts"]) == {"species", "treatments"}
        assert {item["collection"] for item in body["items"]} <= {"species", "treatments"}
        found = {c: sum(1 for i in body["items"] if i["collection"] == c)
                 for c in ("species", "treatments")}
        for collection, n in found.items():
            assert body["counts"][collection] >= n  # every item counted
    status, body = site.get("/api/search?query=hogweed&limit=1")
    assert status == 200 and len(body["items"]) == 1 and body["query"] == "hogweed"


def test_snippets_are_escaped_html_with_marks(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    node.write("species", "a", species("Fallopia japonica"),
               'Knotweed <script>alert("x")</script> & rhizomes under <b>banks</b>.')
    build(Project(node.root), now=WHEN)
    with ServerThread(app_for(node.root, anonymous_rate=0)) as server:
        _, _, body = http_get(server.url + "/api/search?q=rhizomes+script")
    snippet = json.loads(body)["items"][0]["snippet"]
    assert "<script>" not in snippet and "<b>" not in snippet
    assert "&lt;" in snippet and "&amp;" in snippet and "<mark>rhizomes</mark>" in snippet
    assert re.sub(r"</?mark>", "", snippet).count("<") == 0


def test_snippets_are_the_text_people_read(tmp_path: Path) -> None:
    """A snippet is plain text (no Markdown), and an imported species' is the sentence its
    page opens with, not a run of its codes and values."""
    node = Node(tmp_path / "node")
    node.write("species", "a", species("Fallopia japonica"),
               "**Phase 1:** cut the stems of the [knotweed](https://example.org) by hand.")
    imported = node.path("species", "b")
    imported.write_text(textwrap.dedent(f"""\
        +++
        id = "{uuid.uuid4()}"
        scientificName = "Abies grandis"
        family = "Pinaceae"
        category = "introduced"
        taxonID = "alien-plants-belgium:taxon:0a1b2c"
        license = "http://example.org/zero"

        [[distributions]]
        locationID = "ISO_3166-2:BE-VLG"
        locality = "Flemish Region"
        establishmentMeans = "introduced"
        degreeOfEstablishment = "casual"
        pathway = ["horticulture"]
        +++
        """), "utf-8")
    build(Project(node.root), now=WHEN)
    with ServerThread(app_for(node.root, anonymous_rate=0)) as server:
        for query, mode, expected in (
                ("stems", "keyword", "<mark>Phase</mark> 1: cut the <mark>stems</mark>"),
                ("stems", "keyword", "of the knotweed by hand"),
                ("Pinaceae", "keyword", "An alien plant of the <mark>Pinaceae</mark>, "
                                        "introduced in Flemish Region by horticulture, casual"),
                ("VLG", "keyword", "An alien plant of the Pinaceae")):  # a code it holds
            _, _, body = http_get(server.url + "/api/search?" + urlencode(
                {"q": query if expected[:1] != "<" else f"phase {query}", "mode": mode,
                 "limit": 1}))
            snippet = json.loads(body)["items"][0]["snippet"]
            assert expected in snippet and "**" not in snippet and "://" not in snippet, \
                snippet


@pytest.mark.parametrize("query, fix", [
    ("", "q is required"),
    ("?q=", "q may not be empty"),
    ("?q=%20%20%09", "q may not be empty"),
    ("?q=" + "a" * 501, "at most 500"),
    ("?q=x&collections=plants", "collections: no collection 'plants'"),
    ("?q=x&collections=species,", "collections: no collection ''"),
    ("?q=x&limit=0", "limit must be from 1 to 50"),
    ("?q=x&limit=51", "limit must be from 1 to 50"),
    ("?q=x&limit=ten", "limit must be a whole number"),
    ("?q=x&mode=fuzzy", "mode must be one of hybrid, keyword, semantic"),
    ("?q=x&sort=score", "unknown parameter 'sort'"),
    ("?q=x&q=y", "given more than once"),
    ("?q=x&query=y", "not both"),
])
def test_bad_input_is_400_naming_the_fix(site: Site, query: str, fix: str) -> None:
    status, body = site.get("/api/search" + query)
    assert status == 400 and body["error"]["code"] == "invalid_parameter", body
    assert fix in body["error"]["message"], body


def test_keys_add_their_groups_and_keep_to_their_collections(site: Site) -> None:
    query = "/api/search?q=floating+pennywort+partner+survey&limit=50"
    anonymous = [item["id"] for item in site.get(query)[1]["items"]]
    _, granted = site.get(query, site.partners)
    assert PARTNER_SURVEY not in anonymous
    assert PARTNER_SURVEY in [item["id"] for item in granted["items"]]
    _, body = site.get("/api/search?q=stem+injection+knotweed&limit=50", site.partners)
    assert STEM_INJECTION not in [item["id"] for item in body["items"]]  # sensitive, not held
    status, body = site.get("/api/search?q=knotweed", site.species_only)
    assert status == 200 and body["collections"] == ["species"]
    assert {item["collection"] for item in body["items"]} == {"species"}
    status, body = site.get("/api/search?q=knotweed&collections=species,team",
                            site.species_only)
    assert status == 403 and body["error"]["code"] == "insufficient_scope"
    status, body = site.get("/api/search?q=knotweed", site.no_search)
    assert status == 403 and body["error"]["code"] == "insufficient_scope"


QUERIES = ["knotweed", "floating pennywort survey", "partner meeting river contracts",
           "arnica", "pasque flower seed", "stem injection glyphosate", "Wouter",
           "cottongrass peat", "water primrose eradication pond", "seed germination",
           "invasive plant priorities 2027", "herbicide", "Arnica montana", "Pulsatilla"]


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_restricted_records_change_nothing_for_others(site: Site, without_restricted: Site,
                                                      mode: str) -> None:
    """Byte for byte, an anonymous and an ungranted caller get from the sample exactly what
    they get from the sample without its restricted records."""
    ungranted = [site.species_only, without_restricted.species_only]
    for text in QUERIES:
        for extra in ("", "&limit=50", "&collections=team,resources"):
            path = f"/api/search?q={text.replace(' ', '+')}&mode={mode}{extra}"
            full = http_get(site.url + path)
            public = http_get(without_restricted.url + path)
            assert full[0] == 200 and full[2] == public[2], path
        path = f"/api/search?q={text.replace(' ', '+')}&mode={mode}&limit=50"
        full = http_get(site.url + path, {"X-API-Key": ungranted[0]})
        public = http_get(without_restricted.url + path, {"X-API-Key": ungranted[1]})
        assert full[2] == public[2], path


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=520),
       mode=st.sampled_from(["keyword", "semantic", "hybrid"]))
def test_any_text_is_an_answer_or_a_400(site: Site, text: str, mode: str) -> None:
    from urllib.parse import quote
    status, body = site.get(f"/api/search?q={quote(text)}&mode={mode}")
    assert status in (200, 400), body
    if status == 400:
        assert body["error"]["code"] == "invalid_parameter"
    else:
        assert text.split() and len(text) <= 500


@pytest.mark.slow
def test_no_network_during_export_and_search(tmp_path: Path) -> None:
    """The embedding model and everything else load from the installed packages: with every
    socket but loopback refused, an export and a semantic search both work."""
    root = copy_sample(tmp_path / "node")
    shutil.rmtree(root / ".fednode", ignore_errors=True)
    script = textwrap.dedent(f"""
        import socket, sys
        sys.path.insert(0, {str(REPO)!r})
        refused = []
        original = socket.socket.connect
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6) and \\
                    not str(address[0]).startswith(("127.", "::1")):
                refused.append(address)
                raise OSError("network refused by the test")
            return original(self, address)
        socket.socket.connect = connect
        def resolve(*args, **kwargs):
            refused.append(args[0])
            raise socket.gaierror("no name resolution in this test")
        socket.getaddrinfo = resolve
        from pathlib import Path
        from exporter.pipeline.build import build
        from exporter.project.config import Project
        from exporter.contract.wire import COLLECTIONS
        from sidecar import search
        from sidecar.store import Snapshot
        root = Path({str(root)!r})
        build(Project(root))
        found = search.run(Snapshot(root / ".fednode" / "bundle"), ["public"],
                           list(COLLECTIONS), "pulling balsam by hand", "semantic", 5)
        assert found["items"], found
        print("refused", refused)
    """)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=environment, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "refused []" in result.stdout  # nothing even tried
    assert socket  # the module the script patches


def test_a_new_export_is_searchable_without_a_restart(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    node.write("species", "a", species("Fallopia japonica"))
    build(Project(node.root), now=WHEN)
    with ServerThread(app_for(node.root, anonymous_rate=0, reload_interval=0)) as server:
        before = json.loads(http_get(server.url + "/api/search?q=Solidago")[2])
        node.write("species", "b", species("Solidago gigantea"))
        build(Project(node.root), now=datetime(2026, 3, 2, tzinfo=UTC))
        after = json.loads(http_get(server.url + "/api/search?q=Solidago")[2])
    assert before["items"] == [] and before["counts"]["species"] == 0
    assert [item["title"] for item in after["items"]] == ["Solidago gigantea"]


def test_a_change_of_searched_fields_indexes_afresh() -> None:
    """The index's version covers which fields each collection searches: an upgrade that
    changes them never reuses an index (or vectors) made from other fields."""
    import copy
    import dataclasses

    from exporter.indexing.search_index import index_version
    from exporter.project.schemas import collections
    known = collections()
    schema = copy.deepcopy(known["species"].schema)
    schema["x-fednode"]["search"]["names"] = ["scientificName"]
    changed = {**known, "species": dataclasses.replace(known["species"], schema=schema)}
    assert index_version(changed) != index_version(known) == index_version(collections())


@pytest.mark.slow
def test_indexing_steps_aside_while_tantivys_queue_is_full(tmp_path: Path) -> None:
    """More documents than tantivy's queue holds (10,000): the adds that find it full are
    where the process's other work is done (each step of `alongside`, all of them here),
    not after the index is written; and every document is indexed all the same."""
    steps: list[int] = []

    def other_work() -> bool:
        if len(steps) == 5:
            return False  # none left: the writer sleeps while the queue drains
        steps.append(len(steps))
        return True

    def document(n: int) -> Any:
        return writing.record_document(search.Doc(
            "species", f"s{n}", f"Name {n}", f"Title {n}", "some words of text " * 40))

    index = search.create(tmp_path)
    writing.write(index, map(document, range(30_000)), alongside=other_work)
    assert steps == [0, 1, 2, 3, 4]
    index.reload()
    searcher = index.searcher()
    assert searcher.num_docs == 30_000
    found = searcher.search(tantivy.Query.term_query(search.SCHEMA, "id", "s29999"), limit=1)
    assert len(found.hits) == 1


def test_nothing_new_to_embed_loads_no_model() -> None:
    """An index whose texts all have vectors already (an export after one that changed
    only who may read a record) embeds nothing, and does not load the model to do so."""
    from exporter.indexing.search_index import Vectors, index_version
    from exporter.project.schemas import collections
    loaded, word_vectors.Embedder._model = word_vectors.Embedder._model, None
    try:
        vectors = Vectors(None, index_version(collections()))
        assert vectors.step() is False
        vectors.finish([], {}, collections())
        assert vectors.fresh == {} and word_vectors.Embedder._model is None
    finally:
        word_vectors.Embedder._model = loaded


# Texts made mostly of what could break cutting a text into pieces: spaces and runs of them,
# the model's own space sign, special tokens, line breaks, characters the vocabulary lacks.
_AWKWARD = st.lists(st.one_of(
    st.sampled_from([" ", "  ", "\u2581", "\u2581\u2581", "<s>", "</s>", "<unk>", "\n", "\t",
                     "knotweed", "Fallopia", "japonica", "é", "漢字", "🌱", "x", "'s", "."]),
    st.text(max_size=6)), max_size=40).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_AWKWARD, min_size=1, max_size=12))
def test_a_texts_tokens_are_its_pieces_tokens(texts: list[str]) -> None:
    """`WordVectors` tokenizes a text's pieces (remembered between texts) instead of the
    whole text: the ids are the tokenizer's own for the whole text, for any text, and the
    shipped model is one where this holds (the pieces are used)."""
    model = word_vectors.Embedder.model()
    assert model._bare is not None
    texts = [*texts, "漢字" * 300, "https://example.org/" + "x" * 80]  # long pieces: not kept
    whole = [e.ids for e in model.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert model.token_ids(texts) == whole
    assert model.token_ids(texts) == whole  # again, from what was remembered
    assert max(map(len, model._pieces), default=0) <= model.PIECE_CHARS


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=20).map(
    lambda texts: [*texts, "Japanese knotweed along the Meuse", "Fallopia japonica (Houtt.)"]))
def test_our_word_vectors_are_wordllamas(texts: list[str]) -> None:
    """The export and the sidecar embed with `WordVectors`, which reads wordllama's files
    without importing wordllama; its vectors are wordllama's own, for any text."""
    import wordllama
    from wordllama import WordLlama

    theirs = WordLlama.load(**search.MODEL, cache_dir=Path(wordllama.__file__).parent,
                            disable_download=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # a text without tokens: NaN, alike
        expected = theirs.embed(texts, norm=True, batch_size=7)
        ours = word_vectors.Embedder.embed(texts)
    assert ours.dtype == np.float32 and ours.shape == (len(texts), search.DIMENSIONS)
    np.testing.assert_array_equal(ours, expected)


def test_a_restricted_record_naming_another_node_leaves_no_trace_in_search(
        tmp_path: Path) -> None:
    """A node's own restricted record may name a `source_node` (content may set it): a
    caller without its group gets the same answers as if it did not (no `node_counts`, which
    only a hub's manifest brings, and nothing for that node's id)."""
    root = exported_sample(tmp_path / "node")
    arnica = root / "content" / "species" / "arnica-montana.md"
    text = arnica.read_text("utf-8")
    answers = {}
    for named in (False, True):
        if named:
            arnica.write_text(text.replace('scientificName = "Arnica montana"\n',
                                           'scientificName = "Arnica montana"\n'
                                           'source_node = "another-node"\n', 1), "utf-8")
        build(Project(root))
        with ServerThread(app_for(root, anonymous_rate=0)) as server:
            answers[named] = [http_get(f"{server.url}/api/search?{query}")[2]
                              for query in ("q=arnica", "q=grassland&mode=keyword",
                                            "q=arnica&nodes=another-node",
                                            "q=meadow&mode=semantic")]
    assert answers[True] == answers[False]
    assert all(b"node_counts" not in answer for answer in answers[True])


def _clustered(count: int, clusters: int, seed: int) -> np.ndarray:
    """Unit vectors around `clusters` random centres, as records' meanings fall."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, search.DIMENSIONS)).astype(np.float32)
    picked = rng.integers(0, clusters, count)
    vectors = centres[picked] + 0.6 * rng.standard_normal(
        (count, search.DIMENSIONS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_lists_find_what_comparing_every_vector_finds() -> None:
    """Probing 32 of 40 lists of clustered vectors, the ten closest of each query are
    found as comparing it with every vector finds them; probing all, exactly."""
    vectors = _clustered(20_000, 60, seed=1)
    filed = lists.Lists(vectors)
    assert len(filed.bounds) == 41 and filed.bounds[-1] == len(vectors)
    assert sorted(filed.rows.tolist()) == list(range(len(vectors)))  # each row once
    queries = _clustered(200, 60, seed=2)
    found = 0
    every = np.arange(len(vectors))
    closeness = vectors @ queries.T  # of every vector to each query, a column a query
    for query, scores in zip(queries, closeness.T, strict=True):
        exact = set(np.argpartition(-scores, 9)[:10].tolist())
        near = filed.near(query)
        assert np.all(np.diff(near) > 0)
        best = near[np.argsort(-scores[near])[:10]]
        found += len(exact & set(best.tolist()))
        assert np.array_equal(filed.near(query, probe=40), every)
    assert found / (10 * len(queries)) >= 0.97


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_lists_brought_up_to_date_keep_each_unchanged_row_and_file_the_rest(
        data: st.DataObject) -> None:
    """`Lists.updated`: a row that holds an earlier row's vector stays in that row's list, a
    changed or added one goes to its closest centroid, every row is in one list once, and
    the centroids are the earlier ones, until more than a fifth of the records the centroids
    were learnt among have changed: then there is nothing to update (the caller makes the
    lists afresh)."""
    before = _clustered(2_000, 20, seed=data.draw(st.integers(0, 2**16)))
    earlier = lists.Lists(before)
    size = data.draw(st.integers(1_700, 2_300))
    # The first half of the rows unchanged, as after a few edits; the rest any earlier row
    # (a row may hold the vector of one before it, or of another kept row) or changed.
    rest = size - size // 2
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    kept = rng.integers(0, len(before), size)
    kept[: size // 2] = np.arange(size // 2)
    changing = data.draw(st.integers(0, rest))
    kept[size // 2 + rng.choice(rest, changing, replace=False)] = -1
    fresh = _clustered(size, 20, seed=7)
    vectors = np.where((kept >= 0)[:, None], before[np.maximum(kept, 0)], fresh)
    updated = lists.Lists.updated(earlier, kept, vectors)
    changed = int(np.count_nonzero(kept < 0))
    if changed > lists.REFRESH * len(before) or abs(size - len(before)) > 0.2 * len(before):
        assert updated is None
        return
    assert updated is not None
    assert updated.centroids is earlier.centroids and updated.moved == changed
    assert sorted(updated.rows.tolist()) == list(range(size))
    listed = np.empty(size, np.int64)  # the list each row is found in, from rows and bounds
    listed[updated.rows] = np.repeat(np.arange(len(updated.bounds) - 1),
                                     np.diff(updated.bounds))
    assert listed.tolist() == updated.filed.tolist()
    same = kept >= 0
    assert (updated.filed[same] == earlier.filed[kept[same]]).all()
    closest = np.argmax(vectors[~same] @ earlier.centroids.T, axis=1)
    assert (updated.filed[~same] == closest).all()


def test_updates_past_a_fifth_of_the_records_learn_the_centroids_again() -> None:
    """Edits add up across reloads: once the records filed since the centroids were learnt
    pass REFRESH of them, the next update is refused, and the lists are made afresh."""
    vectors = _clustered(1_000, 10, seed=3)
    current = lists.Lists(vectors)
    kept = np.arange(len(vectors))
    kept[:150] = -1  # 150 records changed at each export
    current = lists.Lists.updated(current, kept, vectors)
    assert current is not None and current.moved == 150
    assert lists.Lists.updated(current, kept, vectors) is None  # 300 > 200
    grown = _clustered(1_250, 10, seed=4)  # a quarter more records, none changed
    assert lists.Lists.updated(lists.Lists(vectors), np.concatenate(
        [np.arange(1_000), np.full(250, -1)]), grown) is None


def test_a_large_groups_lists_answer_as_every_vector_does_when_all_are_probed(
        site: Site, without_restricted: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """With lists made for the sample's small groups and every list probed, hybrid search
    answers as comparing every vector does; and a caller without a group gets from the
    sample what it gets from the sample without its restricted records: a group's lists
    are made of its own vectors alone."""
    from sidecar import search as searching
    from sidecar.store import Snapshot

    def answers(root: Path, groups: list[str]) -> list[dict[str, Any]]:
        snapshot = Snapshot(root / ".fednode" / "bundle")
        return [searching.run(snapshot, groups, list(COLLECTIONS), text, "hybrid", 20)
                for text in QUERIES]

    whole = answers(site.root, ["public", "partners"])
    monkeypatch.setattr(lists, "FROM", 10)
    monkeypatch.setattr(lists, "PER_LIST", 8)
    monkeypatch.setattr(lists, "PROBE", 1_000)
    assert Snapshot(site.root / ".fednode" / "bundle").search["public"].lists is not None
    assert answers(site.root, ["public", "partners"]) == whole
    monkeypatch.setattr(lists, "PROBE", 2)
    group = Snapshot(site.root / ".fednode" / "bundle").search["public"]
    row_of = {record_id.decode(): n for n, record_id in enumerate(group.ids)}
    found = 0
    for text in QUERIES:  # each hit the record it names, scored as its own vector is
        vector = word_vectors.Embedder.embed([text], serving=True)[0]
        near = set(group.lists.near(vector).tolist())
        hits, _ = group.semantic(vector, list(COLLECTIONS), 10, count=False)
        assert len(near) < group.size
        found += len(hits)
        for hit in hits:
            assert row_of[hit.id] in near
            assert hit.score == pytest.approx(float(group.vectors[row_of[hit.id]] @ vector))
    assert found >= len(QUERIES)
    assert answers(site.root, ["public"]) == answers(without_restricted.root, ["public"])


def test_a_reload_takes_the_lists_of_unchanged_groups_and_defers_restricted_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group whose vectors are the same file as in the snapshot before (the export links
    a group it did not change) keeps that snapshot's inverted file, and a group that changed
    brings that snapshot's up to date (`Lists.updated`); on a deferred load (a
    reload a request waits for) a restricted group's is made by `complete`, after the swap,
    so the lists never lengthen that wait with a restricted group's size; the public
    group's is made before."""
    from sidecar.store import Snapshot

    monkeypatch.setattr(lists, "FROM", 1)
    monkeypatch.setattr(lists, "PER_LIST", 2)
    root = exported_sample(tmp_path / "node")
    first = Snapshot(root / ".fednode" / "bundle")
    assert set(first.search) == {"public", "partners", "sensitive"}
    assert all(group.lists is not None for group in first.search.values())
    again = Snapshot(root / ".fednode" / "bundle", first)
    assert all(again.search[name].lists is first.search[name].lists for name in first.search)
    edited = next((root / "content" / "species").glob("*.md"))
    text = edited.read_text("utf-8")
    assert 'access = "public"' in text or "access" not in text
    edited.write_text(text + "\nOne more line about it.\n", "utf-8")
    build(Project(root))
    after = Snapshot(root / ".fednode" / "bundle", again, defer=True)
    assert after.search["public"].lists is not None
    assert after.search["public"].lists is not again.search["public"].lists
    # ... brought up to date: the same centroids, the edited record's row filed again
    assert after.search["public"].lists.centroids is again.search["public"].lists.centroids
    assert after.search["public"].lists.moved == 1
    kept = after.search["public"].kept_rows(again.search["public"])
    assert int(np.count_nonzero(kept < 0)) == 1
    for name in ("partners", "sensitive"):  # linked, unchanged: taken as they were
        assert after.search[name].lists is again.search[name].lists
    fresh = Snapshot(root / ".fednode" / "bundle", defer=True)  # nothing to take them from
    assert fresh.search["public"].lists is not None
    assert fresh.search["partners"].lists is None and fresh.search["sensitive"].lists is None
    fresh.complete()
    assert all(group.lists is not None for group in fresh.search.values())
    # A restricted group that changed is brought up to date by `complete`, after the swap.
    hidden = root / "content" / "species" / "arnica-montana.md"
    assert 'access = "sensitive"' in hidden.read_text("utf-8")
    hidden.write_text(hidden.read_text("utf-8") + "\nOne more line about it.\n", "utf-8")
    build(Project(root))
    later = Snapshot(root / ".fednode" / "bundle", after, defer=True)
    assert later.search["sensitive"].lists is None
    later.complete(after)
    assert later.search["sensitive"].lists is not None
    assert later.search["sensitive"].lists.centroids is after.search["sensitive"].lists.centroids
    assert later.search["sensitive"].lists.moved == 1


def test_a_reload_learns_the_lists_again_when_a_record_left_the_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The centroids of a group are learnt from its records' vectors: after an export that
    took a record out of the public group (made restricted here; deleted alike), a reload
    learns them again without it, rather than bring up to date lists whose centroids still
    hold its vector. So does a reload whose vectors another version of the index made."""
    from sidecar.store import Snapshot

    monkeypatch.setattr(lists, "FROM", 1)
    monkeypatch.setattr(lists, "PER_LIST", 2)
    root = exported_sample(tmp_path / "node")
    first = Snapshot(root / ".fednode" / "bundle")
    restricted = root / "content" / "species" / "calluna-vulgaris.md"
    text = restricted.read_text("utf-8")
    assert text.startswith("+++\n") and "access =" not in text
    restricted.write_text(text.replace("+++\n", '+++\naccess = "partners"\n', 1), "utf-8")
    build(Project(root))
    after = Snapshot(root / ".fednode" / "bundle", first)
    public, before = after.search["public"], first.search["public"]
    assert public.kept_rows(before) is None
    assert public.lists is not None and before.lists is not None
    assert public.lists.centroids is not before.lists.centroids and public.lists.moved == 0
    assert after.search["partners"].kept_rows(first.search["partners"]) is not None  # (one in)
    same = Snapshot(root / ".fednode" / "bundle").search["public"]
    assert same.kept_rows(public) is not None
    same.version = "another version"
    assert same.kept_rows(public) is None


def test_a_name_no_live_record_holds_any_more_weighs_nothing(tmp_path: Path) -> None:
    """A record's old name stops being a name (BOOST_NAMED) at the export that renames it,
    though the index keeps the old document's terms until its segments merge."""
    from sidecar.store import Snapshot

    root = exported_sample(tmp_path / "node")
    assert "heather" in Snapshot(root / ".fednode" / "bundle").search["public"].names_of(
        "my heather")
    species = root / "content" / "species" / "calluna-vulgaris.md"
    species.write_text(species.read_text("utf-8").replace('vernacularName = "Heather"',
                                                          'vernacularName = "Ling"'), "utf-8")
    build(Project(root))
    group = Snapshot(root / ".fednode" / "bundle").search["public"]
    assert group.names_of("my heather") == set()
    assert group.names_of("my ling") == {"ling"}
