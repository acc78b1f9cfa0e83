"""The synthetic world: determinism, file formats, answerability, splits and distractors."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import gin
import pytest

from realm_bench import cli
from realm_bench.gin_utils import parse_gin
from realm_bench.io_utils import read_jsonl, sha256_file
from realm_bench.tasks import world

TREC_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE


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


def test_imports_without_tensorflow_jax_or_seqio():
  code = ("import sys, realm_bench.tasks.world; "
          "print(sorted(m for m in ('tensorflow', 'jax', 'seqio') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
  assert result.stdout.strip() == "[]"


def test_default_gin_binds_the_dataclass_defaults():
  """default.gin spells the defaults out for users to edit; the two must not drift apart."""
  parse_gin(["world/default.gin"])
  try:
    from_gin = world.WorldConfig()
  finally:
    gin.clear_config()
  assert from_gin == world.WorldConfig()


def test_same_seed_is_byte_identical_and_another_seed_differs(tiny_config, tiny, tmp_path):
  world.generate(out_dir=tmp_path / "again", config=tiny_config)
  assert all_files(tmp_path / "again") == all_files(tiny)
  world.generate(out_dir=tmp_path / "other", config=dataclasses.replace(tiny_config, seed=7))
  other = all_files(tmp_path / "other")
  assert other["corpus/blocks.jsonl"] != all_files(tiny)["corpus/blocks.jsonl"]


def test_manifest_lists_every_file_with_its_checksum(tiny_config, tiny):
  manifest = json.loads((tiny / "manifest.json").read_text(encoding="utf-8"))
  assert manifest["generator_version"] == world.GENERATOR_VERSION
  assert manifest["seed"] == tiny_config.seed
  assert manifest["config"] == dataclasses.asdict(tiny_config)
  on_disk = sorted(k for k in all_files(tiny) if k != "manifest.json")
  assert sorted(manifest["files"]) == on_disk
  for rel, digest in manifest["files"].items():
    assert sha256_file(tiny / rel) == digest, rel
  counts = manifest["counts"]
  assert counts["blocks"] == len(blocks_of(tiny))
  assert counts["questions"]["nq"]["test"] == len(questions(tiny, "nq", "test"))
  assert 30 <= counts["entities"] <= 80  # "a few dozen"


def test_line_fields_and_types(tiny):
  blocks = blocks_of(tiny)
  assert [b["id"] for b in blocks] == list(range(len(blocks)))
  for b in blocks:
    assert set(b) == {"id", "title", "body"}
    assert isinstance(b["title"], str) and b["title"]
    assert isinstance(b["body"], str) and len(b["body"].split()) <= 45
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


def test_passages_tsv_mirrors_blocks(tiny):
  lines = (tiny / "corpus/passages.tsv").read_text(encoding="utf-8").split("\n")
  assert lines[0] == "id\ttext\ttitle" and lines[-1] == ""
  blocks = blocks_of(tiny)
  assert len(lines) - 2 == len(blocks)
  for line, block in zip(lines[1:], blocks):
    assert line.split("\t") == [str(block["id"]), block["body"], block["title"]]


def test_spans_index_the_text_and_the_block_states_the_fact(tiny):
  blocks = blocks_of(tiny)
  for s in rows(tiny / "pretrain/sentences.jsonl"):
    text, block = s["text"], blocks[s["block_id"]]
    spans = s["spans"]
    assert [sp["kind"] for sp in spans].count("entity") >= 1
    assert all(sp["kind"] in ("entity", "date") for sp in spans)
    assert all(0 <= sp["start"] < sp["end"] <= len(text) for sp in spans)
    assert all(a["end"] <= b["start"] for a, b in zip(spans, spans[1:]))
    texts = [text[sp["start"]:sp["end"]] for sp in spans]
    assert block["title"] in texts  # the subject
    for piece, sp in zip(texts, spans):
      assert piece in block["body"], (piece, block)
      if sp["kind"] == "date":
        assert re.fullmatch(r"\d{4}", piece)
    # Restated in a different template: the sentence is not copied from its block.
    assert text not in block["body"]


def test_every_fact_is_restated_for_pretraining(tiny_config, tiny):
  sentences = rows(tiny / "pretrain/sentences.jsonl")
  assert len(sentences) == len(facts_of(tiny)) * tiny_config.pretrain_sentences_per_fact
  stated = {(s["block_id"], s["text"][sp["start"]:sp["end"]])
            for s in sentences for sp in s["spans"]}
  for fact in facts_of(tiny):
    assert (fact["block_id"], fact["object"]) in stated, fact


def test_answers_appear_in_a_block_titled_with_the_subject(tiny):
  blocks = blocks_of(tiny)
  for benchmark in ("nq", "wq"):
    for split in world.SPLITS:
      for q in questions(tiny, benchmark, split):
        about = [b for b in blocks if b["title"].lower() in q["question"]]
        assert about, q
        assert any(a in b["body"] for b in about for a in q["answer"]), q


def test_facts_spread_over_blocks(tiny):
  facts = facts_of(tiny)
  blocks = blocks_of(tiny)
  for entity in rows(tiny / "truth/entities.jsonl"):
    assert len(entity["block_ids"]) >= 2
    assert all(blocks[i]["title"] == entity["name"] for i in entity["block_ids"])
    stated = [f["block_id"] for f in facts if f["subject"] == entity["name"]]
    assert sorted(set(stated)) == entity["block_ids"]


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
  for e in rows(tiny / "truth/entities.jsonl"):
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
        assert compiled.match(world.fold(value)), (pattern, value)
        if value in twins:
          assert not compiled.match(twins[value]), (pattern, twins[value])
          checked_twins += 1
  assert checked_twins


def test_distractors_have_near_identical_names_and_different_facts(tiny):
  entities = {e["name"]: e for e in rows(tiny / "truth/entities.jsonl")}
  distractors = [e for e in entities.values() if e["distractor_of"]]
  assert {e["kind"] for e in distractors} == set(world.KINDS)
  for d in distractors:
    original = entities[d["distractor_of"]]
    assert original["distractor_of"] is None and original["kind"] == d["kind"]
    assert edit_distance(d["name"], original["name"]) == 1
    for relation, value in d["attributes"].items():
      assert value != original["attributes"][relation], (d["name"], relation)
  folded = [world.fold(name) for name in entities]
  assert len(set(folded)) == len(folded)


def test_shared_attribute_values(tiny):
  people = [e for e in rows(tiny / "truth/entities.jsonl") if e["kind"] == "person"]
  years = [p["attributes"]["birth_year"] for p in people]
  places = [p["attributes"]["birthplace"] for p in people]
  assert len(set(years)) < len(years) and len(set(places)) < len(places)


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
                                     "--gin.WorldConfig.num_people='many'"])
def test_cli_rejects_bad_bindings(tmp_path, capsys, binding):
  code = cli.main(["world", "--out", str(tmp_path / "w"), "--gin_file", "world/tiny.gin",
                   binding])
  assert code == 2
  assert "error" in capsys.readouterr().err
  assert not (tmp_path / "w/manifest.json").exists()
