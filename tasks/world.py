"""The seeded synthetic world: entities, a knowledge corpus, pre-training text and questions.

REALM's effects (retrieval helps, a stale index hurts, a learned retriever beats a fixed one)
only show when answering needs the corpus. So the world has many entities whose attribute
values are shared (many people born the same year or in the same town), distractor entities
whose names differ from a real one by a single letter but whose facts all differ, and every
entity's facts are spread over two or more blocks so no block holds everything about it.

Questions are split by FACT (subject, relation), not by question, and the same partition is
used by all three benchmarks, so a test fact is never asked during fine-tuning; the
pre-training sentences state every fact, as Wikipedia text covers everything.

Only the standard library and gin are imported: the generator must run before (and without)
TensorFlow, JAX or seqio. Everything random comes from one `random.Random(seed)` and every
iteration is over lists in a fixed order, so the same seed and GENERATOR_VERSION give
byte-identical files.
"""
from __future__ import annotations

import dataclasses
import math
import random
import re
import unicodedata
from pathlib import Path
from typing import Callable

import gin

from realm_bench.errors import InputError
from realm_bench.io_utils import (atomic_write_json, atomic_write_jsonl, atomic_write_text,
                                  sha256_file)

# Bump whenever the same config would produce different files.
GENERATOR_VERSION = "1"

SPLITS = ("train", "dev", "test")
BENCHMARKS = ("nq", "wq", "trec")


@gin.configurable
@dataclasses.dataclass(frozen=True)
class WorldConfig:
  """Size and difficulty of the world. Counts are of real entities; distractors come on top.

  Attributes:
    seed: the only source of randomness.
    num_people, num_places, num_organisations: real entities of each kind.
    num_regions: regions places lie in; few regions means many places share one.
    distractor_fraction: per kind, this fraction of extra entities whose name is one letter
      away from a real entity's and whose every fact differs from it.
    facts_per_block: most facts one corpus block states.
    min_blocks_per_entity: an entity's facts are spread over at least this many blocks (as far
      as it has facts), so retrieval must find the right block, not just the right entity.
    pretrain_sentences_per_fact: pre-training sentences restating each fact (at most 3, one
      per distinct pre-training template).
    dev_fraction, test_fraction: fractions of facts held out as dev and test questions.
    train_questions_per_fact: differently phrased questions asked about each training fact.
    nq_fraction, wq_fraction, trec_fraction: fraction of each split's facts a benchmark asks.
    first_birth_year, last_birth_year: people's birth years; a narrow range makes many
      people share one.
    accent_fraction: fraction of name words given one accented vowel, so Unicode paths run.
  """
  seed: int = 0
  num_people: int = 300
  num_places: int = 70
  num_organisations: int = 80
  num_regions: int = 10
  distractor_fraction: float = 0.2
  facts_per_block: int = 2
  min_blocks_per_entity: int = 2
  pretrain_sentences_per_fact: int = 2
  dev_fraction: float = 0.1
  test_fraction: float = 0.15
  train_questions_per_fact: int = 1
  nq_fraction: float = 1.0
  wq_fraction: float = 0.7
  trec_fraction: float = 0.5
  first_birth_year: int = 1820
  last_birth_year: int = 1960
  accent_fraction: float = 0.02


# ----------------------------------------------------------------------------- relations

@dataclasses.dataclass(frozen=True)
class Relation:
  """One attribute: its templates per use. `{s}` subject, `{o}` object, `{a}` a/an for {o}."""
  subject_kind: str
  object_type: str   # year | person | place | organisation | region | occupation | industry
  corpus: tuple[str, ...]
  pretrain: tuple[str, ...]
  nq: tuple[str, ...]
  wq: tuple[str, ...]
  trec: tuple[str, ...]


