"""What kind of record a question asks for, told by its asking words.

People ask a node "how do I get rid of Himalayan balsam", "who looks after the stored
seed", "why won't my heather seed germinate". Their words name the species, so the species
record matches best by words and meaning; what they want is a control method, a person, a
germination result, a rule or an event. Hybrid search (`search.run`) adds `LIFT` to the
fused score of the records of the collections a question's asking words point to, so that
among the records that match it, the kind asked for comes first. A query without such
words (a name, a topic) is ranked as it was matched. The words are English, as the
sample's records are; a node in another language ranks without the lift.

Measured on bench/search_judged.json (bench/search_quality.py): see docs/search.md."""

from __future__ import annotations

import re

LIFT = 0.5  # added to a fused score (0..1) of a record of an asked-for collection

# Each collection with the words that ask for it, in the order they are tried: "who runs
# the germination tests" asks for a person; "how do I get my cowslip seed to come up" for
# germination, not a way to remove a plant; "biological control" and "a dataset of control
# records" for resources. Words that ask for several kinds ("seedlings", "control") are
# left out.
_ASKING: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("team", re.compile(
        r"\b(who|whom|someone|somebody|anyone|person|people|contact|expert|coordinator|"
        r"press|interview)\b")),
    ("germination", re.compile(
        r"\b(germinat\w*|sprout\w*|come up|stratif\w*)\b")),
    ("resources", re.compile(
        r"\b(illegal|legal\w*|law|laws|allowed|permitted|regulations?|banned|report\w*|"
        r"training|course|events?|workshops?|volunteer\w*|biological control|biocontrol|"
        r"datasets?)\b")),
    ("treatments", re.compile(
        r"\b(how (do|can|should|to|would) (i|we|you|one)?|get rid|rid of|stop\w*|kill\w*|"
        r"remov\w*|clear\w*|eradicat\w*|tackl\w*|deal with|keeps? coming back|"
        r"coming up all over|taking over|spreading|restor\w*)\b")),
)


def asked_for(text: str) -> tuple[str, ...]:
    """The collections the question's asking words point to: the first that any of its
    words ask for (germination, a person, a control method), or none."""
    lowered = " ".join(text.lower().split())
    for collection, words in _ASKING:
        if words.search(lowered):
            return (collection,)
    return ()
