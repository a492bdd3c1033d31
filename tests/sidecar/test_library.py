"""The document library: PDFs read page by page at export, grounded answers with page
citations from POST /api/library/ask (and `fednode ask`), refusals where the library has no
answer, restricted documents absent for keys without their group, PDFs served only to
those who may read them, and the export's errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import (
    NODE_TOML,
    REPO,
    Node,
    ServerThread,
    app_for,
    http_get,
    issue_key,
    make_pdf,
    raw_pdf,
    record_text,
    species,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.pipeline.build import build
from exporter.project.config import Project
from exporter.shared import search, word_vectors
from exporter.shared.errors import ContentError

GUIDE = "11111111-1111-4111-8111-111111111111"
PROTOCOL = "22222222-2222-4222-8222-222222222222"  # access: sensitive
GUIDE_PAGES = [
    "Knotweed control guide. Meuse Valley Restoration Network, 2025.",
    "Contents. Injection, page 1. Balsam, page 2.",
    "Stem injection of Japanese knotweed is done from late August to early October, when "
    "the plant moves sugars down into its rhizome. Each hollow stem receives a measured dose "
    "between the second and third node.\n\nStands are checked again the following spring.",
    "Himalayan balsam is pulled by hand before its seed pods ripen, in June and July. "
    "Pulled plants are piled on dry ground, away from the water, so that they cannot root "
    "again.",
]
PROTOCOL_PAGES = [
    "Partner protocol.",
    "Every injection team carries a spill kit with absorbent pads and a sealed bag. A spill "
    "is reported to the coordinator on the same day. Spare Spillsorb pads are kept in the "
    "store at Profondeville.",
]


def test_a_title_with_an_escape_sequence_never_reaches_fednode_ask(tmp_path: Path) -> None:
    """A document's title holding an escape sequence could clear the publisher's screen
    when `fednode ask` cites it: the export refuses it, naming the file, line and field
    (and `ask` still escapes what it prints)."""
    node = library_node(tmp_path / "node", restricted=False)
    guide = node.root / "content" / "library" / "guide.md"
    guide.write_text(guide.read_text().replace('title = "Knotweed control guide"',
                                               'title = "Knotweed \\u001b[2J guide"'))
    with pytest.raises(ContentError) as caught:
        build(Project(node.root))
    line = guide.read_text().split("\n").index('title = "Knotweed \\u001b[2J guide"') + 1
    assert [(p.path, p.line, p.field) for p in caught.value.problems] == [
        ("content/library/guide.md", line, "title")]


def test_a_stale_snapshot_never_serves_a_pdf_of_another_group(tmp_path: Path) -> None:
    """A sidecar still answering from an older snapshot (one export ago: the guide public)
    reads its PDF from the build it loaded, which two exports later is rewritten: there, the
    guide is restricted, with a new PDF. The PDF of another access group is never what an
    anonymous caller gets (it was, through library/<id>.pdf: now library/<group>/<id>.pdf)."""
    node = library_node(tmp_path / "node", restricted=False)
    build(Project(node.root))
    with ServerThread(app_for(node.root, anonymous_rate=0, reload_interval=3600)) as server:
        url = f"{server.url}/library/{GUIDE}.pdf"
        assert http_get(url)[0] == 200
        guide = node.root / "content" / "library" / "guide.md"
        guide.write_text(guide.read_text().replace('kind = "document"',
                                                   'kind = "document"\naccess = "partners"'))
        secret = "Partners only: the injection doses."
        make_pdf(node.root / "content" / "library" / "guide.pdf", [secret] * 2)
        partners_pdf = (node.root / "content" / "library" / "guide.pdf").read_bytes()
        build(Project(node.root))
        node.write("species", "other", species("Impatiens glandulifera"))
        build(Project(node.root))  # rewrites the build the sidecar holds
        status, _, body = http_get(url)
        assert body != partners_pdf and status in (200, 404)


def library_node(root: Path, *, restricted: bool = True) -> Node:
    node = Node(root, NODE_TOML + 'sidecar_url = "https://api.example.org"\n')
    node.write("species", "knotweed", species("Fallopia japonica"))
    library = root / "content" / "library"
    make_pdf(library / "guide.pdf", GUIDE_PAGES, ["i", "ii", "1", "2"])
    (library / "guide.md").write_text(record_text(
        {"id": GUIDE, "title": "Knotweed control guide", "kind": "document",
         "summary": "How the network controls knotweed and balsam."}, "A guide."))
    if restricted:
        make_pdf(library / "protocol.pdf", PROTOCOL_PAGES)
        (library / "protocol.md").write_text(record_text(
            {"id": PROTOCOL, "title": "Spill protocol", "kind": "document",
             "summary": "For partner teams.", "access": "sensitive"}, "Restricted."))
    return node


class Site:
    def __init__(self, root: Path, restricted: bool = True) -> None:
        self.node = library_node(root, restricted=restricted)
        build(Project(root))
        self.keys = {name: issue_key(root, name, **grants)[0] for name, grants in (
            ("plain", {}), ("sensitive", {"groups": ["sensitive"]}),
            ("species only", {"collections": ["species"]}))}
        self.server = ServerThread(app_for(root, anonymous_rate=0))
        self.url = self.server.__enter__().url

    def ask(self, body: Any, key: str = "plain", raw: bytes | None = None,
            content_type: str = "application/json") -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + "/api/library/ask", method="POST",
            data=raw if raw is not None else json.dumps(body).encode(),
            headers={"Content-Type": content_type, "X-API-Key": self.keys[key]})
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site = Site(tmp_path_factory.mktemp("library") / "node")
    yield site
    site.server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def public_only(tmp_path_factory: pytest.TempPathFactory) -> Any:
    site = Site(tmp_path_factory.mktemp("public-library") / "node", restricted=False)
    yield site
    site.server.__exit__(None, None, None)


def test_an_answer_cites_the_page_it_comes_from(site: Site) -> None:
    status, body = site.ask({"question": "When should knotweed stems be injected?"})
    assert status == 200 and body["grounded"] is True, body
    first = body["citations"][0]
    assert first["document_id"] == GUIDE and first["title"] == "Knotweed control guide"
    assert (first["page"], first["page_label"]) == (3, "1")
    assert first["quote"].startswith("Stem injection of Japanese knotweed is done from late "
                                     "August")
    assert first["url"].endswith(f"/library/{GUIDE}.pdf#page=3")
    assert "[1]" in body["answer"] and first["quote"] in body["answer"]
    flat = " ".join(GUIDE_PAGES[2].split())
    for citation in body["citations"]:
        assert citation["quote"] in " ".join(GUIDE_PAGES[citation["page"] - 1].split()) \
            or citation["quote"] in flat
    status, body = site.ask({"question": "When is Himalayan balsam pulled by hand?", "limit": 1})
    assert len(body["citations"]) == 1 and body["citations"][0]["page_label"] == "2"


@pytest.mark.parametrize(("question", "says"), [
    # Nothing near: no passages at all.
    ("How many members does the football club have?", "nothing near"),
    ("What is the best way to feed a horse in winter?", "nothing near"),
    # A name (a capital inside a sentence, a code, a year) the library never uses: it
    # cannot be what the question is about.
    ("What is the best treatment for Ambrosia allergy?", "never mention 'Ambrosia'"),
    ("What are the dates of the 2031 balsam pulling days?", "never mention '2031'"),
    # A common word the library never uses refuses nothing by itself: the weighing does.
    ("What is the best treatment for ragweed allergy?", "states the answer"),
    ("Are knotweed stems injected in Dinant as well?", "never mention 'Dinant'"),
    ("Can a holder of a P1 licence inject knotweed stems?", "never mention 'P1'"),
])
def test_no_support_is_no_answer(site: Site, question: str, says: str) -> None:
    """No answer where no sentence states it; the closest passages all the same, but none
    where the library holds nothing near the question."""
    status, body = site.ask({"question": question})
    assert status == 200
    assert body["answer"] is None and body["grounded"] is False and body["citations"] == []
    assert says in body["message"], body["message"]
    assert (body["passages"] == []) is ("nothing near" in body["message"]), body["passages"]


@pytest.mark.slow
def test_the_evidence_is_the_same_in_every_process(site: Site) -> None:
    """The question's words are a set, whose order follows each process's string hashes:
    two workers (or a worker and `fednode ask`) must retrieve and weigh a question to the
    same bits."""
    script = ("import sys; from pathlib import Path; from sidecar.library import weigh; "
              "from sidecar.store import Snapshot; "
              "groups = Snapshot(Path(sys.argv[1])).passage_groups(['public']); "
              "print([(w.evidence, [(q.sentence, q.score) for q in w.quotes]) "
              "for w in (weigh(groups, q) for q in sys.argv[2:])])")
    questions = ["When should knotweed stems be injected?",
                 "Where are pulled balsam plants piled, and why?"]
    weighed = {subprocess.run(
        [sys.executable, "-c", script, str(site.node.root / ".fednode" / "bundle"), *questions],
        env=dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED=str(seed)),
        capture_output=True, text=True, check=True).stdout for seed in range(4)}
    assert len(weighed) == 1, weighed


def test_a_capital_opening_a_later_sentence_is_no_name(site: Site) -> None:
    """Only a capital inside a sentence makes a word a name: "Afterwards" opens one."""
    status, body = site.ask({"question": "Stems are cut. Afterwards, when should knotweed "
                                         "stems be injected?"})
    assert body["grounded"] is True, body
    status, body = site.ask({"question": "Our team pulls balsam, and afterwards Dinant: "
                                         "when should knotweed stems be injected?"})
    assert "never mention 'Dinant'" in body["message"]


def test_a_question_in_capitals_or_full_width_letters_is_answered_alike(site: Site) -> None:
    """The word vectors are case-sensitive and know no full-width letters, and a capital
    inside a question reads as a name: before, of the judged questions the sample answers,
    5 in 72 were answered in capitals and none in full-width letters."""
    question = "When is Himalayan balsam pulled by hand?"
    wide = question.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})
    _, plain = site.ask({"question": question})
    assert plain["grounded"] is True
    for asked in (question.upper(), wide):
        _, body = site.ask({"question": asked})
        assert body["question"] == asked  # echoed as it was sent
        assert body["citations"] == plain["citations"], asked


def test_restricted_documents_are_absent_for_keys_without_their_group(
        site: Site, public_only: Site) -> None:
    question = {"question": "What must an injection team carry in case of a spill?"}
    status, granted = site.ask(question, "sensitive")
    assert granted["grounded"] and granted["citations"][0]["document_id"] == PROTOCOL
    assert granted["passages"][0]["document_id"] == PROTOCOL
    # A restricted PDF is served by the sidecar only; a public one is a static file.
    assert granted["citations"][0]["url"].startswith("https://api.example.org/library/")
    public = site.ask({"question": "When should knotweed stems be injected?"})[1]
    assert public["citations"][0]["url"].startswith("https://node.example.org/library/")
    # A name only the restricted document uses is, for everyone else, one the library
    # never mentions: the refusal says so, as a node without the document would.
    status, named = site.ask({"question": "Where are the Spillsorb pads kept?"}, "sensitive")
    assert named["grounded"] and named["citations"][0]["document_id"] == PROTOCOL
    for words in ("What must an injection team carry in case of a spill?",
                  "When should knotweed stems be injected?", "spill kit absorbent pads",
                  "Where are the Spillsorb pads kept?",
                  # each kind of answer, and common words the library never uses
                  "How soon is a spill reported?", "How many pads does a spill kit hold?",
                  "Is it OK to pile pulled balsam near the water?",
                  "Why are pulled balsam plants piled on dry ground?",
                  "Who do we tell about a spill of weedkiller?"):
        plain = site.ask({"question": words, "limit": 5}, "plain")
        alone = public_only.ask({"question": words, "limit": 5}, "plain")
        assert plain == alone, words
        assert PROTOCOL not in json.dumps(plain)
    named = site.ask({"question": "Where are the Spillsorb pads kept?"}, "plain")[1]
    assert "never mention 'Spillsorb'" in named["message"]


# Words of the restricted protocol and of the public documents, mixed into questions.
MIXED = ("spill", "kit", "pads", "Spillsorb", "injection", "team", "carry", "knotweed",
         "stems", "injected", "when", "how", "many", "balsam", "pulled", "water", "report",
         "coordinator", "herbicide", "weedkiller", "the", "dogs", "seed", "dry")


@settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MIXED), min_size=1, max_size=7), st.integers(1, 10))
def test_passages_never_show_or_betray_a_document_the_caller_cannot_read(
        site: Site, public_only: Site, words: list[str], limit: int) -> None:
    """Any question, any limit: the passages, their scores, order and quotes, the answer and
    the message, byte for byte as on a node without the restricted document."""
    body = {"question": " ".join(words) + "?", "limit": limit}
    plain, alone = site.ask(body, "plain"), public_only.ask(body, "plain")
    assert plain == alone
    assert PROTOCOL not in json.dumps(plain)


def test_the_weighing_never_depends_on_a_document_the_caller_cannot_read(
        site: Site, public_only: Site) -> None:
    """Every part of every sentence's score (the share of the question's words, weighted by
    how rare each is in the caller's passages; the rarest words; closeness in meaning; the
    kind of answer), the evidence, and the names the library never mentions: the same, to
    the bit, for a caller without the `sensitive` group, whether or not a restricted
    document exists."""
    from sidecar.library import unknown_names, weigh
    from sidecar.store import Snapshot
    with_it, without = (Snapshot(s.node.root / ".fednode" / "bundle").passage_groups(["public"])
                        for s in (site, public_only))
    for question in ("What must an injection team carry in case of a spill?",
                     "How soon is a spill reported to the coordinator?",
                     "Where are the Spillsorb pads kept at Profondeville?",
                     "Is it OK to pile pulled balsam near the water?",
                     "When should knotweed stems be injected?",
                     "How many canes can one person inject in an hour?"):
        assert weigh(with_it, question) == weigh(without, question), question
        assert unknown_names(question, with_it) == unknown_names(question, without)
    assert unknown_names("Where are the Spillsorb pads kept?", with_it) == ["Spillsorb"]


def test_a_common_word_never_refuses(site: Site) -> None:
    """Only a name the library never mentions keeps an answer from being given at once:
    "OK" in capitals, or "weedkiller" where the library says "herbicide", are words, and
    the question is weighed; its closest passage is the page that answers it."""
    for question in ("Is it OK to pile pulled balsam on dry ground?",
                     "Is balsam pulled by hand or sprayed with weedkiller in June?"):
        _, body = site.ask({"question": question})
        assert "never mention" not in body.get("message", ""), (question, body)
        assert body["passages"][0]["page"] == 4, body
        assert not body["grounded"] or body["citations"][0]["page"] == 4, body


def test_the_answer_leads_with_the_sentence_that_answers(tmp_path: Path) -> None:
    """Of sentences on one subject, the one that gives the kind of answer asked for (a
    distance, an amount, a duration) leads the answer; where none gives it, the question is
    refused rather than answered with a neighbouring fact; a contents line is no answer."""
    from sidecar.library import answer
    from sidecar.store import Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    page = ("Refill the injection gun at least 10 metres from any watercourse, on level "
            "ground. The product is a glyphosate formulation of 360 grams per litre, "
            "authorised for professional use. Inject 3 millilitres of the formulation into "
            "each cane, between the second and third node.")
    make_pdf(node.root / "content" / "library" / "guide.pdf", [*GUIDE_PAGES, page])
    build(Project(node.root))
    snapshot = Snapshot(node.root / ".fednode" / "bundle")
    for question, lead in (
            ("How far away from the stream do I need to be when I refill the injection gun?",
             "Refill the injection gun at least 10 metres"),
            ("How much glyphosate product goes into each knotweed cane?",
             "Inject 3 millilitres of the formulation")):
        found = answer(snapshot, ["public"], question, 3)
        assert found["grounded"] and found["citations"][0]["quote"].startswith(lead), found
        assert found["answer"].startswith(lead)
    refused = answer(snapshot, ["public"], "How many weeks does glyphosate stay in the soil "
                                           "after the canes are injected?", 3)
    assert refused["answer"] is None and refused["citations"] == [], refused
    found = answer(snapshot, ["public"], "Which page covers injection and balsam?", 3)
    assert not any(", page" in c["quote"] for c in found["citations"]), found


def test_the_sentences_weighed_can_give_the_kind_asked_for(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The sentences closest in meaning that are weighed are found among those that can
    give the kind of answer asked for: a sentence with the distance asked for is weighed
    however many sentences without one come closer."""
    from exporter.shared import encoder, word_vectors
    from sidecar import library
    from sidecar.store import Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    page = ("Refill the injection gun at least 10 metres from any watercourse, on level "
            "ground. Pile pulled balsam 5 metres from the water, on dry ground.")
    make_pdf(node.root / "content" / "library" / "guide.pdf", [*GUIDE_PAGES, page])
    build(Project(node.root))
    indexes = Snapshot(node.root / ".fednode" / "bundle").passage_groups(["public"])
    question = "How far from the water do we pile pulled balsam?"
    sense = encoder.Encoder.shared().encode([question])[0]
    vector = word_vectors.Embedder.embed([question], serving=True)[0]
    monkeypatch.setattr(library, "PASSAGES", 0)  # the sentences closest in meaning alone
    monkeypatch.setattr(library, "SENTENCE_DEPTH", 2)
    answers = library.answering("distance", [])
    [(group, found)] = library.candidates(indexes, question, sense, vector, answers)
    assert found and all(answers(group.sentences[n].quoted) for n in found)
    closest = group.closest_sentences(sense, library.SENTENCE_POOL)
    giving = [n for n in closest if answers(group.sentences[n].quoted)]
    assert sorted(found) == sorted(giving[:2])
    assert [(g, f) for g, f in library.candidates(indexes, question, sense, vector)] == \
        [(group, sorted(closest[:2]))]


