"""`infer`: predictions for an Open-QA split, in the ORQA predictions format.

Writes one `{"question", "prediction"}` line per question, the file `realm-bench score` and
the official evaluation read. `evaluate` makes the same predictions (`pipeline.predictions`),
for a retrieve-and-read pipeline or a closed-book one.
"""
from __future__ import annotations

from pathlib import Path

from realm_bench import checkpoints, validate
from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.networks import versions
from realm_bench.pipelines.base import Pipeline
from realm_bench.tasks.data import SPLIT_FILES, SequenceLengths


def load_finetuned(*, model, pipeline: Pipeline, checkpoint_from: str,
                   sequence_lengths: SequenceLengths, split: str = "test"):
  """Parameters of a fine-tuning run and its frozen index (saved by the run itself), checked
  to be this model's: an ICT or pre-training run's checkpoint has no reader to predict with."""
  run = Path(checkpoint_from)
  params = checkpoints.load_params(run / "checkpoints")
  pipeline.setup(model=model, run_dir=run, sequence_lengths=sequence_lengths,
                 warm_start_params=None)
  check_fits(model, pipeline, params, pipeline.examples(split)[:1], where=run / "checkpoints")
  return params


def check_fits(model, pipeline: Pipeline, params, examples, *, where) -> None:
  """InputError naming the first parameter of `model` that `params` lacks or shapes otherwise."""
  import jax  # pylint: disable=g-import-not-at-top
  from flax.core import meta  # pylint: disable=g-import-not-at-top
  if not examples:
    return
  wanted = jax.eval_shape(lambda: meta.unbox(model.init_params(
      jax.random.PRNGKey(0), pipeline.shape_batch(list(examples)))))
  saved, target = checkpoints.param_shapes(params), checkpoints.param_shapes(wanted)
  name = checkpoints.first_mismatch(saved, target)
  if name is not None:
    hint = versions.mismatch_hint(name, saved.get(name), target.get(name),
                                 checkpoint_names=saved, model_names=target)
    if hint is not None:
      raise InputError(f"CHECKPOINT_FROM does not fit this model: {hint}", path=where,
                       field=name)
    describe = lambda e: "absent" if e is None else f"{tuple(e['shape'])} {e['dtype']}"
    raise InputError(f"CHECKPOINT_FROM is not a run of this model (an ICT or pre-training run? "
                     f"evaluate and infer take a fine-tuning run): parameter {name!r} is "
                     f"{describe(saved.get(name))} there but {describe(target.get(name))} in "
                     "the model", path=where, field=name)


def infer(*, model, pipeline: Pipeline, checkpoint_from: str,
          sequence_lengths: SequenceLengths, split: str = "test", output: str,
          batch_size: int = 32) -> Path:
  validate.text("infer", "checkpoint_from",
                None if checkpoint_from is None else str(checkpoint_from))
  validate.text("infer", "split", split, choices=tuple(SPLIT_FILES))
  validate.text("infer", "output", None if output is None else str(output))
  validate.whole("infer", "batch_size", batch_size, minimum=1)
  params = load_finetuned(model=model, pipeline=pipeline, checkpoint_from=checkpoint_from,
                          sequence_lengths=sequence_lengths, split=split)
  rows = pipeline.predictions(model, params, pipeline.examples(split), batch_size=batch_size)
  atomic_write_jsonl(output, [{"question": r["question"], "prediction": r["prediction"]}
                              for r in rows])
  return Path(output)
