"""The experiment log's scripts, run on the committed records: the numbers the README and
`results/EXPERIMENTS.md` quote are what the scripts print from those records, and the scripts'
input errors are named."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np

import pytest

ROOT = Path(__file__).parents[1]
RECORDS = ROOT / "results" / "records"


def _load(script: str):
  """An experiment script as a module (they are files, not a package)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  folder = str(ROOT / "results" / "experiments")
  if folder not in sys.path:   # the scripts import each other, as when run from their folder
    sys.path.insert(0, folder)
  spec = importlib.util.spec_from_file_location(script, f"{folder}/{script}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
  """`python results/experiments/SCRIPT ARGS` from the repository root, in this process: the
  same argv, import path, output and exit status as a subprocess, without paying the
  interpreter's and JAX's start-up again for each of the ~60 calls (an uncaught exception
  fails the test, where a subprocess would print its traceback)."""
  path = ROOT / "results" / "experiments" / script
  out, err = io.StringIO(), io.StringIO()
  saved_argv, saved_path, saved_cwd = sys.argv, sys.path[:], os.getcwd()
  sys.argv, code = [str(path), *args], 0
  sys.path.insert(0, str(path.parent))
  os.chdir(ROOT)
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      runpy.run_path(str(path), run_name="__main__")
  except SystemExit as e:
    if isinstance(e.code, int) or e.code is None:
      code = e.code or 0
    else:
      err.write(f"{e.code}\n")
      code = 1
  finally:
    sys.argv, sys.path[:] = saved_argv, saved_path
    os.chdir(saved_cwd)
  return subprocess.CompletedProcess([script, *args], code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("records, worlds", [("quickstart_question_form_ict_warmup", 4),
                                             ("quickstart_alias", 4),
                                             ("quickstart_finetune900/aliases", 4),
                                             ("quickstart_finetune900/topical", 4),
                                             ("quickstart_finetune900/topical_reworded", 4)])
def test_seed_table_prints_the_quickstart_rows_the_readme_quotes(records, worlds):
  folders = sorted(str(p) for p in (RECORDS / records).glob("seed_*"))
  out = _run("seed_table.py", *folders)
  assert out.returncode == 0, out.stderr
  readme = (ROOT / "README.md").read_text(encoding="utf-8")
  rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "±" in line]
  assert len(rows) == worlds
  for row in rows:
    assert row in readme, row


E70_QUOTE = (r"\*\*(\S+), 95% interval over the 12 runs \[(\S+), (\S+)\], over the 4 "
             r"world means \[(\S+), (\S+)\]\*\*")
E76_QUOTE = (r"\*\*lowers\*\* ICT's Recall@5 here, at every one of 12 runs \(3 seeds of the "
             r"REALM stage per world\): (\S+), 95% interval \[(\S+), (\S+)\] over the runs, "
             r"\[(\S+), (\S+)\] over the world means")


@pytest.mark.parametrize("records, quote", [("question_form_ict_warmup", E70_QUOTE),
                                            ("aliases", E76_QUOTE)])
def test_seed_recall_gives_the_intervals_the_readme_quotes(records, quote):
  worlds = sorted(str(p) for p in (RECORDS / "realm_recall_seeds" / records).glob("world_*"))
  out = _run("seed_recall.py", "ict_recall_dev",
             "qf=realm_recall_dev,realm_seed1_recall_dev,realm_seed2_recall_dev", "--", *worlds)
  assert out.returncode == 0, out.stderr
  found = re.search(r"mean difference (\S+) over 12 runs, 95% interval over runs \[(\S+), (\S+)\]; "
                    r"over the 4 world means \[(\S+), (\S+)\]", out.stdout)
  assert found, out.stdout
  readme = _readme_words()
  quoted = re.search(quote, readme)
  assert quoted, f"the README no longer quotes the interval of {records}"
  # The script prints two decimals, the README one: equal up to that rounding.
  for printed, said in zip(found.groups(), quoted.groups()):
    assert abs(float(printed) - float(said)) <= 0.055, (found.groups(), quoted.groups())


def test_seed_recall_gives_each_world_its_interval_over_seeds_and_verdict():
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  worlds = sorted(str(p) for p in
                  (RECORDS / "realm_recall_seeds" / "question_form_ict_warmup").glob("world_*"))
  out = _run("seed_recall.py", "ict_recall_dev",
             "qf=realm_recall_dev,realm_seed1_recall_dev,realm_seed2_recall_dev", "--", *worlds)
  assert out.returncode == 0, out.stderr
  rows = re.findall(r"\| (world_\d) \| realm\S* \| \S+ \| \S+ \| (\S+) ± \S+ \|", out.stdout)
  means = re.findall(r"\| (world_\d) \| mean of 3 runs, 95% interval over them \| \| \| "
                     r"(\S+) \[(\S+), (\S+)\] (PASS|FAIL|INCONCLUSIVE) \|", out.stdout)
  assert len(rows) == 12 and len(means) == 4, out.stdout
  verdicts = set()
  for world, mean, low, high, verdict in means:
    d = np.array([float(x) for w, x in rows if w == world])
    half = scipy_stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    # The rows print one decimal, as do the intervals: equal up to that rounding.
    assert abs(d.mean() - float(mean)) <= 0.1
    assert abs(d.mean() - half - float(low)) <= 0.15 and abs(d.mean() + half - float(high)) <= 0.15
    assert verdict == ("PASS" if float(low) > 0 else "FAIL" if float(high) < 0
                       else "INCONCLUSIVE")
    verdicts.add(verdict)
  assert verdicts == {"PASS", "INCONCLUSIVE"}  # these records hold both


def test_sweep_seeds_pairs_by_seed_and_decides_the_trend_as_check_does(tmp_path):
  """Six committed recall records of world 0 stand in for 3 points x 2 seeds."""
  base = RECORDS / "quickstart_finetune900"
  stand_ins = {(20, 0): "e106_rate1_fresh/reworded_world_0/realm_recall_dev",
               (20, 1): "e110_refresh60/reworded_world_0/realm_recall_dev",
               (60, 0): "e110_refresh200/reworded_world_0/realm_recall_dev",
               (60, 1): "e106_rate1_stale/reworded_world_0/realm_recall_dev",
               (200, 0): "e102_wide/reworded_world_0/realm_recall_dev",
               (200, 1): "e102_wide/reworded_world_0/ict_recall_dev"}
  world = tmp_path / "world_0"
  world.mkdir()
  r5 = {}
  for (point, seed), rel in stand_ins.items():
    (world / f"r{point}_s{seed}").symlink_to(base / rel, target_is_directory=True)
    r5[point, seed] = json.loads((base / rel / "record.json").read_text())["metrics"]["recall@5"]
  out = _run("sweep_seeds.py", "r{point}_s{seed}", "20,60,200", "0,1", "--", str(world))
  assert out.returncode == 0, out.stderr
  for point in (20, 60, 200):
    mean = (r5[point, 0] + r5[point, 1]) / 2
    assert re.search(rf"\| {point} \| {r5[point, 0]:.1f} \| {r5[point, 1]:.1f} \| {mean:.1f} \|",
                     out.stdout), out.stdout
  for a, b in ((20, 60), (60, 200)):
    found = re.search(rf"\| {a} − {b} \| .* \| (\S+) \[(\S+), (\S+)\] \|", out.stdout)
    assert found, out.stdout
    # Paired over the same questions, the mean paired difference is the difference of means.
    want = np.mean([r5[a, s] - r5[b, s] for s in (0, 1)])
    assert abs(float(found.group(1)) - want) <= 0.06
  # The means fall at every step (63.6, 58.0, 44.4), but three points cannot pass: the
  # smallest one-sided p is 1/3! = 0.167, as check's rule says.
  assert "trend: ρ -1.00, p 0.167: INCONCLUSIVE" in out.stdout
  assert "it cannot pass" in out.stdout
  missing = _run("sweep_seeds.py", "r{point}_s{seed}", "20,600", "0", "--", str(world))
  assert missing.returncode != 0 and "r600_s0/record.json: no such record" in missing.stderr
  assert "Traceback" not in missing.stderr
  for args, says in ((("r20_s{seed}", "20,60", "0"), "'PATTERN': must contain {point}"),
                     (("r{point}_s0", "20,60", "0,1"), "'PATTERN': must contain {seed}"),
                     (("r{point}_s{seed}", "20,sixty", "0"), "'POINTS': comma-separated whole"),
                     (("r{point}_s{seed}", "20,60", "0;1"), "'SEEDS': comma-separated whole")):
    bad = _run("sweep_seeds.py", *args, "--", str(world))
    assert bad.returncode != 0 and says in bad.stderr, (args, bad.stderr)
    assert "Traceback" not in bad.stderr


def test_seed_recall_names_missing_records_and_fails_when_none(tmp_path):
  world = RECORDS / "realm_recall_seeds" / "question_form_ict_warmup" / "world_0"
  out = _run("seed_recall.py", "ict_recall_dev", "qf=realm_recall_dev,no_such_run", "--",
             str(world))
  assert out.returncode == 0 and "no record for no_such_run; pair skipped" in out.stderr
  out = _run("seed_recall.py", "ict_recall_dev", "qf=no_such_run", "--", str(tmp_path))
  assert out.returncode != 0 and "none of the runs has a recall record" in out.stderr


def test_pretrain_subset_splits_the_text_by_subject_form(tmp_path):
  import dataclasses  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top
  from realm_bench.gin_utils import parse_gin  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world  # pylint: disable=g-import-not-at-top
  parse_gin(["world/tiny.gin"])
  config = dataclasses.replace(world.WorldConfig(), alias_fraction=0.5)
  gin.clear_config()
  out = tmp_path / "out"
  world.generate(out_dir=out / "world", config=config)
  (out / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
  for run in ("bert", "ict", "ict_recall_dev"):
    (out / "runs" / run).mkdir(parents=True)
  kept = {}
  for kind in ("name", "alias", "random"):
    done = _run("pretrain_subset.py", str(out), str(tmp_path / kind), kind)
    assert done.returncode == 0, done.stderr
    kept[kind] = (tmp_path / kind / "world/pretrain/sentences.jsonl").read_text(
        encoding="utf-8").splitlines()
    assert (tmp_path / kind / "world/corpus").is_symlink()
    assert (tmp_path / kind / "runs/ict").resolve() == (out / "runs/ict").resolve()
  everything = (out / "world/pretrain/sentences.jsonl").read_text(encoding="utf-8").splitlines()
  assert kept["name"] and kept["alias"]
  assert sorted(kept["name"] + kept["alias"]) == sorted(everything)
  assert len(kept["random"]) == len(kept["name"]) and set(kept["random"]) <= set(everything)
  out_again = _run("pretrain_subset.py", str(out), str(tmp_path / "name"), "name")
  assert out_again.returncode != 0 and "exists; give a new folder" in out_again.stderr
  assert "Traceback" not in out_again.stderr
  assert not list(tmp_path.glob("*.tmp"))
  plain = tmp_path / "plain"
  world.generate(out_dir=plain / "world", config=dataclasses.replace(config, alias_fraction=0.0))
  refused = _run("pretrain_subset.py", str(plain), str(tmp_path / "from_plain"), "name")
  assert refused.returncode != 0 and "alias_fraction = 0" in refused.stderr
  assert "Traceback" not in refused.stderr and not (tmp_path / "from_plain").exists()


def test_finetune_variant_keeps_what_precedes_fine_tuning(tmp_path):
  out = tmp_path / "out"
  for run in ("bert", "ict", "ict_recall_dev", "realm_pretrain", "realm_finetune",
              "realm_eval_test", "orqa_eval_dev", "bm25_nq_dev"):
    (out / "runs" / run).mkdir(parents=True)
    (out / "runs" / run / "record.json").write_text("{}", encoding="utf-8")
  (out / "world").mkdir()
  (out / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
  done = _run("finetune_variant.py", str(out), str(tmp_path / "new"))
  assert done.returncode == 0, done.stderr
  kept = sorted(p.name for p in (tmp_path / "new" / "runs").iterdir())
  assert kept == ["bert", "bm25_nq_dev", "ict", "ict_recall_dev", "realm_pretrain"]
  # Copies, so that the summary's walk over runs/ finds their records.
  assert not (tmp_path / "new/runs/ict").is_symlink()
  assert (tmp_path / "new/runs/ict/record.json").exists()
  again = _run("finetune_variant.py", str(out), str(tmp_path / "new"))
  assert again.returncode != 0 and "exists; give a new folder" in again.stderr
  unfinished = _run("finetune_variant.py", str(tmp_path / "new" / "runs"), str(tmp_path / "x"))
  assert unfinished.returncode != 0 and "finished quickstart folder" in unfinished.stderr
  assert "Traceback" not in again.stderr + unfinished.stderr
  assert not list(tmp_path.glob("*.tmp"))


def test_check_on_the_alias_world_records_gives_the_verdicts_the_readme_quotes():
  done = subprocess.run([sys.executable, "-m", "realm_bench.cli", "check", "--runs",
                         str(RECORDS / "quickstart_alias"), "--format", "json"],
                        capture_output=True, text=True, cwd=ROOT, check=False)
  claims = {v["item"]: v for v in json.loads(done.stdout)["verdicts"]
            if v["kind"] == "claim" and v["verdict"] != "MISSING"}
  readme = _readme_words()
  for item, verdict, words in (
      ("table1/realm_above_closed_book", "PASS", "REALM > closed-book PASS"),
      ("table2/realm_above_orqa", "PASS", "REALM > ORQA PASS on NQ dev"),
      ("table1/realm_above_orqa", "INCONCLUSIVE", "INCONCLUSIVE on NQ test"),
      ("table1/realm_above_bm25_reader", "FAIL", "REALM > BM25 + reader FAIL, but by")):
    found = claims[item]
    assert found["verdict"] == verdict, found
    quoted = (f"{words} ({found['delta']:+.1f} [{found['ci_low']:+.1f}, {found['ci_high']:+.1f}]"
              if verdict != "FAIL" else
              f"{words} {found['delta']:+.1f} [{found['ci_low']:+.1f}, {found['ci_high']:+.1f}]")
    assert quoted in readme, quoted


def test_realm_variant_random_blocks_are_seeded_by_step_and_span_the_corpus():
  import types  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  variant = _load("realm_variant")
  fake = types.SimpleNamespace(corpus=types.SimpleNamespace(ids=np.arange(100, 150)),
                               num_candidates=8, _batch=lambda raw, ids: ids)
  raw = [{}] * 64
  first = variant.random_prepare(fake, 3, None, raw)
  assert first.shape == (64, 7)
  assert np.array_equal(first, variant.random_prepare(fake, 3, None, raw))
  assert not np.array_equal(first, variant.random_prepare(fake, 4, None, raw))
  assert set(first.ravel()) <= set(range(100, 150)) and len(set(first.ravel())) > 40


def _namesake_world(tmp_path) -> Path:
  """Two namesakes (Aro Bel, Ott Bel), a person without one and a place; one block each."""
  world = tmp_path / "world"
  for sub in ("corpus", "truth", "open_qa/nq"):
    (world / sub).mkdir(parents=True)
  blocks = [(0, "Aro Bel", "Bel was born in Cadmere."), (1, "Ott Bel", "Bel was born in Kent."),
            (2, "Dun Eck", "Eck was born in Fenwick."), (3, "Paru", "Paru has a bell.")]
  (world / "corpus/blocks.jsonl").write_text("".join(
      json.dumps({"id": i, "title": t, "body": b}) + "\n" for i, t, b in blocks))
  def fact(block, subject, kind, question):
    return {"block_id": block, "subject": subject, "subject_kind": kind,
            "relation": "birthplace", "questions": {"nq": [question] if question else []}}
  facts = [fact(0, "Aro Bel", "person", "where was aro bel born"),
           fact(1, "Ott Bel", "person", "where was ott bel born"),
           fact(2, "Dun Eck", "person", "where was dun eck born"),   # no namesake: left out
           fact(3, "Paru", "place", None)]
  (world / "truth/facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in facts))
  dev = ["where was aro bel born", "where was ott bel born", "where was dun eck born"]
  (world / "open_qa/nq/dev.jsonl").write_text("".join(
      json.dumps({"question": q, "answer": [a]}) + "\n"
      for q, a in zip(dev, ["Cadmere", "Kent", "Fenwick"])))
  return world


def test_realm_variant_forces_the_source_and_a_namesakes_block_first(tmp_path):
  import types  # pylint: disable=g-import-not-at-top
  variant = _load("realm_variant")
  decoys = variant.namesake_blocks(_namesake_world(tmp_path))
  assert decoys == {0: [1], 1: [0]}
  fake = types.SimpleNamespace(
      lengths=types.SimpleNamespace(query=4), num_candidates=4, _batch=lambda raw, ids: ids,
      towers=types.SimpleNamespace(embed_queries=lambda params, ids, batch_size: ids),
      refresher=types.SimpleNamespace(index=types.SimpleNamespace(
          search=lambda q, k: (None, np.array([[3, 0, 2, 1, 5][:k]] * len(q))))))
  raw = [{"inputs": [1], "block_id": 0}, {"inputs": [2], "block_id": 2}]
  both = variant.forced_prepare(oracle=True, decoys=decoys)(fake, 0, None, raw)
  # Source, namesake's block, then the retrieved blocks not already there; Dun Eck has no
  # namesake, so only his source block is forced.
  assert both.tolist() == [[0, 1, 3], [2, 3, 0]]
  named = variant.forced_prepare(oracle=False, decoys=decoys)(fake, 0, None, raw)
  assert named.tolist() == [[1, 3, 0], [3, 0, 2]]
  oracle = variant.forced_prepare(oracle=True, decoys=None)(fake, 0, None, raw)
  assert oracle.tolist() == [[0, 3, 2], [2, 3, 0]]
  for args in ([], ["out"], ["out", "x", "--random", "--oracle"], ["out", "x", "--oracel"]):
    refused = _run("realm_variant.py", *args)
    assert refused.returncode != 0 and "realm_variant.py OUT NAME" in refused.stderr, args
  missing = _run("realm_variant.py", str(tmp_path / "nowhere"), "x", "--namesakes")
  assert missing.returncode != 0 and "facts.jsonl" in missing.stderr


def test_namesake_reading_splits_exact_match_by_the_top_5(tmp_path):
  world = _namesake_world(tmp_path)
  dev = [json.loads(line)["question"] for line in
         (world / "open_qa/nq/dev.jsonl").read_text().splitlines()]
  (tmp_path / "a").mkdir()
  # Aro Bel: gold first, the namesake's block second; Ott Bel: gold and no namesake's block.
  (tmp_path / "a/retrieved_validation.jsonl").write_text("".join(
      json.dumps({"question": q, "retrieved": r}) + "\n"
      for q, r in zip(dev, [[0, 1], [1, 3], [2]])))
  (tmp_path / "p.jsonl").write_text("".join(
      json.dumps({"question": q, "prediction": p}) + "\n"
      for q, p in zip(dev, ["Kent", "Kent", "Fenwick"])))
  out = _run("namesake_reading.py", str(world), str(tmp_path / "a"), str(tmp_path / "p.jsonl"))
  assert out.returncode == 0, out.stderr
  row = [c.strip() for c in out.stdout.splitlines()[2].split("|")[2:-1]]
  assert row == ["1, 100.0", "1, 0.0", "0, -", "0, -", "50.0", "-100.0 ± 0.0"]
  (tmp_path / "p.jsonl").write_text('{"question": "elsewhere", "prediction": "x"}\n')
  bad = _run("namesake_reading.py", str(world), str(tmp_path / "a"), str(tmp_path / "p.jsonl"))
  assert bad.returncode != 0 and "p.jsonl" in bad.stderr and "Traceback" not in bad.stderr


def test_readme_quotes_the_default_world_differences_at_900_steps():
  out = _run("seed_table.py", str(RECORDS / "quickstart_finetune900" / "default" / "seed_0"))
  assert out.returncode == 0, out.stderr
  row = [line for line in out.stdout.splitlines() if line.startswith("| 0 |")][0]
  orqa, bm25, closed, recall = [c.strip() for c in row.strip("|").split("|")][-4:]
  readme = _readme_words()
  quote = (f"REALM − ORQA **{orqa}**, REALM − BM25 + reader {bm25}, REALM − closed-book "
           f"{closed}, REALM's Recall@5 − ICT's {recall}.")
  assert quote in readme, quote


def test_encoder_control_continues_bert_for_realm_pretrainings_budget(monkeypatch, tmp_path):
  from realm_bench import stages as stages_lib  # pylint: disable=g-import-not-at-top
  control = _load("encoder_control")
  seen = {}
  monkeypatch.setattr(stages_lib, "bert_stage",
                      lambda s, *, name, extra: seen.update(name=name, extra=extra))
  config = stages_lib.QuickstartConfig()
  control.continue_bert(stages_lib.Stages(tmp_path, config), "more_bert")
  assert seen["name"] == "more_bert"
  assert f"NUM_STEPS = {config.pretrain_steps}" in seen["extra"]
  assert f"BATCH_SIZE = {config.pretrain_batch}" in seen["extra"]
  assert f"LEARNING_RATE = {config.pretrain_lr}" in seen["extra"]
  assert "CORPUS_TASK = None" in seen["extra"]
  warm = [b for b in seen["extra"] if b.startswith("train_lib.train.warm_starts")]
  assert warm and str(tmp_path / "runs" / "bert") in warm[0] and "'mlm_head'" in warm[0]
  usage = _run("encoder_control.py", str(tmp_path))
  assert usage.returncode != 0 and "--continue-bert" in usage.stderr
  missing = _run("encoder_control.py", str(tmp_path), "x", "--encoder", str(tmp_path / "nope"))
  assert missing.returncode != 0 and "no record.json" in missing.stderr
  assert "Traceback" not in usage.stderr + missing.stderr
  assert not (tmp_path / "runs" / "x_finetune").exists()


def test_encoder_control_bm25_reads_bm25s_blocks_with_the_encoders_reader(monkeypatch, tmp_path):
  from realm_bench import stages as stages_lib  # pylint: disable=g-import-not-at-top
  control = _load("encoder_control")
  runs = tmp_path / "runs"
  for needed in ("bert", "ict", "realm_pretrain"):
    (runs / needed).mkdir(parents=True)
    (runs / needed / "record.json").write_text("{}")
  trained, evaluated = [], []
  monkeypatch.setattr(stages_lib.Stages, "train",
                      lambda self, name, gin_files, bindings, kind: trained.append(
                          (name, gin_files, bindings, self.config.extra_gin)) or runs / name)
  monkeypatch.setattr(stages_lib.Stages, "evaluate",
                      lambda self, name, experiment, tuned, split, overlays=(): evaluated.append(
                          (name, experiment, split, tuple(overlays))))
  wide = "results/experiments/tiny_wide.gin"   # E102's towers: built at its size, not tiny's
  control.run(tmp_path, "enc_bm25", runs / "realm_pretrain", bm25=True, extra_gin=(wide,))
  [(name, gin_files, bindings, extra_gin)] = trained
  assert name == "enc_bm25_finetune" and "experiments/bm25_reader.gin" in gin_files
  assert extra_gin == (wide,)
  assert f"BERT_RUN = '{runs / 'realm_pretrain'}'" in bindings and "WARM_START = None" in bindings
  assert [e[:3] for e in evaluated] == [("enc_bm25_eval_test", "bm25_reader", "test"),
                                        ("enc_bm25_eval_dev", "bm25_reader", "validation")]
  assert all(e[3] == ("experiments/bm25_reader.gin",) for e in evaluated)
  bad = _run("encoder_control.py", str(tmp_path), "x", "--encoder", str(runs / "bert"), "--bm2")
  assert bad.returncode != 0 and "--bm25" in bad.stderr
  typo = _run("encoder_control.py", str(tmp_path), "x", "--encoder", str(runs / "bert"),
              "--extra_gin=results/experiments/tiny_wid.gin")
  assert typo.returncode != 0 and "tiny_wid.gin" in typo.stderr
  assert "Traceback" not in typo.stderr and not (runs / "x_finetune").exists()


def test_readme_default_world_table_at_900_steps_is_the_records():
  seeds = sorted(str(p) for p in (RECORDS / "quickstart_finetune900" / "default").glob("seed_*"))
  out = _run("seed_table.py", *seeds)
  assert out.returncode == 0, out.stderr
  readme = (ROOT / "README.md").read_text(encoding="utf-8")
  rows = [line for line in out.stdout.splitlines() if re.match(r"\| \d \|", line)]
  assert len(rows) == 4
  for row in rows:
    cells = [c.strip() for c in row.strip("|").split("|")]
    del cells[7:9]   # the README's table leaves out the two Recall@5 levels
    assert "| " + " | ".join(cells) + " |" in readme, row


def _readme_words() -> str:
  """The README with its line breaks and runs of spaces made single spaces, so a quoted number
  is found wherever the prose wraps."""
  return " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())


def _paired_over_worlds(a: str, b: str, pairs) -> tuple[str, str]:
  """`paired_runs.py A B PAIR ...` as the README quotes it: each world's "diff ± se", comma
  separated, and the mean with its interval."""
  out = _run("paired_runs.py", a, b, *map(str, pairs))
  assert out.returncode == 0, out.stderr
  *worlds, mean = out.stdout.strip().splitlines()
  listed = ", ".join(line.rsplit(" ", 3)[1] + " ± " + line.rsplit(" ", 1)[1] for line in worlds)
  return listed, re.match(r"mean (\S+ \[\S+ \S+\])", mean).group(1)


@pytest.mark.parametrize("a, b, folder_a, folder_b, per_world", [
    ("realm_recall_dev", "realm_recall_dev", "e103_long", "e102_wide", False),  # 900 − 300 steps
    ("realm_recall_dev", "ict_recall_dev", "e103_long", "e102_wide", False),
    ("realm_eval_test", "bm25_reader_eval_test", "e103_long", "e102_wide", True),
    ("realm_eval_test", "orqa_eval_test", "e103_long", "e102_wide", False),
    ("realm_recall_dev", "realm_recall_dev", "e102_wide", "e104_stale", False),  # fresh − stale
    ("realm_recall_dev", "realm_recall_dev", "e105_rate", "e102_wide", False),   # 0.3x − 0.1x
    ("realm_recall_dev", "ict_recall_dev", "e106_rate1_fresh", "e102_wide", True),  # 1.0x
    ("realm_recall_dev", "realm_recall_dev", "e106_rate1_fresh", "e106_rate1_stale", True),
    ("realm_eval_test", "bm25_reader_eval_test", "e106_rate1_fresh", "e102_wide", True),
    ("realm_eval_test", "realm_eval_test", "e106_rate1_fresh", "e103_long", False),
    ("realm_eval_test", "orqa_eval_test", "e106_rate1_fresh", "e102_wide", False),
])
def test_readme_quotes_the_wide_tower_comparisons(a, b, folder_a, folder_b, per_world):
  """E103-E106's and E108's intervals over worlds 0, 4, 5, 6 in the README are what `paired_runs.py`
  gives from the committed records (and, where the README lists them, each world's)."""
  root = RECORDS / "quickstart_finetune900"
  listed, quoted = _paired_over_worlds(a, b, (
      f"{root / folder_a / f'reworded_world_{n}'},{root / folder_b / f'reworded_world_{n}'}"
      for n in (0, 4, 5, 6)))
  readme = _readme_words()
  assert quoted in readme, (a, b, folder_a, quoted)
  if per_world:
    assert listed in readme, listed


def _staleness_em_pairs() -> list[list[str]]:
  """E115-E117: each world's FRESH,STALE record folders at seeds 0, 1, 2 (fine-tuned)."""
  root = RECORDS / "quickstart_finetune900"
  worlds = []
  for n in (0, 4, 5, 6):
    folders = [f"reworded_world_{n}"] + [f"reworded_world_{n}_seed_{s}" for s in (1, 2)]
    exps = ["e106"] + ["e116" if n == 6 else "e117"] * 2
    worlds.append([",".join(str(root / f"{exp}_rate1_{arm}" / folder) for arm in ("fresh", "stale"))
                   for exp, folder in zip(exps, folders)])
  return worlds


def test_readme_quotes_the_em_half_of_the_staleness_claim_over_seeds():
  """E117: fresh − stale EM per world over seeds 0-2 and over the four worlds, the fine-tuned
  recall range, and the rank correlation of zero-shot recall with EM, as the README gives them,
  are what the scripts print from the committed records."""
  from realm_bench.reporting.records import RECORD_NAME, read_record  # pylint: disable=g-import-not-at-top
  worlds = _staleness_em_pairs()
  grouped = [arg for i, pairs in enumerate(worlds) for arg in (["--"] if i else []) + pairs]
  readme = _readme_words()
  quoted = {}
  for split in ("dev", "test"):
    out = _run("paired_runs.py", f"realm_eval_{split}", f"realm_eval_{split}", *grouped)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    means = [re.match(r"world mean of 3 seeds (\S+ \[\S+ \S+\]) \(.*\) (\w+)$", line)
             for line in lines if line.startswith("world mean")]
    assert len(means) == 4 and all(m and m.group(2) == "INCONCLUSIVE" for m in means), lines
    over = re.match(r"mean (\S+ \[\S+ \S+\]) \(t over 4 worlds\) (\w+)$", lines[-1])
    quoted[split] = ([m.group(1) for m in means], over.group(1), over.group(2))
    if split == "dev":
      seeds6 = [line.rsplit(" ", 3)[1] + " ± " + line.rsplit(" ", 1)[1]
                for line in lines if "reworded_world_6" in line]
  per_world, over, verdict = quoted["dev"]
  assert (f"{', '.join(per_world[:3])} and {per_world[3]} on worlds 0, 4, 5, 6, **{over} over "
          f"the four: {verdict}**") in readme, quoted
  assert f"(test {quoted['test'][1]})" in readme
  assert f"read {seeds6[0].lstrip('-')} better" in readme and f"({seeds6[1]}, {seeds6[2]})" in readme
  pairs = [pair.split(",") for world in worlds for pair in world]
  evals = [read_record(Path(d) / "realm_eval_dev" / RECORD_NAME) for pair in pairs for d in pair]
  tuned = [r.stats["finetuned_recall@5"] for r in evals]
  assert f"to {min(tuned):.0f}-{max(tuned):.0f}% answer-string recall in the top 5" in readme
  # Zero-shot recall of each run beside its EM: the REALM-stage records of the seed folders.
  seeds = RECORDS / "realm_recall_seeds" / "rate1_wide"
  runs = [f"{seeds / f'world_{n}' / 'runs' / f'realm_refresh{r}_seed{s}_recall_dev'},"
          f"{Path(pairs[3 * i + s][a]) / 'realm_eval_dev'}"
          for i, n in enumerate((0, 4, 5, 6)) for s in range(3) for a, r in ((0, 20), (1, 600))]
  out = _run("recall_and_em.py", *runs)
  assert out.returncode == 0, out.stderr
  rho = out.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1]
  assert f"(Spearman {rho}, `results/experiments/recall_and_em.py`;" in readme, out.stdout
  rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1:]
          for line in out.stdout.splitlines()[2:] if line.startswith("| ")}
  w5 = {arm: rows[str(seeds / "world_5" / "runs" / f"realm_refresh{r}_seed1_recall_dev")]
        for arm, r in (("fresh", 20), ("stale", 600))}
  lost = float(w5["fresh"][0]) - float(w5["stale"][0])
  assert (f"seed 1 had lost {lost:.0f} points of recall and reads {w5['stale'][1].strip(' |')} "
          f"against the fresh run's {w5['fresh'][1].strip(' |')})") in readme, w5


def test_readme_quotes_the_quickstart_at_the_papers_rate():
  """E109's REALM − ICT (each world's and the interval) and its EM against the 0.1x quickstart
  in the README are what `paired_runs.py` gives from the committed records."""
  root = RECORDS / "quickstart_finetune900"
  e109 = [root / "e109_quickstart_rate1" / f"reworded_world_{n}" for n in (0, 4, 5, 6)]
  readme = _readme_words()
  listed, quoted = _paired_over_worlds("realm_recall_dev", "ict_recall_dev", e109)
  assert f"{listed}, **{quoted}" in readme, listed
  _, quoted = _paired_over_worlds("realm_eval_test", "realm_eval_test", (
      f"{e},{root / 'topical_reworded' / f'seed_{n}'}" for e, n in zip(e109, (0, 4, 5, 6))))
  assert f"test EM {quoted} against the 0.1x REALM" in readme, quoted


def test_readme_quotes_the_sweep_at_the_papers_rate():
  """E110's Recall@5 at refresh every 20, 60, 200 and 600 steps (worlds 0 and 4), as the README
  lists them, are the committed recall records'."""
  from realm_bench.reporting.records import RECORD_NAME, read_record  # pylint: disable=g-import-not-at-top
  root = RECORDS / "quickstart_finetune900"
  folders = ("e106_rate1_fresh", "e110_refresh60", "e110_refresh200", "e106_rate1_stale")
  readme = _readme_words()
  def recall(folder, n):
    path = root / folder / f"reworded_world_{n}" / "realm_recall_dev" / RECORD_NAME
    return f"{read_record(path).metrics['recall@5']:.1f}"
  worlds = [", ".join(recall(f, n) for f in folders) for n in (0, 4)]
  assert f"30x of {worlds[0]} and {worlds[1]}:" in readme, worlds


def test_readme_quotes_the_staleness_seeds():
  """E111 and E114's fresh − stale and REALM − ICT over five seeds, as the README quotes them,
  are what seed_recall.py computes from the committed records: the mean and the interval over
  the four worlds' seed means, each world's verdict, and world 6's own interval."""
  worlds = sorted(str(p) for p in (RECORDS / "realm_recall_seeds" / "rate1_wide").glob("world_*"))
  assert len(worlds) == 4
  seeds = lambda r: ",".join(f"realm_refresh{r}_seed{s}_recall_dev" for s in range(5))
  out = _run("seed_recall.py", "ict_recall_dev", f"fresh={seeds(20)}", f"stale={seeds(600)}",
             "--versus", "fresh:stale", "--", *worlds)
  assert out.returncode == 0, out.stderr
  overall = re.findall(r"mean difference (\S+) over 20 runs, .*; over the 4 world means "
                       r"\[(\S+), (\S+)\]", out.stdout)
  said = lambda m, lo, hi: f"{float(m):+.1f} [{float(lo):+.1f}, {float(hi):+.1f}]"
  fresh_stale, fresh_ict = said(*overall[0]), said(*overall[1])
  world6 = re.findall(r"\| world_6 \| mean of 5 runs, 95% interval over them \| \| \| "
                      r"(\S+ \[\S+ \S+\]) (\w+) \|", out.stdout)
  verdicts = re.findall(r"\| (world_\d) \| mean of 5 runs.* (PASS|FAIL|INCONCLUSIVE) \|", out.stdout)
  readme = _readme_words()
  assert [w for w, v in verdicts[:4] if v == "PASS"] == ["world_6"]
  assert [v for w, v in verdicts[:4] if w != "world_6"] == ["INCONCLUSIVE"] * 3
  assert (f"fresh > 30x stale (Recall@5) passes on world 6 only**, {world6[0][0]}, INCONCLUSIVE "
          f"on worlds 0, 4 and 5, and is {fresh_stale} over the four worlds' seed means"
          in readme), (world6[0], fresh_stale)
  assert [v for _, v in verdicts[4:8]] == ["PASS"] * 4
  assert f"REALM − ICT, **{fresh_ict}**, passes over seeds on every world." in readme
  r5 = {(w, r): np.array([json.loads((Path(w) / "runs" / f"realm_refresh{r}_seed{s}_recall_dev"
                                      / "record.json").read_text())["metrics"]["recall@5"]
                          for s in range(5)]) for w in worlds for r in (20, 600)}
  ahead = sum(int((r5[w, 20] > r5[w, 600]).sum()) for w in worlds)
  low = {r: sum(int((r5[w, r] < 45).sum()) for w in worlds) for r in (20, 600)}
  sds = [r5[w, 600].std(ddof=1) for w in worlds]
  assert (f"above the stale one in {ahead} of the 20 (world, seed) pairs, but the stale runs "
          f"spread widely (SD {min(sds):.1f}-{max(sds):.1f} points over seeds; {low[600]} of the "
          f"20 below 45 R@5, {low[20]} of the 20 fresh)" in readme), (ahead, low, sds)
  # Seeds 3 and 4 were a second look: with α split over the two looks (97.5% intervals) world
  # 6's interval reaches zero and the four worlds' does not, as the README says.
  split = _run("seed_recall.py", "ict_recall_dev", f"fresh={seeds(20)}", f"stale={seeds(600)}",
               "--versus", "fresh:stale", "--confidence", "0.975", "--", *worlds)
  world_6 = re.search(r"\| world_6 \| mean of 5 runs, 97.5% interval over them \| \| \| "
                      r"\S+ \[(\S+), \S+\] INCONCLUSIVE \|", split.stdout)
  over_4 = re.search(r"over the 4 world means \[(\S+), ", split.stdout)
  assert world_6 and float(world_6.group(1)) <= 0 < float(over_4.group(1)), split.stdout
  assert ("with α split over the two looks, the same command with `--confidence 0.975`, world "
          "6's interval reaches zero, the four worlds' does not" in readme)
  bad = _run("seed_recall.py", "ict_recall_dev", f"fresh={seeds(20)}", "--confidence", "95",
             "--", *worlds)
  assert bad.returncode != 0 and "--confidence: a level between 0 and 1, got '95'" in bad.stderr


def test_readme_stale_runs_lose_the_source_block_in_every_seed():
  """E114's description: over the last fifth of each pre-training log, every stale run's
  candidates hold the source block less often than every fresh run's, in the ranges the README
  quotes (source_retrieved.py on the committed logs)."""
  fifths = _load("source_retrieved").fifths
  logs = RECORDS / "realm_recall_seeds" / "rate1_wide"
  last = {r: [fifths(str(p))[1] for p in logs.glob(f"world_*/logs/realm_refresh{r}_seed*_pretrain")]
          for r in (20, 600)}
  assert len(last[20]) == len(last[600]) == 20
  assert max(last[600]) < min(last[20])
  pct = lambda v: f"{round(100 * min(v))}-{round(100 * max(v))}%"
  assert f"{pct(last[600])} of a batch against {pct(last[20])}" in _readme_words(), last
  # --recall: each run's Recall@5 beside it, and the correlation the log quotes.
  out = _run("source_retrieved.py", "--recall",
             *map(str, sorted(logs.glob("world_*/logs/realm_refresh*_seed*_pretrain"))))
  assert out.returncode == 0, out.stderr
  rho = re.search(r"Spearman \(last fifth, R@5\) over 40 runs: (\S+)", out.stdout).group(1)
  log = " ".join((ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8").split())
  assert f"(Spearman {rho})" in log and f"(Spearman {rho} over the 40 runs)" in log, rho
  bad = _run("source_retrieved.py", "--recall", str(logs / "world_0" / "runs" / "ict_recall_dev"))
  assert bad.returncode != 0 and "--recall reads logs/X_pretrain folders only" in bad.stderr


def test_readme_sweep_over_seeds_is_the_records():
  """The README's generator-3 sweep table (E112) is sweep_seeds.py's output on the records."""
  worlds = [RECORDS / "realm_recall_seeds" / "rate1_wide" / f"world_{n}" for n in (0, 4)]
  out = _run("sweep_seeds.py", "realm_refresh{point}_seed{seed}_recall_dev", "20,60,200,600",
             "0,1,2", "--", *map(str, worlds))
  assert out.returncode == 0, out.stderr
  points = {}
  for world_text in out.stdout.split("\nworld_")[1:]:
    for point, mean, sd in re.findall(r"^\| (\d+) \| \S+ \| \S+ \| \S+ \| (\S+) \| (\S+) \|$",
                                      world_text, re.M):
      points.setdefault(int(point), []).append(f"{mean} ({sd})")
    trend = re.search(r"trend: ρ (\S+), p (\S+): (\w+)", world_text)
    points.setdefault("trend", []).append(
        f"{float(trend.group(1)):.2f} ({trend.group(2)}) {trend.group(3)}")
  readme = _readme_words()
  for point, label in ((20, "20 (1x, REALM's)"), (60, "60 (3x)"), (200, "200 (10x)"),
                       (600, "600 (30x, Table 2's stale row)"),
                       ("trend", "Spearman ρ of the means (one-sided p), check's rule")):
    row = f"| {label} | " + " | ".join(points[point]) + " |"
    assert row in readme, row


@pytest.mark.parametrize("world", [0, 4, 5, 6])
def test_log_e106_staleness_table_is_the_records(world):
  """E106's rows (the wide retriever at the paper's rate, fresh and stale, against ICT, the 0.1x
  REALM and BM25) are the committed records', differences paired as `paired_runs.py` pairs them."""
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting.records import RECORD_NAME, read_record  # pylint: disable=g-import-not-at-top
  root = RECORDS / "quickstart_finetune900"
  def rec(folder, stage):
    return read_record(root / folder / f"reworded_world_{world}" / stage / RECORD_NAME)
  ict, slow, bm25 = (rec("e102_wide", stage)
                     for stage in ("ict_recall_dev", "realm_recall_dev", "bm25_nq_dev"))
  stale, fresh = (rec(f"e106_rate1_{arm}", "realm_recall_dev") for arm in ("stale", "fresh"))
  cells = [f"{r.metrics['recall@5']:.1f}" for r in (ict, slow, stale, fresh, bm25)]
  for a, b in ((fresh, stale), (fresh, ict), (stale, ict), (fresh, slow)):
    diff, se = summary.paired_difference(a, b)
    cells.append(f"{diff:+.1f} ± {se:.1f}")
  row = f"| {world} | " + " | ".join(cells) + " |"
  assert row in (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8"), row


def _decided_claims(runs: Path) -> list[dict]:
  """`realm-bench check --runs RUNS`'s claims that had records to decide them."""
  out = subprocess.run([sys.executable, "-m", "realm_bench.cli", "check", "--runs", str(runs),
                        "--format", "json"], capture_output=True, text=True, cwd=ROOT, check=False)
  return [v for v in json.loads(out.stdout)["verdicts"]
          if v["kind"] == "claim" and v["verdict"] != "MISSING"]


@pytest.mark.parametrize("folder", ["default", "aliases", "topical", "topical_reworded"])
def test_readme_quotes_the_check_over_the_900_step_worlds(folder):
  """The README's verdicts over the worlds at 900 fine-tuning steps are what `realm-bench check`
  decides from the committed records (each claim's difference and 95% interval)."""
  claims = _decided_claims(RECORDS / "quickstart_finetune900" / folder)
  assert len(claims) == 4, claims
  readme = _readme_words()
  for v in claims:
    quoted = f"{v['delta']:+.1f} [{v['ci_low']:+.1f}, {v['ci_high']:+.1f}]"
    assert quoted in readme, (v["item"], v["verdict"], quoted)


def test_readme_quotes_the_check_of_the_reproduction_within_the_budget():
  """E120's claims in the README and the log are `realm-bench check`'s over its records."""
  claims = _decided_claims(RECORDS / "reproduce_e120")
  assert len(claims) == 19, claims
  readme = _readme_words()
  log = " ".join((ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8").split())
  for v in claims:
    if v["delta"] is None:   # the sweep's rank claims: quoted by their correlation
      continue
    quoted = f"{v['delta']:+.1f} [{v['ci_low']:+.1f}, {v['ci_high']:+.1f}]"
    assert quoted in readme and quoted in log, (v["item"], v["verdict"], quoted)
  assert "**8 PASS**" in readme and "**11 INCONCLUSIVE**" in readme
  assert sorted(v["verdict"] for v in claims) == ["INCONCLUSIVE"] * 11 + ["PASS"] * 8


@pytest.mark.parametrize("world", [0, 1, 2])
def test_log_e83_encoder_table_is_the_records(world):
  """E83's rows (the encoders pre-trained on oracle, retrieved and random blocks) are what the
  committed records give, differences by the same paired statistic as `paired_recall.py`."""
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting.records import RECORD_NAME, read_record  # pylint: disable=g-import-not-at-top
  runs = RECORDS / "quickstart_finetune900" / "e83_blocks" / f"default_world_{world}"
  orqa_runs = RECORDS / "quickstart_finetune900" / "default" / f"seed_{world}"
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  for split in ("test", "dev"):
    rec = {name: read_record(runs / f"{name}_enc_eval_{split}" / RECORD_NAME)
           for name in ("oracle", "retrieved", "random")}
    orqa = read_record(orqa_runs / f"orqa_eval_{split}" / RECORD_NAME)
    cells = [f"{r.metrics['exact_match']:.1f}" for r in (orqa, *rec.values())]
    for a, b in (("oracle", "retrieved"), ("oracle", "random"), ("retrieved", "random")):
      diff, se = summary.paired_difference(rec[a], rec[b])
      cells.append(f"{diff:+.1f} ± {se:.1f}")
    row = f"| {world} | {split} | " + " | ".join(cells) + " |"
    assert row in log, row


def test_log_and_readme_e84_bm25_table_is_the_records():
  """E84's rows and its means over the worlds (REALM's gap to the BM25 reader split into
  retriever and encoder) are what `bm25_encoders.py` prints from the committed records; world
  2's ICT + REALM-encoder run is E83's. The README quotes the test split's intervals."""
  e84, e83 = (RECORDS / "quickstart_finetune900" / d for d in ("e84_bm25", "e83_blocks"))
  worlds = [f"{w}:{e84 / f'default_world_{w}'}" for w in (0, 1, 3)]
  worlds.insert(2, f"2:{e84 / 'default_world_2'},{e83 / 'default_world_2'}")
  out = _run("bm25_encoders.py", *worlds)
  assert out.returncode == 0, out.stderr
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  rows = [line for line in out.stdout.splitlines() if re.match(r"\| \d \| (test|dev) \|", line)]
  means = [line for line in out.stdout.splitlines() if line.startswith(("test:", "dev:"))]
  assert len(rows) == 8 and len(means) == 8, out.stdout
  for line in rows + means:
    assert line in log, line
  readme = _readme_words()
  for line in means[:2] + means[3:4]:   # BM25 − ICT, REALM encoder − BERT, retrieved − random
    interval = re.search(r"\[\S+, \S+\]", line).group()
    assert interval in readme, line


def test_bm25_encoders_names_bad_arguments(tmp_path):
  out = _run("bm25_encoders.py", str(tmp_path))
  assert out.returncode != 0 and "WORLD:DIR" in out.stderr


def test_bm25_encoders_names_a_missing_record(tmp_path):
  out = _run("bm25_encoders.py", f"0:{tmp_path}")
  assert out.returncode != 0
  assert "retrieved_enc_eval_test" in out.stderr and str(tmp_path) in out.stderr


def test_paired_runs_gives_e87s_topical_minus_default_means():
  """E87's topical − default differences are what the script prints from the records."""
  folders = RECORDS / "quickstart_finetune900"
  pairs = [f"{folders / 'topical' / f'seed_{w}'},{folders / 'default' / f'seed_{w}'}"
           for w in range(4)]
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  readme = _readme_words()
  means = {}
  for name in ("bm25_reader_eval_test", "orqa_eval_test", "realm_eval_test", "ict_recall_dev",
               "realm_recall_dev"):
    out = _run("paired_runs.py", name, name, *pairs)
    assert out.returncode == 0, out.stderr
    *rows, mean = out.stdout.splitlines()
    means[name] = mean.split(" (")[0].removeprefix("mean ")
    per_world = ", ".join(row.rsplit(" ", 3)[-3] for row in rows)
    assert f"{name}: mean {means[name]} (" in log and per_world in log, (name, out.stdout)
  assert (f"REALM gains {means['realm_eval_test']} EM and ORQA {means['orqa_eval_test']}, the "
          f"BM25 reader {means['bm25_reader_eval_test']}:") in readme


def test_paired_runs_gives_e88s_staleness_table():
  folders = RECORDS / "quickstart_finetune900"
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  e88 = log[log.index("\nE88 "):]
  for a, b, column in (("realm_recall_dev", "realm_stale30x_recall_dev", 4),
                       ("realm_stale30x_recall_dev", "ict_recall_dev", 5)):
    worlds = []
    for w in range(4):
      pair = (folders / "topical" / f"seed_{w}", folders / "e86_ict" / f"topical_world_{w}")
      worlds.append(",".join(str(p) for p in (pair if a == "realm_recall_dev" else pair[::-1])))
    out = _run("paired_runs.py", a, b, *worlds)
    assert out.returncode == 0, out.stderr
    *rows, mean = out.stdout.splitlines()
    for w, row in enumerate(rows):
      cells = next(line for line in e88.splitlines() if line.startswith(f"    | {w} |"))
      assert cells.split("|")[1 + column].strip() == row.rsplit(" ", 3)[-3] + " ± " + \
          row.rsplit(" ", 1)[-1], (row, cells)
    if column == 4:
      assert f"Fresh − stale: {mean.split(' (')[0]} over the four worlds" in " ".join(e88.split())


def test_paired_runs_names_a_missing_record(tmp_path):
  out = _run("paired_runs.py", "realm_recall_dev", "nope", str(tmp_path))
  assert out.returncode != 0 and "no such record" in out.stderr and "Traceback" not in out.stderr


def test_paired_runs_names_an_empty_world():
  out = _run("paired_runs.py", "realm_eval_dev", "realm_eval_dev", "x,y", "--")
  assert out.returncode != 0 and "`--` separates worlds" in out.stderr
  assert "Traceback" not in out.stderr


def test_paired_runs_gives_e89s_encoder_table():
  folders = RECORDS / "quickstart_finetune900"
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  e89 = log[log.index("\nE89 "):].split("\n\n")[1]
  for w in (0, 1):
    controls = folders / "e86_ict" / f"topical_world_{w}"
    for split in ("test", "dev"):
      row = next(line for line in e89.splitlines() if line.startswith(f"    | {w} | {split} |"))
      cells = [c.strip() for c in row.split("|")[1:-1]]
      for a, b, where, cell in (
          (f"retrieved_enc_eval_{split}", f"random_enc_eval_{split}", str(controls), 6),
          (f"realm_eval_{split}", f"retrieved_enc_eval_{split}",
           f"{folders / 'topical' / f'seed_{w}'},{controls}", 7)):
        out = _run("paired_runs.py", a, b, where)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0].endswith(f" {cells[cell]}"), (out.stdout, row)


@pytest.mark.parametrize("world", ["topical", "default"])
def test_finetuned_recall_prints_e90s_tables(world):
  folders = sorted(str(p) for p in (RECORDS / "quickstart_finetune900" / world).glob("seed_*"))
  out = _run("finetuned_recall.py", *folders)
  assert out.returncode == 0, out.stderr
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  e90 = log[log.index("\nE90 "):log.index("\n## What it says")]
  rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
  assert len(rows) == 1 + len(folders) + 1   # the header, the worlds, the mean
  for row in rows:
    assert f"    {row}\n" in e90, row


def test_finetuned_recall_names_a_folder_without_the_records(tmp_path):
  out = _run("finetuned_recall.py", str(tmp_path))
  assert out.returncode != 0 and "no evaluate record" in out.stderr
  assert "Traceback" not in out.stderr


def test_paired_runs_and_source_retrieved_give_e91s_staleness_table():
  e91_dir = RECORDS / "quickstart_finetune900" / "e91_staleness"
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  e91 = log[log.index("\nE91 "):log.index("\nE92 ")]
  worlds = [str(e91_dir / f"topical_world_{w}") for w in range(4)]
  for a, b, column in (("r10_recall_dev", "r10_stale30x_recall_dev", 5),
                       ("r10_eval_test", "r10_stale30x_eval_test", 9)):
    out = _run("paired_runs.py", a, b, *worlds)
    assert out.returncode == 0, out.stderr
    *rows, mean = out.stdout.splitlines()
    for w, row in enumerate(rows):
      cells = next(line for line in e91.splitlines() if line.startswith(f"    | {w} |"))
      assert cells.split("|")[1 + column].strip() == row.split(" − ")[1].split(" ", 1)[1], row
    if column == 5:
      assert mean.split(" (")[0].replace("mean ", "") in " ".join(e91.split())
  out = _run("source_retrieved.py", *[f"{w}/logs/{n}" for w in worlds
                                      for n in ("r10_stale30x", "r10")])
  assert out.returncode == 0, out.stderr
  last = [line.rsplit(" ", 1)[-1] for line in out.stdout.splitlines()]
  assert f"{' / '.join(last[0::2])} against the fresh run's {' / '.join(last[1::2])}" in \
      " ".join(e91.split())


def test_source_retrieved_names_a_missing_log(tmp_path):
  out = _run("source_retrieved.py", str(tmp_path))
  assert out.returncode != 0 and "no such file" in out.stderr and "Traceback" not in out.stderr


def test_realm_variant_finetune_tunes_the_variant_as_the_realm_row(monkeypatch, tmp_path):
  from realm_bench import stages as stages_lib  # pylint: disable=g-import-not-at-top
  variant = _load("realm_variant")
  runs = tmp_path / "runs"
  trained, evaluated = [], []
  monkeypatch.setattr(stages_lib.Stages, "train",
                      lambda self, name, gin_files, bindings, kind=None: trained.append(
                          (name, gin_files, bindings)) or runs / name)
  monkeypatch.setattr(stages_lib.Stages, "recall", lambda self, *args: None)
  monkeypatch.setattr(stages_lib.Stages, "evaluate",
                      lambda self, name, experiment, tuned, split: evaluated.append(
                          (name, experiment, tuned, split)))
  variant.run(tmp_path, "r10", ["RETRIEVER_LR_SCALE = 1.0"], finetune=True)
  (pre, _, pre_bindings), (tuned, gin_files, bindings) = trained
  assert pre == "r10" and "RETRIEVER_LR_SCALE = 1.0" in pre_bindings
  assert tuned == "r10_finetune" and gin_files == ["runs/finetune.gin"]
  # The variant's bindings are its pre-training's; it is fine-tuned as the quickstart's REALM.
  assert bindings == stages_lib.finetune_bindings(stages_lib.QuickstartConfig(), runs / "r10",
                                                  runs / "bert")
  assert evaluated == [("r10_eval_test", "realm", runs / "r10_finetune", "test"),
                       ("r10_eval_dev", "realm", runs / "r10_finetune", "validation")]
  trained.clear()
  variant.run(tmp_path, "r10", [])
  assert [t[0] for t in trained] == ["r10"]


def test_reading_variant_tunes_and_evaluates_under_the_same_bindings(monkeypatch, tmp_path):
  from realm_bench import stages as stages_lib  # pylint: disable=g-import-not-at-top
  variant = _load("reading_variant")
  runs = tmp_path / "runs"
  for needed in ("bert", "ict", "realm_pretrain", "realm_finetune"):
    (runs / needed).mkdir(parents=True)
    (runs / needed / "record.json").write_text("{}")
  trained, evaluated = [], []
  monkeypatch.setattr(stages_lib.Stages, "train",
                      lambda self, name, gin_files, bindings, kind=None: trained.append(
                          (name, gin_files, bindings)) or runs / name)
  monkeypatch.setattr(stages_lib.Stages, "evaluate",
                      lambda self, name, experiment, tuned, split, overlays=(), bindings=():
                      evaluated.append((name, experiment, tuned, split, tuple(overlays),
                                        tuple(bindings))))
  knob = "SPAN_RETRIEVAL_WEIGHT = 0.0"
  variant.run(tmp_path, "w0", [knob])
  [(name, gin_files, bindings)] = trained
  config = stages_lib.QuickstartConfig()
  assert name == "w0_finetune" and gin_files == ["runs/finetune.gin"]
  assert bindings == stages_lib.finetune_bindings(config, runs / "realm_pretrain", runs / "bert",
                                                  [knob])
  assert evaluated == [("w0_eval_test", "realm", runs / "w0_finetune", "test", (), (knob,)),
                       ("w0_eval_dev", "realm", runs / "w0_finetune", "validation", (),
                        (knob,))]
  trained.clear(), evaluated.clear()
  variant.run(tmp_path, "o0", [knob], orqa=True)
  assert trained[0][1] == ["runs/finetune.gin", "experiments/orqa.gin"]
  assert f"WARM_START = '{runs / 'ict'}'" in trained[0][2]
  assert evaluated[0][1] == "orqa" and evaluated[0][4] == ("experiments/orqa.gin",)
  trained.clear(), evaluated.clear()
  variant.run(tmp_path, "b0", ["NUM_STEPS = 2700"], bm25=True)
  # The BM25 reader's row as the quickstart fine-tunes it, plus the bindings.
  assert trained == [("b0_finetune", ["runs/finetune.gin", "experiments/bm25_reader.gin"],
                      stages_lib.finetune_bindings(config, None, runs / "bert",
                                                   ["NUM_STEPS = 2700"]))]
  assert evaluated[1] == ("b0_eval_dev", "bm25_reader", runs / "b0_finetune", "validation",
                          ("experiments/bm25_reader.gin",), ("NUM_STEPS = 2700",))
  trained.clear(), evaluated.clear()
  variant.run(tmp_path, "be", [], bm25=True, encoder=runs / "realm_pretrain")
  assert f"BERT_RUN = '{runs / 'realm_pretrain'}'" in trained[0][2]
  trained.clear(), evaluated.clear()
  variant.run(tmp_path, "p0", [knob], evaluate=runs / "realm_finetune")
  assert not trained and [e[2] for e in evaluated] == [runs / "realm_finetune"] * 2
  missing = _run("reading_variant.py", str(tmp_path), "x", "--evaluate", str(runs / "nope"))
  assert missing.returncode != 0 and "no record.json" in missing.stderr
  usage = _run("reading_variant.py", str(tmp_path))
  assert usage.returncode != 0 and "--evaluate" in usage.stderr
  # --encoder names the BM25 reader's encoder: alone it is refused, not silently ignored.
  stray = _run("reading_variant.py", str(tmp_path), "x", "--encoder", str(runs / "bert"))
  assert stray.returncode != 0 and "--bm25" in stray.stderr
  assert "Traceback" not in missing.stderr + usage.stderr + stray.stderr


def test_reading_errors_says_which_block_each_answer_came_from(tmp_path):
  world = tmp_path / "world"
  for sub in ("corpus", "truth", "open_qa/nq"):
    (world / sub).mkdir(parents=True)
  blocks = [(0, "Aro Bel", "Aro Bel was born in Cadmere."), (1, "Aro Bel", "Aro Bel likes tea."),
            (2, "Dun Eck", "Dun Eck was born in Fenwick."), (3, "Dun Eck", "Dun Eck is a smith."),
            (4, "Gil Hap", "Gil Hap was born in Ivory."), (5, "Gil Hap", "Gil Hap owns a boat."),
            (6, "Ola Hap", "Hap was born in Kent.")]
  (world / "corpus/blocks.jsonl").write_text("".join(
      json.dumps({"id": i, "title": t, "body": b}) + "\n" for i, t, b in blocks))
  facts = [{"block_id": 0, "subject": "Aro Bel", "questions": {"nq": ["where was aro bel born"]}},
           {"block_id": 2, "subject": "Dun Eck", "questions": {"nq": ["where was dun eck born"]}},
           {"block_id": 4, "subject": "Gil Hap", "questions": {"nq": ["where was gil hap born"]}}]
  (world / "truth/facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in facts))
  dev = [("where was aro bel born", "Cadmere"), ("where was dun eck born", "Fenwick"),
         ("where was gil hap born", "Ivory")]
  (world / "open_qa/nq/dev.jsonl").write_text("".join(
      json.dumps({"question": q, "answer": [a]}) + "\n" for q, a in dev))
  def write(name, rows):
    (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
  # Dense: question 1 right from its gold block; question 2 answered from Gil Hap's block,
  # question 3 from the block of Gil Hap's namesake Ola Hap.
  write("retrieved.jsonl", [{"question": dev[0][0], "retrieved": [0, 4, 2, 5, 3]},
                            {"question": dev[1][0], "retrieved": [4, 2, 0, 5, 1]},
                            {"question": dev[2][0], "retrieved": [6, 4, 5, 0, 1]}])
  write("dense.jsonl", [{"question": dev[0][0], "prediction": "Cadmere"},
                        {"question": dev[1][0], "prediction": "Ivory"},
                        {"question": dev[2][0], "prediction": "Kent"}])
  write("bm25.jsonl", [{"question": q, "prediction": a} for q, a in dev])
  out = _run("reading_errors.py", str(world), *(str(tmp_path / f) for f in
                                                 ("retrieved.jsonl", "dense.jsonl", "bm25.jsonl")))
  assert out.returncode == 0, out.stderr
  rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
          for line in out.stdout.splitlines() if line.startswith("| dense") or
          line.startswith("| bm25")}
  # EM, subject's blocks per question ((1 + 1 + 2) / 3), gold@5, EM with / without gold, wrong
  # from gold / subject / other (of those, a namesake's) / none.
  assert rows["dense"] == ["33.3", "1.33", "100.0", "33.3", "-", "0.0", "0.0", "100.0", "50.0",
                           "0.0"]
  assert rows["bm25"][0] == "100.0" and rows["bm25"][5:] == ["-"] * 5
  write("bad.jsonl", [{"question": "another question", "prediction": "x"}] * 3)
  bad = _run("reading_errors.py", str(world), str(tmp_path / "retrieved.jsonl"),
             str(tmp_path / "bad.jsonl"), str(tmp_path / "bm25.jsonl"))
  assert bad.returncode != 0 and "bad.jsonl" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("a, b, mean", [
    ("w0_eval_test", "realm_eval_test", "mean -1.0 [-2.7, +0.6]"),
    ("bm25_realm_enc_eval_test", "realm_eval_test", "mean +21.6 [+18.9, +24.3]"),
    ("realm_eval_test", "bm25_reader_eval_test", "mean +0.3 [-6.4, +7.0]")])
def test_paired_runs_gives_e93s_reading_means(a, b, mean):
  worlds = sorted(str(p) for p in (RECORDS / "quickstart_finetune900" / "e93_reading").glob(
      "topical_world_*"))
  assert len(worlds) == 4
  out = _run("paired_runs.py", a, b, *worlds)
  assert out.returncode == 0, out.stderr
  assert mean in out.stdout
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text()
  assert mean.removeprefix("mean ") in log


def test_e93s_world_0_numbers_are_the_records():
  world0 = RECORDS / "quickstart_finetune900" / "e93_reading" / "topical_world_0"
  em = lambda name: round(json.loads((world0 / name / "record.json").read_text())[
      "metrics"]["exact_match"], 1)
  assert [em(f"read{n}_eval_test") for n in (1, 2, 3)] + [em("realm_eval_test")] == [
      22.7, 26.6, 29.0, 30.0]
  assert (em("long_eval_test"), em("long_eval_dev"), em("w0pred_eval_test")) == (39.0, 37.6, 29.2)
  out = _run("paired_runs.py", "long_eval_test", "realm_eval_test", str(world0))
  assert "+9.0 ± 1.3" in out.stdout


def test_e94s_topical_alias_numbers_are_the_records():
  world0 = RECORDS / "quickstart_finetune900" / "topical_aliases" / "seed_0"
  out = _run("seed_table.py", str(world0))
  assert out.returncode == 0, out.stderr
  row = ("| 0 | 1.1 | 54.4 | 18.4 | 0.8 | 16.2 | 16.2 | 32.0 | 31.6 | +0.0 ± 1.0 | -2.2 ± 1.4 "
         "| +15.4 ± 1.2 | -0.4 ± 0.7 |")
  assert row in out.stdout
  topical = RECORDS / "quickstart_finetune900" / "topical" / "seed_0"
  diff = _run("paired_runs.py", "realm_eval_test", "realm_eval_test", f"{world0},{topical}")
  assert "-13.4 ± 1.6" in diff.stdout
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text()
  assert "REALM -13.4 ± 1.6" in log and "ICT R@5 32.0, REALM 31.6" in log


def test_e95s_longer_fine_tuning_numbers_are_the_records():
  n = RECORDS / "quickstart_finetune2700" / "topical" / "seed_0"
  e93 = RECORDS / "quickstart_finetune900" / "e93_reading" / "topical_world_0"
  pairs = [("realm_eval_test", "bm25_reader_eval_test", str(n), "-5.9 ± 2.0"),
           ("realm_eval_dev", "bm25_reader_eval_dev", str(n), "-7.2 ± 2.0"),
           ("bm25_reader_eval_test", "bm25_reader_eval_test", f"{n},{e93}", "+14.5 ± 1.2"),
           ("realm_eval_test", "long_eval_test", f"{n},{e93}", "+0.0 ± 0.0")]
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text()
  for a, b, world, quoted in pairs:
    out = _run("paired_runs.py", a, b, world)
    assert out.returncode == 0 and quoted in out.stdout, (a, b, out.stdout, out.stderr)
    assert quoted in log


def test_e96s_world_0_and_4_variant_numbers_are_the_records():
  a = RECORDS / "quickstart_finetune900" / "topical_reworded" / "seed_0"
  b = RECORDS / "quickstart_finetune2700" / "topical_reworded" / "seed_0"
  v = RECORDS / "quickstart_finetune900" / "e96_variants" / "reworded_world_0"
  a4 = RECORDS / "quickstart_finetune900" / "topical_reworded" / "seed_4"
  v4 = RECORDS / "quickstart_finetune900" / "e96_variants" / "reworded_world_4"
  pairs = [("realm_eval_test", "bm25_reader_eval_test", str(a), "+5.2 ± 1.9"),
           ("realm_eval_test", "bm25_reader_eval_test", str(b), "-4.1 ± 2.0"),
           ("bm25_reader_eval_test", "bm25_reader_eval_test", f"{b},{a}", "+12.6 ± 1.1"),
           ("realm_eval_test", "realm_eval_test", f"{b},{a}", "+3.3 ± 1.2"),
           ("r10_recall_dev", "r10_stale30x_recall_dev", str(v), "+17.1 ± 1.7"),
           ("realm_learned_scale_recall_dev", "ict_recall_dev", f"{v},{a}", "+2.1 ± 1.1"),
           ("paper1500_recall_dev", "ict_recall_dev", f"{v},{a}", "-1.2 ± 1.4"),
           ("realm_eval_test", "realm_random_eval_test", f"{a},{v}", "+0.6 ± 1.0"),
           ("realm_eval_test", "realm_random_eval_test", f"{a4},{v4}", "-0.1 ± 1.0")]
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text()
  for x, y, world, quoted in pairs:
    out = _run("paired_runs.py", x, y, world)
    assert out.returncode == 0 and quoted in out.stdout, (x, y, out.stdout, out.stderr)
    assert quoted in log, quoted


def test_e96s_held_out_recall_interval_is_the_records():
  """E96's REALM − ICT recall over worlds 0, 4, 5, 6, quoted in the log and the README."""
  worlds = sorted(str(p) for p in
                  (RECORDS / "quickstart_finetune900" / "topical_reworded").glob("seed_*"))
  out = _run("paired_runs.py", "realm_recall_dev", "ict_recall_dev", *worlds)
  assert out.returncode == 0 and len(worlds) == 4, out.stderr
  quoted = out.stdout.strip().splitlines()[-1].removeprefix("mean ").split(" (")[0]
  for text in ("results/EXPERIMENTS.md", "README.md"):
    assert quoted in " ".join((ROOT / text).read_text(encoding="utf-8").split()), text


def test_e96s_convergence_check_is_the_records():
  """REALM > BM25 reader at 2,700 fine-tuning steps over worlds 0, 4, 5, 6, as the log and README
  quote it: `check` decides it from the committed records."""
  [v] = _decided_claims(RECORDS / "quickstart_finetune2700" / "topical_reworded")
  assert (v["item"], v["verdict"]) == ("table1/realm_above_bm25_reader", "FAIL")
  quoted = f"{v['delta']:+.1f} [{v['ci_low']:+.1f}, {v['ci_high']:+.1f}]"
  for text in ("results/EXPERIMENTS.md", "README.md"):
    assert quoted in " ".join((ROOT / text).read_text(encoding="utf-8").split()), text


@pytest.mark.parametrize("world, quotes", [(4, ("-2.6 ± 2.0", "+19.1 ± 1.3", "+3.7 ± 1.2")),
                                           (5, ("-5.8 ± 1.9", "+14.0 ± 1.1", "+4.9 ± 1.3")),
                                           (6, ("-4.4 ± 2.0", "+17.1 ± 1.2", "+3.7 ± 1.3"))])
def test_e96s_held_out_convergence_rows_are_the_records(world, quotes):
  a = RECORDS / "quickstart_finetune900" / "topical_reworded" / f"seed_{world}"
  b = RECORDS / "quickstart_finetune2700" / "topical_reworded" / f"seed_{world}"
  log = (ROOT / "results" / "EXPERIMENTS.md").read_text(encoding="utf-8")
  row = [line for line in log.splitlines() if line.strip().startswith(f"| {world} | ")
         and " -> " in line][0]
  pairs = [("realm_eval_test", "bm25_reader_eval_test", str(b)),
           ("bm25_reader_eval_test", "bm25_reader_eval_test", f"{b},{a}"),
           ("realm_eval_test", "realm_eval_test", f"{b},{a}")]
  for (x, y, folders), quoted in zip(pairs, quotes):
    out = _run("paired_runs.py", x, y, folders)
    assert out.returncode == 0 and quoted in out.stdout, (x, y, out.stdout, out.stderr)
    assert quoted in row, (quoted, row)


def test_namesakes_counts_a_namesakes_block_before_gold(tmp_path):
  world = _namesake_world(tmp_path)
  dev = ["where was aro bel born", "where was ott bel born", "where was dun eck born"]
  for run, lists in (("a", [[1, 0], [0, 3], [2]]), ("b", [[0, 1], [1, 0], [2]])):
    (tmp_path / run).mkdir()
    (tmp_path / run / "retrieved_validation.jsonl").write_text("".join(
        json.dumps({"question": q, "retrieved": r}) + "\n" for q, r in zip(dev, lists)))
  out = _run("namesakes.py", str(world), str(tmp_path / "a"), str(tmp_path / "b"))
  assert out.returncode == 0, out.stderr
  rows = [[c.strip() for c in line.split("|")[2:-1]] for line in out.stdout.splitlines()[2:]]
  # Run a: Aro Bel's namesake's block first (gold second); Ott Bel's gold missing, his
  # namesake's block present. Run b: both golds first, a namesake's block second.
  assert rows[0] == ["2", "50.0", "100.0", "100.0"]
  assert rows[1] == ["2", "100.0", "100.0", "0.0"]
  assert rows[2][1:] == ["+50.0 ± 50.0", "+0.0 ± 0.0", "-100.0 ± 0.0"]
  missing = _run("namesakes.py", str(world), str(tmp_path / "nowhere"))
  assert missing.returncode != 0 and "nowhere" in missing.stderr
  assert "Traceback" not in missing.stderr


def test_em_by_kind_pairs_two_evaluations_per_subject_kind(tmp_path):
  world = tmp_path / "world"
  for sub in ("truth", "open_qa/nq"):
    (world / sub).mkdir(parents=True)
  questions = [("q1", "person"), ("q2", "person"), ("q3", "place"), ("q4", "organisation")]
  (world / "open_qa/nq/test.jsonl").write_text("".join(
      json.dumps({"question": q, "answer": ["x"]}) + "\n" for q, _ in questions))
  (world / "truth/facts.jsonl").write_text("".join(
      json.dumps({"subject_kind": k, "questions": {"nq": [q]}}) + "\n" for q, k in questions))
  source = ROOT / "results/records/quickstart_finetune2700/topical_reworded/seed_0"
  for run, bits in (("a", "0111"), ("b", "1100")):
    record = json.loads((source / "realm_eval_test/record.json").read_text())
    record.update(outcomes=bits, num_examples=len(bits))
    (tmp_path / run).mkdir()
    (tmp_path / run / "record.json").write_text(json.dumps(record))
  out = _run("em_by_kind.py", str(world), str(tmp_path / "a"), str(tmp_path / "b"))
  assert out.returncode == 0, out.stderr
  rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
          for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line}
  assert rows["person"] == ["2", "50.0", "100.0", "-50.0 ± 50.0"]
  assert rows["place"][:3] == ["1", "100.0", "0.0"]
  assert rows["all"] == ["4", "75.0", "50.0", "+25.0 ± 47.9"]
  (world / "open_qa/nq/test.jsonl").write_text('{"question": "q1", "answer": ["x"]}\n')
  short = _run("em_by_kind.py", str(world), str(tmp_path / "a"), str(tmp_path / "b"))
  assert short.returncode != 0 and "4 per-question outcomes" in short.stderr
  assert "Traceback" not in short.stderr


def _test_kinds(tmp_path, world: int) -> np.ndarray:
  """Each NQ-twin test question's subject kind, from the world remade at its seed."""
  folder = _reworded_world(tmp_path, world)
  kind = {q: f["subject_kind"] for f in map(json.loads, (folder / "truth/facts.jsonl")
                                            .read_text().splitlines())
          for q in f["questions"]["nq"]}
  return np.array([kind[json.loads(line)["question"]] for line in
                   (folder / "open_qa/nq/test.jsonl").read_text().splitlines()])


@pytest.mark.parametrize("world", [0, 4, 5, 6])
def test_e97s_by_kind_rows_are_the_records(tmp_path, world):
  """The log's per-kind REALM − BM25 reader at 2,700 steps, from the records' outcomes and the
  kinds the world's seed gives its test questions."""
  records = ROOT / "results/records/quickstart_finetune2700/topical_reworded" / f"seed_{world}"
  kinds = _test_kinds(tmp_path, world)
  realm, bm25 = (np.array([c == "1" for c in json.loads(
      (records / run / "record.json").read_text())["outcomes"]], float) * 100
      for run in ("realm_eval_test", "bm25_reader_eval_test"))
  cells = []
  for kind in ("person", "place", "organisation"):
    m = kinds == kind
    d = realm[m] - bm25[m]
    cells.append(f"{realm[m].mean():.1f} / {bm25[m].mean():.1f}, {d.mean():+.1f} ± "
                 f"{d.std(ddof=1) / np.sqrt(m.sum()):.1f} ({m.sum()})")
  d = realm - bm25
  cells.append(f"{d.mean():+.1f} ± {d.std(ddof=1) / np.sqrt(len(d)):.1f}")
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert f"| {world} | " + " | ".join(cells) + " |" in log


_WORLDS: dict[tuple[int, int | None], Path] = {}


def _reworded_world(tmp_path, seed: int, num_people: int | None = None) -> Path:
  """The reworded world of a seed (and number of people, E99), as the E96-E99 records ran on
  it (the generator is byte-identical per seed and takes about a second), made once per test
  session."""
  key = (seed, num_people)
  if key not in _WORLDS or not _WORLDS[key].exists():
    out = tmp_path / f"world_{seed}_{num_people}"
    bindings = ["--gin_bindings", f"WorldConfig.seed = {seed}"]
    if num_people is not None:
      bindings += ["--gin_bindings", f"WorldConfig.num_people = {num_people}"]
    subprocess.run([sys.executable, "-m", "realm_bench.cli", "world", "--out", str(out),
                    "--gin_file", "world/reworded.gin", *bindings],
                   cwd=ROOT, check=True, capture_output=True)
    _WORLDS[key] = out
  return _WORLDS[key]


@pytest.mark.parametrize("world, quotes", [
    (0, ["21.7 / 19.5 / 14.5", "25.1 / 23.0 / 16.1", "80.5 / 80.4 / 59.8", "55.1 / 0.6 / 0.6"]),
    (4, ["17.0 / 17.0 / 11.9", "24.0 / 22.2 / 16.9", "78.1 / 79.5 / 57.1", "57.1 / 0.3 / 0.3"]),
    (5, ["25.0 / 18.6 / 13.2", "33.6 / 30.2 / 21.8", "85.7 / 78.5 / 56.0", "56.3 / 0.0 / 0.0"]),
    (6, ["21.6 / 18.6 / 13.4", "26.4 / 23.5 / 16.1", "85.2 / 77.5 / 54.3", "55.9 / 0.6 / 0.4"])])
def test_e97s_namesake_rows_are_the_records(tmp_path, world, quotes):
  quickstart = ROOT / "results/records/quickstart_finetune900/topical_reworded" / f"seed_{world}"
  tuned = (ROOT / "results/records/quickstart_finetune2700/e97_reading"
           / f"reworded_world_{world}" / "realm_ft_recall_dev")
  out = _run("namesakes.py", str(_reworded_world(tmp_path, world)),
             str(quickstart / "ict_recall_dev"), str(quickstart / "realm_recall_dev"),
             str(tuned), "bm25")
  assert out.returncode == 0, out.stderr
  rows = [[c.strip() for c in line.split("|")[3:-1]] for line in out.stdout.splitlines()[2:6]]
  assert [" / ".join(r) for r in rows] == quotes
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert f"| {world} | " + " | ".join(quotes) + " |" in log


def test_e113s_fine_tuned_namesake_rows_are_the_records(tmp_path):
  """E113's log rows (each fine-tuned retriever's gold@5 / namesake's block in the top 5 / it
  before gold, and the paired "before gold" differences) and the interval over the four worlds
  the README quotes are what namesakes.py gives on the committed top-k files."""
  from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top
  records = ROOT / "results/records/quickstart_finetune900/e113_finetuned_recall"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  namesakes = runpy.run_path(str(ROOT / "results/experiments/namesakes.py"))

  def table(world, *runs):
    out = _run("namesakes.py", str(_reworded_world(tmp_path, world)), *map(str, runs))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()[2:]
    rows = [" / ".join(c.strip() for c in line.split("|")[3:-1]) for line in lines[:len(runs)]]
    diffs = [line.split("|")[-2].strip() for line in lines[len(runs):]]
    return rows, diffs

  before_gold = []
  for world in (0, 4, 5, 6):
    here = records / f"reworded_world_{world}"
    (orqa, fast, bm25), (vs_orqa, _) = table(world, here / "orqa_ft_recall_dev",
                                             here / "realm_ft_recall_dev", "bm25")
    slow, vs_slow = "-", "-"
    if (here / "realm_rate01_ft_recall_dev").exists():
      (slow, _), (vs_slow,) = table(world, here / "realm_rate01_ft_recall_dev",
                                     here / "realm_ft_recall_dev")
    row = f"| {world} | {slow} | {fast} | {orqa} | {bm25} | {vs_orqa} | {vs_slow} |"
    assert row in log, row
    # The interval is over the unrounded differences, as it was computed for the log.
    rate = lambda run: np.mean([o[2] for o in namesakes["outcomes"](
        _reworded_world(tmp_path, world), here / run)])
    before_gold.append(100 * (rate("realm_ft_recall_dev") - rate("orqa_ft_recall_dev")))
  d = np.array(before_gold)
  half = scipy_stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
  quote = f"+{d.mean():.1f} [{d.mean() - half:+.1f}, {d.mean() + half:+.1f}]"
  assert f"**{quote}**" in log and f"ORQA's over the four worlds, {quote}" in _readme_words()


def test_e97s_world_0_reading_errors_are_the_records(tmp_path):
  records = ROOT / "results/records/quickstart_finetune2700"
  out = _run("reading_errors.py", str(_reworded_world(tmp_path, 0)),
             str(records / "e97_reading/reworded_world_0/realm_ft_recall_dev"
                 / "retrieved_validation.jsonl"),
             *(str(records / "topical_reworded/seed_0" / run / "predictions_validation.jsonl")
               for run in ("realm_eval_dev", "bm25_reader_eval_dev")))
  assert out.returncode == 0, out.stderr
  rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
          for line in out.stdout.splitlines() if line.startswith(("| dense", "| bm25"))}
  # EM, subject's blocks, gold@5, EM with gold, ..., wrong from another entity, namesakes.
  assert [rows["dense"][i] for i in (2, 3, 7, 8)] == ["86.6", "44.2", "81.1", "92.6"]
  assert [rows["bm25"][i] for i in (2, 3, 7, 8)] == ["66.8", "60.7", "7.8", "14.6"]


def test_e97s_people_at_900_and_2700_steps_are_the_records(tmp_path):
  """The log's people-only REALM − BM25 reader at 900 steps and each system's change to 2,700
  (the 900- and 2,700-step runs share their world)."""
  root = ROOT / "results/records"
  diffs, changes = [], {"realm_eval_test": [], "bm25_reader_eval_test": []}
  for world in (0, 4, 5, 6):
    folder = f"topical_reworded/seed_{world}"
    people = _test_kinds(tmp_path, world) == "person"
    def em(steps, run):
      record = root / f"quickstart_finetune{steps}" / folder / run / "record.json"
      return np.array([c == "1" for c in json.loads(record.read_text())["outcomes"]],
                      float)[people] * 100
    d = em(900, "realm_eval_test") - em(900, "bm25_reader_eval_test")
    diffs.append(f"{d.mean():+.1f} ± {d.std(ddof=1) / np.sqrt(len(d)):.1f}")
    for run, found in changes.items():
      found.append(round((em(2700, run) - em(900, run)).mean(), 1))
  log = " ".join((ROOT / "results/EXPERIMENTS.md").read_text().split())
  assert "(" + ", ".join(diffs) + ")" in log
  assert (min(changes["bm25_reader_eval_test"]), max(changes["bm25_reader_eval_test"])) == (9.3,
                                                                                          17.3)
  assert (min(changes["realm_eval_test"]), max(changes["realm_eval_test"])) == (-3.4, -0.1)


def test_e97s_ict_variants_are_the_records(tmp_path):
  folder = ROOT / "results/records/quickstart_finetune900/e97_namesakes/reworded_world_0"
  recall = {run: round(json.loads((folder / f"{run}_recall_dev/record.json").read_text())
                       ["metrics"]["recall@5"], 1) for run in ("ict_namesakes1", "ict_title_sn")}
  assert recall == {"ict_namesakes1": 31.8, "ict_title_sn": 17.3}
  out = _run("namesakes.py", str(_reworded_world(tmp_path, 0)),
             *(str(folder / f"{run}_recall_dev") for run in ("ict_namesakes1", "ict_title_sn")))
  assert out.returncode == 0, out.stderr
  rows = [[c.strip() for c in line.split("|")[3:-1]] for line in out.stdout.splitlines()[2:4]]
  assert rows == [["10.2", "7.7", "5.7"], ["10.4", "5.7", "4.1"]]


@pytest.mark.parametrize("world", [0, 4, 5, 6])
def test_e97s_encoder_rows_are_the_records(world):
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
  records = ROOT / "results/records/quickstart_finetune2700"
  mine = records / "e97_encoders" / f"reworded_world_{world}"
  theirs = records / "topical_reworded" / f"seed_{world}"
  def rec(folder, run):
    return read_record(folder / run / "record.json")
  def pair(a, b):
    pairs = []
    for split in ("test", "dev"):
      diff, se = summary.paired_difference(rec(mine, f"{a}_eval_{split}"),
                                           rec(b[0], f"{b[1]}_eval_{split}"))
      pairs.append(f"{diff:+.1f} ± {se:.1f}")
    return " / ".join(pairs)
  cells = [" / ".join(f"{rec(mine, f'bm25_realm_enc2700_eval_{s}').metrics['exact_match']:.1f}"
                      for s in ("test", "dev")),
           pair("bm25_realm_enc2700", (theirs, "bm25_reader")),
           pair("bm25_realm_enc2700", (theirs, "realm")),
           pair("bm25_realm_enc2700", (mine, "bm25_random_enc2700")) if world in (0, 4) else ""]
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert (f"| {world} | " + " | ".join(cells) + " |").replace("|  |", "| |") in log


def test_name_probe_reads_names_an_index_encodes_and_not_those_it_does_not(tmp_path):
  world = tmp_path / "world"
  for sub in ("corpus", "truth"):
    (world / sub).mkdir(parents=True)
  firsts, lasts = [f"F{i}" for i in range(4)], [f"L{i}" for i in range(4)]
  people = [f"{f} {l}" for f in firsts for l in lasts]
  blocks = [{"id": i, "title": people[i % 16], "body": "x"} for i in range(16 * 25)]
  (world / "corpus/blocks.jsonl").write_text("".join(json.dumps(b) + "\n" for b in blocks))
  (world / "truth/entities.jsonl").write_text("".join(
      json.dumps({"name": p, "kind": "person"}) + "\n" for p in people))
  rng = np.random.default_rng(0)
  # The surname in the embedding, the first name not at all.
  emb = np.stack([np.eye(8)[4 + lasts.index(b["title"].split()[1])] + 0.1 * rng.normal(size=8)
                  for b in blocks]).astype(np.float32)
  index = tmp_path / "index"
  index.mkdir()
  np.save(index / "embeddings.npy", emb)
  np.save(index / "ids.npy", np.arange(len(blocks)))
  out = _run("name_probe.py", str(world), str(index))
  assert out.returncode == 0, out.stderr
  cells = [c.strip() for c in out.stdout.splitlines()[2].split("|")[2:-1]]
  first, last = (tuple(map(float, c.split(" / "))) for c in cells[1:])
  assert cells[0] == "400" and last[0] == 100.0 and first[0] < 50.0
  missing = _run("name_probe.py", str(world), str(tmp_path / "nowhere"))
  assert missing.returncode != 0 and "embeddings.npy" in missing.stderr
  assert "Traceback" not in missing.stderr


def test_e97s_orqa_at_convergence_rows_are_the_records():
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
  records = ROOT / "results/records"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  for world in (0, 4, 5, 6):
    mine = records / "quickstart_finetune2700/e97_orqa" / f"reworded_world_{world}"
    def at(steps, run, world=world):
      return read_record(records / f"quickstart_finetune{steps}/topical_reworded/seed_{world}"
                         / run / "record.json")
    def orqa(split, mine=mine):
      return read_record(mine / f"orqa2700_eval_{split}" / "record.json")
    def pair(a, b):
      return "{:+.1f} ± {:.1f}".format(*summary.paired_difference(a, b))
    cells = [f"{at(900, 'orqa_eval_test').metrics['exact_match']:.1f} -> "
             f"{orqa('test').metrics['exact_match']:.1f} "
             f"({pair(orqa('test'), at(900, 'orqa_eval_test'))})",
             " / ".join(pair(at(2700, f"realm_eval_{s}"), orqa(s)) for s in ("test", "dev")),
             pair(orqa("test"), at(2700, "bm25_reader_eval_test"))]
    assert f"| {world} | " + " | ".join(cells) + " |" in log
  out = _run("paired_runs.py", "realm_eval_test", "orqa2700_eval_test", *(
      f"{records}/quickstart_finetune2700/topical_reworded/seed_{w},"
      f"{records}/quickstart_finetune2700/e97_orqa/reworded_world_{w}" for w in (0, 4, 5, 6)))
  assert "mean +8.1 [+4.8, +11.4]" in out.stdout


E98_READING_2700 = {0: "121, 86.0 | 145, 25.5 | 301, 16.3 | 137, 1.5 | 37.8 | -66.7 ± 3.7",
                    4: "130, 92.3 | 162, 26.5 | 272, 24.3 | 158, 0.6 | 37.6 | -67.2 ± 3.1",
                    5: "150, 71.3 | 160, 26.9 | 299, 15.7 | 102, 0.0 | 38.2 | -51.7 ± 4.1",
                    6: "135, 80.7 | 161, 26.7 | 295, 18.3 | 103, 0.0 | 37.1 | -59.5 ± 3.9"}


@pytest.mark.parametrize("world", [0, 4, 5, 6])
def test_e98s_namesake_reading_at_2700_steps_is_the_records(tmp_path, world):
  records = ROOT / "results/records/quickstart_finetune2700"
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, world)),
             str(records / "e97_reading" / f"reworded_world_{world}" / "realm_ft_recall_dev"),
             str(records / "topical_reworded" / f"seed_{world}" / "realm_eval_dev"
                 / "predictions_validation.jsonl"))
  assert out.returncode == 0, out.stderr
  row = out.stdout.splitlines()[2].split("|", 2)[2].strip()
  assert row == E98_READING_2700[world] + " |"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert f"| {world} | {E98_READING_2700[world]} |" in log


def test_e98s_pretraining_variants_read_alike_on_namesakes(tmp_path):
  """World 0 at 900 steps: REALM, random blocks, the source block forced, the source and a
  namesake's block forced."""
  r900 = ROOT / "results/records/quickstart_finetune900"
  e98 = r900 / "e98_namesake_reading/reworded_world_0"
  pairs = [(e98 / "realm_finetune_recall_dev",
            r900 / "topical_reworded/seed_0/realm_eval_dev"),
           (e98 / "realm_random_finetune_recall_dev",
            r900 / "e96_variants/reworded_world_0/realm_random_eval_dev"),
           (e98 / "realm_oracle_finetune_recall_dev", e98 / "realm_oracle_eval_dev"),
           (e98 / "realm_nsk_oracle_finetune_recall_dev", e98 / "realm_nsk_oracle_eval_dev")]
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, 0)),
             *(str(p) for run, evaluation in pairs
               for p in (run, evaluation / "predictions_validation.jsonl")))
  assert out.returncode == 0, out.stderr
  rows = [line.split("|", 2)[2].strip() for line in out.stdout.splitlines()[2:]]
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  for name, row in zip(("REALM", "random blocks", "source forced", "source and namesake forced"),
                       rows):
    assert f"| {name} | {row}" in log, (name, row)


