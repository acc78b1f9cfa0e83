"""Run records, the reported numbers, `realm-bench tables` and `realm-bench check`."""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import numpy as np
import pytest
import yaml

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.reporting import check as check_lib
from realm_bench.reporting import collect, records, render, specs
from record_factory import make_record, write_run, write_seeds

GOLDEN = Path(__file__).parent / "golden" / "tables"
REFERENCE_CSV = (Path(__file__).resolve().parents[2]
                 / "shared/reference/realm_2020_reported.csv")


# --- run records ------------------------------------------------------------------------------


def test_record_round_trip(tmp_path):
  record = make_record(
      experiment="staleness", split="dev", cells=[{"table": "T2", "row": 7, "dataset": "nq",
                                                    "metric": "recall@5"}],
      metrics={"exact_match": 31.25, "recall@5": 17.0}, recall_matcher="regex",
      params={"refresh_every_steps": 30, "nested": {"k": [1, 2]}},
      stats={"staleness_mean": 12.5, "staleness_max": 30},
      index_manifests=[{"embedder_step": 100, "num_blocks": 64}])
  path = records.write_record(tmp_path / "run", record)
  assert path == tmp_path / "run" / "record.json"
  assert records.read_record(path) == record
  assert records.read_record(tmp_path / "run") == record  # a run folder works too
  assert json.loads(path.read_text())["schema_version"] == records.SCHEMA_VERSION


@pytest.mark.parametrize("overrides, field", [
    ({"metrics": {"exact_match": float("nan")}}, "metrics.exact_match"),
    ({"stats": {"staleness_mean": float("inf")}}, "stats.staleness_mean"),
    ({"num_examples": "12"}, "num_examples"),
    ({"dataset": "trivia"}, "dataset"),
    ({"metrics": {"recall@5": 10.0}, "recall_matcher": "fuzzy"}, "recall_matcher"),
])
def test_write_record_refuses_bad_fields(tmp_path, overrides, field):
  with pytest.raises(InputError) as e:
    records.write_record(tmp_path, make_record(**overrides))
  assert e.value.field == field and e.value.path == str(tmp_path / "record.json")
  assert not (tmp_path / "record.json").exists()


def _good_json(tmp_path) -> str:
  return records.write_record(tmp_path / "good", make_record()).read_text()


def _edit(text, **changes) -> str:
  obj = json.loads(text)
  for key, value in changes.items():
    if value is KeyError:
      del obj[key]
    else:
      obj[key] = value
  return json.dumps(obj)


def test_records_carry_the_command_they_were_written_under(tmp_path):
  assert make_record().command is None   # outside any command
  with records.recording_command(["quickstart", "--out", "my runs"]):
    with records.recording_command(["train", "--gin_file=runs/ict.gin",
                                    "--gin.RUN_DIR='my runs/ict'"]) as inner:
      record = make_record()   # a driver's stage: its own command, not the driver's
    outer = make_record()
  assert inner == record.command == "realm-bench train --gin_file=runs/ict.gin " \
      "--gin.RUN_DIR=\"'my runs/ict'\""
  assert outer.command == "realm-bench quickstart --out 'my runs'"
  assert make_record().command is None
  records.write_record(tmp_path / "run", record)
  assert records.read_record(tmp_path / "run").command == record.command


def test_records_before_version_3_read_without_a_command(tmp_path):
  """Records written before commands were kept (schema version 2) still read, and render."""
  path = tmp_path / "old" / "record.json"
  path.parent.mkdir()
  path.write_text(_edit(_good_json(tmp_path), schema_version=2, command=KeyError))
  assert records.read_record(path) == make_record()
  committed = Path(__file__).resolve().parent.parent / "results" / "records" / "quickstart"
  old = [records.read_record(p) for p in sorted(committed.rglob("record.json"))[:5]]
  assert old and all(r.command is None and r.schema_version == 3 for r in old)


