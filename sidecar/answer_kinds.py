"""What kind of answer a question asks for, and whether a sentence gives that kind: an
amount, a distance, a duration, a time, a reason, a rule, a place, a way of doing. A
sentence close to a question in words and meaning may still not answer it ("How far from
the stream?" is not answered by the sentence on the product's strength); one that gives the
kind asked for is more likely the answer. Plain patterns over English words: no model."""

from __future__ import annotations

import re

_NUMBER = (r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
           r"twelve|fifteen|twenty|thirty|forty|fifty|hundred|a few|several|half|a|an)")
_COUNT = (r"(?:\b(?!(?:19|20)\d\d\b)\d|\b(?:one|two|three|four|five|six|seven|eight|nine|"
          r"ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundreds?|thousands?|dozens?|half|several)\b)")
_RANGE = rf"{_NUMBER}\s*(?:(?:to|or|and|-|–)\s*{_NUMBER}\s*)?"
_LENGTH = r"(?:square |cubic )?(?:millimetres?|centimetres?|metres?|kilometres?|mm|cm|m|km)\b"
_TIME_UNIT = (r"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|seasons?|summers?|"
              r"winters?)\b")
_SEASONS = (r"(?:january|february|march|april|may|june|july|august|september|october|"
            r"november|december|spring|summer|autumn|winter|dormant season|growing season|"
            r"midsummer)")
# What a sentence holds that gives each kind of answer.
GIVES = {
    "distance": re.compile(rf"\b{_RANGE}{_LENGTH}", re.I),
    "duration": re.compile(rf"\b{_RANGE}{_TIME_UNIT}|\b(?:until|all year|as long as)\b", re.I),
    "temperature": re.compile(r"°|\bdegrees?\b", re.I),
    "percent": re.compile(r"\bper ?cent\b|%", re.I),
    "money": re.compile(r"€|\beuros?\b|\bfree of charge\b", re.I),
    "count": re.compile(_COUNT, re.I),
    "season": re.compile(rf"\b{_SEASONS}\b", re.I),
    "amount": re.compile(rf"{_COUNT}|\b(?:part in|parts? of)\b", re.I),
    "time": re.compile(rf"\b(?:{_SEASONS}|before|after|until|once|when|whenever|if|as soon as|"
                       rf"within|during|every|each|the day|the end|{_TIME_UNIT})", re.I),
    "digits": re.compile(r"\d{3}"),
    "reason": re.compile(r"\b(?:because|so that|so|since|otherwise|which means|to avoid|"
                         r"to prevent|as a result|reason|causes?d?)\b", re.I),
    "rule": re.compile(r"\b(?:never|must|do not|don't|not|no|only|may|should|need|needs|"
                       r"always|required|allowed|forbidden|banned|cannot|illegal|"
                       r"prohibited)\b", re.I),
    "place": re.compile(r"\b(?:on|in|at|above|below|beside|near|away from|into|under|along|"
                        r"where)\b", re.I),
}
# Kinds only a sentence that gives them answers: a number, a unit, a month. (A time asked
# by "when" may be a condition, "when the root has emerged"; a way, a rule, a reason or a
# place may be put in any words.)
STRICT = frozenset({"distance", "duration", "temperature", "percent", "money", "count",
                    "season", "amount", "digits", "time"})
# How a question asks for each kind, most particular first at one place in the question.
_ASKS = [(kind, re.compile(rf"\b(?:{words})\b", re.I)) for kind, words in (
    ("digits", r"(?:phone|telephone) number|what number"),
    ("temperature", r"(?:what|which) temperature|how (?:hot|cold|warm)"),
    ("percent", r"what (?:germination|percentage|proportion|survival|emergence|share)"
                r"(?: rate)?|what rate|how many percent"),
    ("money", r"how much does (?:\w+ ){1,4}cost|what (?:does|do) (?:\w+ ){1,4}"
              r"(?:cost|charge)|what is the (?:fine|price|cost)|how much is the (?:fine|fee)"),
    ("distance", r"how (?:far|wide|deep|high|tall|close|thick|big|large)|"
                 r"what (?:distance|width|depth|height|size)"),
    ("duration", r"how long|(?:for )?how many (?:years|weeks|days|months|hours|minutes|"
                 r"seasons)|how soon"),
    ("season", r"what time of (?:the )?year|(?:what|which) (?:month|season)s?"),
    ("count", r"how many"),
    ("amount", r"how (?:much|strong|often)|what (?:dose|concentration|amount|quantity|"
               r"number|dilution)|(?:what|which) is the (?:most|least|maximum|minimum)|"
               r"the (?:maximum|minimum)"),
    ("time", r"when|what (?:time|age|stage)|since when"),
    ("reason", r"why|what for"),
    ("place", r"where"),
    ("rule", r"is it|are we|can|could|may|must|should|do|does|is|are|am|have|has|will|did"),
    ("way", r"how|what|which|who"))]
# A clause that sets the scene ("When we sheet over a patch, how far ...") asks nothing.
_SCENE = re.compile(r"^(?:when|if|once|after|before|while)\b[^,?]*,\s*", re.I)
_CLAUSES = re.compile(r"\s[-–—]\s|[;:]\s")
_JOINED = re.compile(r"^\s*(?:so|and|but|then|or|if)\b", re.I)
# Words that open a statement, not an instruction (`instruction`).
_OPENERS = frozenset(
    "the a an this that these those it its we our they their there in on for of at to from "
    "with by as if when while where after before during each every most many some all any "
    "one two three both such seeds seed plants trees".split())