# Corpus and pre-training templates are disjoint, so a pre-training sentence never appears
# verbatim in the corpus (the block it came from is excluded at pre-training anyway).
RELATIONS: dict[str, Relation] = {
    "birth_year": Relation(
        "person", "year",
        corpus=("{s} was born in {o}.", "{s} was born in the year {o}."),
        pretrain=("In {o}, {s} was born.", "The birth of {s} took place in {o}.",
                  "{s} arrived in the world in {o}."),
        nq=("when was {s} born", "what year was {s} born"),
        wq=("what year was {s} born?", "in what year was {s} born?"),
        trec=("In what year was {s} born?", "When was {s} born?")),
    "birthplace": Relation(
        "person", "place",
        corpus=("{s} was born in the town of {o}.", "{s} is a native of {o}."),
        pretrain=("{o} is the birthplace of {s}.", "The hometown of {s} is {o}.",
                  "{s} grew up in {o}, the town of their birth."),
        nq=("where was {s} born", "what is the birthplace of {s}"),
        wq=("what city was {s} born in?", "where is {s} from?"),
        trec=("Where was {s} born?", "What town was {s} born in?")),
    "occupation": Relation(
        "person", "occupation",
        corpus=("{s} worked as {a} {o}.", "By trade, {s} was {a} {o}."),
        pretrain=("{s} earned a living as {a} {o}.",
                  "The profession of {s} was that of {a} {o}.", "{s} trained to become {a} {o}."),
        nq=("what was the occupation of {s}", "what was {s}'s job"),
        wq=("what was {s}'s profession?", "what kind of work did {s} do?"),
        trec=("What was {s}'s profession?", "What did {s} do for a living?")),
    "employer": Relation(
        "person", "organisation",
        corpus=("{s} was employed by {o}.", "{s} spent a career at {o}."),
        pretrain=("{o} employed {s}.", "{s} held a position with {o}.",
                  "For many years {s} worked for {o}."),
        nq=("who did {s} work for", "who was the employer of {s}"),
        wq=("what company did {s} work for?", "where did {s} work?"),
        trec=("Who employed {s}?", "For which company did {s} work?")),
    "region": Relation(
        "place", "region",
        corpus=("{s} is a town in the region of {o}.", "{s} lies within {o}."),
        pretrain=("The town of {s} belongs to {o}.", "{o} is the region that contains {s}.",
                  "{s} is part of {o}."),
        nq=("what region is {s} in", "where is {s} located"),
        wq=("what region is {s} located in?", "which region does {s} belong to?"),
        trec=("In which region is {s}?", "Where is {s} located?")),
    "settled_year": Relation(
        "place", "year",
        corpus=("{s} was founded in {o}.", "The settlement of {s} dates from {o}."),
        pretrain=("Settlers established {s} in {o}.", "{s} was first settled in {o}.",
                  "The town of {s} has existed since {o}."),
        nq=("when was {s} founded", "what year was the town of {s} founded"),
        wq=("when was the town of {s} settled?", "what year was {s} first settled?"),
        trec=("When was {s} founded?", "In what year was {s} settled?")),
    "mayor": Relation(
        "place", "person",
        corpus=("The mayor of {s} is {o}.", "{o} serves as mayor of {s}."),
        pretrain=("{s} elected {o} as its mayor.", "{o} holds the office of mayor in {s}.",
                  "The town of {s} is governed by mayor {o}."),
        nq=("who is the mayor of {s}", "who is the current mayor of {s}"),
        wq=("who is {s}'s mayor?", "who is the mayor of the town of {s}?"),
        trec=("Who is the mayor of {s}?", "Who governs {s} as mayor?")),
    "founder": Relation(
        "organisation", "person",
        corpus=("{s} was founded by {o}.", "{o} established {s}."),
        pretrain=("{o} is the founder of {s}.", "{s} owes its creation to {o}.",
                  "{s} was started by {o}."),
        nq=("who founded {s}", "who was the founder of {s}"),
        wq=("who started {s}?", "who created the company {s}?"),
        trec=("Who founded {s}?", "Who was the founder of {s}?")),
    "founding_year": Relation(
        "organisation", "year",
        corpus=("{s} was established in {o}.", "{s} has operated since {o}."),
        pretrain=("{s} opened its doors in {o}.", "The founding year of {s} is {o}.",
                  "In {o}, {s} began trading."),
        nq=("when was {s} established", "what year was {s} founded"),
        wq=("what year did {s} start?", "when did the company {s} open?"),
        trec=("When was {s} established?", "In what year was {s} founded?")),
    "headquarters": Relation(
        "organisation", "place",
        corpus=("{s} is headquartered in {o}.", "The head office of {s} is in {o}."),
        pretrain=("{s} keeps its headquarters in {o}.", "{o} is home to the head office of {s}.",
                  "{s} is based in {o}."),
        nq=("where is {s} headquartered", "where is the head office of {s}"),
        wq=("what city is {s} based in?", "where are {s}'s headquarters?"),
        trec=("Where is {s} headquartered?", "Where are the headquarters of {s}?")),
    "industry": Relation(
        "organisation", "industry",
        corpus=("{s} works in the {o} industry.", "{s} is {a} {o} company."),
        pretrain=("{s} does business in {o}.", "The trade of {s} is {o}.",
                  "{s} earns its money from {o}."),
        nq=("what industry is {s} in", "what business is {s} in"),
        wq=("what kind of business is {s}?", "what does the company {s} do?"),
        trec=("What industry is {s} in?", "What business is {s} in?")),
}