def test_e98s_deeper_tower_rows_are_the_records(tmp_path):
  deep = ROOT / "results/records/quickstart_finetune900/e98_deep"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  for world in (0, 4):
    out = _run("seed_table.py", str(deep / f"reworded_world_{world}"))
    assert out.returncode == 0, out.stderr
    row = [line for line in out.stdout.splitlines() if line.startswith(f"| {world} |")][0]
    assert f"| {world}, 4 x 128 |" + row[len(f"| {world} |"):] in log
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, 0)),
             str(deep / "reading_world_0/realm_finetune_recall_dev"),
             str(deep / "reworded_world_0/realm_eval_dev/predictions_validation.jsonl"))
  assert out.returncode == 0, out.stderr
  cells = [c.strip() for c in out.stdout.splitlines()[2].split("|")[2:-1]]
  quoted = " | ".join(cells[:4]) + f" | blind {cells[4]} | both − none {cells[5]}"
  assert quoted in " ".join(log.split()), quoted


def test_e98s_bert_namesake_negatives_are_the_records(tmp_path):
  folder = ROOT / "results/records/quickstart_finetune900/e98_bert_namesakes"
  quickstart = ROOT / "results/records/quickstart_finetune900/topical_reworded/seed_0"
  log = " ".join((ROOT / "results/EXPERIMENTS.md").read_text().split())
  for run, quoted in (("realm_eval_test", "REALM EM -1.0 ± 1.4 test"),
                      ("realm_eval_dev", "-0.3 ± 1.4 dev"), ("ict_recall_dev", "R@5 -7.3 ± 1.3"),
                      ("realm_recall_dev", "REALM R@5 -6.3 ± 1.5")):
    out = _run("paired_runs.py", run, run, f"{folder / 'reworded_world_0'},{quickstart}")
    assert out.returncode == 0, out.stderr
    found = re.search(r"[-+]\d+\.\d ± \d+\.\d", quoted).group()
    assert out.stdout.splitlines()[0].endswith(found), (run, out.stdout)
    assert quoted in log
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, 0)),
             str(folder / "reading_world_0/realm_finetune_recall_dev"),
             str(folder / "reworded_world_0/realm_eval_dev/predictions_validation.jsonl"))
  cells = [c.strip() for c in out.stdout.splitlines()[2].split("|")[2:-1]]
  assert " | ".join(cells[:4]) + f" | blind {cells[4]} | both − none {cells[5]}" in log


