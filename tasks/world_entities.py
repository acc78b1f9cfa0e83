"""The synthetic world's entities: names, near-name distractors and attribute values.

Name words are drawn from syllables, each new to the world (no template word, word-list value
or earlier name word), which keeps substring answer matching and distractor checks exact;
people then share first names and surnames from small pools, as people do. Attribute values
are drawn from small pools too, so many entities share each one.
"""
from __future__ import annotations

import dataclasses
import random
import re
import unicodedata

from realm_bench.errors import InputError
from realm_bench.tasks import world_text as text
from realm_bench.tasks.world_text import ACCENTED, PLAIN_CONSONANTS, PLAIN_VOWELS


def fold(s: str) -> str:
  """Lower-case ASCII skeleton of a name: two names that fold alike are the same name."""
  decomposed = unicodedata.normalize("NFD", s)
  return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


class _Names:
  """Draws pronounceable words that no other entity of the world (nor any template or word
  list) already uses."""

  def __init__(self, rng: random.Random, accent_fraction: float):
    self._rng = rng
    self._accent_fraction = accent_fraction
    self.used: set[str] = set()   # folded words; membership only, never iterated
    for phrase in [v for values in text.WORDS.values() for v in values] + [
        t for spec in [*text.MAJOR.values(), *text.MINOR.values()]
        for key in ("corpus", "pretrain", "ask_corpus", "ask_pretrain") for t in spec.get(key, ())]:
      self.used.update(re.findall(r"\w+", fold(phrase)))

  def word(self, syllables: int, suffixes: tuple[str, ...] = ("",)) -> str:
    rng = self._rng
    for _ in range(10_000):
      parts = [rng.choice(text.ONSETS) + rng.choice(text.VOWELS) for _ in range(syllables)]
      w = "".join(parts) + rng.choice(text.CODAS) + rng.choice(suffixes)
      if len(w) < 4 or fold(w) in self.used:
        continue
      self.used.add(fold(w))
      if rng.random() < self._accent_fraction:
        w = _accent(rng, w)
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


@dataclasses.dataclass
class Entity:
  name: str
  kind: str
  words: list[str]   # first name and surname, or core and suffix; a distractor edits one
  distractor_of: str | None = None
  attributes: dict[str, str] = dataclasses.field(default_factory=dict)
  minor_attributes: dict[str, str] = dataclasses.field(default_factory=dict)
  block_ids: list[int] = dataclasses.field(default_factory=list)
  alias: str | None = None   # a second name; only the lead block says it (`draw_aliases`)


