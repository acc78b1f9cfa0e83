"""The seeded synthetic world: entities, a knowledge corpus, pre-training text and questions.

REALM's effects (retrieval helps, a stale index hurts, a learned retriever beats a fixed one)
only show when answering needs the corpus and finding the right block is hard the way real
Open-QA is hard. Generator 1 failed that: subjects stood first in most corpus sentences and in
no question (ICT learned "first token = title"), word overlap alone found the answer block for
99.5% of questions, half the salient spans masked an undeterminable subject, and dev was too
small to tell runs apart. Hence:

- Only "major" relations are asked; every entity also has "minor" facts (hobby, river, motto)
  and a block holds at most one major fact, so recognising the entity (what ICT's pseudo-queries
  teach) finds the right few blocks, not the right one: the relation must match too.
- Blocks read like passages of one encyclopaedia article: the title names the subject, the
  lead passage names it in full once, every other sentence by its short name ("Drosk",
  "Tharmouth", "Vesk" for Vesk Works). Word overlap with the name then favours the entity's
  own blocks only a little over the blocks of others that mention it. (Generator 2's "the
  town" / "the firm" left ICT nothing to learn about places and organisations.)
- Subjects stand anywhere in a sentence (lead-ins, passives, subject-final), in every kind of
  text, so no position gives the title away.
- Vocabulary mismatch: a relation is worded one way in the corpus and another in pre-training
  text. Questions use the pre-training words, and a `question_corpus_overlap` fraction of them
  also the corpus's; for the others BM25 cannot tell which of the entity's blocks answers, and
  the pre-training text is where a model can learn the question's wording. Some question words
  also occur in other facts' corpus sentences ("year", "work", "based"), as in real text.
- A salient span is one its sentence plus the gold block pin down: the object always, the
  subject only when no other entity has the same (relation, object).
- Pre-training text may also state a fact in a question's form (a FAQ page's: question, then
  answer), never in a question's wording: the form REALM's queries must transfer to.
- Near-name distractors (one letter away, every fact different) and shared values keep surface
  matching from sufficing.
- Optionally (`alias_fraction`), a second name per entity that only some of its blocks use and
  some questions ask by: word overlap then misses the fact's block, as on real NQ.

Questions are split by FACT (subject, relation), with one partition for all three benchmarks,
so a test fact is never asked in fine-tuning; the pre-training text states every major fact.

Only the standard library and gin are imported: the generator runs before (and without)
TensorFlow, JAX or seqio. Everything random comes from `random.Random(seed)` (question-form
sentences from a stream of their own, so the knob changes nothing else), iterating over lists
in a fixed order, so a seed and GENERATOR_VERSION give byte-identical files.
Templates and word lists are in `world_text`, names and values in `world_entities`.
"""
from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import gin

from realm_bench.errors import InputError
from realm_bench.io_utils import (atomic_write_json, atomic_write_jsonl, atomic_write_text,
                                  sha256_file)
from realm_bench.tasks import world_text as text
from realm_bench.tasks.world_entities import (Entity, assign_attributes, draw_aliases,
                                              make_entities)
from realm_bench.tasks.world_render import question_text, render, short_form, trec_pattern

# Bump whenever the same config would produce different files.
GENERATOR_VERSION = "3"