@pytest.mark.parametrize(("question", "kind"), [
    ("How far away from the stream do I need to be when I refill the gun?", "distance"),
    ("How much glyphosate product goes into each knotweed cane?", "amount"),
    ("How long do the warning signs stay up?", "duration"),
    ("When we sheet over a patch, how far past the stems does it go?", "distance"),
    ("What temperature should the fridge be at?", "temperature"),
    ("What time of year should I collect alder seed?", "season"),
    ("Why do we break the balsam stems?", "reason"),
    ("Is it OK to use plastic bags when collecting seed?", "rule"),
    ("We have no drying room - how should we store seed?", "way"),
    ("What's the phone number of the emergency line?", "digits"),
])
def test_the_kind_of_answer_asked_for(question: str, kind: str) -> None:
    from sidecar import answer_kinds
    assert answer_kinds.asked(question) == kind


def test_what_gives_a_kind_of_answer() -> None:
    """A number with its unit, counted by the unit asked; an instruction for a rule; a
    year is no count; a capital word opening a sentence, or "OK", is no name."""
    from sidecar import answer_kinds
    from sidecar.library import is_name
    assert answer_kinds.gives("distance", "Refill it at least 10 metres from any watercourse.")
    assert not answer_kinds.gives("distance", "Refill it away from any watercourse.")
    assert answer_kinds.gives("count", "Since 2022, about 300 canes an hour.")
    assert not answer_kinds.gives("count", "Volunteers have worked here since 2022.")
    assert answer_kinds.gives("rule", "Use paper bags, never plastic.")
    assert answer_kinds.units("How much goes into each knotweed cane?") == ["cane"]
    assert answer_kinds.counted_by("Inject 3 ml into each cane.", ["cane"])
    assert not answer_kinds.counted_by("It holds 360 grams per litre.", ["cane"])
    # "in an hour" counts by the hour as "per hour" does
    assert answer_kinds.units("How many canes can one person inject in an hour?") == ["hour"]
    assert answer_kinds.counted_by("An operator treats around 300 canes an hour.", ["hour"])
    assert not answer_kinds.counted_by("Sow two to four grams per square metre.", ["hour"])
    assert is_name("Namur", opens=False) and is_name("P1", opens=True)
    assert is_name("2026", opens=False) and not is_name("12", opens=False)
    assert not is_name("OK", opens=False) and not is_name("Afterwards", opens=True)


