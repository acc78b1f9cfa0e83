"""Masked-LM batches without retrieval (MLM_BATCH): the BERT stage, and closed-book QA.

- `MlmPipeline`: BERT's pre-training on the pre-training text (masked by the task's MASKING)
  and, with `corpus_task`, on the knowledge corpus's blocks as `[CLS] title [SEP] body [SEP]`
  (BERT-base was trained on Wikipedia, the corpus REALM retrieves from). Its encoder
  warm-starts every reader and the ICT retriever. The blocks matter: a name masked in a body
  can be read off the title, so the encoder learns to carry a token across segments, which a
  reader of retrieved blocks needs, and it keeps names apart, which sentences alone (where a
  masked name cannot be predicted) teach it to blur. With `pair_restatements` each sentence
  is a short document with another sentence stating the same fact (segment 1), as BERT's
  inputs are multi-sentence documents: with salient-span masking the encoder learns to fill
  an entity in from the other segment, and a reader warm-started from it reads retrieved
  blocks from REALM's first steps (results/EXPERIMENTS.md, E34-E35). With `negative_rate`
  that fraction of second segments is a sentence about another fact of another block, as
  half of BERT's second segments are random (next-sentence prediction): the encoder then
  learns to fill from the other segment only when it is about the same thing, which is what a
  reader of retrieved blocks, most of which do not hold the fact, has to decide. Those
  batches say which rows are random (`next_is_random`, over the rows with a second segment,
  `next_sentence_weights`), for BERT's next-sentence loss (`MlmModel.next_sentence_weight`).
  With `namesake_negative_rate`, of the sentences with a namesake that fraction are paired with
  a namesake's statement instead (`namesake_sentences`; labelled random for the next-sentence
  loss): a reader that fills the span from the other segment whatever its subject answers a
  person's question from a namesake's block, which is what REALM's reader does
  (results/EXPERIMENTS.md E98); here the two segments differ only in the name.
- `ClosedBookPipeline`: a question followed by `answer_len` [MASK] slots; the model fills in
  the answer's wordpieces and a closing [SEP] from its parameters alone (the paper's T5 rows
  answer from memory too). It can only know what pre-training stated, which is the point of
  the comparison with REALM.
"""
from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.pipelines import base, batching, ict, token_file
from realm_bench.tasks.metrics import to_text
from realm_bench.tasks.open_qa import answers_are_regex, spec_of


class _SentencesThenBlocks(Sequence):
  """The pre-training sentences followed by one `{"block": row}` per corpus row, made when
  asked: a list of 13M such dicts would take gigabytes at paper scale."""

  def __init__(self, sentences: Sequence[dict], num_blocks: int):
    self._sentences, self._num_blocks = sentences, num_blocks

  def __len__(self) -> int:
    return len(self._sentences) + self._num_blocks

  def __getitem__(self, i):
    i = int(i)
    if not -len(self) <= i < len(self):
      raise IndexError(i)
    i %= len(self)
    return (self._sentences[i] if i < len(self._sentences)
            else {"block": i - len(self._sentences)})


def restatements_of(examples: list[dict]) -> list[list[int]]:
  """For each sentence, the other sentences stating its fact (those of one source block);
  numbers the examples (`index`) so a batch can find them."""
  by_block: dict[int, list[int]] = {}
  for i, e in enumerate(examples):
    e["index"] = i
    by_block.setdefault(int(e["block_id"]), []).append(i)
  return [[j for j in by_block[int(e["block_id"])] if j != i] if int(e["block_id"]) >= 0
          else [] for i, e in enumerate(examples)]


def namesake_sentences(examples: Sequence[dict], corpus) -> list[list[int]]:
  """For each sentence, the sentences of its namesakes' blocks (titles other than its block's
  that share a word with it: "Krubi Kibarai" for "Losou Kibarai") that share the most
  wordpieces with it outside the two titles: a namesake's statement of the same relation where
  there is one. Found from the corpus's titles, as at paper scale."""
  rows = {int(e["block_id"]): corpus.row(int(e["block_id"]))
          for e in examples if int(e["block_id"]) >= 0}
  block_of = {row: block for block, row in rows.items()}
  near_rows = ict.namesakes(list(block_of), corpus.titles)
  by_block = collections.defaultdict(list)
  for i, e in enumerate(examples):
    by_block[int(e["block_id"])].append(i)
  words = [set(np.asarray(e["inputs"]).tolist()) | set(np.asarray(e["targets"]).tolist())
           for e in examples]
  out = []
  for i, e in enumerate(examples):
    block = int(e["block_id"])
    if block < 0:
      out.append([])
      continue
    near = [block_of[r] for r in near_rows[rows[block]]]
    own = set(np.asarray(corpus.title_ids[rows[block]]).tolist()) | {0}
    scored = collections.defaultdict(list)
    for b in near:
      names = own | set(np.asarray(corpus.title_ids[rows[b]]).tolist())
      for j in by_block[b]:
        scored[len((words[i] & words[j]) - names)].append(j)
    out.append(sorted(scored[max(scored)]) if scored else [])
  return out


