"""The world's fitness gates, on the tiny world."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import gin
import pytest

from realm_bench import world_gates
from realm_bench.gin_utils import parse_gin
from realm_bench.io_utils import atomic_write_jsonl, read_jsonl
from realm_bench.tasks import world

KEYS = {"benchmark", "split", "questions", "blocks", "matcher", "bm25_recall@5",
        "bm25_gold_recall@5", "bm25_recall@20", "bm25_gold_recall@20", "random_recall@5",
        "oracle_recall", "answer_prior_em", "answer_in_other_entity_block", "subject_spans",
        "subject_masks", "question_words", "sentence_words", "block_words"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
  parse_gin(["world/tiny.gin"])
  config = world.WorldConfig()
  gin.clear_config()
  out = tmp_path_factory.mktemp("gates_world")
  world.generate(out_dir=out, config=config)
  return out


def _facts(root: Path) -> list[dict]:
  return [obj for _, obj in read_jsonl(root / "truth/facts.jsonl")]


@pytest.mark.parametrize("benchmark", world.BENCHMARKS)
def test_gates_keys_and_ranges(tiny, benchmark):
  g = world_gates.gates(tiny, benchmark=benchmark)
  per_family = {f"bm25_gold_recall@{k}[{f}]" for k in (5, 20) for f in ("corpus", "pretrain")}
  assert set(g) == KEYS | per_family
  assert g["matcher"] == ("regex" if benchmark == "trec" else "string")
  assert g["oracle_recall"] == 100.0
  for key, value in g.items():
    if "recall" in key or key in ("answer_prior_em", "answer_in_other_entity_block"):
      assert 0.0 <= value <= 100.0, key
  for k in (5, 20):   # the gold block holds the answer, so a gold hit is a string hit
    assert g[f"bm25_recall@{k}"] >= g[f"bm25_gold_recall@{k}"]
  assert g["bm25_gold_recall@20"] >= g["bm25_gold_recall@5"]
  assert g["random_recall@5"] < g["bm25_recall@5"]
  assert g["question_words"]["max"] >= g["question_words"]["p99"] > 0
  lines = world_gates.format_gates(g).splitlines()
  width = max(map(len, g))   # keys left, values aligned in one column
  assert [line[:width].rstrip() for line in lines] == list(g)
  assert all(line[width:width + 2] == "  " and line[width + 2] != " " for line in lines)


def _rewrite_facts(src: Path, dst: Path, change) -> None:
  shutil.copytree(src, dst)
  atomic_write_jsonl(dst / "truth/facts.jsonl", [change(f) for f in _facts(src)])


def test_answer_prior_is_learned_from_training_facts_only(tiny, tmp_path):
  base = world_gates.gates(tiny)["answer_prior_em"]
  # Whatever the held-out facts say, the prior does not move.
  _rewrite_facts(tiny, tmp_path / "heldout", lambda f: f if f["split"] == "train" else {
      **f, "object": "nobody"})
  assert world_gates.gates(tmp_path / "heldout")["answer_prior_em"] == base
  # Training facts all giving one dev answer per relation: the prior answers exactly that.
  dev = {q: f for f in _facts(tiny) if f["split"] == "dev" for q in f["questions"]["nq"]}
  target = {}
  for f in dev.values():
    target.setdefault(f["relation"], f["object"])
  _rewrite_facts(tiny, tmp_path / "train", lambda f: {
      **f, "object": target.get(f["relation"], f["object"])} if f["split"] == "train" else f)
  questions = [obj for _, obj in read_jsonl(tiny / "open_qa/nq/dev.jsonl")]
  hits = sum(q["answer"][0] == target[dev[q["question"]]["relation"]] for q in questions)
  assert world_gates.gates(tmp_path / "train")["answer_prior_em"] == pytest.approx(
      100.0 * hits / len(questions), abs=0.01)
  assert hits > 0


def test_wordpiece_lengths_with_a_vocabulary(tiny, tmp_path):
  from realm_bench.tasks import vocab  # pylint: disable=g-import-not-at-top
  vocab.learn_vocabulary(texts=vocab.texts_from_world(tiny), size=300, out=tmp_path / "v.txt")
  g = world_gates.gates(tiny, vocab_path=tmp_path / "v.txt")
  for what in ("question", "sentence", "block"):
    stats = g[f"{what}_wordpieces"]
    assert stats["max"] >= stats["p99"] >= stats["mean"] > g[f"{what}_words"]["mean"] / 2
  assert g["question_wordpieces"]["mean"] >= g["question_words"]["mean"] + 2   # [CLS], [SEP]
  json.dumps(g)   # plain values, ready for a run record


def test_world_command_with_stats_prints_and_writes_the_gates(tmp_path, capsys):
  from realm_bench import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / "w"
  assert cli.main(["world", "--out", str(out), "--gin_file", "world/tiny.gin", "--stats"]) == 0
  printed = capsys.readouterr().out
  written = json.loads((out / "gates.json").read_text())
  assert set(written) == {"nq", "wq", "trec"}
  assert written["nq"] == world_gates.gates(out, benchmark="nq")
  assert "fitness gates, trec dev:" in printed and "bm25_recall@5" in printed


def test_gates_split_recall_by_subject_form_in_a_world_with_aliases(tmp_path):
  """Asked by its alias, a question shares no name word with the fact's block; by name, it
  does: BM25's gold recall must say so."""
  parse_gin(["world/tiny.gin"])
  config = world.WorldConfig(alias_fraction=0.5)
  gin.clear_config()
  world.generate(out_dir=tmp_path, config=config)
  g = world_gates.gates(tmp_path)
  forms = {f"bm25_gold_recall@{k}[by {f}]" for k in (5, 20) for f in ("alias", "name")}
  assert forms <= set(g)
  assert g["bm25_gold_recall@20[by alias]"] < g["bm25_gold_recall@20[by name]"]
