"""`realm-bench sweep`: the index-staleness sweep, one REALM pre-training per refresh interval.

REALM's ablation "30x stale MIPS" (NQ dev EM 38.2 -> 28.7) is one point of a curve: how much
does learning suffer when the retriever trains against an index embedded N steps ago? Each
value of `refresh_every_steps` gets its own pre-training (warm-started from one shared ICT
run), a zero-shot Recall@5 on NQ dev, a fine-tuning and an exact match on NQ dev, all recorded
under one experiment so `realm-bench tables` draws the sweep table and its plot. The stage
sizes are the quickstart's (`QuickstartConfig`), so a sweep point is a quickstart REALM run
with one knob moved; finished stages are skipped, so a killed sweep resumes.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Mapping

import gin

from realm_bench import quickstart
from realm_bench import stages as stages_lib
from realm_bench.errors import InputError


@gin.configurable
@dataclasses.dataclass
class SweepConfig:
  experiment: str = "staleness"
  # 1x, 3x, 10x and 30x the quickstart's refresh interval (20 steps).
  values: tuple[int, ...] = (20, 60, 200, 600)
  # Extra pre-training bindings shared by every point, e.g. the refresh mode or index kind.
  pretrain_bindings: tuple[str, ...] = ()


def parse_values(text: str) -> tuple[int, ...]:
  try:
    values = tuple(int(v) for v in text.split(",") if v.strip())
  except ValueError:
    raise InputError(f"expected comma-separated whole numbers, got {text!r}",
                     field="--values") from None
  if not values or min(values) < 1:
    raise InputError(f"refresh intervals must be at least 1 step, got {text!r}",
                     field="--values")
  return values


def run_points(s: stages_lib.Stages, *, sweep: SweepConfig, bert: Path, ict: Path,
               reuse: Mapping[int, tuple[Path, Path]] | None = None) -> None:
  """Every point's stages, skipping finished ones. `reuse` maps a refresh interval to the
  (pre-training, fine-tuning) runs of a table row made with exactly that recipe (REALM's
  row, the 30x stale row), whose checkpoints the point evaluates instead of training twins."""
  c = s.config
  reuse = {} if sweep.pretrain_bindings else dict(reuse or {})
  for value in sweep.values:
    name = f"{sweep.experiment}_refresh_{value:04d}"
    experiment = [f"EXPERIMENT = '{sweep.experiment}'"]
    if value in reuse:
      pretrain, tuned = reuse[value]
    else:
      pretrain = stages_lib.realm_pretrain(
          s, f"{name}_pretrain", ict, bert,
          extra=[f"REFRESH_EVERY = {value}", *experiment, *sweep.pretrain_bindings])
    s.recall(f"{name}_recall_dev", sweep.experiment, pretrain)
    if value not in reuse:
      tuned = s.train(f"{name}_finetune", ["runs/finetune.gin"],
                      stages_lib.finetune_bindings(c, pretrain, bert) + experiment,
                      kind="finetune")
    s.evaluate(f"{name}_eval_dev", sweep.experiment, tuned, "validation")


def run(*, out_dir, sweep: SweepConfig, stages: quickstart.QuickstartConfig,
        world_config) -> list[Path]:
  """Runs every sweep point (skipping finished stages); returns the table files written."""
  from realm_bench.reporting.render import render_tables  # pylint: disable=g-import-not-at-top
  clock = time.perf_counter()
  s, bert, ict = quickstart.start(out_dir, stages, world_config)
  run_points(s, sweep=sweep, bert=bert, ict=ict)
  values = ",".join(str(v) for v in sweep.values)
  files = render_tables(runs_dir=s.runs, formats=["md"], out_dir=s.out / "tables",
                        command=f"realm-bench sweep --out {out_dir} --values={values}",
                        echo=True)
  print(f"sweep finished in {time.perf_counter() - clock:.0f} s; runs in {s.runs}", flush=True)
  return files
