"""Recall@5 of REALM-stage variants against ICT over worlds and seeds, in markdown.

  python results/experiments/seed_recall.py REFERENCE GROUP=RUN,RUN,... [GROUP=...] \
      [--versus GROUP_A:GROUP_B] [--confidence C] -- OUT ...

Each OUT is a world's experiment folder (its `runs/` holds the recall records) or a records
folder holding them directly (`results/records/...`; a missing record is named on stderr and
its pair skipped); REFERENCE is the recall run every variant is paired with (the world's ICT,
`ict_recall_dev`); a GROUP lists the recall runs of one recipe, one per seed (a run name may
be a glob pattern that matches one run in each folder). Prints, per group, every run's
Recall@5 and its paired difference from the reference (points +- SE over the same
questions), each world's mean over its runs (seeds) with a 95% t-interval over them and the
verdict it gives (PASS above zero, FAIL below, INCONCLUSIVE), then the mean difference with
two 95% t-intervals: over all runs (world and seed spread pooled) and over the world means
(the conservative one: worlds are the units a recipe must hold on).
`--versus A:B` also pairs two recipes directly, run by run (the n-th run of A with the n-th of
B, i.e. the same seed), for a difference between recipes that does not go through the
reference's own noise. `--confidence C` (default 0.95) sets every interval's level, e.g. 0.975
to split α over two looks at the same claim.
"""
import math
import sys
from pathlib import Path

import numpy as np

from realm_bench.reporting import claims, stats, summary
from realm_bench.reporting.records import RECORD_NAME, read_record


CONFIDENCE = 0.95


def _interval(values):
  found = stats.t_interval(list(values), confidence=CONFIDENCE, what="runs")
  return (math.nan, math.nan) if found is None else (found.low, found.high)


def main(reference, groups, outs, versus=()):
  runs = dict(groups)
  for a, b in versus:
    if a not in runs or b not in runs:
      sys.exit(f"--versus {a}:{b}: name two of the groups ({', '.join(runs)})")
    _differences(f"{a} - {b}", outs, [(x, y) for x, y in zip(runs[a], runs[b])])
  for group, runs in groups:
    _differences(group, outs, [(run, reference) for run in runs])


def _record(runs_dir: Path, name: str) -> Path | None:
  """The record of run `name` in `runs_dir`, or None; a glob pattern (runs named by a seed
  that differs between folders, e.g. "bert_seed?_ict_recall_dev") must match one run."""
  found = sorted(runs_dir.glob(f"{name}/{RECORD_NAME}"))
  if len(found) > 1:
    sys.exit(f"{runs_dir}: {name!r} matches {len(found)} runs "
             f"({', '.join(p.parent.name for p in found)}); name one")
  return found[0] if found else None


def _differences(title, outs, pairs):
  """Each OUT's paired differences of the (run, against) pairs, and their intervals."""
  print(f"\n{title}\n")
  print("| world | run | R@5 | against R@5 | difference |")
  print("|---|---|---:|---:|---:|")
  diffs, world_means = [], []
  for out in outs:
    # An experiment folder keeps its runs in runs/; a records folder holds them directly.
    runs_dir = Path(out) / "runs" if (Path(out) / "runs").is_dir() else Path(out)
    here = []
    for run, against in pairs:
      path, ref_path = _record(runs_dir, run), _record(runs_dir, against)
      if path is None or ref_path is None:
        print(f"{out}: no record for {run if path is None else against}; pair skipped",
              file=sys.stderr)
        continue
      rec, ref = read_record(path), read_record(ref_path)
      d, se = summary.paired_difference(rec, ref)
      here.append(d)
      print(f"| {Path(out).name} | {run} | {rec.metrics['recall@5']:.1f} | "
            f"{ref.metrics['recall@5']:.1f} | {d:+.1f} ± {se:.1f} |")
    diffs += here
    if here:
      world_means.append(float(np.mean(here)))
    if len(here) > 1:
      slo, shi = _interval(here)
      print(f"| {Path(out).name} | mean of {len(here)} runs, {100 * CONFIDENCE:g}% interval over them | | | "
            f"{np.mean(here):+.1f} [{slo:+.1f}, {shi:+.1f}] {claims.verdict(slo, shi)} |")
  if not diffs:
    sys.exit(f"{title}: none of the runs has a recall record in these folders")
  lo, hi = _interval(diffs)
  wlo, whi = _interval(world_means)
  print(f"\nmean difference {np.mean(diffs):+.2f} over {len(diffs)} runs, {100 * CONFIDENCE:g}% interval over "
        f"runs [{lo:+.2f}, {hi:+.2f}]; over the {len(world_means)} world means "
        f"[{wlo:+.2f}, {whi:+.2f}]")


if __name__ == "__main__":
  args = sys.argv[1:]
  if "--" not in args or len(args) < 4:
    sys.exit(__doc__)
  cut = args.index("--")
  ref, specs, outs = args[0], iter(args[1:cut]), args[cut + 1:]
  groups, pairs = [], []
  for spec in specs:
    if spec == "--versus":
      pairs.append(tuple(next(specs, ":").split(":", 1)))
    elif spec == "--confidence":
      value = next(specs, "")
      try:
        CONFIDENCE = float(value)
      except ValueError:
        CONFIDENCE = math.nan
      if not 0 < CONFIDENCE < 1:
        sys.exit(f"seed_recall.py: --confidence: a level between 0 and 1, got {value!r}")
    else:
      name, _, runs = spec.partition("=")
      groups.append((name, runs.split(",")))
  main(ref, groups, outs, pairs)