def test_callers_words_are_not_remembered_between_calls(site: Site) -> None:
    """The sidecar embeds callers' words (questions, queries, and the sentences of the
    passages a question retrieves, restricted ones included) with a model that keeps
    nothing from one call to the next: no caller's call is faster for what another asked or
    was shown. (The export's model remembers the pieces of the texts it embeds, and the
    tokenizer the words it merged: there, that saves time and tells nobody anything.)"""
    status, _ = site.ask({"question": "Should the walrus team carry a spill kit?"}, "sensitive")
    assert status == 200
    with urllib.request.urlopen(site.url + "/api/search?q=quorblatt+walrus&mode=semantic"
                                ) as response:
        assert response.status == 200
    serving = word_vectors.Embedder.serving()
    assert not serving.remember and not serving._pieces
    exporting = word_vectors.Embedder.model()
    assert exporting is not serving and not any(
        word in piece for piece in exporting._pieces for word in ("walrus", "quorblatt"))
    texts = ["Knotweed stems are injected in late summer.", "quorblatt walrus"]
    embed = word_vectors.Embedder.embed
    assert (embed(texts, serving=True) == embed(texts)).all()


def test_pdfs_are_published_or_served_only_to_those_who_may_read_them(site: Site) -> None:
    root = site.node.root
    assert (root / "site_out" / "library" / f"{GUIDE}.pdf").read_bytes() == \
        (root / "content" / "library" / "guide.pdf").read_bytes()
    assert not (root / "site_out" / "library" / f"{PROTOCOL}.pdf").exists()
    assert PROTOCOL not in "".join(p.name for p in (root / "site_out").rglob("*"))
    record = json.loads(http_get(site.url + f"/api/resources/{GUIDE}")[2])
    assert record["document_url"] == f"https://node.example.org/library/{GUIDE}.pdf"
    record = json.loads(http_get(site.url + f"/api/resources/{PROTOCOL}",
                                 {"X-API-Key": site.keys["sensitive"]})[2])
    assert record["document_url"] == f"https://api.example.org/library/{PROTOCOL}.pdf"
    status, headers, body = http_get(site.url + f"/library/{GUIDE}.pdf")
    assert status == 200 and body.startswith(b"%PDF") and headers["Content-Type"] == \
        "application/pdf"
    hidden = http_get(site.url + f"/library/{PROTOCOL}.pdf", {"X-API-Key": site.keys["plain"]})
    never = http_get(site.url + "/library/33333333-3333-4333-8333-333333333333.pdf",
                     {"X-API-Key": site.keys["plain"]})
    assert hidden[0] == never[0] == 404 and hidden[2] == never[2]
    granted = http_get(site.url + f"/library/{PROTOCOL}.pdf",
                       {"X-API-Key": site.keys["sensitive"]})
    assert granted[0] == 200 and granted[2].startswith(b"%PDF")


