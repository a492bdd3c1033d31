"""The search index's format, shared by the export that writes it and the sidecar that asks
it: the fields, the analyzers that turn text into terms, the files of each group's index,
which text of a record goes where (`document`), and how a text is cut into sentences, words
and stems. Writing is `exporter.indexing`; asking is `sidecar.ranking`; word vectors are
`word_vectors`.

Keyword search is tantivy (BM25, English stemming, fuzzy terms for typos in names, phrase
boosts); semantic search is wordllama's static word vectors, embedded offline at export
time and compared by cosine with numpy.

The index is split by access group: `search/<group>/` in the bundle holds the tantivy
index and the vectors of that group's records only. A caller's search reads the groups it
holds (public, plus its key's groups) and nothing else, so a restricted record cannot
change a single byte of what another caller gets: not its results, order, scores,
snippets or counts (BM25's term statistics are those of the group's own records).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

# Bump when what is indexed, or how, changes: every group is then indexed afresh.
SEARCH_VERSION = "6"
STATE = "state.json"  # per group: the version and the rows, in the order of VECTORS
PASSAGE_ROWS = "passages.json"  # per library group: [document id, page, label, text,
# headings] a row (headings: the spans of its heading sentences in text, `library.passages`)
VECTORS = "vectors.npy"  # per group: float32 (rows, DIMENSIONS), unit length
# per library group: float32 (rows, encoder.DIMENSIONS), each passage's text by the sentence
# encoder (`exporter.shared.encoder`), unit length, in the order of PASSAGE_ROWS
SENSES = "senses.npy"
DIMENSIONS = 256
MODEL = {"config": "l2_supercat", "dim": DIMENSIONS}
EMBED_CHARS = 600  # of a record's text: static vectors are averages, and a long tail blurs them

QUERY_WORDS = 32  # words of a query looked at: a query's cost grows with its words

TEXT = "fednode_text"  # analyzer: words, lower case, ASCII-folded, English stop words, stems
NAMES = "fednode_names"  # analyzer: words, lower case, ASCII-folded; no stems, no stop words



def _analyzer(stems: bool) -> tantivy.TextAnalyzer:
    builder = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
               .filter(tantivy.Filter.remove_long(40))
               .filter(tantivy.Filter.lowercase())
               .filter(tantivy.Filter.ascii_fold()))
    if stems:
        builder = (builder.filter(tantivy.Filter.stopword("english"))
                   .filter(tantivy.Filter.stemmer("english")))
    return builder.build()


ANALYZERS = {TEXT: _analyzer(True), NAMES: _analyzer(False)}
# Words that alone match a name by accident ("of" in "Tree of heaven"): as in the text
# analyzer's English list, plus French, Dutch and German articles and prepositions.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with de du des la le les et en het van een der "
    "die das und von".split())


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("collection", stored=True, tokenizer_name="raw", fast=True)
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("names", stored=True, tokenizer_name=NAMES)
    builder.add_text_field("title", stored=True, tokenizer_name=TEXT)
    builder.add_text_field("text", stored=False, tokenizer_name=TEXT)
    # The part of the text people read on the record's page (its body, or an imported
    # species' sentence, and its facts written as prose): what snippets show, so that a
    # snippet is never a run of codes and values. Queried only to find the snippet's words.
    builder.add_text_field("shown", stored=True, tokenizer_name=TEXT)
    # The member node a hub's record comes from (its `source_node`); a node's own records
    # have none. Counted by, for a hub's matches by member (`node_counts`).
    builder.add_text_field("node", stored=False, tokenizer_name="raw", fast=True)
    return builder.build()


SCHEMA = schema()


def passage_schema() -> tantivy.Schema:
    """A passage of a library PDF: its row in the group's passages.json, and its text."""
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row", stored=True, fast=True)
    builder.add_text_field("text", stored=False, tokenizer_name=TEXT)
    return builder.build()


PASSAGE_SCHEMA = passage_schema()


def _register(index: tantivy.Index) -> tantivy.Index:
    for name, analyzer in ANALYZERS.items():
        index.register_tokenizer(name, analyzer)
    return index


@dataclass(frozen=True)
class Doc:
    """What search knows of one record."""

    collection: str
    id: str
    names: str  # the record's names (`x-fednode.search.names`), one per line
    title: str
    text: str  # every text field, the body first
    node: str = ""  # the record's `source_node` (a hub's record), else empty
    shown: str = ""  # the text fields a snippet may show (`text`'s readable part)

    def embedding_text(self) -> str:
        return f"{self.title}\n{self.names}\n{self.text}"[:EMBED_CHARS]


def document(collection: str, record_id: str, title: str, fields: dict[str, Any],
             name_fields: Sequence[str], text_fields: Sequence[str],
             shown_fields: Sequence[str] = ()) -> Doc:
    """A record's searchable text: its names, its title, its other text fields, and which
    of those a snippet may show."""
    names = "\n".join(_strings(fields.get(name)) for name in name_fields)
    texts = {name: _strings(fields.get(name)) for name in text_fields}
    node = fields.get("source_node")
    return Doc(collection, record_id, names.strip(), title,
               "\n".join(text for text in texts.values() if text),
               node if isinstance(node, str) else "",
               "\n".join(text for name, text in texts.items() if text and name in shown_fields))