@gin.configurable
@dataclasses.dataclass
class MlmPipeline(base.Pipeline):
  """Blocks are masked here, BERT's way (`mask_rate` of the wordpieces, at least one, never a
  special token), freshly at every step from (seed, step): dynamic masking, resumable."""
  pretrain_task: str | None = "realm_bench.synthetic.pretrain"
  corpus_task: str | None = None
  pair_restatements: bool = False
  negative_rate: float = 0.0
  namesake_negative_rate: float = 0.0
  max_masks: int = 10
  mask_rate: float = 0.15

  @property
  def task_name(self):
    return self.pretrain_task or self.corpus_task

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del warm_start_params
    if not (self.pretrain_task or self.corpus_task):
      raise InputError("give a pretrain_task, a corpus_task or both", field="MlmPipeline")
    if not (self.namesake_negative_rate >= 0.0
            and self.negative_rate + self.namesake_negative_rate < 1.0):
      raise InputError(f"with negative_rate {self.negative_rate} must leave a positive rate of "
                       f"restatements, got {self.namesake_negative_rate}",
                       field="MlmPipeline.namesake_negative_rate")
    if self.namesake_negative_rate and not (self.pair_restatements and self.corpus_task):
      raise InputError("namesake negatives need pair_restatements and a corpus_task (the "
                       "blocks' titles)", field="MlmPipeline.namesake_negative_rate")
    self.lengths = sequence_lengths
    self.specials = base.specials_of(model.vocabulary)
    self.examples, self.input_len = [], 0
    if self.pretrain_task:
      base.check_task_vocabulary(self.pretrain_task, model.vocabulary)
      self.examples = base.task_examples(self.pretrain_task, "train",
                                         sequence_lengths.for_queries())
      self.input_len = sequence_lengths.query
    if not 0.0 <= self.negative_rate < 1.0:
      raise InputError(f"must be in [0, 1), got {self.negative_rate}",
                       field="MlmPipeline.negative_rate")
    if self.pair_restatements:
      self.restatements = restatements_of(self.examples)
      if self.negative_rate and len({int(e["block_id"]) for e in self.examples}) < 2:
        raise InputError("negative pairs need sentences of at least two blocks",
                         field="MlmPipeline.negative_rate")
      self.input_len = 2 * sequence_lengths.query
    if self.corpus_task:
      base.check_task_vocabulary(self.corpus_task, model.vocabulary)
      self.corpus = token_file.for_run(self.corpus_task, sequence_lengths.block, run_dir)
      if self.namesake_negative_rate:
        self.namesakes = namesake_sentences(self.examples, self.corpus)
      self.examples = _SentencesThenBlocks(self.examples, len(self.corpus.ids))
      self.input_len = max(self.input_len, sequence_lengths.block)

  def stream(self, *, batch_size, seed):
    self.seed = seed
    self.num_examples = len(self.examples)
    return base.example_stream(self.examples, batch_size=batch_size, seed=seed)

  def _mask_block(self, ids: np.ndarray, rng: np.random.Generator) -> dict:
    s = self.specials
    words = np.flatnonzero((ids > 0) & (ids != s.cls) & (ids != s.sep))
    count = min(self.max_masks, len(words), max(1, round(self.mask_rate * len(words))))
    chosen = rng.choice(words, size=count, replace=False)
    targets = np.zeros_like(ids)
    targets[chosen] = ids[chosen]
    inputs = ids.copy()
    inputs[chosen] = s.mask
    return {"inputs": inputs, "targets": targets}

  def _other_block_sentence(self, e: dict, rng: np.random.Generator) -> dict:
    while True:   # the pre-training text has thousands of blocks: this ends at once
      other = self.examples[int(rng.integers(len(self.examples)))]
      if "block" not in other and int(other["block_id"]) != int(e["block_id"]):
        return other

  def prepare(self, step, params, raw):
    del params
    rng = np.random.default_rng([self.seed, step, 11])
    examples, types = [], []
    is_random = np.zeros(len(raw), np.int32)
    paired = np.zeros(len(raw), np.float32)
    for i, e in enumerate(raw):
      if "block" in e:
        ids = np.asarray(self.corpus.doc_inputs[e["block"]])
        examples.append(self._mask_block(ids, rng))
        types.append(np.zeros_like(ids))
      elif self.pair_restatements and self.restatements[e["index"]]:
        others = self.restatements[e["index"]]
        other = self.examples[others[int(rng.integers(len(others)))]]
        paired[i] = 1.0
        if self.negative_rate and rng.random() < self.negative_rate:
          other = self._other_block_sentence(e, rng)
          is_random[i] = 1
        elif (self.namesake_negative_rate and self.namesakes[e["index"]]
              and rng.random() < self.namesake_negative_rate / (1.0 - self.negative_rate)):
          near = self.namesakes[e["index"]]
          other = self.examples[near[int(rng.integers(len(near)))]]
          is_random[i] = 1
        second = np.asarray(other["inputs"])[1:]   # without its [CLS]
        second = np.where(second == self.specials.mask, np.asarray(other["targets"])[1:], second)
        inputs = np.concatenate([e["inputs"], second]).astype(np.int32)
        examples.append({"inputs": inputs,
                         "targets": np.concatenate([e["targets"], np.zeros_like(second)])})
        types.append(np.repeat([0, 1], [len(e["inputs"]), len(second)]))
      else:
        examples.append(e)
        types.append(np.zeros(len(e["inputs"]), np.int32))
    batch = batching.mlm_batch(examples, input_len=self.input_len, max_masks=self.max_masks)
    batch["input_types"] = batching.pad_rows(types, self.input_len)
    if self.negative_rate or self.namesake_negative_rate:
      batch["next_is_random"], batch["next_sentence_weights"] = is_random, paired
    return batch


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