def test_e98s_ranges_in_the_readme_and_log_are_the_rows():
  rows = [[c.strip() for c in row.split("|")] for row in E98_READING_2700.values()]
  none = [float(r[0].split(", ")[1]) for r in rows]
  both = [float(r[i].split(", ")[1]) for r in rows for i in (1, 2)]
  blind = [float(r[4]) for r in rows]
  quoted = (f"{min(none):.0f}-{max(none):.0f}% of people questions when no namesake's block",
            f"and {min(both):.0f}-{max(both):.0f}% when one is, below the {max(blind):.0f}%")
  assert (min(none), max(none), min(both), max(both), round(max(blind))) == (71.3, 92.3, 15.7,
                                                                             26.9, 38)
  for text in ("README.md", "results/EXPERIMENTS.md"):
    flat = " ".join((ROOT / text).read_text().split())
    assert quoted[0] in flat and quoted[1] in flat, (text, quoted)


def test_e98s_deeper_tower_recall_over_four_worlds_is_the_records():
  deep = ROOT / "results/records/quickstart_finetune900/e98_deep"
  out = _run("paired_runs.py", "realm_recall_dev", "ict_recall_dev",
             *(str(deep / f"reworded_world_{w}") for w in (0, 4, 5, 6)))
  assert out.returncode == 0, out.stderr
  per_world = [line.rsplit(" ", 3)[1:] for line in out.stdout.splitlines()[:4]]
  assert [" ".join(p) for p in per_world] == ["+9.5 ± 1.2", "+7.5 ± 1.3", "+12.5 ± 1.4",
                                              "-0.3 ± 1.2"]
  assert out.stdout.splitlines()[4].startswith("mean +7.3 [-1.4, +16.0]")
  log = " ".join((ROOT / "results/EXPERIMENTS.md").read_text().split())
  assert "Over the four, **+7.3 [-1.4, +16.0]**" in log
  assert "+12.5 ± 1.4 (ICT 41.8 -> REALM 54.3)" in log


