"""`realm-bench reproduce`: its rows against the table specs, its plan, bad input, and the
tiny-world smoke run of every row end to end (slow: `make test-slow`)."""
from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest
import yaml

from realm_bench import cli, gin_utils, resources, reproduce, rows
from realm_bench.errors import InputError
from realm_bench.stages import QuickstartConfig

SPECS = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))
         for p in resources.shipped_folder("results/specs").glob("*.yaml")}


def _synthetic_experiments(spec_id: str) -> set[str]:
  return {r["experiment"] for r in SPECS[spec_id]["synthetic"]["rows"]}


def test_every_synthetic_row_of_the_specs_is_a_system():
  table1 = {s.experiment for s in rows.SYSTEMS if s.table1}
  table2 = {s.experiment for s in rows.SYSTEMS if s.table2}
  assert table1 == _synthetic_experiments("table1")
  assert table2 == _synthetic_experiments("table2")
  assert all(s.recall_of is not None for s in rows.SYSTEMS if s.table2)


@pytest.mark.parametrize("system", rows.SYSTEMS, ids=lambda s: s.experiment)
def test_each_row_is_a_gin_experiment_naming_its_records(system):
  text = (gin_utils.gin_dir() / system.overlay).read_text(encoding="utf-8")
  assert re.search(rf"^EXPERIMENT = '{system.experiment}'$", text, flags=re.M)


def test_pretrainings_name_their_records():
  for p in rows.PRETRAININGS:
    text = (gin_utils.gin_dir() / p.overlay).read_text(encoding="utf-8")
    assert re.search(rf"^EXPERIMENT = '{p.name}'$", text, flags=re.M)


def test_the_sweep_has_the_points_the_staleness_claims_compare():
  """The defaults and every shipped gin file that sets the sweep's points, the smoke run's too
  (its check must decide every claim), include the points the pairwise claims compare."""
  from realm_bench import sweep  # pylint: disable=g-import-not-at-top
  wanted = {v for c in SPECS["staleness"]["claims"] for side in ("better", "worse")
            if side in c for v in c[side]["params"].values()}
  assert wanted == {20, 600}
  assert wanted <= set(reproduce.ReproduceConfig().sweep_values)
  assert wanted <= set(sweep.SweepConfig().values)
  files = ("runs/reproduce.gin", "runs/reproduce_smoke.gin", "runs/sweep.gin",
           "experiments/staleness.gin")
  for name in files:
    text = (gin_utils.gin_dir() / name).read_text(encoding="utf-8")
    found = re.search(r"^\S*(?:sweep_values|SweepConfig\.values) = \(([\d, ]+)\)$", text, re.M)
    assert found, name
    assert wanted <= {int(v) for v in found.group(1).split(",")}, name


def test_plan_lists_every_stage_once_per_seed(tmp_path):
  config = reproduce.ReproduceConfig(seeds=2, sweep_values=(1, 20, 30, 600))
  planned = reproduce.plan(out_dir=tmp_path, config=config, stages=QuickstartConfig())
  names = [p.name for p in planned]
  assert len(names) == len(set(names)) and not any(p.done for p in planned)
  seed0 = {n.split("/")[-1] for n in names if n.startswith("seed_0/")}
  assert {n.split("/")[-1] for n in names if n.startswith("seed_1/")} == seed0
  # The sweep's points at REALM's interval (20) and at 30x (600) evaluate those rows' runs.
  assert "staleness_refresh_0020_eval_dev" in seed0
  assert "staleness_refresh_0020_pretrain" not in seed0
  assert "staleness_refresh_0600_pretrain" not in seed0
  assert "staleness_refresh_0030_pretrain" in seed0
  assert "closed_book_ct_finetune" not in seed0 and "closed_book_wq_eval_test" in seed0
  assert sum(p.kind == "pretrain" for p in planned) == 2 * (len(rows.PRETRAININGS) + 2)


def test_first_seed_plans_that_seed_alone(tmp_path):
  """One seed per invocation (E101) writes the folder `--seeds 3` would, and no other."""
  config = reproduce.ReproduceConfig(seeds=1, first_seed=2, sweep_values=(20, 600))
  planned = reproduce.plan(out_dir=tmp_path, config=config, stages=QuickstartConfig())
  assert {p.name.split("/")[0] for p in planned} == {"seed_2"}
  three = reproduce.plan(out_dir=tmp_path, config=dataclasses.replace(config, seeds=3,
                                                                       first_seed=0),
                         stages=QuickstartConfig())
  assert [p.name for p in planned] == [p.name for p in three if p.name.startswith("seed_2/")]


def test_a_retriever_warmup_precedes_every_realm_pretraining(tmp_path):
  config = reproduce.ReproduceConfig(seeds=1, sweep_values=(20, 30))
  planned = reproduce.plan(out_dir=tmp_path, config=config,
                           stages=QuickstartConfig(retriever_warmup_steps=5))
  names = [p.name.split("/")[-1] for p in planned]
  pretrain = [n for n, p in zip(names, planned) if p.kind == "pretrain"]
  assert len(pretrain) == 2 * (len(rows.PRETRAININGS) + 1)
  for name in pretrain:
    if not name.endswith("_retriever_warmup"):
      assert names.index(f"{name}_retriever_warmup") < names.index(name)