KINDS = ("person", "place", "organisation")
RELATIONS_OF = {k: [r for r in RELATIONS if RELATIONS[r].subject_kind == k] for k in KINDS}
MAX_PRETRAIN_SENTENCES = min(len(r.pretrain) for r in RELATIONS.values())

OCCUPATIONS = (
    "architect", "astronomer", "banker", "blacksmith", "botanist", "cartographer", "chemist",
    "clockmaker", "composer", "engineer", "glassblower", "journalist", "lawyer", "librarian",
    "merchant", "miner", "painter", "physician", "poet", "potter", "printer", "sailor",
    "surveyor", "teacher", "weaver")
INDUSTRIES = (
    "banking", "brewing", "clockmaking", "glassmaking", "insurance", "ironworking", "milling",
    "mining", "pottery", "printing", "publishing", "shipbuilding", "shipping", "tanning",
    "textiles", "timber")
# Generic on purpose: a suffix like "Brewery" would give the industry away without retrieval.
ORG_SUFFIXES = ("Company", "Enterprises", "Group", "Holdings", "Industries", "Partners",
                "Trust", "Works")
PLACE_SUFFIXES = ("", "", "", "ford", "holm", "mere", "stad", "wick")
REGION_SUFFIXES = ("ia", "a", "land", "mark")

ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
          "br", "dr", "gr", "kr", "st", "tr", "th", "sh")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ea", "ou")
CODAS = ("", "", "", "n", "r", "l", "s", "m", "k", "th")
ACCENTED = {"a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü"}
PLAIN_VOWELS = "aeiou"
PLAIN_CONSONANTS = "bdfgklmnprstvz"


# ----------------------------------------------------------------------------- names

def fold(text: str) -> str:
  """Lower-case ASCII skeleton of a name: two names that fold alike are the same name."""
  decomposed = unicodedata.normalize("NFD", text)
  return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


class _Names:
  """Draws pronounceable words that no other entity of the world already uses."""

  def __init__(self, rng: random.Random, accent_fraction: float):
    self._rng = rng
    self._accent_fraction = accent_fraction
    self.used: set[str] = set()   # folded words; membership only, never iterated

  def word(self, syllables: int, suffixes: tuple[str, ...] = ("",)) -> str:
    for _ in range(10_000):
      parts = [self._rng.choice(ONSETS) + self._rng.choice(VOWELS) for _ in range(syllables)]
      w = "".join(parts) + self._rng.choice(CODAS) + self._rng.choice(suffixes)
      if len(w) < 4 or fold(w) in self.used:
        continue
      self.used.add(fold(w))
      if self._rng.random() < self._accent_fraction:
        w = _accent(self._rng, w)
      return w.capitalize()
    raise InputError("cannot draw enough distinct names; lower the entity counts",
                     field="WorldConfig.num_people")


def _accent(rng: random.Random, word: str) -> str:
  positions = [i for i, c in enumerate(word) if c in ACCENTED and i > 0]
  if not positions:
    return word
  i = rng.choice(positions)
  return word[:i] + ACCENTED[word[i]] + word[i + 1:]


