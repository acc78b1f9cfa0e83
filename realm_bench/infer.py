"""`infer`: predictions for an Open-QA split, in the ORQA predictions format.

Writes one `{"question", "prediction"}` line per question, the file `realm-bench score` and
the official evaluation read. `evaluate` makes the same predictions (`pipeline.predictions`),
for a retrieve-and-read pipeline or a closed-book one.
"""
from __future__ import annotations

from pathlib import Path

from realm_bench import checkpoints
from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.pipelines.base import Pipeline
from realm_bench.tasks.data import SequenceLengths


def load_finetuned(*, model, pipeline: Pipeline, checkpoint_from: str,
                   sequence_lengths: SequenceLengths):
  """Parameters of a fine-tuning run and its frozen index (saved by the run itself)."""
  run = Path(checkpoint_from)
  params = checkpoints.load_params(run / "checkpoints")
  pipeline.setup(model=model, run_dir=run, sequence_lengths=sequence_lengths,
                 warm_start_params=None)
  return params


def infer(*, model, pipeline: Pipeline, checkpoint_from: str,
          sequence_lengths: SequenceLengths, split: str = "test", output: str,
          batch_size: int = 32) -> Path:
  params = load_finetuned(model=model, pipeline=pipeline, checkpoint_from=checkpoint_from,
                          sequence_lengths=sequence_lengths)
  rows = pipeline.predictions(model, params, pipeline.examples(split), batch_size=batch_size)
  atomic_write_jsonl(output, [{"question": r["question"], "prediction": r["prediction"]}
                              for r in rows])
  return Path(output)