@pytest.mark.parametrize("field,value", [("seeds", 0), ("first_seed", -1),
                                         ("stale_factor", 1), ("datasets", ("nq", "squad")),
                                         ("sweep_values", (0, 20)), ("lanes", 0)])
def test_bad_config_names_the_field(field, value):
  with pytest.raises(InputError, match=f"ReproduceConfig.{field}"):
    reproduce.ReproduceConfig(**{field: value})


def test_zero_seeds_is_a_clear_error(tmp_path, capsys):
  assert cli.main(["reproduce", "--seeds", "0", "--out", str(tmp_path / "r")]) == 2
  err = capsys.readouterr().err
  assert "--seeds" in err and "Traceback" not in err
  assert not (tmp_path / "r").exists()


def test_zero_lanes_is_a_clear_error(tmp_path, capsys):
  assert cli.main(["reproduce", "--lanes", "0", "--out", str(tmp_path / "r")]) == 2
  err = capsys.readouterr().err
  assert "ReproduceConfig.lanes" in err and "Traceback" not in err
  assert not (tmp_path / "r").exists()


def test_dry_run_says_what_is_left(tmp_path, capsys):
  assert cli.main(["reproduce", "--smoke", "--dry_run", "--out", str(tmp_path / "r")]) == 0
  out = capsys.readouterr().out
  assert re.search(r"0/\d+ stages done, \d+ left, ETA ~\d+ min \(estimated\)", out)
  assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [1, 2])
def test_smoke_runs_every_row_and_the_check(tmp_path, capsys, lanes):
  out = tmp_path / "repro"
  started = time.perf_counter()
  assert cli.main(["reproduce", "--smoke", "--out", str(out), "--lanes", str(lanes)]) == 0
  assert not list(out.rglob("*.lane"))   # every claim released
  runs = out / "seed_0" / "runs"
  config = reproduce.ReproduceConfig()
  for system in rows.SYSTEMS:
    for dataset in (d for d in config.datasets if d not in system.not_on):
      if system.table1:
        assert (runs / rows.eval_name(system, dataset, "test") / "record.json").exists()
    if system.table2:
      assert (runs / rows.eval_name(system, "nq", "dev") / "record.json").exists()
      assert (runs / f"{system.experiment}_recall_dev" / "record.json").exists()
  for value in (2, 20, 60, 600):
    for stage in ("recall_dev", "eval_dev"):
      assert (runs / f"staleness_refresh_{value:04d}_{stage}" / "record.json").exists()
  for name in ("table1", "table2", "staleness"):
    for fmt in ("md", "csv", "tex", "html"):
      assert (out / "tables" / f"{name}.{fmt}").exists()
  assert (out / "tables" / "staleness.png").exists()
  assert (out / "tables" / "leaderboard.html").exists()
  assert "claims:" in (out / "check.txt").read_text()
  capsys.readouterr()
  # `check` reads the records (exit 0 or 1 by the claims; 2 would be unreadable records), and
  # no synthetic claim is MISSING: every row it compares has records.
  assert cli.main(["check", "--runs", str(out), "--format", "json"]) in (0, 1)
  verdicts = [v for v in json.loads(capsys.readouterr().out)["verdicts"]
              if v["kind"] == "claim" and v["scale"] != "paper"]
  assert verdicts and all(v["verdict"] != "MISSING" for v in verdicts)
  print(f"smoke reproduction in {lanes} lane(s) took {time.perf_counter() - started:.0f} s")
  # A rerun finds every stage done; in another lane count it is refused.
  rerun = ["reproduce", "--smoke", "--dry_run", "--out", str(out), "--lanes"]
  assert cli.main([*rerun, str(lanes)]) == 0
  assert re.search(r"(\d+)/\1 stages done, 0 left", capsys.readouterr().out)
  other = str(3 - lanes)
  assert cli.main([*rerun, other]) == 2
  assert f"made in {lanes} lane(s)" in capsys.readouterr().err


def test_a_world_of_another_seed_is_refused(tmp_path):
  from realm_bench import stages as stages_lib
  from realm_bench.tasks import world as world_lib
  (tmp_path / "world").mkdir()
  (tmp_path / "world" / "manifest.json").write_text('{"seed": 0}')
  s = stages_lib.Stages(tmp_path, QuickstartConfig())
  with pytest.raises(InputError, match="WorldConfig.seed"):
    stages_lib.make_world(s, world_lib.WorldConfig(seed=1))


def test_a_world_of_another_config_is_refused(tmp_path):
  """Same seed, another knob: reusing the folder would train on the wrong world."""
  import dataclasses
  import json
  from realm_bench import stages as stages_lib
  from realm_bench.tasks import world as world_lib
  (tmp_path / "world").mkdir()
  config = dataclasses.asdict(world_lib.WorldConfig())
  del config["pretrain_question_sentences_per_fact"]   # a manifest older than the field
  (tmp_path / "world" / "manifest.json").write_text(json.dumps({"seed": 0, "config": config}))
  (tmp_path / "vocab.txt").write_text("[PAD]\n")
  s = stages_lib.Stages(tmp_path, QuickstartConfig())
  # Such a world was made before the knob, at 0, not at the field's default of today.
  stages_lib.make_world(s, world_lib.WorldConfig(pretrain_question_sentences_per_fact=0))
  with pytest.raises(InputError, match="WorldConfig.pretrain_question_sentences_per_fact"):
    stages_lib.make_world(s, world_lib.WorldConfig())