@pytest.mark.parametrize("mutate, field, line", [
    (lambda t: t[: len(t) // 2], None, True),                                   # truncated
    (lambda t: _edit(t, task=KeyError), "task", False),                         # missing field
    (lambda t: _edit(t, metrics={"exact_match": "NaN!"}).replace('"NaN!"', "NaN"),
     "metrics.exact_match", False),                                             # NaN literal
    (lambda t: _edit(t, metrics={"exact_match": 1}).replace(": 1}", ": 1e999}"),
     "metrics.exact_match", False),                                             # overflows to inf
    (lambda t: _edit(t, steps=1.5), "steps", False),                            # wrong type
    (lambda t: _edit(t, metrics={"exact_match": "39"}), "metrics.exact_match", False),
    (lambda t: _edit(t, metric={}), "metric", False),                           # unknown field
    (lambda t: _edit(t, metrics={"recall@5": 3.0}), "recall_matcher", False),   # matcher unnamed
    (lambda t: _edit(t, cells=[{"table": "T1", "row": "9", "dataset": "nq", "metric": "x"}]),
     "cells[0].row", False),
    (lambda t: _edit(t, start_time="yesterday"), "start_time", False),
    (lambda t: _edit(t, command=KeyError), "command", False),   # a version 3 record has one
    (lambda t: _edit(t, command=["realm-bench", "train"]), "command", False),
    (lambda t: _edit(t, command=" "), "command", False),
])
def test_read_record_names_file_and_field(tmp_path, mutate, field, line):
  path = tmp_path / "bad" / "record.json"
  path.parent.mkdir()
  path.write_text(mutate(_good_json(tmp_path)))
  with pytest.raises(InputError) as e:
    records.read_record(path)
  assert e.value.path == str(path)
  assert e.value.field == field
  assert (e.value.line is not None) == line
  assert str(path) in str(e.value)


@pytest.mark.parametrize("command", ["check", "tables"])
def test_cli_exits_2_naming_the_bad_record(tmp_path, capsys, command):
  write_run(tmp_path / "runs", "ok")
  bad = tmp_path / "runs" / "bad" / "record.json"
  bad.parent.mkdir()
  bad.write_text(_edit(_good_json(tmp_path), num_examples=KeyError))
  code = cli.main([command, "--runs", str(tmp_path / "runs"), *(
      ["--out", str(tmp_path / "tables")] if command == "tables" else [])])
  assert code == 2
  err = capsys.readouterr().err
  assert str(bad) in err and "num_examples" in err


def test_git_commit_and_hardware_info(tmp_path):
  assert records.git_commit(tmp_path) == "unknown"
  commit = records.git_commit()
  assert commit == "unknown" or len(commit.removesuffix("-dirty")) == 40
  # hardware_info must not import JAX (that would start a backend just to write a record).
  code = ("import sys; from realm_bench.reporting.records import hardware_info; "
          "info = hardware_info(); assert 'jax' not in sys.modules, 'jax imported'; "
          "assert info['cpu_count'] >= 1 and 'device_kind' not in info")
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- collecting -------------------------------------------------------------------------------


def test_collect_one_row_per_metric_with_params_and_stats(tmp_path):
  write_run(tmp_path / "a" / "deep", "s1", experiment="staleness", split="dev",
            metrics={"exact_match": 40.0, "recall@5": 30.0},
            params={"refresh_every_steps": 5}, stats={"staleness_mean": 2.5})
  write_run(tmp_path, "r1", metrics={"exact_match": 50.0})
  frame = collect.collect_records(tmp_path)
  assert len(frame) == 3
  stale = frame[frame["run_id"] == "s1"]
  assert sorted(stale["metric"]) == ["exact_match", "recall@5"]
  assert (stale["params.refresh_every_steps"] == 5).all()
  assert (stale["stats.staleness_mean"] == 2.5).all()
  assert frame[frame["run_id"] == "r1"]["params.refresh_every_steps"].isna().all()
  assert {"experiment", "dataset", "split", "scale", "metric", "value", "path",
          "run_id"} <= set(frame.columns)


def test_collect_refuses_missing_folder_and_duplicate_run_ids(tmp_path):
  with pytest.raises(InputError, match="does not exist"):
    collect.collect_records(tmp_path / "nope")
  write_run(tmp_path / "x", "same")
  write_run(tmp_path / "y", "same")
  with pytest.raises(InputError) as e:
    collect.collect_records(tmp_path)
  assert e.value.field == "run_id"


def test_collect_seed_folders_pair_lineage_and_refuse_copies(tmp_path):
  # Two seeds' runs carry the same ids in their own folders: each evaluation joins the
  # pre-training of its own seed, and the folder is the row's replicate.
  for seed, every in (("seed_0", 10), ("seed_1", 30)):
    write_run(tmp_path / seed, "pretrain", kind="train", dataset=None, split="train",
              metrics={"loss": 1.0}, params={"refresh_every_steps": every},
              start_time=f"2024-01-0{1 + every // 30}T00:00:00+00:00")
    write_run(tmp_path / seed, "eval", lineage="pretrain", num_examples=4,
              metrics={"exact_match": 50.0}, outcomes="1100",
              start_time=f"2024-01-0{1 + every // 30}T00:00:00+00:00")
  frame = collect.collect_records(tmp_path)
  evals = frame[frame["run_id"] == "eval"].set_index("replicate")
  assert evals.loc["seed_0", "params.refresh_every_steps"] == 10
  assert evals.loc["seed_1", "params.refresh_every_steps"] == 30
  assert (evals["outcomes"] == "1100").all()
  assert frame[frame["kind"] == "train"]["outcomes"].isna().all()
  # Outcomes that do not reproduce the metric are not used.
  write_run(tmp_path / "seed_2", "eval", num_examples=4, metrics={"exact_match": 75.0},
            outcomes="1100", start_time="2024-02-01T00:00:00+00:00")
  frame = collect.collect_records(tmp_path)
  assert frame[frame["replicate"] == "seed_2"]["outcomes"].isna().all()
  # An identical copy of a seed's folder is refused.
  write_run(tmp_path / "copy_of_seed_2", "eval", num_examples=4, metrics={"exact_match": 75.0},
            outcomes="1100", start_time="2024-02-01T00:00:00+00:00")
  with pytest.raises(InputError, match="identical copy") as e:
    collect.collect_records(tmp_path)
  assert e.value.field == "run_id"


# --- reported numbers -------------------------------------------------------------------------


@pytest.mark.skipif(not REFERENCE_CSV.is_file(),
                    reason=f"reference CSV not found at {REFERENCE_CSV} (../shared beside the "
                           "repo)")
def test_reported_yaml_matches_reference_csv():
  reported = specs.load_reported()
  expected = {}
  with open(REFERENCE_CSV, newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
      metric = "exact_match" if row["metric"] == "exact_match" else "recall@5"
      assert metric == "exact_match" or row["metric"].startswith("recall@5")
      for dataset in ("nq", "wq", "ct"):
        if row[dataset] != "NA":
          key = (row["table"], int(row["row"]), dataset, row["split"], metric)
          expected[key] = (float(row[dataset]), row["system"])
  assert set(reported) == set(expected)
  for key, (value, system) in expected.items():
    assert reported[key].value == value, key
    assert reported[key].system == system, key
    assert reported[key].source == f"Guu et al. 2020, REALM, ICML, Table {key[0][1]}"


def test_spec_naming_an_unknown_row_is_refused(tmp_path):
  doc = yaml.safe_load((specs.default_specs_dir() / "table2.yaml").read_text())
  doc["rows"][3]["row"] = 99
  (tmp_path / "table2.yaml").write_text(yaml.safe_dump(doc))
  with pytest.raises(InputError) as e:
    specs.load_specs(tmp_path)
  assert e.value.field == "rows[3].row" and e.value.path == str(tmp_path / "table2.yaml")


# --- fixtures of runs -------------------------------------------------------------------------


def _paper_cells():
  """(spec, row, column, reported cell) for every paper-scale cell `check` judges."""
  reported = specs.load_reported()
  for spec in specs.load_specs(reported=reported):
    for row in spec.rows if spec.kind == "table" else ():
      for col in spec.columns if row.experiment else ():
        cell = reported.get((spec.reported_table, row.row, col.dataset, col.split, col.metric))
        if cell is not None:
          yield spec, row, col, cell


def _write_paper_runs(runs, offsets=None):
  """Three seeds of paper-scale runs per judged cell, averaging the reported value plus
  offsets[(table, row, dataset, metric)] (in units of that cell's tolerance); no per-question
  outcomes, so the claims between them rest on the interval over seeds."""
  offsets = offsets or {}
  for spec, row, col, cell in _paper_cells():
    key = (cell.table, cell.row, cell.dataset, cell.metric)
    write_seeds(runs, f"paper-{cell.table}-{cell.row}-{cell.dataset}-{cell.metric}",
                value=cell.value + offsets.get(key, 0.0) * cell.tolerance, metric=col.metric,
                jitter=0.05 if cell.row % 2 else -0.05, outcomes=False,
                experiment=row.experiment, scale="paper", dataset=col.dataset, split=col.split,
                cells=[dict(zip(("table", "row", "dataset", "metric"), key))])


SYNTHETIC_DEV = {"realm": (50.0, 45.0), "orqa": (35.0, 20.0),
                 "realm_retriever_baseline_encoder": (47.0, 45.0),
                 "baseline_retriever_realm_encoder": (40.0, 20.0),
                 "realm_random_span_mask": (44.0, 35.0), "realm_random_token_mask": (38.0, 30.0),
                 "realm_stale_30x": (30.0, 15.0)}


def _write_synthetic_runs(runs, realm_test=55.0, stale_at_1x=50.0):
  """Three seeds (seed_N folders) of every synthetic row and sweep point, with per-question
  outcomes on 200 questions: the defaults make every claim of the specs hold."""
  for dataset in ("nq", "wq", "ct"):
    write_seeds(runs, f"syn-realm-test-{dataset}", value=realm_test, experiment="realm",
                dataset=dataset)
    write_seeds(runs, f"syn-orqa-test-{dataset}", value=40.0, experiment="orqa",
                dataset=dataset)
  write_seeds(runs, "syn-bm25-test", value=30.0, experiment="bm25_reader")
  write_seeds(runs, "syn-closed-test", value=12.0, experiment="closed_book")
  for name, (em, recall) in SYNTHETIC_DEV.items():
    write_seeds(runs, f"syn-{name}-dev", value=em, experiment=name, split="dev")
    write_seeds(runs, f"syn-{name}-recall", value=recall, metric="recall@5", experiment=name,
                split="dev")
  for every, em in ((20, stale_at_1x), (60, 47.0), (200, 45.0), (600, 35.0)):
    common = dict(experiment="staleness", split="dev", params={"refresh_every_steps": every},
                  stats={"staleness_mean": (every - 1) / 2, "staleness_max": every - 1})
    write_seeds(runs, f"syn-stale-{every}-dev", value=em, **common)
    write_seeds(runs, f"syn-stale-{every}-recall", value=em - 10.0, metric="recall@5",
                **common)


def _verdict(verdicts, item, scale=None):
  rows = verdicts[verdicts["item"] == item]
  if scale is not None:
    rows = rows[rows["scale"] == scale]
  assert len(rows) == 1, (item, rows)
  return rows["verdict"].iloc[0]


# --- check --------------------------------------------------------------------------------------


def test_check_everything_at_reported_values_passes_even_strict(tmp_path):
  _write_paper_runs(tmp_path)
  _write_synthetic_runs(tmp_path)
  code, verdicts = check_lib.check(runs_dir=tmp_path, strict=True)
  assert set(verdicts["verdict"]) <= {"OK", "PASS"}, verdicts[~verdicts["verdict"].isin(
      ["OK", "PASS"])]
  assert code == 0
  # table2's claims have scale `any`: both the paper-scale and the synthetic runs are judged.
  assert _verdict(verdicts, "table2/fresh_above_stale_em", "paper") == "PASS"
  assert _verdict(verdicts, "table2/fresh_above_stale_em", "synthetic") == "PASS"


@pytest.mark.parametrize("offset, verdict, code", [(0.9, "OK", 0), (-1.5, "OK~", 0),
                                                   (2.0, "OK~", 0), (2.1, "FAIL", 1)])
def test_check_cell_tolerance_bands(tmp_path, offset, verdict, code):
  _write_paper_runs(tmp_path, offsets={("T1", 9, "nq", "exact_match"): offset})
  got, verdicts = check_lib.check(runs_dir=tmp_path)
  assert _verdict(verdicts, "T1#9 NQ orqa") == verdict
  assert got == code


def test_check_missing_passes_unless_strict(tmp_path, capsys):
  (tmp_path / "runs").mkdir()
  assert check_lib.check(runs_dir=tmp_path / "runs")[0] == 0
  code, verdicts = check_lib.check(runs_dir=tmp_path / "runs", strict=True)
  assert code == 1 and set(verdicts["verdict"]) == {"MISSING"}
  # On the command line (a CI gate), records of other experiments: MISSING passes unless
  # --strict; MISSING rows are folded into a count unless --verbose.
  write_run(tmp_path / "runs", "other", experiment="not_in_any_spec")
  assert cli.main(["check", "--runs", str(tmp_path / "runs")]) == 0
  assert "MISSING row(s)" in capsys.readouterr().out
  assert cli.main(["check", "--runs", str(tmp_path / "runs"), "--strict", "--verbose"]) == 1
  assert "table1/realm_above_orqa" in capsys.readouterr().out


def test_check_claims_fail_when_direction_reverses(tmp_path, capsys):
  _write_synthetic_runs(tmp_path, realm_test=30.0, stale_at_1x=20.0)
  code, verdicts = check_lib.check(runs_dir=tmp_path)
  assert code == 1
  assert _verdict(verdicts, "table1/realm_above_orqa") == "FAIL"
  assert _verdict(verdicts, "table1/realm_above_closed_book") == "PASS"
  assert _verdict(verdicts, "staleness/refresh_1x_above_30x_em", "synthetic") == "FAIL"
  # Out of order (20, 47, 45, 35): the rank test does not say EM falls, nor that it rises.
  assert _verdict(verdicts, "staleness/em_decreases_with_refresh_interval") == "INCONCLUSIVE"
  assert _verdict(verdicts, "staleness/recall_decreases_with_refresh_interval") == "INCONCLUSIVE"
  assert _verdict(verdicts, "table1/realm_above_bm25_reader") == "INCONCLUSIVE"   # 30 vs 30
  assert _verdict(verdicts, "table2/realm_above_orqa", "synthetic") == "PASS"
  assert _verdict(verdicts, "table1/realm_wiki_above_orqa") == "MISSING"  # paper scale only
  assert cli.main(["check", "--runs", str(tmp_path)]) == 1
  out = capsys.readouterr().out
  assert "table1/realm_above_orqa" in out and "FAIL" in out


def test_records_listing_cells_count_only_for_those_cells(tmp_path):
  # The fine-tuning run also measured recall@5 after fine-tuning; it lists only its EM cell,
  # so Table 2's zero-shot recall@5 comes from the retriever-only run alone.
  write_run(tmp_path, "ft", experiment="realm", scale="paper", split="dev",
            metrics={"exact_match": 38.0, "recall@5": 70.0},
            cells=[{"table": "T2", "row": 1, "dataset": "nq", "metric": "exact_match"}])
  write_run(tmp_path, "zs", experiment="realm", scale="paper", split="dev",
            metrics={"recall@5": 38.0},
            cells=[{"table": "T2", "row": 1, "dataset": "nq", "metric": "recall@5"}])
  _, verdicts = check_lib.check(runs_dir=tmp_path)
  row = verdicts[verdicts["item"] == "T2#1 Recall@5 realm"].iloc[0]
  assert row["ours"] == 38.0 and row["n"] == 1 and row["verdict"] == "OK"


# --- tables -------------------------------------------------------------------------------------


def _golden_runs(runs):
  write_run(runs, "orqa-nq-1", experiment="orqa", scale="paper", metrics={"exact_match": 33.0})
  write_run(runs, "orqa-nq-2", experiment="orqa", scale="paper", metrics={"exact_match": 34.0})
  write_run(runs, "realm-wiki-ct", experiment="realm_wiki", scale="paper", dataset="ct",
            metrics={"exact_match": 41.25})
  write_run(runs, "realm-dev-ft", experiment="realm", scale="paper", split="dev",
            metrics={"exact_match": 38.0, "recall@5": 70.0},
            cells=[{"table": "T2", "row": 1, "dataset": "nq", "metric": "exact_match"}])
  write_run(runs, "realm-dev-zs", experiment="realm", scale="paper", split="dev",
            metrics={"recall@5": 36.9},
            cells=[{"table": "T2", "row": 1, "dataset": "nq", "metric": "recall@5"}])
  _write_synthetic_runs(runs)
  write_seeds(runs, "ict_recall_dev", value=42.0, metric="recall@5", experiment="ict",
              split="dev")   # the sweep's reference line


def _assert_golden(name: str, text: str) -> None:
  path = GOLDEN / name
  if os.environ.get("UPDATE_GOLDEN") == "1":
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return
  assert path.is_file(), f"golden file {path} is missing; create it with UPDATE_GOLDEN=1"
  assert text == path.read_text(encoding="utf-8"), (
      f"{name} differs from {path}; if the change is intended, rerun with UPDATE_GOLDEN=1")


def test_tables_match_golden_files(tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)  # relative paths, so the files' header lines are stable
  _golden_runs(Path("runs"))
  assert cli.main(["tables", "--runs", "runs", "--format", "md,csv", "--out", "tables"]) == 0
  out = capsys.readouterr().out
  for spec in ("table1", "table2", "staleness"):
    for fmt in ("md", "csv"):
      text = (tmp_path / "tables" / f"{spec}.{fmt}").read_text(encoding="utf-8")
      _assert_golden(f"{spec}.{fmt}", text)
    assert (tmp_path / "tables" / f"{spec}.md").read_text(encoding="utf-8") in out


def _csv_frame(path) -> pd.DataFrame:
  return pd.read_csv(path, skiprows=2)  # past the "# Generated by" and "# title" lines


def test_tables_average_runs_and_keep_synthetic_apart(tmp_path):
  write_run(tmp_path / "runs", "p1", experiment="orqa", scale="paper",
            metrics={"exact_match": 33.0})
  write_run(tmp_path / "runs", "p2", experiment="orqa", scale="paper",
            metrics={"exact_match": 34.0})
  write_run(tmp_path / "runs", "s1", experiment="realm", scale="synthetic",
            metrics={"exact_match": 77.0})
  render.render_tables(runs_dir=tmp_path / "runs", formats=["csv"], out_dir=tmp_path / "t")
  frame = _csv_frame(tmp_path / "t" / "table1.csv")
  paper = frame[frame["section"] == "paper"].set_index("row")
  synthetic = frame[frame["section"] == "synthetic"].set_index("experiment")
  assert paper.loc[9, "NQ ours"] == 33.5 and paper.loc[9, "NQ n"] == 2
  assert paper.loc[9, "NQ ±"] == pytest.approx(6.353, abs=1e-3)   # t(1) x 0.5: two runs
  assert paper.loc[9, "NQ Δ"] == pytest.approx(0.2)
  assert paper["NQ ours"].drop(index=9).isna().all()        # the synthetic 77.0 is not here
  assert synthetic.loc["realm", "NQ ours"] == 77.0 and synthetic.loc["realm", "NQ n"] == 1
  assert synthetic.loc["orqa", "NQ n"] == 0                  # the paper runs are not here
  assert "NQ Δ" not in frame.columns or synthetic["NQ Δ"].isna().all()
  assert "NQ reported" not in frame.columns or synthetic["NQ reported"].isna().all()


def test_tables_without_runs_folder_show_reported_numbers(tmp_path, capsys):
  written = render.render_tables(runs_dir=tmp_path / "none", formats=["md", "csv", "tex", "html"],
                                 out_dir=tmp_path / "t")
  assert "does not exist" in capsys.readouterr().err
  assert sorted(p.name for p in written) == sorted(
      [f"{s}.{f}" for s in ("table1", "table2", "staleness") for f in ("md", "csv", "tex", "html")]
      + ["leaderboard.html"])
  for path in written:
    text = path.read_text(encoding="utf-8")
    assert "realm-bench tables --runs" in text and str(tmp_path / "none") in text, path
  md = (tmp_path / "t" / "table1.md").read_text(encoding="utf-8")
  assert "| 9 | ORQA (Lee et al. 2019) | orqa | 33.3 | — | — | 0 | — |" in md
  assert r"\begin{tabular}" in (tmp_path / "t" / "table2.tex").read_text(encoding="utf-8")
  assert not (tmp_path / "t" / "staleness.png").exists()


def test_staleness_plot_written_when_sweep_records_exist(tmp_path):
  _write_synthetic_runs(tmp_path / "runs")
  written = render.render_tables(runs_dir=tmp_path / "runs", formats=["md"],
                                 out_dir=tmp_path / "t")
  png = tmp_path / "t" / "staleness.png"
  assert png in written
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  md = (tmp_path / "t" / "staleness.md").read_text(encoding="utf-8")
  # Three seeds at refresh 20 averaged: mean, ± of the 95% t-interval, n.
  assert "| 20 | 50.0 | 2.5 | 40.0 | 2.5 | 9.5 | 3 |" in md


def test_tables_refuse_unknown_format_and_unswept_runs(tmp_path):
  with pytest.raises(InputError) as e:
    render.render_tables(runs_dir=tmp_path, formats=["md", "pdf"], out_dir=tmp_path / "t")
  assert e.value.field == "--format"
  write_run(tmp_path / "runs", "s", experiment="staleness", split="dev")
  with pytest.raises(InputError) as e:
    render.render_tables(runs_dir=tmp_path / "runs", formats=["md"], out_dir=tmp_path / "t")
  assert e.value.field == "params.refresh_every_steps" and "runs/s/record.json" in e.value.path


def test_record_dataclass_fields_are_the_documented_contract():
  assert [f.name for f in dataclasses.fields(records.RunRecord)] == [
      "schema_version", "run_id", "kind", "experiment", "lineage", "cells", "task", "dataset",
      "split", "scale",
      "metrics", "num_examples", "gin_config", "git_commit", "hardware", "start_time",
      "end_time", "steps", "index_manifests", "params", "stats", "recall_matcher", "outcomes",
      "command"]


@pytest.mark.parametrize("records,out", [
    ("results/records/reproduce_reworded", "results/tables"),
    ("results/records/reproduce", "results/tables/reproduce"),
    ("results/records/reproduce_declarative", "results/tables/reproduce_declarative"),
    ("results/records/reproduce_reworded", "results/tables/reproduce_reworded"),
    ("results/records/reproduce_e120", "results/tables/reproduce_e120"),
    ("results/records/staleness", "results/tables/staleness_generator1"),
    ("results/records/staleness_1000_steps", "results/tables/staleness_1000_steps")])
def test_committed_tables_are_what_the_committed_records_render(tmp_path, records, out):
  root = Path(__file__).resolve().parent.parent
  command = (root / out / "staleness.md").read_text().split("`")[1]
  written = render.render_tables(runs_dir=root / records, formats=["md"], out_dir=tmp_path,
                          command=command)
  for path in written:
    if path.suffix == ".md":
      committed = (root / out / path.name).read_text()
      assert path.read_text().replace(str(root / records), records) == committed, path.name


def test_summary_pairs_outcomes_question_by_question(tmp_path):
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  assert summary.binomial_se(50.0, 100) == pytest.approx(5.0)
  a, b = np.array([1, 1, 0, 1]), np.array([1, 0, 0, 0])
  diff, se = summary.paired(a, b)
  assert diff == pytest.approx(50.0) and se == pytest.approx(100 * np.std([0, 1, 0, 1], ddof=1) / 2)
  for name, outcomes in (("realm", "1101"), ("orqa", "1000")):
    write_run(tmp_path, f"{name}_test", experiment=name, split="test", num_examples=4,
              metrics={"exact_match": 25.0 * outcomes.count("1")}, outcomes=outcomes)
  text = summary.quickstart_summary(tmp_path)
  assert "| REALM − ORQA, EM test | +50.0 | 28.9 | +1.7 | REALM within 2 SE: not an effect |" in text
  recs = summary.evaluation_records(tmp_path)
  realm, orqa = recs[("realm", "evaluate", "test")], recs[("orqa", "evaluate", "test")]
  assert summary.paired_difference(realm, orqa) == pytest.approx((50.0, 28.8675), rel=1e-4)
  assert summary.paired_difference(realm, None) is None
  with pytest.raises(InputError, match="outcomes"):
    write_run(tmp_path, "bad", num_examples=3, outcomes="10")
  # Another twin's records are not NQ's; a second NQ record of one key is refused by path.
  write_run(tmp_path, "realm_wq_test", experiment="realm", split="test", dataset="wq",
            num_examples=4, metrics={"exact_match": 0.0}, outcomes="0000")
  assert summary.evaluation_records(tmp_path)[("realm", "evaluate", "test")].metrics == \
      realm.metrics
  assert set(summary.evaluation_records(tmp_path, dataset="wq")) == {("realm", "evaluate", "test")}
  for point in ("a", "b"):   # experiments the summary does not read may repeat a key
    write_run(tmp_path, f"sweep_{point}", experiment="staleness", split="test",
              num_examples=4, metrics={"exact_match": 0.0}, outcomes="0000")
  assert ("staleness", "evaluate", "test") not in summary.evaluation_records(tmp_path)
  write_run(tmp_path / "seed_1", "realm_test", experiment="realm", split="test",
            num_examples=4, metrics={"exact_match": 0.0}, outcomes="0000")
  with pytest.raises(InputError, match="a second evaluate record of experiment 'realm'") as e:
    summary.evaluation_records(tmp_path)
  assert e.value.path.endswith("seed_1/realm_test/record.json")


def test_sweep_axes_are_labelled_in_words():
  from realm_bench.reporting import plots  # pylint: disable=g-import-not-at-top
  assert plots.axis_label("params.refresh_every_steps") == \
      "index refresh interval (training steps)"
  assert plots.axis_label("stats.mean_staleness") == "mean index staleness (steps behind the model)"
  assert plots.axis_label("stats.retrieval_utility") == "retrieval utility"


# --- the sweep's reference lines --------------------------------------------------------------


def _staleness_spec(specs_dir=None) -> specs.SweepSpec:
  return next(s for s in specs.load_specs(specs_dir) if s.id == "staleness")


def test_the_staleness_sweep_is_read_against_the_warm_start():
  assert _staleness_spec().references == (
      specs.SweepReference(name="ICT warm start (zero-shot)", experiment="ict",
                           metric="recall@5"),)


@pytest.mark.parametrize("references, field", [
    ("ict", "references"),                                               # not a list
    ([{"experiment": "ict", "metric": "recall@5"}], "references[0].name"),
    ([{"name": "warm", "experiment": 3, "metric": "recall@5"}], "references[0].experiment"),
    ([{"name": "warm", "experiment": "ict", "metric": "recall@20"}],      # no panel shows it
     "references[0].metric"),
    ([{"name": "warm", "experiment": "ict", "metric": "staleness_mean"}],  # a stat column
     "references[0].metric"),
    ([{"name": "warm", "experiment": "ict", "metric": "recall@5"},
      {"name": "warm", "experiment": "orqa", "metric": "exact_match"}], "references[1].name"),
    (["ict"], "references[0]"),
])
def test_bad_sweep_references_are_refused_naming_file_and_field(tmp_path, references, field):
  for path in specs.default_specs_dir().glob("*.yaml"):
    (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
  doc = yaml.safe_load((tmp_path / "staleness.yaml").read_text(encoding="utf-8"))
  doc["references"] = references
  (tmp_path / "staleness.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
  with pytest.raises(InputError) as e:
    specs.load_specs(tmp_path)
  assert e.value.field == field and e.value.path == str(tmp_path / "staleness.yaml")


def _reference_runs(runs):
  _write_synthetic_runs(runs)
  write_seeds(runs, "ict_recall_dev", value=42.0, metric="recall@5", experiment="ict",
              split="dev", jitter=2.0)
  # Not the reference: another split, another metric, a training record of the warm start.
  write_run(runs, "ict_recall_test", experiment="ict", metrics={"recall@5": 90.0})
  write_run(runs, "ict_recall_dev_at_1", experiment="ict", split="dev",
            metrics={"recall@1": 90.0})
  write_run(runs, "ict", kind="train", experiment="ict", dataset=None, split="train",
            metrics={"loss": 90.0})


def test_the_reference_is_the_mean_over_seeds_of_its_records(tmp_path):
  from realm_bench.reporting import build  # pylint: disable=g-import-not-at-top
  _reference_runs(tmp_path / "runs")
  frame = collect.collect_records(tmp_path / "runs")
  refs = build.sweep_references(_staleness_spec(), frame)
  assert len(refs) == 1   # synthetic only: no paper-scale records of it
  ref = refs.iloc[0]
  assert (ref["scale"], ref["name"], ref["metric"], ref["n"]) == (
      "synthetic", "ICT warm start (zero-shot)", "recall@5", 3)
  assert ref["value"] == pytest.approx(42.0)   # seeds 40, 42, 44
  assert ref["±"] == pytest.approx(4.968, abs=1e-3)   # t(2) x sd 2 / sqrt(3)
  render.render_tables(runs_dir=tmp_path / "runs", formats=["md"], out_dir=tmp_path / "t")
  md = (tmp_path / "t" / "staleness.md").read_text(encoding="utf-8")
  assert ("Reference line on the plot: ICT warm start (zero-shot) = 42.0 ± 5.0, n = 3 "
          "(recall@5 of experiment 'ict').") in md


def test_the_sweep_plot_draws_the_reference_line(tmp_path, monkeypatch):
  from realm_bench.reporting import build, plots  # pylint: disable=g-import-not-at-top
  _reference_runs(tmp_path / "runs")
  frame = collect.collect_records(tmp_path / "runs")
  spec = _staleness_spec()
  figure = plots.sweep_figure(build.sweep_points(spec, frame), spec=spec, caption="c",
                              references=build.sweep_references(spec, frame))
  panels = figure.axes
  assert len(panels) == 2   # against the interval and against the measured staleness
  for ax in panels:
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1
    assert list(dashed[0].get_ydata()) == [pytest.approx(42.0)] * 2   # horizontal
    label = dashed[0].get_label()
    assert label == "ICT warm start (zero-shot) (synthetic): recall@5 42.0 ± 5.0"
    assert label in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "recall@5" in ax.get_ylabel().lower()
  # `tables` draws its plot with the references.
  drawn = []
  real = plots.sweep_figure
  monkeypatch.setattr(plots, "sweep_figure",
                      lambda *a, **k: drawn.append(k["references"]) or real(*a, **k))
  render.render_tables(runs_dir=tmp_path / "runs", formats=["md"], out_dir=tmp_path / "t")
  assert len(drawn) == 1 and drawn[0]["value"].tolist() == [pytest.approx(42.0)]


@pytest.mark.parametrize("name", ["reproduce_reworded", "reproduce_e120"])
def test_committed_check_is_what_the_committed_records_decide(capsys, name):
  """The reproductions' verdicts quoted in the README (E100, E101; E120) come from records."""
  root = Path(__file__).resolve().parent.parent
  cli.main(["check", "--runs", str(root / "results/records" / name)])
  verdicts = lambda text: [l for l in text.splitlines()
                           if l.split(" ", 1)[0] in ("PASS", "FAIL", "INCONCLUSIVE")]
  ran = verdicts(capsys.readouterr().out)
  assert len(ran) == 19
  assert ran == verdicts((root / "results/tables" / name / "check.txt").read_text())