def test_e98s_reader_alone_and_bm25_reading_are_the_records(tmp_path):
  """World 0's reader-alone evaluation at 2,700 steps, the fine-tuning's last reader loss, and
  the BM25 reader's exact match with the gold block and no namesake's block on each world."""
  r2700 = ROOT / "results/records/quickstart_finetune2700"
  e98 = r2700 / "e98_reading/reworded_world_0"
  log = " ".join((ROOT / "results/EXPERIMENTS.md").read_text().split())
  for split in ("test", "dev"):
    out = _run("paired_runs.py", f"rw0_eval_{split}", f"realm_eval_{split}",
               f"{e98},{r2700 / 'topical_reworded/seed_0'}")
    assert out.returncode == 0, out.stderr
    found = out.stdout.splitlines()[0].rsplit(" ", 3)[1:]
    assert " ".join(found) in log, found
  assert "-1.4 ± 0.4 / -0.2 ± 0.4 against REALM's" in log
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, 0)),
             str(r2700 / "e97_reading/reworded_world_0/realm_ft_recall_dev"),
             str(e98 / "rw0_eval_dev/predictions_validation.jsonl"))
  cells = [c.strip() for c in out.stdout.splitlines()[2].split("|")[2:-1]]
  assert " | ".join(cells[:4]) + f" | blind {cells[4]} | both − none {cells[5]}" in log
  loss = json.loads((r2700 / "topical_reworded/seed_0/realm_finetune/record.json").read_text())
  assert f"reader loss {loss['metrics']['reader_loss']:.2f} nats at the last" in log
  kind = {q: f["subject_kind"] for f in map(json.loads, (_reworded_world(tmp_path, 0) / "truth"
                                                         / "facts.jsonl").read_text().splitlines())
          for q in f["questions"]["nq"]}
  train = [json.loads(line)["question"] for line in
           (_reworded_world(tmp_path, 0) / "open_qa/nq/train.jsonl").read_text().splitlines()]
  people = sum(kind[q] == "person" for q in train)
  assert f"the {people:,} people questions of the {len(train):,} are learned" in log
  bm25 = []
  for world in (0, 4, 5, 6):
    out = _run("namesake_reading.py", str(_reworded_world(tmp_path, world)), "bm25",
               str(r2700 / f"topical_reworded/seed_{world}/bm25_reader_eval_dev"
                   / "predictions_validation.jsonl"))
    bm25.append(float(out.stdout.splitlines()[2].split("|")[2].split(", ")[1]))
  assert f"no namesake: {min(bm25):.1f}-{max(bm25):.1f})" in log


