"""Each system on two paired worlds (same facts, questions and splits, e.g. the topical world
and the default one of the same seed): A − B per world seed and the mean over the seeds.

  python results/experiments/paired_worlds.py A_FOLDER B_FOLDER

A_FOLDER and B_FOLDER hold one quickstart's records per world seed (`seed_N`); the seeds both
have are paired. Per seed: A − B ± the SE of the per-question difference (the questions are
the same); over the seeds: the mean and its 95% t-interval.
"""
import sys
from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.reporting import stats, summary

SYSTEMS = (("bm25_reader", "evaluate", "test"), ("orqa", "evaluate", "test"),
           ("realm", "evaluate", "test"), ("ict", "recall", "dev"), ("realm", "recall", "dev"))


def main(a_folder: Path, b_folder: Path) -> None:
  seeds = sorted({p.name for p in a_folder.glob("seed_*")}
                 & {p.name for p in b_folder.glob("seed_*")})
  if not seeds:
    raise InputError("no seed_N folder in both", path=f"{a_folder} and {b_folder}")
  recs = {s: (summary.evaluation_records(a_folder / s), summary.evaluation_records(b_folder / s))
          for s in seeds}
  for system in SYSTEMS:
    label = f"{system[0]} {'EM test' if system[1] == 'evaluate' else 'R@5 dev'}"
    values, cells = [], []
    for s in seeds:
      a, b = (r.get(system) for r in recs[s])
      found = None if a is None or b is None else summary.paired_difference(a, b)
      if found is None:
        raise InputError(f"no paired {label} records", path=f"{a_folder / s}, {b_folder / s}")
      values.append(found[0])
      cells.append(f"{s}: {found[0]:+.1f} ± {found[1]:.1f}")
    iv = stats.t_interval(values, confidence=0.95, what="worlds")
    mean = sum(values) / len(values)
    over = "" if iv is None else f" [{iv.low:+.1f}, {iv.high:+.1f}] ({iv.method})"
    print(f"{label}: A − B {'; '.join(cells)}; mean {mean:+.1f}{over}")


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  try:
    main(Path(sys.argv[1]), Path(sys.argv[2]))
  except InputError as e:
    sys.exit(f"paired_worlds.py: {e}")
