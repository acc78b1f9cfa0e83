"""`realm-bench reproduce`: every row of Tables 1 and 2 and the staleness sweep, per seed.

  DIR/world, DIR/vocab.txt         one synthetic world for every seed (--gin.WorldConfig.seed)
  DIR/seed_N/runs/...              seed N's runs: BERT stage, ICT, four REALM pre-trainings
                                   (salient spans, random tokens, random spans, 30x stale),
                                   the fine-tunings of rows.SYSTEMS on each twin, their
                                   evaluations and zero-shot recalls, and the sweep's points
  DIR/tables/                      the tables (md, csv, tex, html + leaderboard.html) and plots
  DIR/check.txt, DIR/check.json    `realm-bench check --runs DIR` on all of it

Why one process: each stage is an entry-function call in this process with one persistent
compile cache (DIR/jax_cache), instead of ~60 processes each paying start-up and compilation.
With `lanes` > 1, as many processes, one per core, share the stages (lanes.py).
Why seed folders: the reporting code treats each seed's folder as one replicate (seeds pair
by folder in `check`), and a seed varies only SEED (model initialisation, dropout and data
order), never the world, so seeds differ by what training does with the same questions.

The plan is listed by a dry pass before anything runs, so the progress lines can say how many
stages are done and left and estimate the time to go (progress.py). Finished stages are
skipped, so a killed reproduction resumes where it stopped; `--dry_run` prints the plan and
its estimate without running it.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable

import gin

from realm_bench import lanes as lanes_lib
from realm_bench import rows as rows_lib, validate
from realm_bench import stages as stages_lib
from realm_bench import sweep as sweep_lib
from realm_bench.errors import InputError
from realm_bench.progress import Planned, Progress, training_units
from realm_bench.stages import DATASET_GIN, QuickstartConfig, Stages


@gin.configurable
@dataclasses.dataclass
class ReproduceConfig:
  """What to reproduce; the stage sizes are QuickstartConfig's (runs/reproduce.gin)."""
  seeds: int = 3
  first_seed: int = 0
  # Table 1's twins; Table 2 and the sweep are on the NQ twin's dev split.
  datasets: tuple[str, ...] = ("nq", "wq", "ct")
  # The stale row refreshes its index this many times less often than REALM's row.
  stale_factor: int = 30
  # Refresh intervals of the sweep, in steps: 1x to 30x REALM's. A value equal to REALM's
  # interval or the stale row's reuses that row's runs. (The refresh-every-step point the sweep
  # once had cost 7-8 minutes a seed and lay outside that range.)
  sweep_values: tuple[int, ...] = (20, 60, 200, 600)
  formats: tuple[str, ...] = ("md", "csv", "tex", "html")
  # Processes that run independent stages side by side, one core and one XLA thread each
  # (lanes.py); 1: every stage in this process, on all cores.
  lanes: int = 1

  def __post_init__(self):
    for name, minimum in (("seeds", 1), ("first_seed", 0), ("stale_factor", 2), ("lanes", 1)):
      validate.whole("ReproduceConfig", name, getattr(self, name), minimum=minimum,
                     field=f"ReproduceConfig.{name}")
    unknown = sorted(set(self.datasets) - set(DATASET_GIN))
    if unknown or not self.datasets:
      raise InputError(f"unknown or no dataset(s) {unknown}; choose from {sorted(DATASET_GIN)}",
                       field="ReproduceConfig.datasets")
    if not self.sweep_values:
      raise InputError("the sweep needs at least one refresh interval",
                       field="ReproduceConfig.sweep_values")
    for value in self.sweep_values:
      validate.whole("ReproduceConfig", "sweep_values", value, minimum=1,
                     field="ReproduceConfig.sweep_values")

  @property
  def seed_list(self) -> list[int]:
    return list(range(self.first_seed, self.first_seed + self.seeds))