E99_READING = {
    (0, 900): "301, 75.1 | 290, 33.8 | 453, 26.9 | 379, 1.3 | 38.3 | -45.5 ± 3.0",
    (0, 2700): "307, 91.9 | 285, 31.9 | 486, 24.3 | 345, 2.3 | 38.0 | -64.7 ± 2.2",
    (4, 900): "283, 78.8 | 374, 32.4 | 619, 23.1 | 154, 2.6 | 36.0 | -52.2 ± 2.8",
    (4, 2700): "281, 84.7 | 374, 30.7 | 636, 20.9 | 139, 2.2 | 35.9 | -60.1 ± 2.5"}


@pytest.mark.parametrize("world, steps", sorted(E99_READING))
def test_e99s_namesake_reading_with_more_people_is_the_records(tmp_path, world, steps):
  folder = ROOT / f"results/records/quickstart_finetune{steps}/e99_people"
  out = _run("namesake_reading.py", str(_reworded_world(tmp_path, world, num_people=1000)),
             str(folder / f"reading_world_{world}/realm_finetune_recall_dev"),
             str(folder / f"people1000_world_{world}/realm_eval_dev/predictions_validation.jsonl"))
  assert out.returncode == 0, out.stderr
  row = out.stdout.splitlines()[2].split("|", 2)[2].strip()
  assert row == E99_READING[world, steps] + " |"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert f"| {world}, 1,200 people, {steps:,} | {E99_READING[world, steps]} |" in log


