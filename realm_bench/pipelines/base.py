"""The Pipeline contract, and reading seqio tasks into memory for it.

A pipeline pairs a model with the seqio tasks it learns from and does what the model needs on
the host between steps. The training loop (`train.py`) calls, in order:

  setup(model=, run_dir=, sequence_lengths=, warm_start_params=)   read tasks, build indexes
  stream(batch_size=, seed=)                                       raw example batches
  hooks()                                                          StepHooks, e.g. the refresh
  prepare(step, params, raw) -> batch                              e.g. retrieval with params
  summary()                                                        for the run record
  close()

Examples are read through seqio once and kept in memory; the order is a seeded permutation per
epoch, so a resumed run replays exactly the batches an uninterrupted one would see.
"""
from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from realm_bench.errors import InputError
from realm_bench.iteration import DeterministicIterator, StepHook
from realm_bench.pipelines import batching
from realm_bench.tasks.data import SequenceLengths
from realm_bench.tasks.metrics import to_text


def task_examples(task_name: str, split: str, sequence_length: Mapping[str, int]) -> list[dict]:
  """Every example of a seqio task split, as numpy, in file order."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  task = seqio.get_mixture_or_task(task_name)
  dataset = task.get_dataset(sequence_length=dict(sequence_length), split=split, shuffle=False,
                             num_epochs=1, use_cached=False)
  return list(dataset.as_numpy_iterator())


def load_corpus(task_name: str, lengths: SequenceLengths) -> batching.Corpus:
  """The knowledge corpus, tokenised once, with `[CLS] title [SEP] body [SEP]` padded to the
  block length."""
  blocks = task_examples(task_name, "train", lengths.for_blocks())
  return batching.Corpus(
      ids=np.array([b["id"] for b in blocks], np.int64),
      titles=[to_text(b["title"]) for b in blocks],
      bodies=[to_text(b["body"]) for b in blocks],
      doc_inputs=batching.pad_rows([b["inputs"] for b in blocks], lengths.block),
      title_ids=[np.asarray(b["title_ids"], np.int32) for b in blocks],
      body_ids=[np.asarray(b["body_ids"], np.int32) for b in blocks],
      body_starts=[np.asarray(b["body_starts"], np.int64) for b in blocks],
      body_ends=[np.asarray(b["body_ends"], np.int64) for b in blocks])


def specials_of(vocabulary) -> batching.Specials:
  if vocabulary is None:
    raise InputError("the model has no vocabulary; bind it in gin (VOCABULARY / VOCAB_PATH)",
                     field="vocabulary")
  return batching.Specials(cls=vocabulary.cls_id, sep=vocabulary.sep_id,
                           mask=vocabulary.mask_id)


def check_task_vocabulary(task_name: str, vocabulary) -> None:
  """The task tokenises with the same vocabulary file the model's embeddings are sized for."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  task_vocab = seqio.get_mixture_or_task(task_name).output_features["inputs"].vocabulary
  task_vocab = task_vocab.resolve() if hasattr(task_vocab, "resolve") else task_vocab
  if Path(task_vocab.path) != Path(vocabulary.path):
    raise InputError(f"task {task_name!r} tokenises with {task_vocab.path}, the model's "
                     f"vocabulary is {vocabulary.path}", field="vocabulary")


def example_stream(examples: Sequence[Any], *, batch_size: int, seed: int):
  """A resumable stream of example batches: epoch e visits a permutation seeded by (seed, e)."""
  n = len(examples)
  if n == 0:
    raise ValueError("no examples to train on")

  def make_iterator(seed: int, position: int):
    epoch, offset = divmod(position * batch_size, n)
    order = np.random.default_rng([seed, epoch]).permutation(n)
    while True:
      batch = []
      while len(batch) < batch_size:
        if offset == n:
          epoch, offset = epoch + 1, 0
          order = np.random.default_rng([seed, epoch]).permutation(n)
        batch.append(examples[order[offset]])
        offset += 1
      yield batch

  return DeterministicIterator(make_iterator, seed=seed)


class Pipeline(abc.ABC):
  """What the training loop needs from a model's inputs.

  `task_name`, `dataset` (the Open-QA dataset it trains on, or None) and `num_examples`
  (set by `stream`) are what the run record says of its data.
  """
  dataset: str | None = None
  num_examples: int = 0

  @property
  @abc.abstractmethod
  def task_name(self) -> str:
    """The seqio task the examples come from."""

  @abc.abstractmethod
  def setup(self, *, model, run_dir: Path, sequence_lengths: SequenceLengths,
            warm_start_params=None) -> None:
    """Reads the tasks and builds what `prepare` needs (corpus, index, featurisers)."""

  @abc.abstractmethod
  def stream(self, *, batch_size: int, seed: int) -> DeterministicIterator:
    """Raw example batches, resumable at a position."""

  @abc.abstractmethod
  def prepare(self, step: int, params, raw: list) -> dict:
    """The model batch for `step` (its spec is in `batching`): retrieval happens here."""

  def shape_batch(self, raw: list) -> dict:
    """A batch of the right shapes without parameters, for initialising the model."""
    return self.prepare(0, None, raw)

  def hooks(self) -> list[StepHook]:
    """Host-side work around each step (REALM's index refresh)."""
    return []

  def summary(self) -> dict:
    """For the run record: {"params": ..., "stats": ..., "index_manifests": [...]}."""
    return {}

  def close(self) -> None:
    """Releases what `setup` started."""