# Verbs that open an instruction in a field manual.
_VERBS = frozenset(
    "keep use push handle record return pile survey cut count check leave plant sow water "
    "remove store dry soak mix inject wear cover lay do never always avoid wash rinse clean "
    "follow agree choose take send ask report put dig pull break start wait protect call "
    "cancel tell make give treat look note mark label apply fill bag burn bury spread "
    "collect sort prick pot thin fence stake prune mow graze replace repeat".split())
# Words that may come before the verb of an instruction ("Then keep it ...").
_ADVERBS = frozenset("then first next finally afterwards also now always never".split())
# Words that follow a verb of an instruction: its object, or where or how it is done.
_OBJECTS = frozenset(
    "the a an it them this that these those each every all any some your our its their "
    "one two three four five at in on for with from to by only no up out off down back "
    "away over into".split())


def asked(question: str) -> str | None:
    """The kind of answer a question asks for: where its clauses are apart ("We have no
    drying room - how should we store seed?"), the last that asks; in it, the question
    word that comes first (an auxiliary inside a clause, "what should we do", is not a
    yes-or-no question), unless that is a bare "what" or "how" and a phrase later asks
    for a kind of number ("What's the phone number ...")."""
    clauses = _CLAUSES.split(_SCENE.sub("", question.strip()))
    for clause in reversed(clauses):
        found = sorted((match.start(), order, kind) for order, (kind, pattern)
                       in enumerate(_ASKS) if (match := pattern.search(clause)))
        if not found:
            continue
        start, _, kind = found[0]
        if kind == "rule" and start > 0 and not _JOINED.match(clause[:start]):
            others = [one for one in found if one[2] != "rule"]
            kind = others[0][2] if others else kind
        if kind in ("way", "rule"):
            kind = next((one[2] for one in found if one[2] in STRICT and one[2] != "time"),
                        kind)
        return kind
    return None


_FOCUS = re.compile(r"\b(?:how (?:much|many)|what|which)\s+((?:[\w'-]+\s+){1,4})", re.I)
_FOCUS_ENDS = frozenset(
    "do does did is are was were be should can could may might must will would shall has "
    "have had go goes went get gets need needs to in on for at from with by into".split())


def focus(question: str) -> list[str]:
    """The words that name what a question asks for, after "how much", "how many", "what"
    or "which" ("How much glyphosate product goes into each cane?": glyphosate, product),
    at most FOCUS_WORDS of them. The sentence that answers puts the answer in their place:
    it need not hold them ("Inject 3 millilitres into each cane"), where a neighbouring
    sentence about the product does; the rest of the question ("each cane") tells them
    apart."""
    match = _FOCUS.search(question)
    if not match:
        return []
    found = []
    for word in match.group(1).split():
        if word.lower() in _FOCUS_ENDS:
            break
        if word.lower() not in ("of", "the", "a", "an"):
            found.append(word)
    return found[:FOCUS_WORDS]


FOCUS_WORDS = 2
_PER = re.compile(r"\b(?:each|per|every|in (?:a|an|one))\s+((?:[\w'-]+\s*){1,2})", re.I)
_NOT_UNITS = frozenset("of the a an in on at to for from with by and or new one".split())


def counted_by(sentence: str, counted: list[str]) -> bool:
    """Whether a sentence counts by one of these units (`units`): "each", "per", "every",
    "a" or "one" before it, a word between at most ("into each cane", "per square metre",
    "300 canes an hour")."""
    return any(re.search(rf"\b(?:each|per|every|a|an|one)\s+(?:[\w-]+\s+)?"
                         rf"{re.escape(word[:max(4, len(word) - 2)])}", sentence, re.I)
               for word in counted)


def units(question: str) -> list[str]:
    """What a number asked for is counted by ("into each knotweed cane": cane; "per square
    metre": metre; "how many seeds in a gram": gram): the sentence that gives the number
    names it, where a sentence with a number per litre, or per square metre, answers
    another question."""
    match = _PER.search(question)
    if not match:
        return []
    words = [word for word in re.findall(r"[\w'-]+", match.group(1))
             if word.lower() not in _NOT_UNITS]
    return words[-1:]  # "each knotweed cane": the cane


def gives(kind: str | None, sentence: str) -> bool:
    """Whether a sentence gives the kind of answer asked for: a way or a rule by an
    instruction too ("Use paper bags, never plastic")."""
    if kind in ("way", "rule") and instruction(sentence):
        return True
    pattern = GIVES.get(kind or "")
    return bool(pattern and pattern.search(sentence))


def instruction(sentence: str) -> bool:
    """Whether a sentence tells the reader what to do ("Keep it in a refrigerator", "Never
    wash a spill away"): it opens with a verb of `_VERBS`, or with a capital word that no
    statement opens with followed by what a verb takes ("Handle them", "Pile the plants")."""
    words = re.findall(r"[A-Za-z']+", sentence[:60])
    if not words or not sentence[:1].isupper():
        return False
    while len(words) > 1 and words[0].lower() in _ADVERBS:
        words = words[1:]
    first = words[0].lower()
    if first in _VERBS:
        return True
    return (len(words) > 1 and first not in _OPENERS and words[1].lower() in _OBJECTS
            and not first.endswith(("s", "ed", "ing", "ly")))