SPLITS = ("train", "dev", "test")
BENCHMARKS = ("nq", "wq", "trec")
KINDS = ("person", "place", "organisation")
# What a world manifest written before a field existed was made with (not the field's default).
BEFORE_FIELD = {"pretrain_question_sentences_per_fact": 0}


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
    minor_facts_per_entity: at least this many never-asked facts per entity (one number, or a
      dict kind -> number), topped up so that every major fact has a block of its own and
      every block is full.
    facts_per_block: facts (one sentence each) per corpus block, at most one of them major; an
      entity's facts fill ceil(facts / facts_per_block) blocks. At least 2, as ICT needs one
      sentence for the pseudo-query and one to keep.
    pretrain_sentences_per_fact: pre-training sentences restating each major fact (distinct
      pre-training templates).
    pretrain_question_sentences_per_fact: how many of those are written as a question and its
      answer (the `faq` templates), so that REALM's pre-training queries share the form of the
      questions a retriever is tested on, as real web text does. Only those sentences change:
      corpus, splits and questions are the same as at 0 (generator 3's world, byte for byte).
      1 by default: at 0 (wholly declarative text) REALM pre-training does not raise ICT's
      recall (results/EXPERIMENTS.md, E61-E70; `world/declarative.gin` keeps that world).
    minor_pretrain_sentences_per_fact: the same for minor facts (0: minor facts are only in the
      corpus).
    dev_fraction, test_fraction: fractions of major facts held out as dev and test questions.
    train_questions_per_fact: differently phrased questions asked about each training fact.
    question_corpus_overlap: fraction of questions phrased with the corpus's words for the
      relation; the others share only the pre-training text's words.
    nq_fraction, wq_fraction, trec_fraction: fraction of each split's facts a benchmark asks.
    first_birth_year, last_birth_year: people's birth years; a narrow range makes many
      people share one.
    accent_fraction: fraction of name words given one accented vowel, so Unicode paths run.
    alias_fraction: fraction of questions, pre-training sentences and sentences of corpus
      blocks without a major fact that name their subject by its alias: a second one-word name
      of every entity, also stated in its lead block ("Drosk is also known as Velk."), never
      in another block holding a major fact. Word overlap then finds blocks that use the
      alias, not the one holding the asked fact; a retriever must learn the alias from the
      text. 0: no aliases, the world byte for byte as before the knob (aliases come from a
      stream of their own).
    topic_fraction: fraction of major facts whose block-mates are minor facts of the same
      topic (`world_text.TOPICS`: birth year with schooling, employer with bank), where the
      entity has such facts, as an article's passages each keep to a topic. At 0 a block's
      other facts are drawn at random, so nothing in a block but the fact's own sentence says
      which fact it holds, and ICT, which removes that sentence from the block 90% of the time,
      has little signal to tell an entity's blocks apart (results/EXPERIMENTS.md E86). 0: the world
      byte for byte as before the knob.
  """
  seed: int = 0
  num_people: int = 500
  num_places: int = 115
  num_organisations: int = 130
  num_regions: int = 16
  distractor_fraction: float = 0.2
  minor_facts_per_entity: int | dict = dataclasses.field(
      default_factory=lambda: {"person": 12, "place": 5, "organisation": 6})
  facts_per_block: int = 2
  pretrain_sentences_per_fact: int = 2
  pretrain_question_sentences_per_fact: int = 1
  minor_pretrain_sentences_per_fact: int = 0
  dev_fraction: float = 0.3
  test_fraction: float = 0.3
  train_questions_per_fact: int = 2
  question_corpus_overlap: float = 0.5
  nq_fraction: float = 1.0
  wq_fraction: float = 0.7
  trec_fraction: float = 0.5
  first_birth_year: int = 1820
  last_birth_year: int = 1960
  accent_fraction: float = 0.02
  alias_fraction: float = 0.0
  topic_fraction: float = 0.0


# ----------------------------------------------------------------------------- relations

@dataclasses.dataclass(frozen=True)
class Relation:
  """One attribute and its phrasing families (see `world_text`)."""
  name: str
  subject_kind: str
  object_type: str   # year | person | place | organisation | region | a word list's name
  corpus: tuple[str, ...]
  pretrain: tuple[str, ...]
  ask_corpus: tuple[str, ...] = ()
  ask_pretrain: tuple[str, ...] = ()
  faq: tuple[str, ...] = ()

  @property
  def major(self) -> bool:
    return bool(self.ask_corpus)


def _relations(table: dict) -> dict[str, Relation]:
  return {name: Relation(name, spec["kind"], spec["object"], spec["corpus"], spec["pretrain"],
                         spec.get("ask_corpus", ()), spec.get("ask_pretrain", ()),
                         spec.get("faq", ()))
          for name, spec in table.items()}


RELATIONS = _relations(text.MAJOR)         # asked in questions
MINOR_RELATIONS = _relations(text.MINOR)   # stated, never asked
ALL_RELATIONS = {**RELATIONS, **MINOR_RELATIONS}
RELATIONS_OF = {k: [r for r in RELATIONS if RELATIONS[r].subject_kind == k] for k in KINDS}
MINORS_OF = {k: [r for r in MINOR_RELATIONS if MINOR_RELATIONS[r].subject_kind == k]
             for k in KINDS}
MAX_PRETRAIN_SENTENCES = min(len(r.pretrain) for r in RELATIONS.values())
MAX_MINOR_PRETRAIN_SENTENCES = min(len(r.pretrain) for r in MINOR_RELATIONS.values())
MAX_PRETRAIN_QUESTION_SENTENCES = min(len(r.faq) for r in RELATIONS.values())
MAX_QUESTIONS_PER_FACT = min(len(r.ask_corpus) + len(r.ask_pretrain) for r in RELATIONS.values())


def minor_count(config: WorldConfig, kind: str) -> int:
  """Minor facts of an entity of `kind`: the knob, topped up to whole blocks."""
  majors = len(RELATIONS_OF[kind])
  wanted = config.minor_facts_per_entity
  wanted = wanted[kind] if isinstance(wanted, dict) else wanted
  blocks = max(majors, math.ceil((majors + wanted) / config.facts_per_block))
  return blocks * config.facts_per_block - majors


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
  families: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  forms: dict[str, list[str]] = dataclasses.field(default_factory=dict)   # "name" | "alias"

  @property
  def major(self) -> bool:
    return self.relation in RELATIONS


def _validate(config: WorldConfig) -> None:
  def bad(field: str, why: str):
    raise InputError(why, field=f"WorldConfig.{field}")

  for field in ("seed", "num_people", "num_places", "num_organisations", "num_regions",
                "facts_per_block", "pretrain_sentences_per_fact",
                "pretrain_question_sentences_per_fact",
                "minor_pretrain_sentences_per_fact", "train_questions_per_fact",
                "first_birth_year", "last_birth_year"):
    value = getattr(config, field)
    if not isinstance(value, int) or isinstance(value, bool):
      bad(field, f"must be an integer, got {value!r}")
  for field in ("num_places", "num_organisations", "num_regions"):
    if getattr(config, field) < 2:
      bad(field, "must be at least 2 (a distractor needs a different value to take)")
  if config.facts_per_block < 2:
    bad("facts_per_block", "must be at least 2 (ICT needs a sentence to query, one to keep)")
  minor = config.minor_facts_per_entity
  per_kind = minor if isinstance(minor, dict) else dict.fromkeys(KINDS, minor)
  if sorted(per_kind) != sorted(KINDS) or not all(
      isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in per_kind.values()):
    bad("minor_facts_per_entity", f"must be a non-negative integer or a dict of one per kind "
        f"({', '.join(KINDS)}), got {minor!r}")
  for kind in KINDS:
    if minor_count(config, kind) > len(MINORS_OF[kind]):
      bad("minor_facts_per_entity", f"{kind}s would need {minor_count(config, kind)} minor "
          f"facts to fill whole blocks, but there are only {len(MINORS_OF[kind])} minor "
          "relations of that kind")
  for field, most in (("pretrain_sentences_per_fact", MAX_PRETRAIN_SENTENCES),
                      ("minor_pretrain_sentences_per_fact", MAX_MINOR_PRETRAIN_SENTENCES),
                      ("train_questions_per_fact", MAX_QUESTIONS_PER_FACT)):
    least = 0 if field.startswith("minor") else 1
    if not least <= getattr(config, field) <= most:
      bad(field, f"must be between {least} and {most} (one per distinct template)")
  most = min(config.pretrain_sentences_per_fact, MAX_PRETRAIN_QUESTION_SENTENCES)
  if not 0 <= config.pretrain_question_sentences_per_fact <= most:
    bad("pretrain_question_sentences_per_fact", f"must be between 0 and {most} (at most "
        f"pretrain_sentences_per_fact, and one per distinct question-form template)")
  if config.last_birth_year <= config.first_birth_year:
    bad("last_birth_year", "must be after first_birth_year")
  for field in ("distractor_fraction", "dev_fraction", "test_fraction", "accent_fraction",
                "alias_fraction", "topic_fraction", "question_corpus_overlap", "nq_fraction",
                "wq_fraction", "trec_fraction"):
    value = getattr(config, field)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
      bad(field, f"must be a number in [0, 1], got {value!r}")
  if config.dev_fraction + config.test_fraction >= 1:
    bad("test_fraction", "dev_fraction + test_fraction must leave some training facts")
  people, most = (n + round(config.distractor_fraction * n) for n in (
      config.num_people, max(config.num_places, config.num_organisations)))
  if people < most:
    bad("num_people", "must be at least num_places and num_organisations (every place needs "
        "its own mayor and every organisation its own founder)")


def _topical_companions(topic_rng: random.Random, config: WorldConfig,
                        groups: list[list[Fact]], minor: list[Fact]) -> list[Fact]:
  """Fills a share (`topic_fraction`) of the major facts' groups with minor facts of their
  topic (`world_text.TOPICS`), where the entity has them; returns the minor facts left.
  The draws come from a stream of their own, so at 0 the world is byte for byte as before."""
  if not config.topic_fraction:
    return minor
  left = list(minor)
  for group in groups:
    if not group or topic_rng.random() >= config.topic_fraction:
      continue
    topic = text.TOPICS[group[0].relation]
    for fact in [f for f in left if f.relation in topic][:config.facts_per_block - 1]:
      group.append(fact)
      left.remove(fact)
  return left


def _build_blocks(rng: random.Random, config: WorldConfig, entities: list[Entity],
                  facts_of: dict[str, list[Fact]], alias_rng: random.Random) -> list[dict]:
  """One major fact (or none) per block, the rest minor; sentences in random order."""
  topic_rng = random.Random(f"{config.seed}/topic")
  blocks = []   # (entity, facts, body)
  for entity in entities:
    major = [f for f in facts_of[entity.name] if f.major]
    minor = [f for f in facts_of[entity.name] if not f.major]
    rng.shuffle(major)
    rng.shuffle(minor)
    count = (len(major) + len(minor)) // config.facts_per_block
    groups = [[f] for f in major] + [[] for _ in range(count - len(major))]
    minor = _topical_companions(topic_rng, config, groups, minor)
    for fact in minor:   # whole blocks: minor_count tops the minor facts up
      next(g for g in groups if len(g) < config.facts_per_block).append(fact)
    # Like the passages of one encyclopaedia article: the lead passage names the subject in
    # full once, every other sentence by its short name; the title names it everywhere. With
    # aliases, the lead passage also states the alias, and some sentences of blocks without a
    # major fact use it (what ICT can learn the alias from); a major fact's block never does.
    lead = rng.randrange(len(groups))
    for g, group in enumerate(groups):
      rng.shuffle(group)
      sentences, minor_only = [], not any(f.major for f in group)
      for i, f in enumerate(group):
        subject = entity.name if (g, i) == (lead, 0) else short_form(entity)
        if (entity.alias and subject != entity.name and minor_only
            and alias_rng.random() < config.alias_fraction):
          subject = entity.alias
        sentences.append(render(rng.choice(ALL_RELATIONS[f.relation].corpus), subject,
                                f.value)[0])
      if entity.alias and g == lead:
        sentences.insert(alias_rng.randrange(len(sentences) + 1), render(
            alias_rng.choice(text.ALIAS), short_form(entity), entity.alias)[0])
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


def _pretrain_sentences(rng: random.Random, config: WorldConfig, facts: list[Fact],
                        alias_rng: random.Random):
  """Each fact restated in pre-training words. Salient spans: the object always; the subject
  only when named in full and no other entity has the same (relation, object), so the masked
  sentence plus the gold block determine it (an alias is not in the gold block)."""
  holders: dict[tuple[str, str], int] = {}
  for fact in facts:
    holders[(fact.relation, fact.value)] = holders.get((fact.relation, fact.value), 0) + 1
  faq_rng = random.Random(f"{config.seed}/faq")
  rows = []
  for fact in facts:
    relation = ALL_RELATIONS[fact.relation]
    count = (config.pretrain_sentences_per_fact if fact.major
             else config.minor_pretrain_sentences_per_fact)
    templates = rng.sample(relation.pretrain, count)
    questions = config.pretrain_question_sentences_per_fact if fact.major else 0
    if questions:   # from a stream of their own, so the rest of the world stays the same
      templates[count - questions:] = faq_rng.sample(relation.faq, questions)
    for template in templates:
      by_alias = bool(fact.subject.alias) and alias_rng.random() < config.alias_fraction
      sentence, s, o = render(template, fact.subject.alias if by_alias else fact.subject.name,
                              fact.value)
      spans = [{"start": o[0], "end": o[1],
                "kind": "date" if relation.object_type == "year" else "entity"}]
      if holders[(fact.relation, fact.value)] == 1 and not by_alias:
        spans.append({"start": s[0], "end": s[1], "kind": "entity"})
      rows.append({"text": sentence, "spans": sorted(spans, key=lambda x: x["start"]),
                   "block_id": fact.block_id})
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
               by_name: dict[str, Entity],
               alias_rng: random.Random) -> dict[str, dict[str, list[dict]]]:
  out = {b: {s: [] for s in SPLITS} for b in BENCHMARKS}
  fractions = {"nq": config.nq_fraction, "wq": config.wq_fraction, "trec": config.trec_fraction}
  for benchmark in BENCHMARKS:
    for split in SPLITS:
      pool = [f for f in facts if f.split == split]
      chosen = sorted(rng.sample(pool, round(fractions[benchmark] * len(pool))),
                      key=lambda f: f.id)
      per_fact = config.train_questions_per_fact if split == "train" else 1
      # Exactly round(overlap * n) of the split's questions use the corpus's words.
      slots = [(fact, k) for fact in chosen for k in range(per_fact)]
      corpus_worded = set(rng.sample(range(len(slots)),
                                     round(config.question_corpus_overlap * len(slots))))
      by_alias = set(alias_rng.sample(range(len(slots)), round(
          config.alias_fraction * len(slots)))) if config.alias_fraction else set()
      templates = {}
      for f in chosen:
        asked = RELATIONS[f.relation]
        templates[f.id] = {"corpus": rng.sample(asked.ask_corpus, len(asked.ask_corpus)),
                           "pretrain": rng.sample(asked.ask_pretrain, len(asked.ask_pretrain))}
      rows = []
      for i, (fact, _) in enumerate(slots):
        pools = templates[fact.id]
        family = "corpus" if i in corpus_worded else "pretrain"
        if not pools[family]:   # this fact's questions used up the family's templates
          family = "pretrain" if family == "corpus" else "corpus"
        template = pools[family].pop()
        relation = RELATIONS[fact.relation]
        form = "alias" if i in by_alias else "name"
        question = question_text(template, fact.subject.alias if form == "alias"
                                 else fact.subject.name, benchmark)
        if benchmark == "trec":
          answer = [trec_pattern(relation.object_type, fact.value, by_name.get(fact.value))]
        else:
          answer = [fact.value]
        fact.questions.setdefault(benchmark, []).append(question)
        fact.families.setdefault(benchmark, []).append(family)
        fact.forms.setdefault(benchmark, []).append(form)
        rows.append({"question": question, "answer": answer})
      rng.shuffle(rows)
      out[benchmark][split] = rows
  return out


def generate(*, out_dir, config: WorldConfig) -> dict:
  """Writes the world under `out_dir` and returns the manifest (also written, last)."""
  _validate(config)
  out = Path(out_dir)
  rng = random.Random(config.seed)
  regions, people, places, organisations = make_entities(rng, config)
  assign_attributes(rng, config, regions, people, places, organisations,
                    minors={k: [(r, MINOR_RELATIONS[r].object_type) for r in MINORS_OF[k]]
                            for k in KINDS},
                    minor_counts={k: minor_count(config, k) for k in KINDS})
  entities = people + places + organisations
  by_name = {e.name: e for e in entities}
  alias_rng = random.Random(f"{config.seed}/alias")
  if config.alias_fraction:
    draw_aliases(alias_rng, entities, regions, config.accent_fraction)

  facts, minor_facts = [], []
  facts_of: dict[str, list[Fact]] = {e.name: [] for e in entities}
  for e in entities:
    for pool, values in ((facts, e.attributes), (minor_facts, e.minor_attributes)):
      for relation, value in values.items():
        pool.append(Fact(len(pool), e, relation, value))
        facts_of[e.name].append(pool[-1])
  blocks = _build_blocks(rng, config, entities, facts_of, alias_rng)
  sentences = _pretrain_sentences(rng, config, facts + minor_facts, alias_rng)
  _split_facts(rng, config, facts)
  questions = _questions(rng, config, facts, by_name, alias_rng)

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
  # The ground truth, for analysis (per-relation accuracy, distractor confusions), the fitness
  # gates (`realm_bench.world_gates`) and tests. `question_families` runs parallel to
  # `questions`: "corpus" when the question shares the corpus's words for the relation.
  # With aliases, `alias` and `question_subject_forms` ("name" or "alias", parallel to
  # `questions`); without, neither key, so those files stay as they were before the knob.
  aliased = bool(config.alias_fraction)
  write_jsonl("truth/entities.jsonl", [
      {"name": e.name, "kind": e.kind, "distractor_of": e.distractor_of,
       "attributes": e.attributes, "minor_attributes": e.minor_attributes,
       "block_ids": e.block_ids, **({"alias": e.alias} if aliased else {})} for e in entities])
  def fact_row(f: Fact) -> dict:
    return {"id": f.id, "subject": f.subject.name, "subject_kind": f.subject.kind,
            "relation": f.relation, "object": f.value,
            "object_type": ALL_RELATIONS[f.relation].object_type, "block_id": f.block_id}
  write_jsonl("truth/facts.jsonl", [
      {**fact_row(f), "split": f.split,
       "questions": {b: f.questions.get(b, []) for b in BENCHMARKS},
       "question_families": {b: f.families.get(b, []) for b in BENCHMARKS},
       **({"question_subject_forms": {b: f.forms.get(b, []) for b in BENCHMARKS}}
          if aliased else {})} for f in facts])
  write_jsonl("truth/minor_facts.jsonl", [fact_row(f) for f in minor_facts])

  counts = {
      "people": len(people), "places": len(places), "organisations": len(organisations),
      "regions": len(regions),
      "distractors": sum(e.distractor_of is not None for e in entities),
      "entities": len(entities), "blocks": len(blocks), "facts": len(facts),
      "minor_facts": len(minor_facts),
      "facts_per_split": {s: sum(f.split == s for f in facts) for s in SPLITS},
      "pretrain_sentences": len(sentences),
      "questions": {b: {s: len(questions[b][s]) for s in SPLITS} for b in BENCHMARKS},
  }
  manifest = {"generator_version": GENERATOR_VERSION, "seed": config.seed,
              "config": dataclasses.asdict(config), "counts": counts,
              "files": dict(sorted(files.items()))}
  atomic_write_json(out / "manifest.json", manifest)
  return manifest