def test_e99s_more_people_rows_are_the_records(tmp_path):
  """The 900-step quickstarts' rows, the 2,700-step comparison with the BM25 reader by kind,
  and the count of people training questions."""
  r900 = ROOT / "results/records/quickstart_finetune900/e99_people"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  for world in (0, 4):
    out = _run("seed_table.py", str(r900 / f"people1000_world_{world}"))
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[2]
    assert f"| {world}, 1,200 people |" + row.split("|", 2)[2] in log, row
  r2700 = ROOT / "results/records/quickstart_finetune2700/e99_people/people1000_world_0"
  world = _reworded_world(tmp_path, 0, num_people=1000)
  out = _run("em_by_kind.py", str(world), str(r2700 / "realm_eval_test"),
             str(r2700 / "bm25_reader_eval_test"))
  assert out.returncode == 0, out.stderr
  for line in out.stdout.splitlines()[3:]:
    assert line in log, line
  kind = {q: f["subject_kind"] for f in map(json.loads, (world / "truth/facts.jsonl")
                                            .read_text().splitlines())
          for q in f["questions"]["nq"]}
  train = [json.loads(line)["question"] for line in
           (world / "open_qa/nq/train.jsonl").read_text().splitlines()]
  people = sum(kind[q] == "person" for q in train)
  flat = " ".join(log.split())
  assert f"{people:,} of the {len(train):,} training questions about people" in flat
  for a, b, folders, quoted in (
      ("realm_eval_dev", "bm25_reader_eval_dev", [r2700], "(dev -14.9 ± 1.5.)"),
      ("realm_eval_test", "realm_eval_test", [f"{r2700},{r900 / 'people1000_world_0'}",
                                              f"{r2700.parent / 'people1000_world_4'},"
                                              f"{r900 / 'people1000_world_4'}"],
       "REALM gains +6.1 ± 1.1 on world 0 (36.2) and +0.1 ± 1.0 on world 4 (34.6)"),
      ("bm25_reader_eval_test", "bm25_reader_eval_test",
       [f"{r2700},{r900 / 'people1000_world_0'}"], "reader +16.2 ± 0.9 on world 0")):
    out = _run("paired_runs.py", a, b, *map(str, folders))
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines()[:len(folders)]:
      assert " ".join(line.rsplit(" ", 3)[1:]) in quoted, (line, quoted)
    assert quoted in flat, quoted