@pytest.mark.parametrize("body, status, says", [
    ({}, 400, "question is required"),
    ({"question": "   "}, 400, "question may not be empty"),
    ({"question": 5}, 400, "question must be text, got 5"),
    ({"question": "x" * 2001}, 400, "at most 2000"),
    ({"question": "knotweed", "limit": 0}, 400, "limit must be from 1 to 10, got 0"),
    ({"question": "knotweed", "limit": 11}, 400, "from 1 to 10"),
    ({"question": "knotweed", "limit": "3"}, 400, "limit must be a whole number, got '3'"),
    ({"question": "knotweed", "limit": 2.5}, 400, "limit must be a whole number, got 2.5"),
    ({"question": "knotweed", "limit": True}, 400, "limit must be a whole number, got true"),
    # a float keeps its form; a whole number too long to read is said by its length
    ({"question": "knotweed", "limit": 1e308}, 400, "from 1 to 10, got 1e+308"),
    ({"question": "knotweed", "limit": 10 ** 400}, 400, "got a whole number of 401 digits"),
    ({"question": "knotweed", "top": 3}, 400, "unknown field 'top'"),
])
def test_bad_bodies_name_the_field(site: Site, body: Any, status: int, says: str) -> None:
    found, answer = site.ask(body)
    assert found == status and answer["error"]["code"] == "invalid_parameter"
    assert says in answer["error"]["message"]


