"""A staleness sweep's Recall@5 over seeds, per world, decided by the spec's trend rule.

  python results/experiments/sweep_seeds.py PATTERN POINTS SEEDS -- WORLD [WORLD ...]

PATTERN names one recall record in a WORLD folder (or its runs/), with {point} and {seed} in
it (e.g. "realm_refresh{point}_seed{seed}_recall_dev"); POINTS the refresh intervals in order
("20,60,200,600"), SEEDS the seeds ("0,1,2"). Per world it prints each point's R@5 per seed,
mean and SD over the seeds; each neighbouring pair's difference, paired by seed (the same
data order) with its mean and 95% t-interval over the seeds; and the trend of the per-point
means as `realm-bench check` decides the sweep claim (claims.judge_trend: Spearman ρ, one-sided
exact permutation p, PASS at p <= alpha). Why a script beside `check`: these runs are quickstart
REALM recall runs, not the `staleness` experiment's fine-tuned sweep records the spec reads.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting import claims, stats, summary
from realm_bench.reporting.records import RECORD_NAME, read_record
from realm_bench.reporting.specs import TrendClaim


def _records(world: Path, pattern: str, points, seeds):
  # An experiment or records folder keeps its runs in runs/; a bare folder holds them directly.
  world = world / "runs" if (world / "runs").is_dir() else world
  found = {}
  for point in points:
    for seed in seeds:
      path = world / pattern.format(point=point, seed=seed) / RECORD_NAME
      if not path.exists():
        raise InputError("no such record", path=path)
      found[point, seed] = read_record(path)
  return found


def _interval(values) -> str:
  iv = stats.t_interval(list(values), confidence=0.95, what="seeds")
  return "" if iv is None else f"[{iv.low:+.1f}, {iv.high:+.1f}]"


def main(pattern: str, points: list[int], seeds: list[int], worlds: list[str]) -> None:
  claim = TrendClaim(id="recall_decreases_with_refresh_interval", text="", scale="any",
                     dataset="nq", split="dev", metric="recall@5",
                     experiment="staleness", param="refresh_every_steps",
                     direction="decreasing", correlation="spearman")
  config = stats.StatsConfig()
  for world in map(Path, worlds):
    recs = _records(world, pattern, points, seeds)
    r5 = {k: r.metrics["recall@5"] for k, r in recs.items()}
    print(f"\n{world.name}: Recall@5 per refresh interval (seeds {seeds})\n")
    print("| refresh every | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | SD |")
    print("|---:|" + "---:|" * (len(seeds) + 2))
    for p in points:
      v = np.array([r5[p, s] for s in seeds])
      sd = f"{v.std(ddof=1):.1f}" if len(v) > 1 else "-"
      print(f"| {p} | " + " | ".join(f"{x:.1f}" for x in v) + f" | {v.mean():.1f} | {sd} |")
    print("\n| pair | per seed (± paired SE) | mean [95% t over seeds] |")
    print("|---|---|---|")
    for a, b in zip(points, points[1:]):
      diffs = [summary.paired_difference(recs[a, s], recs[b, s]) for s in seeds]
      cells = ", ".join(f"{d:+.1f} ± {se:.1f}" for d, se in diffs)
      print(f"| {a} − {b} | {cells} | {np.mean([d for d, _ in diffs]):+.1f} "
            f"{_interval(d for d, _ in diffs)} |")
    rows = pd.DataFrame({"params.refresh_every_steps": [p for p in points for _ in seeds],
                         "value": [r5[p, s] for p in points for s in seeds]})
    verdict = claims.judge_trend(claim, rows, config=config, key=f"{world.name}/sweep")
    print(f"\ntrend: ρ {verdict['ours']:+.2f}, p {verdict['p_value']:.3f}: "
          f"{verdict['verdict']} ({verdict['method']}"
          + (f"; {verdict['note']})" if verdict["note"] else ")"))


def _whole_numbers(text: str, field: str) -> list[int]:
  try:
    return [int(x) for x in text.split(",")]
  except ValueError:
    raise InputError(f"comma-separated whole numbers, got {text!r}", field=field) from None


def parse(args: list[str]) -> tuple[str, list[int], list[int], list[str]]:
  """The command line, or an InputError naming the argument that is wrong. A PATTERN without
  {point} or {seed} would read one record for several cells and print a flat sweep."""
  pattern, points, seeds, worlds = args[0], args[1], args[2], args[4:]
  for key in ("{point}", "{seed}"):
    if key not in pattern:
      raise InputError(f"must contain {key}, got {pattern!r}", field="PATTERN")
  return pattern, _whole_numbers(points, "POINTS"), _whole_numbers(seeds, "SEEDS"), worlds


if __name__ == "__main__":
  args = sys.argv[1:]
  if "--" not in args or args.index("--") != 3 or len(args) < 5:
    sys.exit(__doc__)
  try:
    main(*parse(args))
  except InputError as e:
    sys.exit(f"sweep_seeds.py: {e}")