def _strings(value: Any) -> str:
    """The text of a field: a string, the strings of a list, or, for a list of tables
    (a species' distributions, descriptions, vernacular names), the strings in each."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_strings(item) for item in value
                         if isinstance(item, (str, dict)) and item)
    if isinstance(value, dict):
        return " ".join(text for key, item in value.items()
                        if key not in _CODES and (text := _strings(item)))
    return ""


# Terms of a table whose values are codes (en, BE), not words anyone searches for.
_CODES = frozenset({"language", "countryCode"})


# An index opened, its analyzers registered (by the export that writes it and the sidecar
# that reads it).

def create(folder: Path, schema: tantivy.Schema = SCHEMA) -> tantivy.Index:
    folder.mkdir(parents=True, exist_ok=True)
    return _register(tantivy.Index(schema, path=str(folder)))


def open_index(folder: Path) -> tantivy.Index:
    return _register(tantivy.Index.open(str(folder)))




HEADING_CHARS = 60
_CONTINUES = tuple(",;:-–—(\"“'‘/")  # a line ending so goes on in the next
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[A-Z0-9“\"(‘'])")


def sentences(text: str) -> list[str]:
    """Text as sentences, with the line breaks of a PDF's layout undone. A short line (a
    heading, a paragraph's last line) ends what came before it, so a heading is a sentence
    of its own."""
    return [sentence for sentence, _ in marked_sentences(text)]


def marked_sentences(text: str, headings: frozenset[str] = frozenset()
                     ) -> list[tuple[str, bool]]:
    """`sentences`, each with whether it is (a piece of) one of `headings`: lines of the
    text set as headings (`exporter.library.pdf.read_pages` finds them by their size on
    the page)."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in (line.strip() for line in text.splitlines()):
        if not line:
            continue
        current.append(line)
        if len(line) < HEADING_CHARS and not line.endswith(_CONTINUES):
            blocks.append(current)
            current = []
    blocks.append(current)
    out = []
    for lines in blocks:
        joined = " ".join(" ".join(lines).split())
        heading = " ".join(lines[-1].split()) if lines and lines[-1] in headings else ""
        # where the heading stands in the block: its end (the line that ended the block)
        from_ = len(joined) - len(heading) if heading and joined.endswith(heading) else None
        at = 0
        for piece in _SENTENCE_END.split(joined):
            begin = joined.index(piece, at)
            at = begin + len(piece)
            if piece.strip():
                out.append((piece.strip(), from_ is not None and begin >= from_))
    return out


def statements(passage: str, headings: Sequence[Sequence[int]] = ()) -> list[tuple[str, str]]:
    """A library passage's sentences, each as weighed and as quoted. `headings` are the
    spans (start, end) of the passage's heading sentences (`library.passages`). Weighed, a
    heading is read with the sentence under it, whose subject it names (its words count for
    that sentence, as in the running text); quoted, the sentence stands without it: a
    heading is not part of what the page says."""
    spans = {int(begin): int(end) for begin, end in headings}
    out, cursor = [], 0
    for sentence in sentences(passage):
        begin = passage.find(sentence, cursor)
        if begin < 0:  # (a sentence is a piece of the text; should it not be, it is quoted whole)
            out.append((sentence, sentence))
            continue
        end = begin + len(sentence)
        cursor = end
        while spans.get(begin, end) < end:  # a heading, with the sentence after it
            begin = spans[begin] + 1
        out.append((sentence, passage[begin:end]))
    return out


def as_asked(text: str) -> str:
    """A caller's words as the library and the records are written, for matching: NFKC
    (full-width letters, ligatures and other compatibility forms as their plain letters),
    and a text without one lower-case letter ("WHEN IS BALSAM PULLED?") in lower case but
    its first letter. The word vectors are case-sensitive, and every capital inside a
    question would otherwise read as a name (`sidecar.library.unknown_names`)."""
    text = unicodedata.normalize("NFKC", text)
    if text.upper() == text and text.lower() != text:  # cased letters, none lower case
        text = text.lower()
        first = next((n for n, c in enumerate(text) if c.isalpha()), None)
        if first is not None:
            text = text[:first] + text[first].upper() + text[first + 1:]
    return text


def words(text: str) -> list[str]:
    """The query's words as the names analyzer sees them (lower case, ASCII-folded)."""
    return ANALYZERS[NAMES].analyze(text)[:QUERY_WORDS]  # type: ignore[no-any-return]


def stems(text: str) -> list[str]:
    """The query's stems (at most QUERY_WORDS: a query's cost grows with its words)."""
    return all_stems(text)[:QUERY_WORDS]


def all_stems(text: str) -> list[str]:
    """Every stem of a text as the text analyzer sees it: for weighing a passage or a
    sentence against a query, where every word counts."""
    return ANALYZERS[TEXT].analyze(text)  # type: ignore[no-any-return]