def test_transport_errors(site: Site) -> None:
    assert site.ask(None, raw=b"{")[1]["error"]["code"] == "invalid_parameter"
    assert site.ask(None, raw=b"[]")[0] == 400
    status, body = site.ask({"question": "x"}, content_type="text/plain")
    assert (status, body["error"]["code"]) == (415, "unsupported_media_type")
    status, body = site.ask(None, raw=b'{"question": "' + b"x" * (1024 * 1024) + b'"}')
    assert (status, body["error"]["code"]) == (413, "payload_too_large")
    status, body = site.ask({"question": "knotweed"}, "species only")
    assert (status, body["error"]["code"]) == (403, "insufficient_scope")


@pytest.mark.slow
def test_fednode_ask_answers_from_the_local_bundle(site: Site) -> None:
    command = [str(Path(sys.executable).parent / "fednode"), "ask",
               "When should knotweed stems be injected?", "--project", str(site.node.root)]
    shown = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "Stem injection of Japanese knotweed" in shown and "[1] Knotweed control guide, " \
        "page 1 (PDF page 3)" in shown
    hidden = subprocess.run([*command[:2], "What must a team carry for a spill?", *command[3:]],
                            capture_output=True, text=True, check=True).stdout
    assert "spill kit" not in hidden and "Spill protocol" not in hidden
    granted = subprocess.run([*command[:2], "What must a team carry for a spill?",
                              *command[3:], "--group", "sensitive"],
                             capture_output=True, text=True, check=True).stdout
    assert "spill kit" in granted and "Spill protocol" in granted


def test_a_broken_pdf_or_a_missing_partner_is_a_clear_error(tmp_path: Path) -> None:
    node = library_node(tmp_path / "node", restricted=False)
    pdf = node.root / "content" / "library" / "guide.pdf"
    pdf.write_bytes(b"%PDF-1.4 this is not a PDF at all")
    with pytest.raises(ContentError) as caught:
        build(Project(node.root))
    problem = caught.value.problems[0]
    assert problem.path == "content/library/guide.pdf" and "cannot read this PDF" in \
        problem.message
    pdf.unlink()
    with pytest.raises(ContentError) as caught:
        build(Project(node.root))
    assert "needs its PDF beside it: guide.pdf" in str(caught.value.problems[0])
    make_pdf(node.root / "content" / "library" / "orphan.pdf", ["Alone."])
    make_pdf(pdf, GUIDE_PAGES)
    with pytest.raises(ContentError) as caught:
        build(Project(node.root))
    assert "needs its record beside it: orphan.md" in str(caught.value.problems[0])


