"""The synthetic world: determinism, file formats, answerability, splits and distractors, and the
properties generator 2 adds (minor facts, one major fact per block, subjects anywhere, question
wording, answerable salient spans, big evaluation splits)."""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import gin
import pytest

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.gin_utils import parse_gin
from realm_bench.io_utils import read_jsonl, sha256_file
from realm_bench.retrieval.bm25 import tokenize
from realm_bench.tasks import world, world_entities, world_text

TREC_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")   # how the ICT pipeline splits a block
FAMILIES = ("corpus", "pretrain", "ask_corpus", "ask_pretrain")


@pytest.fixture(scope="module")
def tiny_config() -> world.WorldConfig:
  parse_gin(["world/tiny.gin"])
  config = world.WorldConfig()
  gin.clear_config()
  return config


@pytest.fixture(scope="module")
def tiny(tiny_config, tmp_path_factory) -> Path:
  out = tmp_path_factory.mktemp("tiny_world")
  world.generate(out_dir=out, config=tiny_config)
  return out


def rows(path) -> list[dict]:
  return [obj for _, obj in read_jsonl(path)]


def blocks_of(out) -> list[dict]:
  return rows(out / "corpus/blocks.jsonl")


def facts_of(out) -> list[dict]:
  return rows(out / "truth/facts.jsonl")


def minor_facts_of(out) -> list[dict]:
  return rows(out / "truth/minor_facts.jsonl")


def entities_of(out) -> list[dict]:
  return rows(out / "truth/entities.jsonl")


def questions(out, benchmark, split) -> list[dict]:
  return rows(out / f"open_qa/{benchmark}/{split}.jsonl")


def all_files(out) -> dict[str, bytes]:
  return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def edit_distance(a: str, b: str) -> int:
  previous = list(range(len(b) + 1))
  for i, ca in enumerate(a, start=1):
    current = [i]
    for j, cb in enumerate(b, start=1):
      current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
    previous = current
  return previous[-1]


def content_words(template: str) -> set[str]:
  """What BM25 matches on: lower-cased words of 2+ characters, stopwords and slots dropped."""
  return set(tokenize([re.sub(r"\{[soa]\}", " ", template)])[0])


def short_forms(entity: dict) -> set[str]:
  words = entity["name"].split()
  return {"person": {words[-1]}, "place": {entity["name"]},
          "organisation": {words[0]}}[entity["kind"]]


def short_name(entity: dict) -> str:
  """What every passage opens with: a person's surname, a place's name, a firm's core name."""
  words = entity["name"].split()
  return {"person": words[-1], "place": entity["name"], "organisation": words[0]}[entity["kind"]]


# ----------------------------------------------------------------------------- code and files

