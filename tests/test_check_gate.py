"""`realm-bench check` as a CI gate: no records is an error, JSON and JUnit output, one spec,
user specs, and the same `n` in the table and the verdicts."""
from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from realm_bench import cli
from realm_bench.reporting import build, check as check_lib, specs
from record_factory import outcomes_for, write_run


def _sweep_runs(runs, em_1x=30.0, em_30x=20.0):
  """One seed per refresh interval, each with an evaluation and a recall record carrying
  per-question outcomes (200 questions), so the claims between two points are decided."""
  for value, em in ((20, em_1x), (600, em_30x)):
    common = dict(experiment="staleness", split="dev", params={"refresh_every_steps": value},
                  stats={"staleness_mean": value / 2}, num_examples=200)
    em, right = outcomes_for(em)
    write_run(runs, f"eval_{value}", metrics={"exact_match": em}, outcomes=right, **common)
    recall, hits = outcomes_for(40.0 if value == 20 else 30.0)
    write_run(runs, f"recall_{value}", metrics={"recall@5": recall}, outcomes=hits, **common)


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "runs folder does not exist"),
    (lambda p: p.mkdir(), "holds no run records"),
])
def test_no_records_fails_the_gate(tmp_path, capsys, make, message):
  make(tmp_path / "runs")
  assert cli.main(["check", "--runs", str(tmp_path / "runs")]) == 2
  assert message in capsys.readouterr().err


def test_table_and_check_agree_on_n(tmp_path):
  _sweep_runs(tmp_path)
  spec = next(s for s in specs.load_specs() if s.id == "staleness")
  points = build.sweep_points(spec, build.load_frame(tmp_path))
  assert points["n"].tolist() == [1, 1]   # one seed each, not its two records
  _, verdicts = check_lib.check(runs_dir=tmp_path, spec_ids=["staleness"])
  assert set(verdicts["n"]) == {1}
  pairs = verdicts[verdicts["item"].str.contains("refresh_1x_above_30x")]
  assert set(pairs["verdict"]) == {"PASS"}
  # Two sweep points are too few for a rank correlation: undecided, not passed.
  trends = verdicts[verdicts["item"].str.contains("decreases")]
  assert set(trends["verdict"]) == {"INCONCLUSIVE"}
  assert trends["note"].str.contains("needs 3 or more").all()


def test_json_output(tmp_path, capsys):
  _sweep_runs(tmp_path, em_1x=10.0)
  assert cli.main(["check", "--runs", str(tmp_path), "--format", "json"]) == 1
  captured = capsys.readouterr()
  doc = json.loads(captured.out)
  assert doc["exit_code"] == 1 and "exit 1" in captured.err
  em = next(v for v in doc["verdicts"] if v["item"] == "staleness/refresh_1x_above_30x_em")
  assert em["verdict"] == "FAIL" and em["ours"] == 10.0 and em["baseline"] == 20.0
  assert em["n"] == 1 and em["spec"] == "staleness" and em["delta"] == -10.0
  assert em["ci_high"] < 0 and em["method"].startswith("paired bootstrap over 200 questions")
  assert em["ours_pm"] is None   # one run: no interval over seeds
  assert doc["counts"]["claim"]["FAIL"] == 1


def test_junit_output_has_a_test_case_per_cell_and_claim(tmp_path, capsys):
  _sweep_runs(tmp_path, em_1x=10.0)
  assert cli.main(["check", "--runs", str(tmp_path), "--format", "junit"]) == 1
  root = ET.fromstring(capsys.readouterr().out)
  _, verdicts = check_lib.check(runs_dir=tmp_path)
  cases = root.findall("./testsuite/testcase")
  assert len(cases) == len(verdicts) == int(root.get("tests"))
  failed = [c.get("name") for c in cases if c.find("failure") is not None]
  assert failed == ["staleness/refresh_1x_above_30x_em [synthetic]"]
  assert int(root.get("skipped")) == verdicts["verdict"].isin(["MISSING", "INCONCLUSIVE"]).sum()
  assert verdicts["verdict"].eq("INCONCLUSIVE").sum() == 2   # the two-point sweep's trends
  assert {s.get("name") for s in root.findall("testsuite")} == {"table1", "table2",
                                                                 "staleness"}
  # --strict: MISSING and INCONCLUSIVE are failures, not skips.
  assert cli.main(["check", "--runs", str(tmp_path), "--format", "junit", "--strict"]) == 1
  root = ET.fromstring(capsys.readouterr().out)
  assert root.get("skipped") == "0" and int(root.get("failures")) > 1


def test_one_spec_and_users_own_specs(tmp_path, capsys):
  _sweep_runs(tmp_path / "runs")
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--spec", "staleness"]) == 0
  out = capsys.readouterr().out
  assert "staleness/refresh_1x_above_30x_em" in out and "table1" not in out
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--spec", "tabel1"]) == 2
  assert "--spec" in capsys.readouterr().err
  mine = tmp_path / "my_specs"
  mine.mkdir()
  shutil.copy(specs.default_specs_dir() / "staleness.yaml", mine)
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--specs", str(mine),
                   "--verbose"]) == 0
  assert "table1" not in capsys.readouterr().out
  missing = tmp_path / "reported.yaml"
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--reported", str(missing)]) == 2
  assert str(missing) in capsys.readouterr().err