def test_an_unchanged_pdf_is_not_read_again(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An unchanged PDF is taken from the cache, and so is one with the same bytes in a
    copy of the node's folder (another inode and time); one changed behind the same size
    and time (its time put back, as `cp -p` or `touch -r` do) is read again: its change
    time and inode tell, then its bytes. Were the size and time alone to decide, the broken
    file below would be taken for the PDF it replaced."""
    from exporter.library import documents as library
    node = library_node(tmp_path / "node", restricted=False)
    build(Project(node.root))
    copy = shutil.copytree(node.root, tmp_path / "copy", symlinks=True)
    species = copy / "content" / "species" / "knotweed.md"
    species.write_text(species.read_text() + "\nSeen by the river.\n")  # an export to make
    with monkeypatch.context() as patched:
        def unread(data: bytes) -> Any:
            raise AssertionError("an unchanged PDF was read again")
        patched.setattr(library, "_guarded", unread)  # (read on a thread)
        patched.setattr(library, "_read_limited", unread)  # (read in a process of its own)
        build(Project(node.root))
        build(Project(copy))
    pdf = node.root / "content" / "library" / "guide.pdf"
    info = pdf.stat()
    pdf.write_bytes(b"x" * info.st_size)  # not a PDF any more, same size and time
    os.utime(pdf, ns=(info.st_atime_ns, info.st_mtime_ns))
    with pytest.raises(ContentError):
        build(Project(node.root))
    assert REPO.exists()


@pytest.mark.slow
def test_a_passage_is_encoded_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentence encoder (about 45 ms a passage) encodes each passage and each sentence
    once: a group whose PDFs did not change is linked from the build before, and a group
    rebuilt around a changed PDF takes its other passages' and sentences' vectors from there
    (what the process encoded before is forgotten before each export here, so the build
    alone can give them). Every vector is the one its text has when encoded afresh. (What an
    export encoded is what its process learned (`library._encoded`), from the process that
    built the library aside too.)"""
    from exporter.library import documents as library
    from exporter.shared import encoder
    from sidecar.store import Snapshot
    encode = encoder.Encoder.encode

    def encoded_by_an_export() -> list[str]:
        monkeypatch.setattr(library, "_encoded", {})
        build(Project(node.root))
        return list(library._encoded)
    node = library_node(tmp_path / "node")
    first = encoded_by_an_export()
    assert first and any("spill kit" in text for text in first)
    assert encoded_by_an_export() == []
    make_pdf(node.root / "content" / "library" / "guide.pdf",
             [*GUIDE_PAGES, "Knotweed fragments are burnt on site where that is allowed."],
             ["i", "ii", "1", "2", "3"])
    assert encoded_by_an_export() == [
        "Knotweed fragments are burnt on site where that is allowed."]
    groups = Snapshot(node.root / ".fednode" / "bundle").passage_groups(
        ["public", "sensitive"])
    for group in groups:
        fresh = encode(encoder.Encoder.shared(), [str(row[3]) for row in group.rows])
        assert np.abs(np.asarray(group.senses) - fresh).max() < 1e-5
        fresh = encode(encoder.Encoder.shared(), [s.weighed for s in group.sentences])
        assert np.abs(np.asarray(group.sentence_senses) - fresh).max() < 1e-5
    # Another version of the encoder: every passage and every sentence is encoded again,
    # none taken from the build before (its vectors meant something else).
    monkeypatch.setattr(encoder, "VERSION", "another-model:1")
    assert sorted(encoded_by_an_export()) == sorted(
        {str(row[3]) for group in groups for row in group.rows}
        | {sentence.weighed for group in groups for sentence in group.sentences})


def test_passages_of_the_wrong_shape_are_an_unusable_bundle(tmp_path: Path) -> None:
    """A damaged senses.npy (or vectors.npy) is refused when the bundle loads, with what to
    do, rather than failing every question later with an error 500."""
    from exporter.contract.bundle import PASSAGES
    from sidecar.store import BundleMissing, Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    build(Project(node.root))
    bundle = node.root / ".fednode" / "bundle"
    for name, width in ((search.SENSES, 383), (search.VECTORS, 255)):
        path = bundle / PASSAGES / "public" / name
        kept = path.read_bytes()
        rows = np.load(path).shape[0]
        path.unlink()  # (a file of the build: replaced, not written into)
        np.save(path, np.zeros((rows, width), np.float32))
        with pytest.raises(BundleMissing, match="run `fednode export` again"):
            Snapshot(bundle)
        path.unlink()
        path.write_bytes(kept)
    Snapshot(bundle)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(cuts=st.lists(st.tuples(st.integers(0, 10**6), st.binary(min_size=0, max_size=8)),
                     min_size=1, max_size=6), keep=st.integers(20, 10**6))
def test_a_damaged_pdf_is_an_error_or_an_export_never_a_crash(
        cuts: list[tuple[int, bytes]], keep: int) -> None:
    """Bytes overwritten anywhere, the file cut short: the export either reads the PDF or
    stops with `content/library/guide.pdf: cannot read this PDF: ...`."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        node = library_node(Path(folder) / "node", restricted=False)
        pdf = node.root / "content" / "library" / "guide.pdf"
        data = bytearray(pdf.read_bytes())
        for at, patch in cuts:
            at %= len(data)
            data[at:at + len(patch)] = patch
        pdf.write_bytes(bytes(data[:keep]))
        try:
            build(Project(node.root))
        except ContentError as exc:
            assert exc.problems[0].path == "content/library/guide.pdf"
            assert "cannot read this PDF" in exc.problems[0].message


def test_running_headers_and_footers_are_left_out_of_the_passages(tmp_path: Path) -> None:
    """A title repeated at the foot of every page and the printed page number are on the
    page, not what it says: they are no passage's words, and never quoted."""
    from exporter.contract.bundle import PASSAGES
    from exporter.shared import search
    node = library_node(tmp_path / "node", restricted=False)
    labels = ["i", "ii", "1", "2"]
    furnished = [f"RESTRICTED: not really.\n\n{text}\n\nKnotweed control guide, 2025\n\n{label}"
                 for text, label in zip(GUIDE_PAGES, labels, strict=True)]
    make_pdf(node.root / "content" / "library" / "guide.pdf", furnished, labels)
    build(Project(node.root))
    rows = json.loads((node.root / ".fednode" / "bundle" / PASSAGES / "public" /
                       search.PASSAGE_ROWS).read_text())["rows"]
    text = " ".join(str(row[3]) for row in rows)
    assert "Knotweed control guide, 2025" not in text and "not really" not in text
    assert [row[3] for row in rows if row[1] == 3][0].startswith("Stem injection")
    for body in GUIDE_PAGES:  # every sentence of every page is still there
        for sentence in search.sentences(body):
            assert sentence in text, sentence


def test_every_word_of_a_passage_counts_as_evidence(tmp_path: Path) -> None:
    """A sentence's share of the question's words counts the words at a passage's end too,
    not only its opening ones (the query's cap on words is for queries), and the words of
    the sentence before it count for its window."""
    from sidecar.library import weigh
    from sidecar.store import Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    long_page = ("Grazing is an old way of keeping rough ground open, and on the river terraces "
                 "the network has tried it on several plots since the first surveys of the "
                 "valley. Sheep keep the grass short, cattle open the tall herbs and trample "
                 "the litter, and ponies reach the brambles that nothing else will eat. The "
                 "fences are moved twice a year and the water troughs every month. Goats browse "
                 "the regrowth of tree of heaven each summer.")
    make_pdf(node.root / "content" / "library" / "guide.pdf", [*GUIDE_PAGES, long_page])
    build(Project(node.root))
    groups = Snapshot(node.root / ".fednode" / "bundle").passage_groups(["public"])
    quotes = weigh(groups, "Do goats browse tree of heaven regrowth?").quotes
    goats = next(q for q in quotes if q.sentence.startswith("Goats browse"))
    assert goats.parts.words == pytest.approx(1.0) and goats is quotes[0]
    # Words in two sentences that follow each other ("sheep" in one, "fences moved" in the
    # next): all in the window of the second, though in no one sentence.
    quotes = weigh(groups, "Are the sheep fences moved?").quotes
    fences = next(q for q in quotes if q.sentence.startswith("The fences are moved"))
    assert fences.parts.words < 1.0 and fences.parts.window == pytest.approx(1.0)


def test_a_heading_is_not_quoted_with_the_sentence_under_it(tmp_path: Path) -> None:
    """A heading (a line set larger than the page's body text) lends the sentence under it
    its words when the sentence is weighed, but the quote is the sentence alone; a narrow
    column, whose every line is short, is still quoted in whole sentences."""
    from sidecar.library import answer, weigh
    from sidecar.store import Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    page = ("# Grazing the river terraces\n\nSheep keep the grass short on the terraces from "
            "May to September, and cattle open the tall herbs.")
    make_pdf(node.root / "content" / "library" / "guide.pdf", [*GUIDE_PAGES, page])
    build(Project(node.root))
    groups = Snapshot(node.root / ".fednode" / "bundle").passage_groups(["public"])
    quotes = weigh(groups, "Which animals graze the river terraces?").quotes[:3]
    assert quotes[0].sentence == ("Sheep keep the grass short on the terraces from May to "
                                  "September, and cattle open the tall herbs.")
    assert quotes[0].passage[1] == 5
    assert not any("Grazing" in quote.sentence for quote in quotes)
    # The same pages in a column of 40 characters: no line is a heading.
    make_pdf(node.root / "content" / "library" / "guide.pdf", [*GUIDE_PAGES, page], width=40)
    build(Project(node.root))
    found = answer(Snapshot(node.root / ".fednode" / "bundle"), ["public"],
                   "When should knotweed stems be injected?", 3)
    assert found["citations"][0]["quote"].startswith("Stem injection of Japanese knotweed is "
                                                     "done from late August"), found


def test_a_sentence_is_quoted_as_it_stands_in_the_passage_cited(tmp_path: Path) -> None:
    """The same words, under a heading on one page and as one sentence on another, are
    weighed alike: each passage's quote is its own (the heading left out only where it is
    a heading)."""
    from sidecar.library import weigh
    from sidecar.store import Snapshot
    node = library_node(tmp_path / "node", restricted=False)
    sentence = "Sheep keep the grass short on the terraces from May to September."
    make_pdf(node.root / "content" / "library" / "guide.pdf",
             [*GUIDE_PAGES, f"# Grazing terraces\n\n{sentence}",
              f"Grazing terraces {sentence} Cattle open the tall herbs."])
    build(Project(node.root))
    groups = Snapshot(node.root / ".fednode" / "bundle").passage_groups(["public"])
    quotes = {(quote.passage[1], quote.sentence)
              for quote in weigh(groups, "When do sheep graze the terraces?").quotes}
    assert (5, sentence) in quotes and (6, f"Grazing terraces {sentence}") in quotes, quotes
    assert (5, f"Grazing terraces {sentence}") not in quotes
    assert (6, sentence) not in quotes


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(
    ["4.", "Grazing the terraces", "Sheep graze.", "Cattle open the tall herbs.", "Why graze?",
     "“Quoted.”", "Sheep graze", "Contents", "a b"]), st.booleans()), max_size=8))
