"""How the synthetic world's facts become text: corpus and pre-training sentences, questions in
each benchmark's style, and CuratedTREC's answer patterns."""
from __future__ import annotations

import re

from realm_bench.tasks import world_text as text
from realm_bench.tasks.world_entities import Entity, fold


def _article(word: str) -> str:
  return "an" if fold(word)[0] in text.PLAIN_VOWELS else "a"


def short_form(entity: Entity) -> str:
  """How a passage refers to its subject once the lead has named it: a person's surname, a
  place's name, an organisation's core name."""
  return {"person": entity.words[-1], "place": entity.name,
          "organisation": entity.words[0]}[entity.kind]


def render(template: str, subject: str, obj: str) -> tuple[str, tuple[int, int], tuple[int, int]]:
  """Fills a template; returns the text and the [start, end) offsets of subject and object."""
  out, spans = "", {}
  for piece in re.split(r"(\{[soa]\})", template):
    if piece == "{s}":
      subject = subject if out else subject[0].upper() + subject[1:]
      spans["s"] = (len(out), len(out) + len(subject))
      out += subject
    elif piece == "{o}":
      spans["o"] = (len(out), len(out) + len(obj))
      out += obj
    elif piece == "{a}":
      out += _article(obj)
    else:
      out += piece
  return out, spans.get("s"), spans.get("o")


def question_text(template: str, subject: str, benchmark: str) -> str:
  """A question in a benchmark's style: NQ lower case with no "?", WebQuestions lower case with
  "?", CuratedTREC capitalised with "?"."""
  if benchmark == "trec":
    q = template.replace("{s}", subject)
    return q[0].upper() + q[1:] + "?"
  q = template.replace("{s}", subject.lower())
  return q + "?" if benchmark == "wq" else q


def trec_pattern(object_type: str, value: str, entity: Entity | None) -> str:
  """A CuratedTREC-style answer regex: matched with re.match (a prefix), IGNORECASE. Accented
  names also accept their plain spelling, as a TREC assessor would."""

  def name(s: str) -> str:
    plain = fold(s)
    if plain == s.lower():
      return re.escape(s)
    return f"(?:{re.escape(s)}|{re.escape(plain)})"

  if object_type == "year":
    return f"(?:in )?{re.escape(value)}"
  if object_type == "person":
    first, surname = entity.words
    return f"(?:{name(first)} )?{name(surname)}"
  if object_type == "organisation":
    core, suffix = entity.words
    return f"(?:the )?{name(core)}(?: {re.escape(suffix)})?"
  if object_type == "place":
    return f"(?:in )?{name(value)}"
  if object_type == "region":
    return f"(?:the )?(?:region of )?{name(value)}"
  if object_type == "occupation":
    return f"(?:an? )?{re.escape(value)}"
  return f"(?:the )?{re.escape(value)}(?: industry)?"