def _one_letter_variant(rng: random.Random, word: str) -> str:
  """`word` with one non-initial letter replaced: a vowel by another vowel, or a consonant
  between two vowels by another consonant, so the variant stays pronounceable and reads
  almost the same ("Dotan" -> "Doten", "Dotan" -> "Doman")."""
  plain = fold(word)

  def editable(i: int) -> bool:
    if plain[i] in PLAIN_VOWELS:
      return True
    return (plain[i] in PLAIN_CONSONANTS and i + 1 < len(plain)
            and plain[i - 1] in PLAIN_VOWELS and plain[i + 1] in PLAIN_VOWELS)

  i = rng.choice([i for i in range(1, len(word)) if editable(i)])
  pool = PLAIN_VOWELS if plain[i] in PLAIN_VOWELS else PLAIN_CONSONANTS
  return word[:i] + rng.choice([c for c in pool if c != plain[i]]) + word[i + 1:]


# ----------------------------------------------------------------------------- entities

@dataclasses.dataclass
class Entity:
  name: str
  kind: str
  words: list[str]   # first name and surname, or core and suffix; a distractor edits one
  distractor_of: str | None = None
  attributes: dict[str, str] = dataclasses.field(default_factory=dict)
  block_ids: list[int] = dataclasses.field(default_factory=list)


def _person_name(words: list[str]) -> str:
  return " ".join(words)