def test_statements_are_weighed_whole_and_quoted_without_headings(
        parts: list[tuple[str, bool]]) -> None:
    """A passage's statements are weighed as the sentences of its text, exactly; each is
    quoted as its end, without the heading spans it starts with, and only those."""
    text, spans = "", []
    for sentence, heading in parts:
        text = f"{text} {sentence}" if text else sentence
        if heading:
            spans.append([len(text) - len(sentence), len(text)])
    found = search.statements(text, spans)
    assert [weighed for weighed, _ in found] == search.sentences(text)
    starts = {begin: end for begin, end in spans}
    cursor = 0
    for weighed, quoted in found:
        begin = text.index(weighed, cursor)
        cursor = begin + len(weighed)
        assert quoted and weighed.endswith(quoted)
        while starts.get(begin, cursor) < cursor:  # what may be cut: whole headings
            begin = starts[begin] + 1
        assert text[begin:cursor] == quoted


def _text(*lines: bytes) -> bytes:
    """A content stream showing each line, 14 points apart."""
    return b"".join(b"BT /F1 10 Tf 50 %d Td (%b) Tj ET\n" % (780 - 14 * n, line)
                    for n, line in enumerate(lines))


# Codes a hostile font maps to half a character, a NUL, a direction override, a zero-width
# space: the text keeps none of them (half a character becomes U+FFFD).
_ODD_MAP = b"""/CIDInit /ProcSet findresource begin 12 dict begin begincmap
/CMapName /X def /CMapType 2 def
1 begincodespacerange <00> <FF> endcodespacerange
4 beginbfchar <01> <D800> <02> <0000> <03> <202E> <04> <200B> endbfchar
endcmap CMapName currentdict /CMap defineresource pop end end"""


@pytest.mark.parametrize(("make", "says"), [
    (lambda pdf: raw_pdf(pdf, [_text(b"Knotweed grows. " * 13_000)]),
     "page 1 holds 208,000 characters of text; a page may hold 200,000"),
    (lambda pdf: raw_pdf(pdf, [_text(b"Knotweed grows.")],
                         labels=b"<< /Nums [0 << /P (" + b"x" * 100 + b") >>] >>"),
     "page 1 has a label of 100 characters; a label may have 64"),
    (lambda pdf: os.mkfifo(pdf), "not a regular file"),
    (lambda pdf: pdf.symlink_to("/dev/zero"), "not a regular file"),
])
def test_a_pdf_beyond_the_limits_is_refused_with_its_path(
        tmp_path: Path, make: Any, says: str) -> None:
    """Text, labels and files that would take the export's memory or time for ever are
    refused, each a problem naming the PDF, and the last good build stays."""
    node = library_node(tmp_path / "node", restricted=False)
    build(Project(node.root))
    before = os.readlink(node.root / ".fednode" / "current")
    pdf = node.root / "content" / "library" / "guide.pdf"
    pdf.unlink()
    make(pdf)
    with pytest.raises(ContentError) as raised:
        build(Project(node.root))
    assert str(raised.value.problems[0]).startswith(
        f"content/library/guide.pdf: cannot read this PDF: {says}")
    assert os.readlink(node.root / ".fednode" / "current") == before


def test_a_pdfs_text_keeps_no_invisible_or_broken_characters(tmp_path: Path) -> None:
    """Half a character (a lone surrogate: it crashed the export), NUL, a direction override
    and a zero-width space, which a font may map its codes to, do not reach the passages or
    a quote: U+FFFD stands for the half character, the others are dropped."""
    from exporter.contract.bundle import PASSAGES
    node = library_node(tmp_path / "node", restricted=False)
    pdf = node.root / "content" / "library" / "guide.pdf"
    pdf.unlink()
    raw_pdf(pdf, [_text(b"Knotweed \001spreads \002along \003rivers \004and roads.")],
            to_unicode=_ODD_MAP)
    build(Project(node.root))
    rows = json.loads((node.root / ".fednode" / "bundle" / PASSAGES / "public" /
                       search.PASSAGE_ROWS).read_text("utf-8"))["rows"]
    assert [row[3] for row in rows] == ["Knotweed \ufffdspreads along rivers and roads."]


