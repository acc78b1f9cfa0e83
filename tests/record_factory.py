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
