"""Masked-LM batches without retrieval (MLM_BATCH): the BERT stage, and closed-book QA.

- `MlmPipeline`: BERT's pre-training on the pre-training text (masked by the task's MASKING,
  random tokens for the BERT stage). Its encoder warm-starts every reader and the ICT
  retriever, as BERT-base does in the paper.
- `ClosedBookPipeline`: a question followed by `answer_len` [MASK] slots; the model fills in
  the answer's wordpieces and a closing [SEP] from its parameters alone (the paper's T5 rows
  answer from memory too). It can only know what pre-training stated, which is the point of
  the comparison with REALM.
"""
from __future__ import annotations

import dataclasses

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.pipelines import base, batching
from realm_bench.tasks.metrics import to_text
from realm_bench.tasks.open_qa import answers_are_regex, spec_of


@gin.configurable
@dataclasses.dataclass
class MlmPipeline(base.Pipeline):
  pretrain_task: str = "realm_bench.synthetic.pretrain"
  max_masks: int = 10

  @property
  def task_name(self):
    return self.pretrain_task

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del run_dir, warm_start_params
    base.check_task_vocabulary(self.pretrain_task, model.vocabulary)
    self.lengths = sequence_lengths
    self.examples = base.task_examples(self.pretrain_task, "train",
                                       sequence_lengths.for_queries())

  def stream(self, *, batch_size, seed):
    self.num_examples = len(self.examples)
    return base.example_stream(self.examples, batch_size=batch_size, seed=seed)

  def prepare(self, step, params, raw):
    del step, params
    return batching.mlm_batch(raw, input_len=self.lengths.query, max_masks=self.max_masks)


@gin.configurable
@dataclasses.dataclass
class ClosedBookPipeline(base.Pipeline):
  """`[CLS] question [SEP] [MASK] x answer_len [SEP]`; targets: the first answer's wordpieces,
  then [SEP] (what decoding stops at), cut to `answer_len` slots."""
  qa_task: str = "realm_bench.synthetic.nq_open"
  answer_len: int = 8

  @property
  def task_name(self):
    return self.qa_task

  @property
  def dataset(self):
    return spec_of(self.qa_task).dataset

  @property
  def regex_answers(self) -> bool:
    return answers_are_regex(self.qa_task)

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del run_dir, warm_start_params
    if self.answer_len < 2:
      raise InputError(f"must be at least 2 (a wordpiece and [SEP]), got {self.answer_len}",
                       field="ClosedBookPipeline.answer_len")
    base.check_task_vocabulary(self.qa_task, model.vocabulary)
    self.lengths = sequence_lengths
    self.vocabulary = model.vocabulary
    self.specials = base.specials_of(model.vocabulary)
    self.index = None

  def examples(self, split: str) -> list[dict]:
    return base.task_examples(self.qa_task, split, self.lengths.for_queries())

  def stream(self, *, batch_size, seed):
    if self.regex_answers:
      raise InputError(f"closed-book training needs answer strings; {self.qa_task!r} has "
                       "regular expressions", field="qa_task")
    examples = self.examples("train")
    self.num_examples = len(examples)
    return base.example_stream(examples, batch_size=batch_size, seed=seed)

  def batch(self, raw, *, with_gold: bool) -> dict:
    s, n = self.specials, self.answer_len
    inputs, targets = [], []
    for e in raw:
      q = np.asarray(e["inputs"])
      inputs.append(np.concatenate([q, np.full(n, s.mask), [s.sep]]))
      answer = (list(self.vocabulary.encode(to_text(e["answers"][0])))[:n - 1] + [s.sep]
                if with_gold else [])
      targets.append(np.concatenate([np.zeros(len(q), np.int64),
                                     np.pad(answer, (0, n - len(answer))), [0]]))
    length = self.lengths.query + n + 1
    batch = {"input_ids": batching.pad_rows(inputs, length)}
    positions = np.stack([len(np.asarray(e["inputs"])) + np.arange(n) for e in raw])
    batch["mlm_positions"] = positions.astype(np.int32)
    batch["mlm_targets"] = np.take_along_axis(batching.pad_rows(targets, length), positions,
                                              axis=1)
    batch["mlm_weights"] = (batch["mlm_targets"] > 0).astype(np.float32)
    return batch

  def prepare(self, step, params, raw):
    del step, params
    return self.batch(raw, with_gold=True)

  def decode(self, tokens: np.ndarray) -> str:
    ids = []
    for token in tokens.tolist():
      if token == self.specials.sep:
        break
      ids.append(token)
    return self.vocabulary.decode(ids)

  def predictions(self, model, params, examples, *, batch_size: int) -> list[dict]:
    """[{question, prediction, answers, retrieved}] for every example, in order."""
    import jax  # pylint: disable=g-import-not-at-top
    predict = jax.jit(model.predict_batch)
    rows = []
    for start in range(0, len(examples), batch_size):
      chunk = list(examples[start:start + batch_size])
      real = len(chunk)
      chunk += [chunk[-1]] * (batch_size - real)     # one compiled shape for every batch
      tokens = np.asarray(jax.device_get(predict(params, self.batch(chunk, with_gold=False)))
                          ["tokens"])
      for i in range(real):
        rows.append({"question": to_text(chunk[i]["question"]),
                     "prediction": self.decode(tokens[i]),
                     "answers": [to_text(a) for a in chunk[i]["answers"]], "retrieved": []})
    return rows