def make_entities(rng: random.Random, config):
  """Regions and the people, places and organisations (distractors last in each list)."""
  names = _Names(rng, config.accent_fraction)
  regions = [names.word(2, text.REGION_SUFFIXES) for _ in range(config.num_regions)]

  # Small first-name and surname pools: people share first names and surnames, as people do.
  first_names = [names.word(2) for _ in range(max(4, config.num_people // 3))]
  surnames = [names.word(rng.choice((2, 2, 3))) for _ in range(max(4, config.num_people // 2))]
  taken: set[str] = set()   # folded full names; membership only

  people = []
  for _ in range(config.num_people):
    for _ in range(10_000):
      words = [rng.choice(first_names), rng.choice(surnames)]
      if fold(" ".join(words)) not in taken:
        break
    else:
      raise InputError("too many people for the name pools", field="WorldConfig.num_people")
    taken.add(fold(" ".join(words)))
    people.append(Entity(" ".join(words), "person", words))

  places = []
  for _ in range(config.num_places):
    w = names.word(rng.choice((2, 2, 3)), text.PLACE_SUFFIXES)
    taken.add(fold(w))
    places.append(Entity(w, "place", [w]))

  organisations = []
  for _ in range(config.num_organisations):
    core = names.word(2)
    name = f"{core} {rng.choice(text.ORG_SUFFIXES)}"
    taken.add(fold(name))
    organisations.append(Entity(name, "organisation", [core, name[len(core) + 1:]]))

  reserved = {fold(w) for w in regions + [p.name for p in places]
              + [o.words[0] for o in organisations]}
  for group in (people, places, organisations):
    group.extend(_distractors(rng, group, config.distractor_fraction, names, taken, reserved))
  return regions, people, places, organisations


def draw_aliases(rng: random.Random, entities: list[Entity], regions: list[str],
                 accent_fraction: float) -> None:
  """Gives every entity (distractors too) a one-word alias new to the world, the way "the
  Bard" names Shakespeare: a question may ask by it, and only one of the entity's blocks says
  it, so word overlap cannot find the others. Drawn after every other name, from `rng` (a
  stream of its own), so the rest of the world is the same with aliases or without."""
  names = _Names(rng, accent_fraction)
  names.used.update(re.findall(r"\w+", fold(" ".join(text.ALIAS))))
  names.used.update(fold(w) for w in regions)
  names.used.update(fold(w) for e in entities for w in e.name.split())
  for entity in entities:
    entity.alias = names.word(2)


def _distractors(rng, originals: list[Entity], fraction: float, names: _Names,
                 taken: set[str], reserved: set[str]) -> list[Entity]:
  """Entities named one letter away from a real one. A person's edited word may be another
  person's name word (a second "Dotan" is fine) but never a place, organisation or region word;
  a place's or organisation's edited word must be new to the world."""
  out = []
  for original in rng.sample(originals, round(fraction * len(originals))):
    for _ in range(1000):
      words = list(original.words)
      i = rng.randrange(len(words)) if original.kind == "person" else 0
      words[i] = _one_letter_variant(rng, words[i])
      name = " ".join(words)
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


def assign_attributes(rng: random.Random, config, regions, people, places, organisations, *,
                      minors: dict[str, list[tuple[str, str]]],
                      minor_counts: dict[str, int]) -> None:
  """Draws every attribute; a distractor redraws until each value differs from its original's.
  `minors[kind]` lists (relation, object type) of the kind's minor relations, of which an
  entity gets `minor_counts[kind]`."""
  by_name = {e.name: e for e in people + places + organisations}
  pools = {"person": people, "place": places, "organisation": organisations}

  def draw(entity: Entity, relation: str, sample, minor: bool = False) -> None:
    original = by_name[entity.distractor_of] if entity.distractor_of else None
    avoid = (original.minor_attributes if minor else original.attributes) if original else {}
    for _ in range(1000):
      value = sample()
      if value != avoid.get(relation) and value != entity.name:
        (entity.minor_attributes if minor else entity.attributes)[relation] = value
        return
    raise InputError(f"cannot draw a distinct {relation} for a distractor",
                     field="WorldConfig.distractor_fraction")

  years = range(config.first_birth_year, config.last_birth_year + 1)
  for p in people:
    draw(p, "birth_year", lambda: str(rng.choice(years)))
    draw(p, "birthplace", lambda: rng.choice(places).name)
    draw(p, "occupation", lambda: rng.choice(text.WORDS["OCCUPATIONS"]))
    draw(p, "employer", lambda: rng.choice(organisations).name)

  # Each place has its own mayor and each organisation its own founder, so no person answers
  # two questions of one kind, and a distractor's mayor or founder always differs from its
  # original's.
  for place, mayor in zip(places, rng.sample(people, len(places))):
    draw(place, "region", lambda: rng.choice(regions))
    draw(place, "settled_year", lambda: str(rng.randint(1050, 1800)))
    place.attributes["mayor"] = mayor.name

  for org, founder in zip(organisations, rng.sample(people, len(organisations))):
    org.attributes["founder"] = founder.name
    born = int(founder.attributes["birth_year"])
    draw(org, "founding_year", lambda: str(born + rng.randint(22, 60)))
    draw(org, "headquarters", lambda: rng.choice(places).name)
    draw(org, "industry", lambda: rng.choice(text.WORDS["INDUSTRIES"]))

  for entity in people + places + organisations:
    chosen = rng.sample(minors[entity.kind], minor_counts[entity.kind])
    for relation, kind in minors[entity.kind]:   # in a fixed order, whatever the sample's
      if (relation, kind) not in chosen:
        continue
      if kind in pools:
        draw(entity, relation, lambda: rng.choice(pools[kind]).name, minor=True)
      elif kind == "region":
        draw(entity, relation, lambda: rng.choice(regions), minor=True)
      else:
        draw(entity, relation, lambda: rng.choice(text.WORDS[kind]), minor=True)