class _PlanningStages(Stages):
  """Lists the stages a driver would run, with their sizes, instead of running them."""

  def __init__(self, *args, plan: list[Planned], prefix: str, **kwargs):
    super().__init__(*args, **kwargs)
    self.plan, self.prefix = plan, prefix

  def _add(self, name, kind, units):
    self.plan.append(Planned(name=f"{self.prefix}{name}", kind=kind, units=units,
                             done=self.finished(name)))

  def train(self, name, gin_files, bindings, *, kind: str = "train") -> Path:
    self._add(name, kind, training_units(kind, bindings))
    return self.runs / name

  def evaluate(self, name, experiment, finetuned, split, overlays=(), *, dataset="nq"):
    self._add(name, "evaluate", 1.0)
    return {}

  def recall(self, name, experiment, checkpoint):
    self._add(name, "recall", 1.0)
    return {}


def seed_stages(s: Stages, config: ReproduceConfig) -> None:
  """One seed's stages, in order; every row's records land in s.runs."""
  c = s.config
  bert = stages_lib.bert_stage(s)
  ict = stages_lib.ict_stage(s, bert)
  s.recall("ict_recall_dev", "ict", ict)
  starts = {rows_lib.ICT: ict}
  for p in rows_lib.PRETRAININGS:
    refresh = c.refresh_every * (config.stale_factor if p.stale else 1)
    starts[p.name] = stages_lib.realm_pretrain(s, f"{p.name}_pretrain", ict, bert,
                                               overlays=[p.overlay],
                                               extra=[f"REFRESH_EVERY = {refresh}"])
  tuned = {}
  for system in rows_lib.SYSTEMS:
    if system.recall_of is not None:
      s.recall(f"{system.experiment}_recall_dev", system.experiment, starts[system.recall_of])
    datasets = [d for d in config.datasets if d not in system.not_on] if system.table1 \
        else ["nq"]
    for dataset in datasets:
      extra = [] if system.reader is None else [f"REALM_RUN = '{starts[system.reader]}'"]
      warm = None if system.retriever is None else starts[system.retriever]
      run = s.train(rows_lib.finetune_name(system, dataset),
                    ["runs/finetune.gin", DATASET_GIN[dataset], system.overlay],
                    stages_lib.finetune_bindings(c, warm, bert, extra), kind="finetune")
      tuned[(system.experiment, dataset)] = run
      splits = (["test"] if system.table1 else []) + (
          ["dev"] if system.table2 and dataset == "nq" else [])
      for split in splits:
        s.evaluate(rows_lib.eval_name(system, dataset, split), system.experiment, run,
                   "validation" if split == "dev" else split, system.eval_overlays,
                   dataset=dataset)
  stale = c.refresh_every * config.stale_factor
  reuse = {c.refresh_every: (starts["realm"], tuned[("realm", "nq")]),
           stale: (starts["realm_stale_30x"], tuned[("realm_stale_30x", "nq")])}
  sweep = sweep_lib.SweepConfig(experiment="staleness", values=tuple(config.sweep_values))
  sweep_lib.run_points(s, sweep=sweep, bert=bert, ict=ict, reuse=reuse)


def _seed_config(stages: QuickstartConfig, seed: int) -> QuickstartConfig:
  return dataclasses.replace(stages, seed=seed)


def _shared(out: Path) -> dict[str, Path]:
  """What every seed's stages share: one world, its vocabulary and its corpus token files."""
  return {"world": out / "world", "vocab": out / "vocab.txt", "tokens": out / "corpus_tokens"}


def plan(*, out_dir, config: ReproduceConfig, stages: QuickstartConfig) -> list[Planned]:
  """Every stage of the reproduction, in order, marked done where its record exists."""
  out, planned = Path(out_dir), []
  for seed in config.seed_list:
    seed_dir = out / f"seed_{seed}"
    seed_stages(_PlanningStages(seed_dir, _seed_config(stages, seed), **_shared(out),
                                plan=planned, prefix=f"seed_{seed}/runs/"), config)
  return planned


def _write_check(out: Path) -> tuple[int, str]:
  from realm_bench.io_utils import atomic_write_text  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting import check as check_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting import check_output  # pylint: disable=g-import-not-at-top
  code, verdicts = check_lib.check(runs_dir=out, require_records=True)
  text = (check_lib.format_verdicts(verdicts) + "\n\n"
          + check_lib.format_summary(verdicts, code=code, strict=False))
  atomic_write_text(out / "check.txt", text + "\n")
  atomic_write_text(out / "check.json", check_output.to_json(verdicts, code=code, strict=False))
  return code, text