def test_imports_without_tensorflow_jax_or_seqio():
  code = ("import sys, realm_bench.tasks.world; "
          "print(sorted(m for m in ('tensorflow', 'jax', 'seqio') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
  assert result.stdout.strip() == "[]"


def test_world_text_is_data_only():
  public = {k: v for k, v in vars(world_text).items() if not k.startswith("__")}
  assert public and all(isinstance(v, (dict, tuple, str)) for v in public.values()), [
      k for k, v in public.items() if not isinstance(v, (dict, tuple, str))]


def test_default_gin_binds_the_dataclass_defaults():
  """default.gin spells the defaults out for users to edit; the two must not drift apart."""
  parse_gin(["world/default.gin"])
  try:
    from_gin = world.WorldConfig()
  finally:
    gin.clear_config()
  assert from_gin == world.WorldConfig()
  text = (Path(__file__).parents[1] / "gin/world/default.gin").read_text(encoding="utf-8")
  assert set(re.findall(r"^world\.WorldConfig\.(\w+) =", text, re.M)) == {
      f.name for f in dataclasses.fields(world.WorldConfig)}


def test_same_seed_is_byte_identical_and_another_seed_differs(tiny_config, tiny, tmp_path):
  world.generate(out_dir=tmp_path / "again", config=tiny_config)
  assert all_files(tmp_path / "again") == all_files(tiny)
  world.generate(out_dir=tmp_path / "other", config=dataclasses.replace(tiny_config, seed=7))
  other = all_files(tmp_path / "other")
  assert other["corpus/blocks.jsonl"] != all_files(tiny)["corpus/blocks.jsonl"]


def test_manifest_lists_every_file_with_its_checksum(tiny_config, tiny):
  manifest = json.loads((tiny / "manifest.json").read_text(encoding="utf-8"))
  assert manifest["generator_version"] == world.GENERATOR_VERSION == "3"
  assert manifest["seed"] == tiny_config.seed
  assert manifest["config"] == dataclasses.asdict(tiny_config)
  on_disk = sorted(k for k in all_files(tiny) if k != "manifest.json")
  assert sorted(manifest["files"]) == on_disk
  for rel, digest in manifest["files"].items():
    assert sha256_file(tiny / rel) == digest, rel
  counts = manifest["counts"]
  assert counts["blocks"] == len(blocks_of(tiny))
  assert counts["minor_facts"] == len(minor_facts_of(tiny))
  assert counts["questions"]["nq"]["test"] == len(questions(tiny, "nq", "test"))
  assert 30 <= counts["entities"] <= 80  # "a few dozen"


def test_line_fields_and_types(tiny):
  blocks = blocks_of(tiny)
  assert [b["id"] for b in blocks] == list(range(len(blocks)))
  for b in blocks:
    assert set(b) == {"id", "title", "body"}
    assert isinstance(b["title"], str) and b["title"]
    assert isinstance(b["body"], str) and len(b["body"].split()) <= 30
  for s in rows(tiny / "pretrain/sentences.jsonl"):
    assert set(s) == {"text", "spans", "block_id"}
    assert isinstance(s["text"], str) and 0 <= s["block_id"] < len(blocks)
    for span in s["spans"]:
      assert set(span) == {"start", "end", "kind"}
  for benchmark in world.BENCHMARKS:
    for split in world.SPLITS:
      qs = questions(tiny, benchmark, split)
      assert qs, (benchmark, split)
      for q in qs:
        assert set(q) == {"question", "answer"}
        assert isinstance(q["question"], str) and q["question"]
        assert q["answer"] and all(isinstance(a, str) and a for a in q["answer"])
  for f in facts_of(tiny):
    for benchmark in world.BENCHMARKS:
      assert len(f["question_families"][benchmark]) == len(f["questions"][benchmark])
      assert set(f["question_families"][benchmark]) <= {"corpus", "pretrain"}


def test_passages_tsv_mirrors_blocks(tiny):
  lines = (tiny / "corpus/passages.tsv").read_text(encoding="utf-8").split("\n")
  assert lines[0] == "id\ttext\ttitle" and lines[-1] == ""
  blocks = blocks_of(tiny)
  assert len(lines) - 2 == len(blocks)
  for line, block in zip(lines[1:], blocks):
    assert line.split("\t") == [str(block["id"]), block["body"], block["title"]]


# ----------------------------------------------------------------------------- blocks

def test_major_and_minor_facts_fill_blocks(tiny_config, tiny):
  """Each major fact has a gold block of its own; a block holds facts_per_block sentences, at
  most one of them major; an entity's facts fill ceil(n / facts_per_block) blocks, some of
  which hold no major fact at all."""
  blocks = blocks_of(tiny)
  majors, minors = facts_of(tiny), minor_facts_of(tiny)
  major_blocks = collections.Counter(f["block_id"] for f in majors)
  assert max(major_blocks.values()) == 1
  assert set(major_blocks) < set(range(len(blocks)))   # blocks of minor facts only exist
  per_block = collections.Counter(f["block_id"] for f in majors + minors)
  assert set(per_block.values()) == {tiny_config.facts_per_block}
  assert all(relation not in world.RELATIONS for relation in {f["relation"] for f in minors})
  for f in majors + minors:
    assert f["object"] in blocks[f["block_id"]]["body"], f
  for entity in entities_of(tiny):
    mine = [f for f in majors + minors if f["subject"] == entity["name"]]
    assert len(entity["block_ids"]) == math.ceil(len(mine) / tiny_config.facts_per_block) >= 2
    assert len(entity["minor_attributes"]) >= 1
    assert sorted({f["block_id"] for f in mine}) == entity["block_ids"]
    assert all(blocks[i]["title"] == entity["name"] for i in entity["block_ids"])


def test_every_block_has_two_sentences_and_fits(tiny):
  for b in blocks_of(tiny):
    assert len([s for s in SENTENCE_END.split(b["body"].strip()) if s]) >= 2, b


def test_minor_facts_are_never_asked(tiny):
  asked = {f["relation"] for f in facts_of(tiny) if any(f["questions"].values())}
  assert asked == set(world.RELATIONS)
  assert not asked & set(world.MINOR_RELATIONS)


def test_blocks_name_their_subject_once_in_full_then_by_short_form(tiny):
  """Like an article's passages: only the lead block spells a person or firm out in full,
  once; every other sentence names the subject by its short name."""
  blocks = blocks_of(tiny)
  for e in entities_of(tiny):
    sentences = [s for i in e["block_ids"] for s in SENTENCE_END.split(blocks[i]["body"])]
    full = re.compile(rf"(?<!\w){re.escape(e['name'])}(?!\w)")
    named = [s for s in sentences if full.search(s)]
    if e["kind"] != "place":   # a place's short name is its name
      assert len(named) == 1, (e["name"], named)
    for s in sentences:
      assert s in named or any(form in s for form in short_forms(e)), (e["name"], s)
    for s in sentences:
      assert short_name(e) in s, (e["name"], s)


def test_answers_appear_in_a_block_titled_with_the_subject(tiny):
  blocks = blocks_of(tiny)
  for benchmark in ("nq", "wq"):
    for split in world.SPLITS:
      for q in questions(tiny, benchmark, split):
        about = [b for b in blocks if b["title"].lower() in q["question"]]
        assert about, q
        assert any(a in b["body"] for b in about for a in q["answer"]), q


# ----------------------------------------------------------------------------- subject position

def test_no_family_of_templates_mostly_starts_with_the_subject():
  for family in FAMILIES:
    templates = [t for r in world.ALL_RELATIONS.values() for t in getattr(r, family)]
    first = sum(t.startswith("{s}") for t in templates)
    assert first <= 0.4 * len(templates), (family, first, len(templates))
    for r in world.ALL_RELATIONS.values():
      own = getattr(r, family)
      assert not own or sum(t.startswith("{s}") for t in own) < len(own), (r.name, family)
    # The subject also stands at the end of some templates and in the middle of others.
    assert any(t.rstrip(".").endswith("{s}") for t in templates), family
    assert any(not t.startswith("{s}") and not t.rstrip(".").endswith("{s}")
               for t in templates), family


def test_written_text_does_not_start_with_the_subject(tiny):
  """Counted on the files: corpus sentences (full name or short form), pre-training sentences
  and every benchmark's questions."""
  entities = {e["name"]: e for e in entities_of(tiny)}
  starts, total = 0, 0
  for b in blocks_of(tiny):
    forms = short_forms(entities[b["title"]]) | {b["title"]}
    for s in SENTENCE_END.split(b["body"]):
      starts += any(s.startswith(f) for f in forms)
      total += 1
  assert starts <= 0.45 * total, (starts, total)
  sentences = rows(tiny / "pretrain/sentences.jsonl")
  titles = {b["id"]: b["title"] for b in blocks_of(tiny)}
  starts = sum(s["text"].startswith(titles[s["block_id"]]) for s in sentences)
  assert starts <= 0.45 * len(sentences)
  for benchmark in world.BENCHMARKS:
    owner = {q: f for f in facts_of(tiny) for q in f["questions"][benchmark]}
    asked = [q["question"] for s in world.SPLITS for q in questions(tiny, benchmark, s)]
    starts = sum(q.lower().startswith(owner[q]["subject"].lower()) for q in asked)
    assert 0 < starts <= 0.45 * len(asked), (benchmark, starts, len(asked))


# ----------------------------------------------------------------------------- wording

def test_question_wording_families():
  """Questions share the pre-training text's words for the relation; only the "ask_corpus"
  family also shares the corpus's."""
  for r in world.RELATIONS.values():
    corpus = set().union(*map(content_words, r.corpus))
    pretrain = set().union(*map(content_words, r.pretrain))
    assert r.ask_corpus and r.ask_pretrain
    for q in r.ask_pretrain:
      assert not content_words(q) & corpus, (r.name, q, content_words(q) & corpus)
      assert content_words(q) & pretrain, (r.name, q)
    for q in r.ask_corpus:
      assert content_words(q) & corpus, (r.name, q)
    # A pre-training sentence is never a corpus sentence.
    assert not set(r.pretrain) & set(r.corpus)
  every = [t for r in world.RELATIONS.values() for t in r.ask_corpus + r.ask_pretrain]
  assert len(every) == len(set(every))   # so a question names its fact


@pytest.mark.parametrize("overlap", [0.0, 0.5, 1.0])
def test_question_corpus_overlap_sets_the_share_of_corpus_worded_questions(
    tiny_config, tmp_path, overlap):
  world.generate(out_dir=tmp_path, config=dataclasses.replace(
      tiny_config, question_corpus_overlap=overlap))
  facts = facts_of(tmp_path)
  for benchmark in world.BENCHMARKS:
    for split in world.SPLITS:
      families = [fam for f in facts if f["split"] == split
                  for fam in f["question_families"][benchmark]]
      assert abs(families.count("corpus") - overlap * len(families)) <= 1, (benchmark, split)
  for f in facts:   # each question comes from a template of the family it is filed under
    for q, fam in zip(f["questions"]["nq"], f["question_families"]["nq"]):
      pool = getattr(world.RELATIONS[f["relation"]], "ask_" + fam)
      assert q in [world.question_text(t, f["subject"], "nq") for t in pool], (q, fam)


def test_question_styles_differ_by_benchmark(tiny):
  nq = [q["question"] for q in questions(tiny, "nq", "train")]
  wq = [q["question"] for q in questions(tiny, "wq", "train")]
  trec = [q["question"] for q in questions(tiny, "trec", "train")]
  assert all(q == q.lower() and not q.endswith("?") for q in nq)
  assert all(q == q.lower() and q.endswith("?") for q in wq)
  assert all(q[0].isupper() and q.endswith("?") for q in trec)
  assert not set(nq) & set(wq)


def test_trec_regexes_compile_and_match_only_the_right_answer(tiny):
  facts = facts_of(tiny)
  owner = {q: f for f in facts for q in f["questions"]["trec"]}
  twins = {}
  for e in entities_of(tiny):
    if e["distractor_of"]:
      twins[e["distractor_of"]] = e["name"]
      twins[e["name"]] = e["distractor_of"]
  checked_twins = 0
  for split in world.SPLITS:
    for q in questions(tiny, "trec", split):
      value = owner[q["question"]]["object"]
      for pattern in q["answer"]:
        compiled = re.compile(pattern, TREC_FLAGS)
        assert compiled.match(value), (pattern, value)
        assert compiled.match(world_entities.fold(value)), (pattern, value)
        if value in twins:
          assert not compiled.match(twins[value]), (pattern, twins[value])
          checked_twins += 1
  assert checked_twins


# ----------------------------------------------------------------------------- pre-training

def test_salient_spans_are_pinned_down_by_sentence_and_gold_block(tiny):
  """The object is always a span; the subject only when no other entity has the same
  (relation, object)."""
  blocks = blocks_of(tiny)
  holders = collections.Counter((f["relation"], f["object"])
                                for f in facts_of(tiny) + minor_facts_of(tiny))
  by_block = {f["block_id"]: f for f in facts_of(tiny) + minor_facts_of(tiny)
              if f["relation"] in world.RELATIONS}
  subject_spans = 0
  for s in rows(tiny / "pretrain/sentences.jsonl"):
    text, block, fact = s["text"], blocks[s["block_id"]], by_block[s["block_id"]]
    spans = s["spans"]
    assert all(sp["kind"] in ("entity", "date") for sp in spans)
    assert all(0 <= sp["start"] < sp["end"] <= len(text) for sp in spans)
    assert all(a["end"] <= b["start"] for a, b in zip(spans, spans[1:]))
    pieces = [text[sp["start"]:sp["end"]] for sp in spans]
    assert fact["object"] in pieces and fact["object"] in block["body"]
    kind = [sp["kind"] for sp, p in zip(spans, pieces) if p == fact["object"]][0]
    assert kind == ("date" if fact["object_type"] == "year" else "entity")
    unique = holders[(fact["relation"], fact["object"])] == 1
    assert (block["title"] in pieces) == unique, (text, fact)
    subject_spans += unique
    assert len(spans) == 1 + unique
    # Restated in other words: the sentence is not copied from its block.
    assert text not in block["body"]
  assert subject_spans   # mayors and founders are unique to their place and organisation


def test_every_major_fact_is_restated_for_pretraining(tiny_config, tiny):
  sentences = rows(tiny / "pretrain/sentences.jsonl")
  assert len(sentences) == len(facts_of(tiny)) * tiny_config.pretrain_sentences_per_fact
  stated = {(s["block_id"], s["text"][sp["start"]:sp["end"]])
            for s in sentences for sp in s["spans"]}
  for fact in facts_of(tiny):
    assert (fact["block_id"], fact["object"]) in stated, fact


def test_minor_pretrain_sentences_knob(tiny_config, tmp_path):
  config = dataclasses.replace(tiny_config, minor_pretrain_sentences_per_fact=1)
  world.generate(out_dir=tmp_path, config=config)
  sentences = rows(tmp_path / "pretrain/sentences.jsonl")
  assert len(sentences) == (len(facts_of(tmp_path)) * config.pretrain_sentences_per_fact
                            + len(minor_facts_of(tmp_path)))
  minor_blocks = {f["block_id"] for f in minor_facts_of(tmp_path)}
  assert sum(s["block_id"] in minor_blocks for s in sentences) >= len(minor_facts_of(tmp_path))


def test_question_form_pretrain_sentences_knob(tiny_config, tmp_path):
  config = dataclasses.replace(tiny_config, pretrain_question_sentences_per_fact=1)
  world.generate(out_dir=tmp_path, config=config)
  sentences = rows(tmp_path / "pretrain/sentences.jsonl")
  facts = facts_of(tmp_path)
  # The same number of sentences, one per major fact now a question and its answer.
  assert len(sentences) == len(facts) * config.pretrain_sentences_per_fact
  asked = [s for s in sentences if "? " in s["text"]]
  assert len(asked) == len(facts)
  by_block = {}
  for s in asked:
    by_block.setdefault(s["block_id"], []).append(s)
    span = next(sp for sp in s["spans"] if sp["start"] > s["text"].index("?"))
    assert span["end"] == len(s["text"]) - 1   # the answer, masked, ends the sentence
  assert sorted(by_block) == sorted(f["block_id"] for f in facts)


def test_question_form_sentences_change_nothing_else(tiny_config, tmp_path):
  """The knob's runs are paired with the default world's: same corpus, splits, questions."""
  plain = world.generate(out_dir=tmp_path / "plain", config=dataclasses.replace(
      tiny_config, pretrain_question_sentences_per_fact=0))
  asked = world.generate(out_dir=tmp_path / "asked", config=dataclasses.replace(
      tiny_config, pretrain_question_sentences_per_fact=1))
  differ = [f for f in plain["files"] if plain["files"][f] != asked["files"][f]]
  assert differ == ["pretrain/sentences.jsonl"]


# ----------------------------------------------------------------------------- aliases

@pytest.fixture(scope="module")
def aliased(tiny_config, tmp_path_factory) -> Path:
  out = tmp_path_factory.mktemp("aliased_world")
  world.generate(out_dir=out, config=dataclasses.replace(tiny_config, alias_fraction=0.5))
  return out


def test_aliases_change_only_subject_names_and_the_lead_blocks(tiny, aliased):
  """Paired with the world without aliases: the same facts, blocks, splits and answers; a lead
  block gains a sentence stating the alias, and a sentence of a block without a major fact,
  a question or a pre-training sentence may name its subject by the alias instead."""
  plain_blocks, alias_blocks = blocks_of(tiny), blocks_of(aliased)
  entities = {e["name"]: e for e in entities_of(aliased)}
  short = {name: short_name(e) for name, e in entities.items()}
  major_blocks = {f["block_id"] for f in facts_of(aliased)}
  gained = renamed = 0
  for plain, alias in zip(plain_blocks, alias_blocks):
    assert plain["title"] == alias["title"]
    name = alias["title"]
    said = entities[name]["alias"]
    sentences = SENTENCE_END.split(alias["body"])
    stated = [x for x in sentences if any(re.fullmatch(
        re.escape(t).replace(r"\{s\}", re.escape(short[name])).replace(
            r"\{o\}", re.escape(said)), x) for t in world_text.ALIAS)]
    gained += len(stated)
    kept = [x.replace(said, short[name]) for x in sentences if x not in stated]
    assert kept == SENTENCE_END.split(plain["body"]), (plain, alias)
    if alias["id"] in major_blocks and not stated:
      assert said not in alias["body"], alias
    renamed += sum(said in x for x in sentences if x not in stated)
  assert gained == len(entities) and renamed > 0   # one lead block each
  strip = lambda f: {k: v for k, v in f.items() if k not in ("questions", "question_families",
                                                              "question_subject_forms")}
  assert [strip(f) for f in facts_of(tiny)] == [strip(f) for f in facts_of(aliased)]
  for benchmark in world.BENCHMARKS:
    for split in world.SPLITS:
      assert sorted(q["answer"] for q in questions(tiny, benchmark, split)) == sorted(
          q["answer"] for q in questions(aliased, benchmark, split))
  assert [s["block_id"] for s in rows(tiny / "pretrain/sentences.jsonl")] == [
      s["block_id"] for s in rows(aliased / "pretrain/sentences.jsonl")]


def test_aliases_are_new_words_said_only_in_their_entitys_blocks(aliased):
  blocks = blocks_of(aliased)
  entities = entities_of(aliased)
  name_words = {world_entities.fold(w) for e in entities for w in e["name"].split()}
  template_words = {world_entities.fold(w) for t in world_text.ALIAS
                    for w in re.findall(r"[A-Za-z]+", t)}
  aliases = [world_entities.fold(e["alias"]) for e in entities]
  assert len(set(aliases)) == len(aliases)
  assert not set(aliases) & (name_words | template_words)
  assert not name_words & template_words
  for e in entities:
    saying = [b["id"] for b in blocks if re.search(rf"(?<!\w){e['alias']}(?!\w)", b["body"])]
    assert saying and set(saying) <= set(e["block_ids"]), e["name"]


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_alias_fraction_sets_the_share_of_questions_asked_by_alias(tiny_config, tmp_path,
                                                                    fraction):
  world.generate(out_dir=tmp_path, config=dataclasses.replace(tiny_config,
                                                              alias_fraction=fraction))
  facts = facts_of(tmp_path)
  if not fraction:   # no aliases: the truth files have no alias fields at all
    assert "alias" not in entities_of(tmp_path)[0]
    assert "question_subject_forms" not in facts[0]
    return
  alias_of = {e["name"]: e["alias"] for e in entities_of(tmp_path)}
  for benchmark in world.BENCHMARKS:
    for split in world.SPLITS:
      forms = [form for f in facts if f["split"] == split
               for form in f["question_subject_forms"][benchmark]]
      assert abs(forms.count("alias") - fraction * len(forms)) <= 1, (benchmark, split)
  for f in facts:
    for q, form in zip(f["questions"]["trec"], f["question_subject_forms"]["trec"]):
      named = alias_of[f["subject"]] if form == "alias" else f["subject"]
      assert named in q and (form == "name") == (f["subject"] in q), (q, form)
  sentences = rows(tmp_path / "pretrain/sentences.jsonl")
  title_of = {b["id"]: b["title"] for b in blocks_of(tmp_path)}
  by_alias = [s for s in sentences if alias_of[title_of[s["block_id"]]] in s["text"]]
  if fraction == 1.0:
    assert len(by_alias) == len(sentences)
  # A masked alias is not in the gold block, so an alias is never a salient span.
  for s in by_alias:
    assert all(alias_of[title_of[s["block_id"]]] not in s["text"][sp["start"]:sp["end"]]
               for sp in s["spans"]), s


@pytest.mark.parametrize("gin_file, knob", [("world/aliases.gin", dict(alias_fraction=0.5)),
                                            ("world/topical.gin", dict(topic_fraction=1.0)),
                                            ("world/reworded.gin", dict(
                                                topic_fraction=1.0,
                                                question_corpus_overlap=0.0))])
def test_world_gin_files_set_their_knob_on_the_default_world(gin_file, knob):
  parse_gin([gin_file])
  try:
    config = world.WorldConfig()
  finally:
    gin.clear_config()
  assert config == dataclasses.replace(world.WorldConfig(), **knob)


def test_declarative_gin_file_unsets_the_knob():
  parse_gin(["world/declarative.gin"])
  try:
    config = world.WorldConfig()
  finally:
    gin.clear_config()
  assert config.pretrain_question_sentences_per_fact == 0
  assert config == dataclasses.replace(world.WorldConfig(), pretrain_question_sentences_per_fact=0)


def test_question_form_templates_are_not_the_questions():
  """A FAQ sentence shares the questions' form, never a question's wording: pre-training must
  not hand the retriever the test questions."""
  for r in world.RELATIONS.values():
    assert len(r.faq) >= 2, r.name
    asks = [a.lower() for a in r.ask_corpus + r.ask_pretrain]
    for template in r.faq:
      question, answer = template.split("? ")
      assert "{o}" in answer and "{o}" not in question, template
      q = question.lower()
      assert not any(q in a or a in q for a in asks), (r.name, template)


# ----------------------------------------------------------------------------- splits and sizes

def test_splits_partition_facts_alike_for_every_benchmark(tiny):
  facts = facts_of(tiny)
  assert {f["split"] for f in facts} == set(world.SPLITS)
  for benchmark in world.BENCHMARKS:
    owner = {}
    for f in facts:
      for question in f["questions"][benchmark]:
        owner[question] = f
    seen = {}
    for split in world.SPLITS:
      qs = questions(tiny, benchmark, split)
      assert len({q["question"] for q in qs}) == len(qs)
      keys = set()
      for q in qs:
        fact = owner[q["question"]]
        assert fact["split"] == split, (benchmark, q)
        keys.add((fact["subject"], fact["relation"]))
      seen[split] = keys
    assert not seen["train"] & seen["dev"]
    assert not seen["train"] & seen["test"]
    assert not seen["dev"] & seen["test"]
    asked = sum(len(questions(tiny, benchmark, s)) for s in world.SPLITS)
    assert asked == len(owner)


def test_default_world_has_big_evaluation_splits_and_a_bounded_corpus(tmp_path):
  manifest = world.generate(out_dir=tmp_path, config=world.WorldConfig())
  counts = manifest["counts"]
  assert min(counts["questions"]["nq"]["dev"], counts["questions"]["nq"]["test"]) >= 1000
  assert 4000 <= counts["blocks"] <= 7000


# ----------------------------------------------------------------------------- entities

def test_distractors_have_near_identical_names_and_different_facts(tiny):
  entities = {e["name"]: e for e in entities_of(tiny)}
  distractors = [e for e in entities.values() if e["distractor_of"]]
  assert {e["kind"] for e in distractors} == set(world.KINDS)
  for d in distractors:
    original = entities[d["distractor_of"]]
    assert original["distractor_of"] is None and original["kind"] == d["kind"]
    assert edit_distance(d["name"], original["name"]) == 1
    for field in ("attributes", "minor_attributes"):
      for relation, value in d[field].items():
        assert value != original[field].get(relation), (d["name"], relation)
  folded = [world_entities.fold(name) for name in entities]
  assert len(set(folded)) == len(folded)


def test_shared_attribute_values(tiny):
  entities = entities_of(tiny)
  people = [e for e in entities if e["kind"] == "person"]
  years = [p["attributes"]["birth_year"] for p in people]
  places = [p["attributes"]["birthplace"] for p in people]
  assert len(set(years)) < len(years) and len(set(places)) < len(places)
  minor = collections.Counter((r, v) for e in entities for r, v in e["minor_attributes"].items())
  assert max(minor.values()) >= 3


# ----------------------------------------------------------------------------- config and CLI

@pytest.mark.parametrize("change, field", [
    (dict(facts_per_block=1), "facts_per_block"),
    (dict(minor_facts_per_entity=-1), "minor_facts_per_entity"),
    (dict(minor_facts_per_entity=40), "minor_facts_per_entity"),
    (dict(minor_facts_per_entity={"person": 2}), "minor_facts_per_entity"),
    (dict(question_corpus_overlap=1.5), "question_corpus_overlap"),
    (dict(alias_fraction=-0.1), "alias_fraction"),
    (dict(topic_fraction=1.5), "topic_fraction"),
    (dict(minor_pretrain_sentences_per_fact=9), "minor_pretrain_sentences_per_fact"),
    (dict(pretrain_question_sentences_per_fact=3), "pretrain_question_sentences_per_fact"),
    (dict(pretrain_sentences_per_fact=1, pretrain_question_sentences_per_fact=2),
     "pretrain_question_sentences_per_fact"),
])
def test_bad_configs_are_refused(tiny_config, tmp_path, change, field):
  with pytest.raises(InputError, match=f"WorldConfig.{field}"):
    world.generate(out_dir=tmp_path, config=dataclasses.replace(tiny_config, **change))
  assert not (tmp_path / "manifest.json").exists()


def test_one_minor_count_for_every_kind(tiny_config, tmp_path):
  world.generate(out_dir=tmp_path, config=dataclasses.replace(
      tiny_config, minor_facts_per_entity=4, facts_per_block=3))
  for e in entities_of(tmp_path):
    facts = len(e["attributes"]) + len(e["minor_attributes"])
    assert len(e["minor_attributes"]) >= 4 and facts % 3 == 0
    assert len(e["block_ids"]) == facts // 3 >= len(e["attributes"])


def test_cli_writes_a_world(tmp_path, capsys):
  out = tmp_path / "w"
  assert cli.main(["world", "--out", str(out), "--gin_file", "world/tiny.gin"]) == 0
  assert "corpus blocks" in capsys.readouterr().out
  manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
  assert manifest["config"]["num_people"] == 24
  assert cli.main(["world", "--out", str(tmp_path / "s"), "--gin_file", "world/tiny.gin",
                   "--gin.WorldConfig.seed=3"]) == 0
  assert json.loads((tmp_path / "s/manifest.json").read_text())["seed"] == 3


@pytest.mark.parametrize("binding", ["--gin.WorldConfig.no_such_knob=1",
                                     "--gin.WorldConfig.test_fraction=0.95",
                                     "--gin.WorldConfig.num_people='many'",
                                     "--gin.WorldConfig.minor_facts_per_entity={'person': 1}"])
def test_cli_rejects_bad_bindings(tmp_path, capsys, binding):
  code = cli.main(["world", "--out", str(tmp_path / "w"), "--gin_file", "world/tiny.gin",
                   binding])
  assert code == 2
  assert "error" in capsys.readouterr().err
  assert not (tmp_path / "w/manifest.json").exists()


# ----------------------------------------------------------------------------- topical blocks

@pytest.fixture(scope="module")
def topical(tiny_config, tmp_path_factory) -> Path:
  out = tmp_path_factory.mktemp("topical_world")
  world.generate(out_dir=out, config=dataclasses.replace(tiny_config, topic_fraction=1.0))
  return out


def test_topics_name_real_relations_of_the_same_kind():
  assert set(world_text.TOPICS) == set(world.RELATIONS)
  for major, minors in world_text.TOPICS.items():
    assert minors and all(world.MINOR_RELATIONS[m].subject_kind
                          == world.RELATIONS[major].subject_kind for m in minors), major


def test_topical_blocks_regroup_only_the_minor_facts(tiny, topical):
  """Paired with the world without topics: the same facts, questions and splits, each major
  fact in the block of the same id; only which minor facts share its block changes."""
  assert facts_of(tiny) == facts_of(topical)
  for benchmark in world.BENCHMARKS:
    for split in world.SPLITS:
      assert questions(tiny, benchmark, split) == questions(topical, benchmark, split)
  assert [b["title"] for b in blocks_of(tiny)] == [b["title"] for b in blocks_of(topical)]
  assert blocks_of(tiny) != blocks_of(topical)


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_topic_fraction_fills_major_blocks_with_their_topic(tiny_config, tiny, topical,
                                                            fraction):
  out = topical if fraction else tiny
  mates = collections.defaultdict(list)
  for f in minor_facts_of(out):
    mates[f["block_id"]].append(f["relation"])
  owned = collections.defaultdict(set)
  for f in minor_facts_of(out):
    owned[f["subject"]].add(f["relation"])
  topical_blocks = could = 0
  for f in facts_of(out):
    topic = set(world_text.TOPICS[f["relation"]])
    could += bool(topic & owned[f["subject"]])
    topical_blocks += bool(topic & set(mates[f["block_id"]]))
  assert could > 0
  if fraction:
    assert topical_blocks == could   # every major fact whose entity has a topic mate gets one
  else:
    assert topical_blocks < 0.8 * could
