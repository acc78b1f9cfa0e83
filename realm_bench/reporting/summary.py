"""The quickstart's summary: every system beside its reference points, with standard errors.

Read from run records only. A system's standard error is the binomial one of its split,
sqrt(p (1 - p) / n); a difference between two systems evaluated on the same questions is
judged by the standard error of the paired per-question differences (the records' outcomes),
which is what decides whether "REALM above ORQA" is an effect or noise on n questions.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError
from realm_bench.reporting.records import RECORD_NAME, RunRecord, read_record

SYSTEMS = (("answer prior", "answer_prior"), ("closed-book", "closed_book"),
           ("BM25 + reader", "bm25_reader"), ("ORQA", "orqa"), ("REALM", "realm"))
RETRIEVERS = (("random", "random_retrieval"), ("BM25", "bm25"), ("ICT (ORQA's)", "ict"),
              ("REALM", "realm"), ("oracle (gold block)", "oracle"))
COMPARED = ("orqa", "bm25_reader", "closed_book")
SUMMARISED = frozenset(e for _, e in SYSTEMS + RETRIEVERS)


def evaluation_records(runs_dir, *, dataset: str = "nq",
                       experiments=SUMMARISED) -> dict[tuple[str, str, str], RunRecord]:
  """(experiment, kind, split) -> record, for the evaluations of `dataset` and `experiments`
  under runs_dir (the other experiments, a sweep's points say, may repeat a key).

  Two records of one key (a folder holding two seeds' or two worlds' runs) are an InputError
  naming both, not a silent pick of one of them."""
  out, where = {}, {}
  for path in sorted(Path(runs_dir).rglob(RECORD_NAME)):
    record = read_record(path)
    if (record.kind == "train" or record.dataset != dataset
        or record.experiment not in experiments):
      continue
    key = (record.experiment, record.kind, record.split)
    if key in out:
      raise InputError(f"a second {record.kind} record of experiment {key[0]!r} on "
                       f"{dataset} {key[2]} (the first: {where[key]}); summarise one seed's "
                       "folder at a time", path=path)
    out[key], where[key] = record, path
  return out


def outcomes(record: RunRecord | None) -> np.ndarray | None:
  if record is None or record.outcomes is None:
    return None
  return np.frombuffer(record.outcomes.encode(), np.uint8) - ord("0")


def binomial_se(percent: float, n: int) -> float:
  p = percent / 100.0
  return 100.0 * math.sqrt(p * (1 - p) / n) if n else math.nan


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
  """(mean difference, its standard error) in points, over the same questions."""
  d = (a.astype(float) - b.astype(float)) * 100.0
  return float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan


def metric_of(record: RunRecord | None, name: str) -> float | None:
  return None if record is None else record.metrics.get(name)


def fmt(value) -> str:
  return "—" if value is None or (isinstance(value, float) and math.isnan(value)) \
      else f"{value:.1f}"


def paired_difference(a: RunRecord | None, b: RunRecord | None) -> tuple[float, float] | None:
  """(A - B, its SE) in points over the same questions; None unless both records carry
  per-question outcomes for the same questions."""
  oa, ob = outcomes(a), outcomes(b)
  if oa is None or ob is None or len(oa) != len(ob):
    return None
  return paired(oa, ob)


def _difference_line(name, better, worse, metric_record_pairs) -> str:
  found = paired_difference(*metric_record_pairs)
  if found is None:
    return f"| {name} | — | — | — | not recorded |"
  diff, se = found
  z = diff / se if se else (0.0 if diff == 0 else math.copysign(math.inf, diff))
  verdict = ("above by more than 2 SE" if z > 2 else "below by more than 2 SE" if z < -2
             else "within 2 SE: not an effect")
  return f"| {name} | {diff:+.1f} | {se:.1f} | {z:+.1f} | {better} {verdict} |"


def quickstart_summary(runs_dir, *, dataset_label: str = "NQ twin") -> str:
  recs = evaluation_records(runs_dir)
  lines = []
  test_n = next((r.num_examples for (e, k, s), r in recs.items() if s == "test"), 0)
  dev_n = next((r.num_examples for (e, k, s), r in recs.items() if s == "dev"), 0)
  lines += [f"## Synthetic {dataset_label}: every system from its run record (one seed)", "",
            f"Exact match (%) on test (n = {test_n}) and dev (n = {dev_n}); ± is one binomial "
            "standard error.", "",
            "| system | EM test | ± SE | EM dev | ± SE |", "|---|---:|---:|---:|---:|"]
  for label, experiment in SYSTEMS:
    test = metric_of(recs.get((experiment, "evaluate", "test")), "exact_match")
    dev = metric_of(recs.get((experiment, "evaluate", "dev")), "exact_match")
    lines.append(f"| {label} | {fmt(test)} | {fmt(test and binomial_se(test, test_n))} | "
                 f"{fmt(dev)} | {fmt(dev and binomial_se(dev, dev_n))} |")
  lines += ["", f"Zero-shot Recall@5 (%) on dev (n = {dev_n}), before any fine-tuning:", "",
            "| retriever | Recall@5 | ± SE | Recall@20 |", "|---|---:|---:|---:|"]
  for label, experiment in RETRIEVERS:
    record = recs.get((experiment, "recall", "dev"))
    r5 = metric_of(record, "recall@5") if experiment != "oracle" else metric_of(record, "recall@1")
    r20 = metric_of(record, "recall@20")
    lines.append(f"| {label} | {fmt(r5)} | {fmt(r5 and binomial_se(r5, dev_n))} | "
                 f"{fmt(r20)} |")
  lines += ["", "Paired differences over the same questions (points; SE of the per-question "
            "difference):", "", "| comparison | difference | SE | z | verdict |",
            "|---|---:|---:|---:|---|"]
  realm_test = recs.get(("realm", "evaluate", "test"))
  for experiment in COMPARED:
    label = dict((e, l) for l, e in SYSTEMS)[experiment]
    lines.append(_difference_line(f"REALM − {label}, EM test", "REALM", experiment,
                                  (realm_test, recs.get((experiment, "evaluate", "test")))))
  lines.append(_difference_line(
      "REALM − ICT retriever, zero-shot Recall@5 dev", "REALM", "ict",
      (recs.get(("realm", "recall", "dev")), recs.get(("ict", "recall", "dev")))))
  return "\n".join(lines)