def _make_entities(rng: random.Random, config: WorldConfig):
  names = _Names(rng, config.accent_fraction)
  regions = [names.word(2, REGION_SUFFIXES) for _ in range(config.num_regions)]

  # Small first-name and surname pools: people share first names and surnames, as people do.
  first_names = [names.word(2) for _ in range(max(4, config.num_people // 3))]
  surnames = [names.word(rng.choice((2, 2, 3))) for _ in range(max(4, config.num_people // 2))]
  taken: set[str] = set()   # folded full names; membership only

  people = []
  for _ in range(config.num_people):
    for _ in range(10_000):
      words = [rng.choice(first_names), rng.choice(surnames)]
      if fold(_person_name(words)) not in taken:
        break
    else:
      raise InputError("too many people for the name pools", field="WorldConfig.num_people")
    taken.add(fold(_person_name(words)))
    people.append(Entity(_person_name(words), "person", words))

  places = []
  for _ in range(config.num_places):
    w = names.word(rng.choice((2, 2, 3)), PLACE_SUFFIXES)
    taken.add(fold(w))
    places.append(Entity(w, "place", [w]))

  organisations = []
  for _ in range(config.num_organisations):
    core = names.word(2)
    name = f"{core} {rng.choice(ORG_SUFFIXES)}"
    taken.add(fold(name))
    organisations.append(Entity(name, "organisation", [core, name[len(core) + 1:]]))

  reserved = {fold(w) for w in regions + [p.name for p in places]
              + [o.words[0] for o in organisations]}
  for group in (people, places, organisations):
    group.extend(_distractors(rng, group, config.distractor_fraction, names, taken, reserved))
  return regions, people, places, organisations


def _distractors(rng, originals: list[Entity], fraction: float, names: _Names,
                 taken: set[str], reserved: set[str]) -> list[Entity]:
  """Entities named one letter away from a real one. A person's edited word may be another
  person's name word (a second "Dotan" is fine) but never a place, organisation or region word;
  a place's or organisation's edited word must be new to the world."""
  count = round(fraction * len(originals))
  out = []
  for original in rng.sample(originals, count):
    for _ in range(1000):
      words = list(original.words)
      i = rng.randrange(len(words)) if original.kind == "person" else 0
      words[i] = _one_letter_variant(rng, words[i])
      name = _person_name(words)
      forbidden = reserved if original.kind == "person" else names.used
      if fold(name) not in taken and fold(words[i]) not in forbidden:
        break
    else:
      raise InputError("cannot find distinct distractor names",
                       field="WorldConfig.distractor_fraction")
    taken.add(fold(name))
    names.used.add(fold(words[i]))
    if original.kind != "person":
      reserved.add(fold(words[i]))
    out.append(Entity(name, original.kind, words, distractor_of=original.name))
  return out


def _assign_attributes(rng: random.Random, config: WorldConfig, regions, people, places,
                       organisations) -> None:
  """Draws every attribute; a distractor redraws until each value differs from its original's."""
  by_name = {e.name: e for e in people + places + organisations}

  def draw(entity: Entity, relation: str, sample: Callable[[], str]) -> None:
    original = by_name[entity.distractor_of] if entity.distractor_of else None
    for _ in range(1000):
      value = sample()
      if original is None or value != original.attributes[relation]:
        entity.attributes[relation] = value
        return
    raise InputError(f"cannot draw a distinct {relation} for a distractor",
                     field="WorldConfig.distractor_fraction")

  years = range(config.first_birth_year, config.last_birth_year + 1)
  for p in people:
    draw(p, "birth_year", lambda: str(rng.choice(years)))
    draw(p, "birthplace", lambda: rng.choice(places).name)
    draw(p, "occupation", lambda: rng.choice(OCCUPATIONS))
    draw(p, "employer", lambda: rng.choice(organisations).name)

  # Each place has its own mayor and each organisation its own founder, so no person answers
  # two questions of one kind, and a distractor's mayor or founder always differs from its
  # original's.
  mayors = rng.sample(people, len(places))
  founders = rng.sample(people, len(organisations))

  for place, mayor in zip(places, mayors):
    draw(place, "region", lambda: rng.choice(regions))
    draw(place, "settled_year", lambda: str(rng.randint(1050, 1800)))
    place.attributes["mayor"] = mayor.name

  for org, founder in zip(organisations, founders):
    org.attributes["founder"] = founder.name
    born = int(founder.attributes["birth_year"])
    draw(org, "founding_year", lambda: str(born + rng.randint(22, 60)))
    draw(org, "headquarters", lambda: rng.choice(places).name)
    draw(org, "industry", lambda: rng.choice(INDUSTRIES))


# ----------------------------------------------------------------------------- text

def _article(word: str) -> str:
  return "an" if fold(word)[0] in PLAIN_VOWELS else "a"


def render(template: str, subject: str, obj: str) -> tuple[str, tuple[int, int], tuple[int, int]]:
  """Fills a template; returns the text and the [start, end) offsets of subject and object."""
  text, spans = "", {}
  for piece in re.split(r"(\{[soa]\})", template):
    if piece == "{s}":
      spans["s"] = (len(text), len(text) + len(subject))
      text += subject
    elif piece == "{o}":
      spans["o"] = (len(text), len(text) + len(obj))
      text += obj
    elif piece == "{a}":
      text += _article(obj)
    else:
      text += piece
  return text, spans["s"], spans["o"]


def trec_pattern(object_type: str, value: str, entity: Entity | None) -> str:
  """A CuratedTREC-style answer regex: matched with re.match (a prefix), IGNORECASE. Accented
  names also accept their plain spelling, as a TREC assessor would."""

  def name(text: str) -> str:
    plain = fold(text)
    if plain == text.lower():
      return re.escape(text)
    return f"(?:{re.escape(text)}|{re.escape(plain)})"

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


# ----------------------------------------------------------------------------- generation

@dataclasses.dataclass
class Fact:
  id: int
  subject: Entity
  relation: str
  value: str
  block_id: int = -1
  split: str = ""
  questions: dict[str, list[str]] = dataclasses.field(default_factory=dict)


def _validate(config: WorldConfig) -> None:
  def bad(field: str, why: str):
    raise InputError(why, field=f"WorldConfig.{field}")

  for field in ("seed", "num_people", "num_places", "num_organisations", "num_regions",
                "facts_per_block", "min_blocks_per_entity", "pretrain_sentences_per_fact",
                "train_questions_per_fact", "first_birth_year", "last_birth_year"):
    value = getattr(config, field)
    if not isinstance(value, int) or isinstance(value, bool):
      bad(field, f"must be an integer, got {value!r}")
  for field in ("num_places", "num_organisations", "num_regions"):
    if getattr(config, field) < 2:
      bad(field, "must be at least 2 (a distractor needs a different value to take)")
  for field in ("facts_per_block", "min_blocks_per_entity", "train_questions_per_fact"):
    if getattr(config, field) < 1:
      bad(field, "must be at least 1")
  if not 1 <= config.pretrain_sentences_per_fact <= MAX_PRETRAIN_SENTENCES:
    bad("pretrain_sentences_per_fact",
        f"must be between 1 and {MAX_PRETRAIN_SENTENCES} (one per distinct template)")
  if config.last_birth_year <= config.first_birth_year:
    bad("last_birth_year", "must be after first_birth_year")
  for field in ("distractor_fraction", "dev_fraction", "test_fraction", "accent_fraction",
                "nq_fraction", "wq_fraction", "trec_fraction"):
    value = getattr(config, field)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
      bad(field, f"must be a number in [0, 1], got {value!r}")
  if config.dev_fraction + config.test_fraction >= 1:
    bad("test_fraction", "dev_fraction + test_fraction must leave some training facts")
  def with_distractors(n: int) -> int:
    return n + round(config.distractor_fraction * n)
  if with_distractors(config.num_people) < with_distractors(
      max(config.num_places, config.num_organisations)):
    bad("num_people", "must be at least num_places and num_organisations (every place needs "
        "its own mayor and every organisation its own founder)")


def _build_facts(entities: list[Entity]) -> list[Fact]:
  facts = []
  for entity in entities:
    for relation in RELATIONS_OF[entity.kind]:
      facts.append(Fact(len(facts), entity, relation, entity.attributes[relation]))
  return facts


def _build_blocks(rng: random.Random, config: WorldConfig, entities: list[Entity],
                  facts_of: dict[str, list[Fact]]) -> list[dict]:
  blocks = []   # (entity, [(fact, sentence)])
  for entity in entities:
    facts = list(facts_of[entity.name])
    rng.shuffle(facts)
    count = min(len(facts), max(config.min_blocks_per_entity,
                                math.ceil(len(facts) / config.facts_per_block)))
    groups = [facts[i::count] for i in range(count)]
    for group in groups:
      sentences = []
      for fact in group:
        template = rng.choice(RELATIONS[fact.relation].corpus)
        sentences.append(render(template, entity.name, fact.value)[0])
      blocks.append((entity, group, " ".join(sentences)))
  # Shuffled so a block id says nothing about which entity it is about.
  rng.shuffle(blocks)
  rows = []
  for block_id, (entity, group, body) in enumerate(blocks):
    entity.block_ids.append(block_id)
    for fact in group:
      fact.block_id = block_id
    rows.append({"id": block_id, "title": entity.name, "body": body})
  for entity in entities:
    entity.block_ids.sort()
  return rows


def _pretrain_sentences(rng: random.Random, config: WorldConfig, facts: list[Fact]):
  rows = []
  for fact in facts:
    relation = RELATIONS[fact.relation]
    for template in rng.sample(relation.pretrain, config.pretrain_sentences_per_fact):
      text, s, o = render(template, fact.subject.name, fact.value)
      kind = "date" if relation.object_type == "year" else "entity"
      spans = sorted([{"start": s[0], "end": s[1], "kind": "entity"},
                      {"start": o[0], "end": o[1], "kind": kind}], key=lambda x: x["start"])
      rows.append({"text": text, "spans": spans, "block_id": fact.block_id})
  rng.shuffle(rows)
  return rows


def _split_facts(rng: random.Random, config: WorldConfig, facts: list[Fact]) -> None:
  order = list(range(len(facts)))
  rng.shuffle(order)
  n_test = round(config.test_fraction * len(facts))
  n_dev = round(config.dev_fraction * len(facts))
  for rank, index in enumerate(order):
    facts[index].split = "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"


def _questions(rng: random.Random, config: WorldConfig, facts: list[Fact],
               by_name: dict[str, Entity]) -> dict[str, dict[str, list[dict]]]:
  out = {b: {s: [] for s in SPLITS} for b in BENCHMARKS}
  fractions = {"nq": config.nq_fraction, "wq": config.wq_fraction, "trec": config.trec_fraction}
  for benchmark in BENCHMARKS:
    for split in SPLITS:
      pool = [f for f in facts if f.split == split]
      chosen = sorted(rng.sample(pool, round(fractions[benchmark] * len(pool))),
                      key=lambda f: f.id)
      per_fact = config.train_questions_per_fact if split == "train" else 1
      rows = []
      for fact in chosen:
        relation = RELATIONS[fact.relation]
        templates = list(getattr(relation, benchmark))
        rng.shuffle(templates)
        for k in range(per_fact):
          template = templates[k % len(templates)]
          if benchmark == "trec":
            question = template.replace("{s}", fact.subject.name)
            answer = [trec_pattern(relation.object_type, fact.value, by_name.get(fact.value))]
          else:
            # NQ and WebQuestions questions are lower-cased, as the real ones are.
            question = template.replace("{s}", fact.subject.name.lower())
            answer = [fact.value]
          if question in fact.questions.get(benchmark, []):
            continue
          fact.questions.setdefault(benchmark, []).append(question)
          rows.append({"question": question, "answer": answer})
      rng.shuffle(rows)
      out[benchmark][split] = rows
  return out


def generate(*, out_dir, config: WorldConfig) -> dict:
  """Writes the world under `out_dir` and returns the manifest (also written, last)."""
  _validate(config)
  out = Path(out_dir)
  rng = random.Random(config.seed)
  regions, people, places, organisations = _make_entities(rng, config)
  _assign_attributes(rng, config, regions, people, places, organisations)
  entities = people + places + organisations
  by_name = {e.name: e for e in entities}

  facts = _build_facts(entities)
  facts_of: dict[str, list[Fact]] = {e.name: [] for e in entities}
  for fact in facts:
    facts_of[fact.subject.name].append(fact)
  blocks = _build_blocks(rng, config, entities, facts_of)
  sentences = _pretrain_sentences(rng, config, facts)
  _split_facts(rng, config, facts)
  questions = _questions(rng, config, facts, by_name)

  files: dict[str, str] = {}

  def write_jsonl(rel: str, rows) -> None:
    atomic_write_jsonl(out / rel, rows)
    files[rel] = sha256_file(out / rel)

  write_jsonl("corpus/blocks.jsonl", blocks)
  atomic_write_text(out / "corpus/passages.tsv", "id\ttext\ttitle\n" + "".join(
      f"{b['id']}\t{b['body']}\t{b['title']}\n" for b in blocks))
  files["corpus/passages.tsv"] = sha256_file(out / "corpus/passages.tsv")
  write_jsonl("pretrain/sentences.jsonl", sentences)
  for benchmark in BENCHMARKS:
    for split in SPLITS:
      write_jsonl(f"open_qa/{benchmark}/{split}.jsonl", questions[benchmark][split])
  # The ground truth, for analysis (per-relation accuracy, distractor confusions) and tests.
  write_jsonl("truth/entities.jsonl", [
      {"name": e.name, "kind": e.kind, "distractor_of": e.distractor_of,
       "attributes": e.attributes, "block_ids": e.block_ids} for e in entities])
  write_jsonl("truth/facts.jsonl", [
      {"id": f.id, "subject": f.subject.name, "subject_kind": f.subject.kind,
       "relation": f.relation, "object": f.value,
       "object_type": RELATIONS[f.relation].object_type, "block_id": f.block_id,
       "split": f.split, "questions": {b: f.questions.get(b, []) for b in BENCHMARKS}}
      for f in facts])

  counts = {
      "people": len(people), "places": len(places), "organisations": len(organisations),
      "regions": len(regions),
      "distractors": sum(e.distractor_of is not None for e in entities),
      "entities": len(entities), "blocks": len(blocks), "facts": len(facts),
      "facts_per_split": {s: sum(f.split == s for f in facts) for s in SPLITS},
      "pretrain_sentences": len(sentences),
      "questions": {b: {s: len(questions[b][s]) for s in SPLITS} for b in BENCHMARKS},
  }
  manifest = {"generator_version": GENERATOR_VERSION, "seed": config.seed,
              "config": dataclasses.asdict(config), "counts": counts,
              "files": dict(sorted(files.items()))}
  atomic_write_json(out / "manifest.json", manifest)
  return manifest


def summary(manifest: dict, out_dir) -> str:
  c = manifest["counts"]
  q = "; ".join(f"{b} " + "/".join(str(c["questions"][b][s]) for s in SPLITS)
                for b in BENCHMARKS)
  return (f"Synthetic world (generator {manifest['generator_version']}, seed {manifest['seed']}) "
          f"written to {out_dir}: {c['entities']} entities ({c['people']} people, {c['places']} "
          f"places, {c['organisations']} organisations, of which {c['distractors']} are "
          f"near-name distractors), {c['blocks']} corpus blocks, {c['facts']} facts "
          f"(train/dev/test {'/'.join(str(c['facts_per_split'][s]) for s in SPLITS)}), "
          f"{c['pretrain_sentences']} pre-training sentences; questions train/dev/test: {q}.")
