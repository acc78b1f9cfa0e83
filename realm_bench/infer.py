"""`infer`: predictions for an Open-QA split, in the ORQA predictions format.

Writes one `{"question", "prediction"}` line per question, the file `realm-bench score` and
the official evaluation read. `evaluate` calls the same `predict_answers`.
"""
from __future__ import annotations

from pathlib import Path

import jax

from realm_bench import checkpoints
from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.models import OpenQAModel
from realm_bench.pipelines import batching
from realm_bench.pipelines.open_qa import OpenQAPipeline
from realm_bench.tasks.data import SequenceLengths
from realm_bench.tasks.metrics import to_text


def load_finetuned(*, model: OpenQAModel, pipeline: OpenQAPipeline, checkpoint_from: str,
                   sequence_lengths: SequenceLengths):
  """Parameters of a fine-tuning run and its frozen index (saved by the run itself)."""
  run = Path(checkpoint_from)
  params = checkpoints.load_params(run / "checkpoints")
  pipeline.setup(model=model, run_dir=run, sequence_lengths=sequence_lengths,
                 warm_start_params=None)
  return params


def predict_answers(*, model: OpenQAModel, pipeline: OpenQAPipeline, params, examples,
                    batch_size: int) -> list[dict]:
  """[{question, prediction, answers, block_ids}] for every example, in order."""
  predict = jax.jit(model.predict_batch)
  rows = []
  for start in range(0, len(examples), batch_size):
    chunk = list(examples[start:start + batch_size])
    real = len(chunk)
    chunk += [chunk[-1]] * (batch_size - real)     # one compiled shape for every batch
    batch, retrieved = pipeline.batch(params, chunk, with_gold=False)
    out = jax.device_get(predict(params, batch))
    for i in range(real):
      prediction = ""
      if out["has_span"][i]:
        read = out["block"][i]
        offset = batch["body_start"][i, read]   # spans index the reader input; cut the body
        prediction = batching.answer_text(pipeline.corpus, retrieved[i, read],
                                          out["start"][i] - offset, out["end"][i] - offset)
      rows.append({"question": to_text(chunk[i]["question"]), "prediction": prediction,
                   "answers": [to_text(a) for a in chunk[i]["answers"]],
                   "retrieved": [int(b) for b in retrieved[i] if b >= 0]})
  return rows


def infer(*, model: OpenQAModel, pipeline: OpenQAPipeline, checkpoint_from: str,
          sequence_lengths: SequenceLengths, split: str = "test", output: str,
          batch_size: int = 32) -> Path:
  params = load_finetuned(model=model, pipeline=pipeline, checkpoint_from=checkpoint_from,
                          sequence_lengths=sequence_lengths)
  rows = predict_answers(model=model, pipeline=pipeline, params=params,
                         examples=pipeline.examples(split), batch_size=batch_size)
  atomic_write_jsonl(output, [{"question": r["question"], "prediction": r["prediction"]}
                              for r in rows])
  return Path(output)