@pytest.mark.parametrize("world, num_people, folder", [
    (0, None, "reworded_world_0"), (0, 1000, "people1000_world_0"),
    (4, None, "reworded_world_4"), (4, 1000, "people1000_world_4")])
def test_e99s_namesake_reading_of_training_questions_is_the_records(tmp_path, world,
                                                                     num_people, folder):
  runs = ROOT / "results/records/quickstart_finetune2700/e99_people/train_split" / folder
  out = _run("namesake_reading.py", "--split", "train",
             str(_reworded_world(tmp_path, world, num_people=num_people)),
             str(runs / "realm_recall_train"),
             str(runs / "realm_eval_train/predictions_train.jsonl"))
  assert out.returncode == 0, out.stderr
  row = out.stdout.splitlines()[2].split("|", 2)[2].strip()
  people = "600 people" if num_people is None else "1,200 people"
  log = (ROOT / "results/EXPERIMENTS.md").read_text()
  assert f"| {world}, {people}, train | {row}" in log
  exact_match = json.loads((runs / "realm_eval_train/record.json").read_text())["metrics"]
  assert f"{exact_match['exact_match']:.1f}" in " ".join(log.split()[log.split().index("E99"):])


def test_e99s_namesake_reading_refuses_a_dev_run_as_training_questions(tmp_path):
  runs = ROOT / "results/records/quickstart_finetune2700/e99_people"
  out = _run("namesake_reading.py", "--split", "train",
             str(_reworded_world(tmp_path, 0, num_people=1000)),
             str(runs / "reading_world_0/realm_finetune_recall_dev"),
             str(runs / "people1000_world_0/realm_eval_dev/predictions_validation.jsonl"))
  assert out.returncode != 0
  assert "retrieved_train.jsonl" in out.stderr or "train split" in out.stderr, out.stderr
  unknown = _run("namesake_reading.py", "--split", "tset", str(tmp_path), "run", "predictions")
  assert unknown.returncode != 0 and "--split tset: known splits are dev, train" in unknown.stderr
  assert "Traceback" not in out.stderr + unknown.stderr


def test_recall_and_em_names_a_bad_argument_and_a_missing_record(tmp_path):
  out = _run("recall_and_em.py", str(tmp_path))
  assert out.returncode != 0 and "expected RECALL_RECORD,EVAL_RECORD" in out.stderr
  out = _run("recall_and_em.py", f"{tmp_path},{tmp_path}")
  assert out.returncode != 0 and "no such record" in out.stderr and "Traceback" not in out.stderr
