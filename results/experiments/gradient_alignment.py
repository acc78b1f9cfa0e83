"""Does REALM's gradient on the retriever point where question retrieval needs it to?

  python results/experiments/gradient_alignment.py OUT [RUN_DIR] [--sentences N] [--batch B]

OUT is a quickstart output folder. The retriever and reader are REALM pre-training's start
(OUT's ICT retriever, BERT's reader and MLM head, as `gin/runs/pretrain.gin` warm-starts
them), or RUN_DIR's last checkpoint when given. Over the pre-training sentences, in batches of
B (the quickstart's 16), with the index of those parameters, three gradients with respect to
the retriever's parameters are summed:

- REALM: the marginal likelihood of the masked spans (the pre-training loss);
- source: cross-entropy on the block the sentence restates, where it is a candidate (the
  supervised signal, which does carry over to questions: experiment log E43);
- questions: cross-entropy on the gold block of the NQ twin's *training* questions, among
  their top K-1 retrieved blocks with the gold block put in (what zero-shot recall needs).

It prints the cosine between the full-sample gradients (the direction in expectation), the
cosine between the two halves of each sample (how reliable that direction is at this sample
size), and the mean and SD over batches of one batch's gradient against the full questions
gradient (what a single step of training sees); all of it over every retriever parameter and
again without the embedding tables, and where each gradient's squared norm lies.
1/sqrt(#parameters) is the cosine of a random direction. Adam rescales coordinates, so the
cosine of sign vectors is printed too. Dropout is on, as in training.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import gin
import jax
import numpy as np
from flax.core import meta

from realm_bench import checkpoints, gin_utils
from realm_bench import stages as stages_lib
from realm_bench import warm_start as warm_start_lib
from realm_bench.pipelines import base, batching
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex
from realm_bench.tasks.data import SequenceLengths
from source_supervised import source_block_cross_entropy  # this folder


def _flat(tree) -> np.ndarray:
  return np.concatenate([np.ravel(np.asarray(x, np.float64))
                         for _, x in jax.tree_util.tree_flatten_with_path(tree)[0]])


# The embedding tables carry most of the questions gradient (position embeddings alone about
# half: questions are shorter and worded unlike any pre-training sentence), a part the
# pre-training text cannot supply; the cosines are printed with and without them.
EMBEDDING_TABLES = ("position_embed", "token_embed", "type_embed")


def _cos(a, b) -> float:
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def setup(out: Path):
  config = stages_lib.QuickstartConfig()
  stages = stages_lib.Stages(out, config)
  runs = out / "runs"
  bindings = [*stages.data_bindings(), "RUN_DIR = 'unused'",
              *stages_lib.pretrain_bindings(config, runs / "ict", runs / "bert")]
  gin_utils.parse_gin(["runs/pretrain.gin", config.size_gin, *config.extra_gin], bindings)
  model = gin.query_parameter("train_lib.train.model").scoped_configurable_fn()
  lengths = gin.get_configurable(SequenceLengths)()
  return model, lengths, config


def source_loss(model, params, batch, rng):
  scores, _ = model._forward(params, batch, rng)  # pylint: disable=protected-access
  return source_block_cross_entropy(scores, batch)


def main(out: Path, run_dir: Path | None, num_sentences: int, batch_size: int) -> None:
  model, lengths, config = setup(out)
  corpus = base.load_corpus("realm_bench.synthetic.corpus", lengths)
  specials = base.specials_of(model.vocabulary)
  sentences = base.task_examples("realm_bench.synthetic.pretrain", "train",
                                 lengths.for_queries())
  rng = np.random.default_rng(0)
  sentences = [sentences[i] for i in rng.permutation(len(sentences))[:num_sentences]]
  facts = [json.loads(line) for line in (out / "world/truth/facts.jsonl").open()]
  gold_of = {q.lower(): f["block_id"] for f in facts for q in f["questions"].get("nq", [])}
  questions = []
  for e in base.task_examples("realm_bench.synthetic.nq_open", "train", lengths.for_queries()):
    gold = gold_of.get(e["question"].decode().lower())
    if gold is not None:
      questions.append({"inputs": e["inputs"], "targets": np.zeros(0, np.int32),
                        "block_id": gold})

  k = config.num_candidates
  shape = batching.pretrain_batch(sentences[:2], np.resize(corpus.ids, (2, k - 1)), corpus,
                                  specials, query_len=lengths.query, max_masks=10,
                                  joint_len=lengths.reader)
  if run_dir is None:
    params = meta.unbox(model.init_params(jax.random.PRNGKey(0), shape))
    params = warm_start_lib.warm_start(
        params, checkpoints.load_params(out / "runs/ict/checkpoints"), {"retriever": "retriever"})
    params = warm_start_lib.warm_start(
        params, checkpoints.load_params(out / "runs/bert/checkpoints"),
        {"reader": "reader", "mlm_head": "mlm_head"})
    where = "REALM pre-training's start (ICT retriever, BERT reader)"
  else:
    params = checkpoints.load_params(run_dir / "checkpoints")
    where = str(run_dir)
  towers = Towers(model)
  index = ExactIndex()
  index.build(towers.embed_docs(params, corpus.doc_inputs), corpus.ids)

  def batches(examples, force_gold):
    for start in range(0, len(examples) - batch_size + 1, batch_size):
      raw = examples[start:start + batch_size]
      q = towers.embed_queries(params, batching.pad_rows([e["inputs"] for e in raw],
                                                         lengths.query), batch_size=len(raw))
      _, top = index.search(q, k - 1)
      source = np.array([e["block_id"] for e in raw])
      if force_gold:
        rest = batching.select_candidates(top, source, k - 2)
        cands = np.concatenate([source[:, None], rest], axis=1)
      else:
        cands = batching.select_candidates(top, np.full(len(raw), -2), k - 1)
      batch = batching.pretrain_batch(raw, cands, corpus, specials, query_len=lengths.query,
                                      max_masks=10, joint_len=lengths.reader)
      batch["cand_is_source"] = np.pad(cands == source[:, None], ((0, 0), (1, 0))).astype(
          np.float32)
      yield batch

  realm_grad = jax.jit(jax.grad(lambda p, b, r: model.loss_fn(p, b, r)[0]))
  src_grad = jax.jit(jax.grad(lambda p, b, r: source_loss(model, p, b, r)))
  key = jax.random.PRNGKey(1)

  leaves = [(jax.tree_util.keystr(path), int(np.size(x))) for path, x in
            jax.tree_util.tree_flatten_with_path(params["retriever"])[0]]
  masks = {"": np.ones(sum(n for _, n in leaves), bool),
           " without " + ", ".join(EMBEDDING_TABLES): np.concatenate(
               [np.full(n, not any(t in name for t in EMBEDDING_TABLES)) for name, n in leaves])}

  def collect(grad_fn, examples, force_gold, against=None):
    """(full-sample mean, the two halves' means, {mask: per-batch cosines against `against`})."""
    halves, counts, cosines = [0.0, 0.0], [0, 0], {m: [] for m in masks}
    for i, batch in enumerate(batches(examples, force_gold)):
      g = _flat(grad_fn(params, batch, jax.random.fold_in(key, i))["retriever"])
      halves[i % 2] = halves[i % 2] + g
      counts[i % 2] += 1
      if against is not None:
        for m, keep in masks.items():
          cosines[m].append(_cos(g[keep], against[keep]))
    means = [h / max(c, 1) for h, c in zip(halves, counts)]
    return (halves[0] + halves[1]) / sum(counts), means, cosines

  full, halves, per = {}, {}, {}
  full["questions"], halves["questions"], _ = collect(src_grad, questions, True)
  for name, fn in (("REALM", realm_grad), ("source", src_grad)):
    full[name], halves[name], per[name] = collect(fn, sentences, False, full["questions"])
  for m, keep in masks.items():
    report({n: g[keep] for n, g in full.items()},
           {n: (h1[keep], h2[keep]) for n, (h1, h2) in halves.items()},
           {n: np.array(c[m]) for n, c in per.items()}, label=m, where=where,
           num_sentences=len(sentences), num_questions=len(questions),
           batch_size=batch_size, k=k)
  print("\nwhere each full gradient's squared norm lies (the 3 largest parameters):")
  bounds = np.cumsum([0] + [n for _, n in leaves])
  for name, g in full.items():
    share = np.array([np.sum(g[a:b] ** 2) for a, b in zip(bounds[:-1], bounds[1:])])
    share /= share.sum()
    top = np.argsort(-share)[:3]
    print(f"  {name}: " + ", ".join(f"{leaves[i][0]} {100 * share[i]:.0f}%" for i in top))


def report(full, halves, per, *, label, where, num_sentences, num_questions, batch_size, k):
  num_params = full["REALM"].size
  print(f"\nparameters: {where}; {num_sentences} sentences and {num_questions} training "
        f"questions in batches of {batch_size}; K = {k}; {num_params:,} retriever parameters"
        f"{label} (a random direction's cosine: "
        f"+-{1 / math.sqrt(num_params):.4f})\n")
  print("| gradients | cosine | cosine of signs |")
  print("|---|---:|---:|")
  names = list(full)
  for i, a in enumerate(names):
    for b in names[i + 1:]:
      print(f"| {a} vs {b} (full samples) | {_cos(full[a], full[b]):+.3f} | "
            f"{_cos(np.sign(full[a]), np.sign(full[b])):+.3f} |")
  for name, (h1, h2) in halves.items():
    print(f"| {name}: one half of the sample vs the other | {_cos(h1, h2):+.3f} | "
          f"{_cos(np.sign(h1), np.sign(h2)):+.3f} |")
  for name in ("REALM", "source"):
    c = per[name]
    print(f"| one batch of {name} vs the full questions gradient: mean +- SD over "
          f"{len(c)} batches | {c.mean():+.3f} +- {c.std(ddof=1):.3f} | |", flush=True)


if __name__ == "__main__":
  args = sys.argv[1:]
  opts = {"--sentences": 100000, "--batch": 16}
  for flag in list(opts):
    if flag in args:
      i = args.index(flag)
      opts[flag] = int(args[i + 1])
      del args[i:i + 2]
  if not args or len(args) > 2:
    sys.exit(__doc__)
  main(Path(args[0]), Path(args[1]) if len(args) > 1 else None, opts["--sentences"],
       opts["--batch"])
