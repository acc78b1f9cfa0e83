"""The staleness sweep: argument checking, and end to end at tiny sizes (slow)."""
from __future__ import annotations

import pytest

from realm_bench import cli, sweep
from realm_bench.errors import InputError
from realm_bench.reporting import collect
from realm_bench.reporting.records import read_record


def test_parse_values():
  assert sweep.parse_values("1, 3,10,30") == (1, 3, 10, 30)
  for bad in ("", "1,x", "0,5"):
    with pytest.raises(InputError, match="--values"):
      sweep.parse_values(bad)


def test_bad_values_exit_nonzero(tmp_path, capsys):
  assert cli.main(["sweep", "--out", str(tmp_path), "--values=3,fast"]) == 2
  assert "--values" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_records_one_point_per_value(tmp_path, capsys, monkeypatch):
  small = [f"--gin.QuickstartConfig.{k}={v}" for k, v in dict(
      ict_steps=20, retriever_warmup_steps=4, pretrain_steps=8, finetune_steps=6,
      world_gin="'world/tiny.gin'").items()]
  monkeypatch.chdir(tmp_path)   # a relative --out: records must not name the machine's paths
  argv = ["sweep", "--out", "out", "--gin_file", "experiments/staleness.gin",
          "--values=2,8", *small]
  assert cli.main(argv) == 0
  out = tmp_path / "out"
  runs = out / "runs"
  frame = collect.collect_records(runs).set_index("run_id")
  for value, refreshes in ((2, 4), (8, 1)):
    for stage in ("recall_dev", "eval_dev"):
      run_id = f"staleness_refresh_{value:04d}_{stage}"
      record = read_record(runs / run_id)
      assert record.experiment == "staleness" and record.split == "dev"
      # The pre-training's interval and statistics reach the evaluation through its lineage.
      assert frame.loc[run_id, "params.refresh_every_steps"] == value
      assert frame.loc[run_id, "stats.num_refreshes"] == refreshes
      assert frame.loc[run_id, "stats.staleness_max"] == value - 1
    for run in runs.iterdir():
      assert str(tmp_path) not in (run / "record.json").read_text()
  table = (out / "tables" / "staleness.md").read_text()
  assert "Sweep at synthetic scale" in table and (out / "tables" / "staleness.png").exists()
  capsys.readouterr()
  assert cli.main(argv) == 0   # a rerun skips every finished stage
  assert "done already" in capsys.readouterr().out