def _lane_stages(out: Path, config: ReproduceConfig, stages: QuickstartConfig,
                 progress: Progress, lane: int) -> None:
  """Lane `lane`'s share of every seed's stages (lanes.py), then it exits."""
  def walk_once(walk):
    for seed in config.seed_list:
      prefix = f"seed_{seed}/runs/"
      seed_stages(lanes_lib.LaneStages(
          out / f"seed_{seed}", _seed_config(stages, seed), **_shared(out), walk=walk,
          label=f"reproduce lane {lane} seed {seed}",
          on_stage=lambda name, kind, sec, skip, p=prefix: progress.stage_done(
              p + name, kind, sec, skip, done=_done(out, progress))), config)
  stages_lib.use_compile_cache(out)
  lanes_lib.work(walk_once)


def _done(out: Path, progress: Progress) -> set[str]:
  """The planned stages with a record, whichever lane ran them."""
  return {name for name in progress.plan if (out / name / "record.json").exists()}


def run(*, out_dir, config: ReproduceConfig, stages: QuickstartConfig, world_config,
        dry_run: bool = False, command: str | None = None,
        lane_command: Callable[[int], list[str]] | None = None,
        lane: int | None = None) -> list[Path]:
  """Runs (or with dry_run, lists) every stage of every seed, then writes the tables, plots
  and check output; returns the files written. The check's verdicts do not fail the run:
  `realm-bench check --runs DIR --strict` is the gate. With `config.lanes` > 1 the stages
  after each seed's world and reference points run in that many processes started with
  `lane_command(i)`, each of which calls this with `lane=i` (lanes.py)."""
  from realm_bench.reporting.render import render_tables  # pylint: disable=g-import-not-at-top
  clock = time.perf_counter()
  out = Path(out_dir)
  planned = plan(out_dir=out, config=config, stages=stages)
  if lane is not None:
    _lane_stages(out, config, stages, Progress(planned, label=f"reproduce lane {lane}",
                                               lanes=config.lanes), lane)
    return []
  progress = Progress(planned)
  head = Stages(out, stages, label="reproduce")
  head.say(f"{len(config.seed_list)} seed(s) {config.seed_list}, world seed "
           f"{world_config.seed}: {progress.summary()}")
  lanes_lib.check_lane_count(out, config.lanes, write=not dry_run)
  if dry_run:
    kinds = {}
    for p in planned:
      kinds[p.kind] = kinds.get(p.kind, 0) + (not p.done)
    head.say("stages left by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    return []
  stages_lib.use_compile_cache(out)
  for seed in config.seed_list:
    prefix = f"seed_{seed}/runs/"
    s = Stages(out / f"seed_{seed}", _seed_config(stages, seed), **_shared(out),
               label=f"reproduce seed {seed}",
               on_stage=lambda name, kind, sec, skip, p=prefix: progress.stage_done(
                   p + name, kind, sec, skip))
    stages_lib.make_world(s, world_config)
    stages_lib.reference_points(s)
    if config.lanes == 1:
      seed_stages(s, config)
  if config.lanes > 1:
    if lane_command is None:
      raise ValueError("lanes > 1 needs the command that starts a lane")
    if cleared := lanes_lib.clear_claims(out):
      head.say(f"cleared {cleared} claim(s) a stopped reproduction left")
    head.say(f"{config.lanes} lanes, one core and one XLA thread each")
    lanes_lib.run_lanes(lane_command, config.lanes)
  command = command or f"realm-bench reproduce --seeds {config.seeds} --out {out_dir}"
  files = render_tables(runs_dir=out, formats=list(config.formats), out_dir=out / "tables",
                        command=command)
  code, text = _write_check(out)
  print(text, flush=True)
  files += [out / "check.txt", out / "check.json"]
  head.say(f"finished in {time.perf_counter() - clock:.0f} s; {len(files)} files under "
           f"{out / 'tables'} and {out}/check.*; check exit code {code} (claims are not "
           f"gated here: `realm-bench check --runs {out_dir} --strict`)")
  return files


def validate_seeds(value) -> int:
  """--seeds from the command line: a whole number of at least 1, or a clear error."""
  validate.whole("reproduce", "seeds", value, minimum=1, field="--seeds")
  return value