@pytest.mark.slow
def test_a_page_without_sentence_ends_is_cut_into_passages(tmp_path: Path) -> None:
    """A page of words with no full stop is cut at spaces into passages of at most about
    PASSAGE_CHARS: one passage of the whole page made every question that retrieved it slow
    to weigh (seconds, at megabytes)."""
    from exporter.contract.bundle import PASSAGES
    from exporter.library.documents import PASSAGE_CHARS
    node = library_node(tmp_path / "node", restricted=False)
    pdf = node.root / "content" / "library" / "guide.pdf"
    pdf.unlink()
    # (3,000 words: each passage is encoded too, at tens of milliseconds)
    raw_pdf(pdf, [_text(b" ".join(b"knotweed%d" % n for n in range(3_000)))])
    build(Project(node.root))
    rows = json.loads((node.root / ".fednode" / "bundle" / PASSAGES / "public" /
                       search.PASSAGE_ROWS).read_text("utf-8"))["rows"]
    assert len(rows) > 40 and max(len(row[3]) for row in rows) <= PASSAGE_CHARS
    assert " ".join(row[3] for row in rows).split() == \
        [f"knotweed{n}" for n in range(3_000)]


@pytest.mark.slow
def test_the_readers_warnings_name_the_pdf(tmp_path: Path) -> None:
    """A damaged PDF pypdf can read all the same (here its cross-reference table is not
    where the file says) exports, and what pypdf warns of is said with the PDF's path (its
    own, though another PDF is read at the same time)."""
    node = library_node(tmp_path / "node")
    pdf = node.root / "content" / "library" / "guide.pdf"
    pdf.unlink()
    raw_pdf(pdf, [_text(b"Knotweed grows along rivers.")])
    data = pdf.read_bytes()
    head, _, tail = data.rpartition(b"startxref\n")
    pdf.write_bytes(head + b"startxref\n" + b"%d" % (int(tail.split()[0]) + 7) + b"\n%%EOF\n")
    done = subprocess.run([sys.executable, "-m", "cli.main", "export", "--project",
                           str(node.root)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "pypdf" in line]
    assert warned and all(line.startswith("content/library/guide.pdf: warning: pypdf: ")
                          for line in warned), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("slow", [("guide.pdf",), ("guide.pdf", "protocol.pdf")])
def test_a_pdf_that_takes_too_long_to_read_is_refused(tmp_path: Path,
                                                      slow: tuple[str, ...]) -> None:
    """The command reads each PDF in a process of its own, killed after READ_SECONDS (here 2
    s, for a page whose text takes pypdf about ten): a problem naming the PDF, and the last
    good build stays. Two PDFs are read at once (the command has two cores), each given its
    own READ_SECONDS from when its reading began."""
    node = library_node(tmp_path / "node")
    build(Project(node.root))
    before = os.readlink(node.root / ".fednode" / "current")
    for name in slow:
        pdf = node.root / "content" / "library" / name
        pdf.unlink()
        raw_pdf(pdf, [b"BT /F1 10 Tf 50 700 Td\n" + b"(Knotweed grows. ) Tj\n" * 200_000 +
                      b"ET\n"])
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
              "from exporter.library import documents as library\n"
              "from exporter.pipeline.build import build\n"
              "from exporter.project.config import Project\n"
              "from exporter.shared.errors import ContentError\n"
              "library.READ_SECONDS = 2.0\n"
              "try: build(Project(Path(sys.argv[2])))\n"
              "except ContentError as error: print(*error.problems, sep='\\n')\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script, str(REPO), str(node.root)],
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 30, done
    assert done.stdout.splitlines() == [
        f"content/library/{name}: cannot read this PDF: reading it took more than 2 s; "
        f"replace it with a PDF whose text can be extracted"
        for name in slow], done
    assert os.readlink(node.root / ".fednode" / "current") == before


# Any character a line of text can hold: no line breaks, no control characters.
LINE_CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cc", "Zl", "Zp"))


@settings(max_examples=200, deadline=None)
@given(bodies=st.lists(st.lists(st.text(LINE_CHARACTERS, min_size=1, max_size=30), max_size=6),
                      min_size=1, max_size=8),
       header=st.sampled_from(["", "A manual"]), numbered=st.booleans())
def test_furniture_is_only_what_repeats_at_the_edges(
        bodies: list[list[str]], header: str, numbered: bool) -> None:
    """A page keeps every line of its body; only a line at its top or bottom that is its
    label, or that stands at the top or bottom of half the pages (three at least), goes."""
    from exporter.library.documents import without_furniture
    # Body lines differ from page to page, as a text's lines do (numbered to make sure).
    bodies = [[f"{n}.{m} {line}".strip() for m, line in enumerate(lines)]
              for n, lines in enumerate(bodies)]
    pages = []
    for n, lines in enumerate(bodies):
        top = [header] if header else []
        bottom = [str(n + 1)] if numbered else []
        pages.append((str(n + 1), "\n".join(top + lines + bottom)))
    kept = without_furniture(pages)
    repeats = len(pages) >= 3
    for (_, text), lines, out in zip(pages, bodies, kept, strict=True):
        got = out.splitlines()
        assert got == (lines if repeats or not header else [header, *lines]), (text, out)


def test_a_broken_pdf_is_named_beside_other_problems(tmp_path: Path) -> None:
    """A broken PDF is named with the content's other problems, not only once they are
    fixed (`fednode check` said one round of problems, then the PDF's)."""
    node = library_node(tmp_path / "node", restricted=False)
    (node.root / "content" / "library" / "guide.pdf").write_bytes(b"%PDF-1.4 not a PDF")
    fields = species("Heracleum mantegazzianum")
    fields["category"] = "weedy"
    node.write("species", "hogweed", fields)
    done = subprocess.run([sys.executable, "-m", "cli.main", "check", "--project",
                           str(node.root)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "content/species/hogweed.md" in said and "category" in said, said
    assert "content/library/guide.pdf: cannot read this PDF" in said, said
