"""How `check` decides a claim: intervals over seeds and questions, rank tests over a sweep,
what it falls back to and says when outcomes or seeds are missing, and INCONCLUSIVE under
--strict in every output format."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import yaml

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.reporting import check as check_lib, specs
from record_factory import write_run, write_seeds


def _claim(runs, item, scale="synthetic"):
  _, verdicts = check_lib.check(runs_dir=runs, spec_ids=[item.split("/")[0]])
  rows = verdicts[(verdicts["item"] == item) & (verdicts["scale"] == scale)]
  assert len(rows) == 1, verdicts[["item", "scale", "verdict"]]
  return rows.iloc[0]


def _realm_orqa(runs, realm, orqa, **kw):
  """Per seed, REALM and ORQA right on different questions (half the split apart), so the
  paired difference is noisy question by question."""
  write_seeds(runs, "realm-test", value=realm, experiment="realm", **kw)
  write_seeds(runs, "orqa-test", value=orqa, experiment="orqa", shift=100, **kw)


@pytest.mark.parametrize("realm, orqa, verdict", [(48.0, 40.0, "PASS"), (40.0, 48.0, "FAIL"),
                                                  (41.0, 40.0, "INCONCLUSIVE")])
def test_interval_of_the_difference_decides(tmp_path, realm, orqa, verdict):
  _realm_orqa(tmp_path, realm, orqa)
  row = _claim(tmp_path, "table1/realm_above_orqa")
  assert row["verdict"] == verdict and row["n"] == 3
  assert row["ci_low"] < row["delta"] < row["ci_high"]
  assert row["delta"] == pytest.approx(realm - orqa)
  # Both the seeds and the questions are behind the interval.
  assert "t over 3 seeds (paired)" in row["method"] and "bootstrap" in row["method"]
  assert row["ours_pm"] > 0 and row["baseline_pm"] > 0   # mean ± over seeds, as the tables


def test_without_outcomes_the_interval_is_over_seeds_and_says_so(tmp_path, capsys):
  _realm_orqa(tmp_path, 48.0, 40.0, outcomes=False)
  row = _claim(tmp_path, "table1/realm_above_orqa")
  assert row["verdict"] == "PASS" and row["method"] == "t over 3 seeds (paired)"
  assert "no per-question outcomes" in row["note"] and "over seeds only" in row["note"]
  assert cli.main(["check", "--runs", str(tmp_path), "--spec", "table1"]) == 0
  assert "interval over seeds only" in capsys.readouterr().out


def test_one_seed_uses_its_questions_or_is_inconclusive(tmp_path):
  _realm_orqa(tmp_path / "with", 60.0, 40.0, seeds=(0,))
  row = _claim(tmp_path / "with", "table1/realm_above_orqa")
  assert row["verdict"] == "PASS" and row["method"].startswith("paired bootstrap over 200")
  assert "one seed" in row["note"]
  _realm_orqa(tmp_path / "without", 60.0, 40.0, seeds=(0,), outcomes=False)
  row = _claim(tmp_path / "without", "table1/realm_above_orqa")
  assert row["verdict"] == "INCONCLUSIVE" and row["ci_low"] is None
  assert "no interval" in row["note"]


def test_runs_not_paired_by_seed_folder_get_welchs_interval(tmp_path):
  for i, value in enumerate((47.0, 48.0, 49.0)):
    write_run(tmp_path, f"realm-{i}", experiment="realm", metrics={"exact_match": value})
  for i, value in enumerate((40.0, 41.0)):
    write_run(tmp_path, f"orqa-{i}", experiment="orqa", metrics={"exact_match": value})
  row = _claim(tmp_path, "table1/realm_above_orqa")
  assert row["method"].startswith("Welch t over 3 and 2 runs") and row["n"] == 2
  assert "not paired" in row["note"] and row["verdict"] == "PASS"


def test_output_is_deterministic(tmp_path, capsys):
  _realm_orqa(tmp_path, 42.0, 40.0)
  outputs = []
  for _ in range(2):
    cli.main(["check", "--runs", str(tmp_path), "--format", "json"])
    outputs.append(capsys.readouterr().out)
  assert outputs[0] == outputs[1]


def test_inconclusive_fails_only_under_strict_in_every_format(tmp_path, capsys):
  _realm_orqa(tmp_path, 41.0, 40.0)
  args = ["check", "--runs", str(tmp_path), "--spec", "table1"]
  assert cli.main(args) == 0
  captured = capsys.readouterr()
  assert "INCONCLUSIVE  table1/realm_above_orqa" in captured.out
  assert "1 INCONCLUSIVE" in captured.out
  assert cli.main([*args, "--strict"]) == 1
  assert "--strict: MISSING and INCONCLUSIVE fail" in capsys.readouterr().out
  assert cli.main([*args, "--format", "json"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert doc["counts"]["claim"]["INCONCLUSIVE"] == 1
  claim = next(v for v in doc["verdicts"] if v["item"] == "table1/realm_above_orqa")
  assert claim["verdict"] == "INCONCLUSIVE" and claim["ci_low"] < 0 < claim["ci_high"]
  for strict, tag in ((False, "skipped"), (True, "failure")):
    assert cli.main([*args, "--format", "junit", *(["--strict"] if strict else [])]) == strict
    root = ET.fromstring(capsys.readouterr().out)
    case = next(c for c in root.iter("testcase")
                if c.get("name") == "table1/realm_above_orqa [synthetic]")
    found = case.find(tag)
    assert found is not None and found.get("message").startswith("INCONCLUSIVE")


def _sweep(runs, ems, seeds=(0, 1)):
  for every, em in ems.items():
    write_seeds(runs, f"eval-{every}", value=em, seeds=seeds, experiment="staleness",
                split="dev", params={"refresh_every_steps": every})


@pytest.mark.parametrize("ems, verdict", [
    ({1: 40.0, 3: 38.0, 10: 33.0, 30: 30.0}, "PASS"),
    ({1: 30.0, 3: 33.0, 10: 38.0, 30: 40.0}, "FAIL"),
    ({1: 40.0, 3: 30.0, 10: 38.0, 30: 33.0}, "INCONCLUSIVE"),
])
def test_trend_claim_is_a_rank_test_over_the_sweep(tmp_path, ems, verdict):
  _sweep(tmp_path, ems)
  row = _claim(tmp_path, "staleness/em_decreases_with_refresh_interval")
  assert row["verdict"] == verdict and row["n"] == 2     # two seeds behind every point
  assert "Spearman rho over 4 points" in row["method"] and "exact" in row["method"]
  if verdict == "PASS":
    assert row["ours"] == -1.0 and row["p_value"] == pytest.approx(1 / 24)


def test_trend_with_three_points_cannot_pass_and_says_so(tmp_path):
  _sweep(tmp_path, {1: 40.0, 10: 33.0, 30: 30.0})
  row = _claim(tmp_path, "staleness/em_decreases_with_refresh_interval")
  assert row["verdict"] == "INCONCLUSIVE" and "cannot pass" in row["note"]


def _spec_dir(tmp_path, edit):
  mine = tmp_path / "specs"
  mine.mkdir()
  doc = yaml.safe_load((specs.default_specs_dir() / "staleness.yaml").read_text())
  edit(doc)
  (mine / "staleness.yaml").write_text(yaml.safe_dump(doc))
  return mine


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["claims"][0]["trend"].update(direction="down"), "claims[0].trend.direction"),
    (lambda d: d["claims"][0]["trend"].update(correlation="pearson"),
     "claims[0].trend.correlation"),
    (lambda d: d["claims"][0]["trend"].pop("param"), "claims[0].trend.param"),
    (lambda d: d["claims"][0].update(trend="falls"), "claims[0].trend"),
    (lambda d: d["claims"][0].update(better="staleness"), "claims[0]"),
])
def test_malformed_claims_name_file_and_field(tmp_path, capsys, edit, field):
  mine = _spec_dir(tmp_path, edit)
  with pytest.raises(InputError) as e:
    specs.load_specs(mine)
  assert e.value.field == field and e.value.path == str(mine / "staleness.yaml")
  write_run(tmp_path / "runs", "r")
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--specs", str(mine)]) == 2
  err = capsys.readouterr().err
  assert str(mine / "staleness.yaml") in err and field in err and "Traceback" not in err


def test_trend_runs_must_record_the_swept_parameter(tmp_path, capsys):
  write_run(tmp_path, "s", experiment="staleness", split="dev")
  assert cli.main(["check", "--runs", str(tmp_path), "--spec", "staleness"]) == 2
  assert "params.refresh_every_steps" in capsys.readouterr().err


def test_shipped_specs_load_with_their_claims():
  loaded = {s.id: s for s in specs.load_specs()}
  trends = [c for c in loaded["staleness"].claims if isinstance(c, specs.TrendClaim)]
  assert {c.metric for c in trends} == {"exact_match", "recall@5"}
  assert all(c.direction == "decreasing" and c.correlation == "spearman" for c in trends)
  # Table 1's claims on each twin and against each baseline.
  assert {"realm_above_orqa", "realm_above_orqa_wq", "realm_above_orqa_ct",
          "realm_above_bm25_reader", "realm_above_closed_book"} <= {
              c.id for c in loaded["table1"].claims}
  assert len(loaded["table2"].claims) == 10


def test_tables_and_check_show_the_same_mean_interval_and_n(tmp_path):
  from realm_bench.reporting import build  # pylint: disable=g-import-not-at-top
  _realm_orqa(tmp_path, 48.0, 40.0)
  reported = specs.load_reported()
  table1 = next(s for s in specs.load_specs(reported=reported) if s.id == "table1")
  built = build.build_tables(frame=build.load_frame(tmp_path), specs=[table1],
                             reported=reported)[0]
  synthetic = built.sections[1].frame.set_index("experiment")
  row = _claim(tmp_path, "table1/realm_above_orqa")
  assert synthetic.loc["realm", "NQ ours"] == pytest.approx(row["ours"])
  assert synthetic.loc["realm", "NQ ±"] == pytest.approx(row["ours_pm"], abs=1e-3)
  assert synthetic.loc["orqa", "NQ ±"] == pytest.approx(row["baseline_pm"], abs=1e-3)
  assert synthetic.loc["realm", "NQ n"] == synthetic.loc["orqa", "NQ n"] == row["n"] == 3
