"""`reference_points`: the numbers any system is judged against, recorded like any run.

A learned system's number means little without, in the same run folder: a trivial baseline
(the answer prior: per relation, the most frequent training answer; random retrieval), a
strong non-learned one (BM25), and an oracle (the gold block). They need no training, and at
synthetic scale the world's `truth/` files know each question's relation and gold block
(`world_gates`). Each becomes a run record (experiments `answer_prior`, `bm25`,
`random_retrieval`, `oracle`), so the quickstart's summary and the tables read them from
records like every other number.
"""
from __future__ import annotations

import datetime
from pathlib import Path

import gin

from realm_bench import world_gates
from realm_bench.reporting.records import RunRecord, git_commit, hardware_info, write_record

BENCHMARK_DATASETS = {"nq": "nq", "wq": "wq", "trec": "ct"}
SPLIT_NAMES = {"validation": "dev", "dev": "dev", "test": "test"}


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def reference_points(*, world_dir, runs_dir, benchmark: str = "nq", split: str = "test",
                     scale: str = "synthetic") -> dict[str, dict]:
  """Writes one record per reference point under `runs_dir` and returns their metrics."""
  started = _now()
  split = SPLIT_NAMES[split]
  g = world_gates.gates(world_dir, benchmark=benchmark, split=split)
  matcher = g["matcher"]
  points = {
      "answer_prior": ("evaluate", {"exact_match": g["answer_prior_em"]}, None, {}),
      "bm25": ("recall", {f"recall@{k}": g[f"bm25_recall@{k}"] for k in world_gates.KS},
               matcher, {f"gold_recall@{k}": g[f"bm25_gold_recall@{k}"]
                         for k in world_gates.KS}),
      "random_retrieval": ("recall", {"recall@5": g["random_recall@5"]}, matcher, {}),
      "oracle": ("recall", {"recall@1": g["oracle_recall"]}, matcher, {}),
  }
  out = {}
  for experiment, (kind, metrics, recall_matcher, stats) in points.items():
    run_dir = Path(runs_dir) / f"{experiment}_{benchmark}_{split}"
    write_record(run_dir, RunRecord(
        run_id=run_dir.name, kind=kind, experiment=experiment, lineage=None,
        task=f"world:{benchmark}", dataset=BENCHMARK_DATASETS[benchmark], split=split,
        scale=scale, metrics=metrics, num_examples=g["questions"], gin_config=gin.config_str(),
        git_commit=git_commit(), hardware=hardware_info(), start_time=started,
        end_time=_now(), steps=0, stats=stats, recall_matcher=recall_matcher))
    out[experiment] = metrics
  return out
