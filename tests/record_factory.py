"""Run records for tests: valid by default, any field overridable, written with write_record."""
from __future__ import annotations

from pathlib import Path

from realm_bench.reporting.records import RunRecord, write_record


def make_record(**overrides) -> RunRecord:
  fields = dict(
      run_id="run-0", kind="evaluate", experiment="realm", lineage=None, cells=[], task="open_qa_nq", dataset="nq",
      split="test", scale="synthetic", metrics={"exact_match": 40.0}, num_examples=100,
      gin_config="train.steps = 10\n", git_commit="0" * 40, hardware={"cpu_count": 2},
      start_time="2024-01-01T00:00:00+00:00", end_time="2024-01-01T00:10:00+00:00", steps=10,
      index_manifests=[], params={}, stats={}, recall_matcher=None, outcomes=None)
  fields.update(overrides)
  if fields["recall_matcher"] is None and any(m.startswith("recall@") for m in fields["metrics"]):
    fields["recall_matcher"] = "string"
    if "kind" not in overrides:
      fields["kind"] = "recall"
  return RunRecord(**fields)


def write_run(runs_dir, run_id: str, **overrides) -> Path:
  """Writes runs_dir/run_id/record.json; the run_id doubles as the folder name."""
  return write_record(Path(runs_dir) / run_id, make_record(run_id=run_id, **overrides))


N_QUESTIONS = 200


def outcomes_for(percent: float, n: int = N_QUESTIONS, shift: int = 0) -> tuple[float, str]:
  """(the share n questions can score, per-question outcomes scoring it): right ones first,
  so two systems' outcomes overlap as much as they can, unless `shift` rotates them."""
  right = round(percent * n / 100)
  text = "1" * right + "0" * (n - right)
  return 100.0 * right / n, text[-shift:] + text[:-shift] if shift else text


def write_seeds(runs_dir, run_id: str, *, value: float, metric: str = "exact_match",
                seeds=(0, 1, 2), jitter: float = 1.0, outcomes: bool = True, shift: int = 0,
                **overrides) -> list[Path]:
  """One run of `run_id` in each seed's folder (runs_dir/seed_N), valued value + (N - mean
  seed) * jitter, so their mean is `value`; with per-question outcomes (see outcomes_for)
  unless told not."""
  paths = []
  middle = sum(seeds) / len(seeds)
  for seed in seeds:
    share = value + (seed - middle) * jitter
    fields = dict(metrics={metric: share}, start_time=f"2024-01-{seed + 1:02d}T00:00:00+00:00")
    if outcomes:
      share, text = outcomes_for(share, shift=shift)
      fields.update(metrics={metric: share}, num_examples=N_QUESTIONS, outcomes=text)
    fields.update(overrides)
    paths.append(write_run(Path(runs_dir) / f"seed_{seed}", run_id, **fields))
  return paths
