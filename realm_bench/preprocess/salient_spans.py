"""Salient spans of pre-training sentences: dates by a regular expression, named entities by a
pluggable tagger.

REALM masks salient spans: "named entities and dates", the entities found by a BERT-based
tagger trained on CoNLL-2003 and the dates by a regular expression (REALM, section 3.4). The
date expression is ours, written to the paper's description (the released code does not carry
it): full dates in either order ("20 December 2018", "December 20, 2018"), month and year,
month and day, and years 1000-2099 standing alone.

The entity tagger is an interface (`EntityTagger`: a sentence -> [(start, end)] character
spans) so a trained model can be plugged in. The one shipped, `CapitalizedRunTagger`, runs
offline with no model, and is not the paper's tagger:

- it finds maximal runs of capitalised words, joined by a few lower-case connectors ("Bank of
  England", "Charles de Gaulle"), and treats each run as one entity; there are no entity types;
- it misses entities that are not capitalised (e.g. "iPhone", "eBay") and lower-case mentions;
- it over-tags capitalised words that are not entities: sentence-initial words (it skips a
  first word only when it is a common function word or the run is that word alone), month and
  day names outside dates, titles of works run into names, headings;
- it cannot split two adjacent names ("Paris France") the way a trained tagger can.
A CoNLL-trained tagger (REALM's, or any spaCy / Flair / Hugging Face NER model) plugs in through
`EntityTagger`; its spans replace this one's, dates are still found by the expression.
"""
from __future__ import annotations

import re
from typing import Protocol

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|"
          r"December|Jan\.|Feb\.|Mar\.|Apr\.|Jun\.|Jul\.|Aug\.|Sep\.|Sept\.|Oct\.|Nov\.|Dec\.)")
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1\d{3}|20\d{2})"
DATE = re.compile(
    rf"\b(?:{_DAY} {_MONTH},? {_YEAR}"        # 20 December 2018
    rf"|{_MONTH} {_DAY},? {_YEAR}"            # December 20, 2018
    rf"|{_MONTH},? {_YEAR}"                   # December 2018
    rf"|{_MONTH} {_DAY}\b"                    # December 20
    rf"|{_DAY} {_MONTH}"                      # 20 December
    rf"|{_YEAR}s?)(?!\d)(?<!\.)")             # 2018, the 1990s
_CONNECTORS = {"of", "the", "de", "da", "del", "der", "van", "von", "la", "le", "du", "and",
               "for", "y", "al", "bin", "ibn", "&"}
_FUNCTION_WORDS = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "We", "This",
                   "That", "These", "Those", "His", "Her", "Its", "Their", "There", "After",
                   "Before", "During", "When", "While", "As", "By", "For", "From", "If", "But",
                   "And", "Or", "However", "Although", "Since", "With", "Of", "To", "Some",
                   "Many", "Most", "One", "I", "You", "Our", "My", "Also", "Both", "Each",
                   "Other", "Another", "Such", "All", "According", "Following", "Despite",
                   "Under", "Between", "Among", "Over", "Later", "Then", "Today", "Here"}
_WORD = re.compile(r"[^\s,;:()\"“”]+")


class EntityTagger(Protocol):
  """Named-entity spans of one sentence: (start, end) character offsets, end exclusive."""

  name: str

  def __call__(self, sentence: str) -> list[tuple[int, int]]:
    ...


def _capitalised(word: str) -> bool:
  return word[:1].isupper() or (word[:1].isdigit() and any(c.isupper() for c in word))


class CapitalizedRunTagger:
  """Runs of capitalised words as entities (offline, no model; see the module docstring)."""

  name = "capitalized-runs"

  def __call__(self, sentence: str) -> list[tuple[int, int]]:
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(sentence)]
    spans, i = [], 0
    while i < len(words):
      if not _capitalised(words[i][2]):
        i += 1
        continue
      j = i + 1   # extend over capitalised words and connectors followed by one
      while j < len(words):
        if _capitalised(words[j][2]):
          j += 1
        elif (words[j][2] in _CONNECTORS and j + 1 < len(words)
              and _capitalised(words[j + 1][2])):
          j += 2
        else:
          break
      first = i
      if first == 0 and words[0][2] in _FUNCTION_WORDS:
        first = 1
      if first < j and not (first == 0 and j == 1 and i == 0):
        start, end = words[first][0], words[j - 1][1]
        text = sentence[start:end].rstrip(".'’")
        if text:
          spans.append((start, start + len(text)))
      i = j
    return spans


def date_spans(sentence: str) -> list[tuple[int, int]]:
  return [m.span() for m in DATE.finditer(sentence)]


def salient_spans(sentence: str, tagger: EntityTagger) -> list[dict]:
  """{"start", "end", "kind"} spans, sorted, dates first where a date and an entity overlap
  (a tagger that calls "December 2018" an entity would otherwise hide the date)."""
  dates = date_spans(sentence)
  spans = [{"start": s, "end": e, "kind": "date"} for s, e in dates]
  for s, e in tagger(sentence):
    if not 0 <= s < e <= len(sentence):
      raise ValueError(f"tagger {tagger.name!r} returned span ({s}, {e}) outside a sentence of "
                       f"{len(sentence)} characters")
    if not any(s < de and ds < e for ds, de in dates):
      spans.append({"start": s, "end": e, "kind": "entity"})
  return sorted(spans, key=lambda span: (span["start"], span["end"]))


TAGGERS: dict[str, type] = {CapitalizedRunTagger.name: CapitalizedRunTagger}
