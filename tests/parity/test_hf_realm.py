"""Our networks against Hugging Face's REALM classes on the same (random) weights.

Small random `RealmConfig`s; every HF parameter is drawn at random (LayerNorm gains and all
biases too, so a mis-mapped bias cannot hide behind a zero), copied into our parameter trees
with `realm_bench.networks.hf_realm`, and both forward passes are compared on inputs laid out
as REALM's featurizer lays them out. Relative error = max |ours - HF| / max |HF| per quantity;
the target is 1e-5, and the conftest prints what was measured.

Where HF differs by design, the parts that should agree are compared:
- `RealmReader` returns only the argmax span and the losses: span logits are compared through
  its own `qa_outputs` (RealmReaderProjection) on its encoder's output, plus the retrieval
  score it adds; its candidates are (start, end) pairs by width, ours a (start, width) grid, and
  it masks invalid spans with float32's minimum, we exclude them: valid spans are compared and
  the validity masks must agree.
- `RealmKnowledgeAugEncoder`'s loss marginalises each masked token over the candidates (the
  released code's form): it is compared with `per_mask_marginal=True`; our default, the
  paper's product over masks, is a different number by design.
- `RealmScorer` scores are the raw inner product: our default `score_scale` 1.0.
Needs the `parity` extra (`pip install -c constraints.txt -e '.[parity]'`; `make test-parity`).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers.models.deprecated.realm")

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position

from realm_bench import models  # pylint: disable=g-import-not-at-top,wrong-import-position
from realm_bench.networks import hf_realm  # pylint: disable=g-import-not-at-top
from realm_bench.networks.bert import BertConfig  # pylint: disable=g-import-not-at-top

pytestmark = pytest.mark.parity

TARGET = 1e-5
PAD, CLS, SEP, MASK = 0, 2, 3, 4
VOCAB, HIDDEN, LAYERS, HEADS, MLP, PROJ = 64, 32, 2, 4, 64, 16
SPAN_HIDDEN, MAX_SPAN = 16, 4
B, K, R, N = 2, 3, 2, 3   # batch, candidates, read blocks, retrieved blocks


def _hf_config(**overrides):
  fields = dict(vocab_size=VOCAB, hidden_size=HIDDEN, retriever_proj_size=PROJ,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=MLP,
                max_position_embeddings=64, num_candidates=K, span_hidden_size=SPAN_HIDDEN,
                max_span_width=MAX_SPAN, reader_beam_size=R, searcher_beam_size=N,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                hidden_act="gelu_new", layer_norm_eps=1e-12, reader_layer_norm_eps=1e-3)
  fields.update(overrides)
  return hf.RealmConfig(**fields)


OUR_CONFIG = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=LAYERS,
                        num_heads=HEADS, mlp_dim=MLP, max_len=64, dropout_rate=0.0)


@pytest.fixture(autouse=True, scope="module")
def _torch_threads():
  torch.set_num_threads(1)


def _randomised(module, seed: int):
  """`module` in eval mode with every parameter random: weights N(0, 0.2), LayerNorm gains
  1 + N(0, 0.1), embeddings N(0, 0.5). Tied parameters stay tied (one draw each)."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, param in module.named_parameters():
      noise = torch.randn(param.shape, generator=gen)
      if "LayerNorm.weight" in name or "layer_normalization.weight" in name:
        param.copy_(1.0 + 0.1 * noise)
      elif "embeddings" in name:
        param.copy_(0.5 * noise)
      else:
        param.copy_(0.2 * noise)
  return module.eval()


def _state(module) -> dict:
  return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def _rel(ours, theirs) -> float:
  ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
  assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
  return float(np.abs(ours - theirs).max() / np.abs(theirs).max())


def _check(errors, name, ours, theirs):
  errors[name] = max(errors.get(name, 0.0), _rel(ours, theirs))
  assert errors[name] <= TARGET, f"{name}: relative error {errors[name]:.2e}"


def _t(x):
  return torch.tensor(np.asarray(x))


# ------------------------------------------------------------------------------------------
# Inputs, featurised as REALM's featurizer does it.
# ------------------------------------------------------------------------------------------

def _pair(first, second, length):
  """[CLS] first [SEP] second [SEP], 0-padded: ids and segment ids (second part 1), as
  REALM's bert_format / featurize_document and ORQA's pad_or_truncate_pair."""
  ids = [CLS, *first, SEP, *second, SEP]
  types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
  pad = length - len(ids)
  assert pad >= 0
  return ids + [PAD] * pad, types + [0] * pad


def _words(rng, n):
  return [int(x) for x in rng.integers(5, VOCAB, size=n)]


def _pretrain_inputs(seed=0):
  rng = np.random.default_rng(seed)
  lq, ld, lj = 9, 14, 20
  queries, mask_positions, targets = [], [], []
  for length in (6, 5):
    words = _words(rng, length)
    positions = [2, 3] if length == 6 else [1, 4]
    targets.append([words[p - 1] for p in positions])
    for p in positions:
      words[p - 1] = MASK
    queries.append([CLS, *words, SEP] + [PAD] * (lq - length - 2))
    mask_positions.append(positions)
  docs = np.zeros((B, K, ld), np.int64)
  doc_types = np.zeros((B, K, ld), np.int64)
  joint = np.zeros((B, K, lj), np.int64)
  joint_types = np.zeros((B, K, lj), np.int64)
  for b in range(B):
    query_words = [t for t in queries[b][1:] if t not in (SEP, PAD)]
    for k in range(K):
      title, body = ([], []) if k == 0 else (_words(rng, k + 1), _words(rng, 9 - 2 * k))
      docs[b, k], doc_types[b, k] = _pair(title, body, ld)   # candidate 0: the null document
      joint[b, k], joint_types[b, k] = _pair(query_words, body, lj)   # REALM drops the title
  return {"query_ids": np.array(queries, np.int32), "cand_doc_ids": docs.astype(np.int32),
          "doc_types": doc_types, "joint_ids": joint.astype(np.int32),
          "joint_types": joint_types.astype(np.int32),
          "mlm_positions": np.array(mask_positions, np.int32),
          "mlm_targets": np.array(targets, np.int32),
          "mlm_weights": np.ones((B, 2), np.float32), "cand_valid": np.ones((B, K), np.float32)}


def _batch(inputs):
  return {k: v for k, v in inputs.items() if k != "doc_types"}


def _mask(ids):
  return _t((np.asarray(ids) > 0).astype(np.int64))


# ------------------------------------------------------------------------------------------
# Retriever and knowledge-augmented encoder.
# ------------------------------------------------------------------------------------------

def _hf_pretrain(share: bool):
  """RealmScorer (one embedder for queries and documents, or a query embedder of its own)
  and RealmKnowledgeAugEncoder."""
  config = _hf_config()
  query_embedder = None if share else hf.RealmEmbedder(config)
  scorer = _randomised(hf.RealmScorer(config, query_embedder=query_embedder), seed=1)
  encoder = _randomised(hf.RealmKnowledgeAugEncoder(config), seed=2)
  return scorer, encoder


def _our_pretrain_params(scorer, encoder, share: bool) -> dict:
  arch = {"num_layers": LAYERS, "num_heads": HEADS}
  state = _state(scorer)
  if share:
    retriever = {"embedder": hf_realm.embedder_params(state, "embedder.", **arch)}
  else:
    retriever = {"query_embedder": hf_realm.embedder_params(state, "query_embedder.", **arch),
                 "doc_embedder": hf_realm.embedder_params(state, "embedder.", **arch)}
  kae = _state(encoder)
  return {"retriever": retriever, "reader": hf_realm.bert_params(kae, "realm.", **arch),
          "mlm_head": hf_realm.mlm_head_params(kae)}


def _our_pretrain_model(share: bool, per_mask: bool = False):
  return models.RealmPretrainModel(retriever_config=OUR_CONFIG, reader_config=OUR_CONFIG,
                                   proj_dim=PROJ, share_embedders=share, sep_id=SEP,
                                   per_mask_marginal=per_mask)


@pytest.mark.parametrize("share", [True, False], ids=["shared", "two_towers"])
def test_embeddings_and_retrieval_scores(share, parity_errors):
  scorer, encoder = _hf_pretrain(share)
  x = _pretrain_inputs()
  with torch.no_grad():
    out = scorer(input_ids=_t(x["query_ids"]).long(), attention_mask=_mask(x["query_ids"]),
                 token_type_ids=torch.zeros(x["query_ids"].shape, dtype=torch.long),
                 candidate_input_ids=_t(x["cand_doc_ids"]).long(),
                 candidate_attention_mask=_mask(x["cand_doc_ids"]),
                 candidate_token_type_ids=_t(x["doc_types"]))
  model = _our_pretrain_model(share)
  params = _our_pretrain_params(scorer, encoder, share)
  query = model.embed_queries(params, x["query_ids"])
  docs = model.embed_docs(params, x["cand_doc_ids"].reshape(B * K, -1)).reshape(B, K, -1)
  scores = jax.jit(model.predict_batch)(params, _batch(x))["retrieval_scores"]
  _check(parity_errors, "query embedding", query, out.query_score.numpy())
  _check(parity_errors, "document embedding", docs, out.candidate_score.numpy())
  _check(parity_errors, "retrieval score", scores, out.relevance_score.numpy())


def test_the_document_tower_needs_realms_segments_to_agree():
  """Without the title/body segments (the networks before), the documents do not match."""
  scorer, encoder = _hf_pretrain(share=True)
  x = _pretrain_inputs()
  with torch.no_grad():
    out = scorer(input_ids=_t(x["query_ids"]).long(), attention_mask=_mask(x["query_ids"]),
                 candidate_input_ids=_t(x["cand_doc_ids"]).long(),
                 candidate_attention_mask=_mask(x["cand_doc_ids"]),
                 candidate_token_type_ids=_t(x["doc_types"]))
  model = models.RealmPretrainModel(retriever_config=OUR_CONFIG, reader_config=OUR_CONFIG,
                                    proj_dim=PROJ, separate_doc_segments=False)
  params = _our_pretrain_params(scorer, encoder, share=True)
  docs = model.embed_docs(params, x["cand_doc_ids"].reshape(B * K, -1)).reshape(B, K, -1)
  assert _rel(docs, out.candidate_score.numpy()) > 1e-2


@pytest.mark.parametrize("per_mask", [True, False], ids=["per_mask", "product"])
def test_mlm_logits_and_the_released_codes_loss(per_mask, parity_errors):
  scorer, encoder = _hf_pretrain(share=True)
  x = _pretrain_inputs()
  labels = np.full(x["joint_ids"].shape[::2], -100, np.int64)        # [B, joint_len]
  for b in range(B):
    labels[b, x["mlm_positions"][b]] = x["mlm_targets"][b]
  with torch.no_grad():
    relevance = scorer(input_ids=_t(x["query_ids"]).long(),
                       attention_mask=_mask(x["query_ids"]),
                       candidate_input_ids=_t(x["cand_doc_ids"]).long(),
                       candidate_attention_mask=_mask(x["cand_doc_ids"]),
                       candidate_token_type_ids=_t(x["doc_types"])).relevance_score
    out = encoder(input_ids=_t(x["joint_ids"]).long(), attention_mask=_mask(x["joint_ids"]),
                  token_type_ids=_t(x["joint_types"]).long(), relevance_score=relevance,
                  labels=_t(labels), mlm_mask=_t((labels >= 0).astype(np.int64)))
  hf_logits = out.logits.numpy().reshape(B, K, -1, VOCAB)
  hf_logits = np.stack([hf_logits[b][:, x["mlm_positions"][b]] for b in range(B)])
  model = _our_pretrain_model(share=True, per_mask=per_mask)
  params = _our_pretrain_params(scorer, encoder, share=True)
  _, logits = model._pretrain_net().apply(  # pylint: disable=protected-access
      {"params": params}, x["query_ids"], x["cand_doc_ids"], x["joint_ids"], x["joint_types"],
      x["mlm_positions"])
  _check(parity_errors, "MLM logits", logits, hf_logits)
  loss, _ = jax.jit(model.loss_fn)(params, _batch(x), jax.random.PRNGKey(0))
  if per_mask:
    _check(parity_errors, "MLM loss (per-mask marginal)", loss, out.loss.numpy())
  else:   # the paper's product over masks: another objective, not HF's
    assert _rel(loss, out.loss.numpy()) > 1e-4


# ------------------------------------------------------------------------------------------
# Reader.
# ------------------------------------------------------------------------------------------

def _reader_inputs(seed=0):
  rng = np.random.default_rng(seed)
  length = 18
  question = _words(rng, 3)
  ids, types, block_mask = [], [], []
  body_start, body_len = [], []
  for r in range(R):
    title, body = _words(rng, 2), _words(rng, 9 - 2 * r)
    # [CLS] q [SEP] title [SEP] body [SEP], the block (title on) segment 1, as ORQA's
    # reader_inputs and HF's tokenizer(question, block) give it.
    row, row_types = _pair(question, [*title, SEP, *body], length)
    start = len(question) + 2 + len(title) + 1
    ids.append(row)
    types.append(row_types)
    block_mask.append([1 if start <= i < start + len(body) else 0 for i in range(length)])
    body_start.append(start)
    body_len.append(len(body))
  # Our spans index the body (the span head reads the body's positions); HF's the input.
  body = max(body_len)
  positions = [[start + i if i < n else 0 for i in range(body)]
               for start, n in zip(body_start, body_len)]
  gold_spans = np.zeros((1, R, body, MAX_SPAN), np.float32)
  gold_spans[0, 1, 2, 1] = 1.0                 # block 1, a two-wordpiece span at body piece 2
  gold = (body_start[1] + 2, 1)                # the same span, as HF indexes it
  return {
      "query_ids": np.array([[CLS, *question, SEP, PAD]], np.int32),
      "retrieved_doc_emb": rng.normal(size=(1, N, PROJ)).astype(np.float32),
      "retrieved_valid": np.ones((1, N), np.float32),
      "retrieved_has_answer": np.array([[0, 1, 1]], np.float32),
      "reader_ids": np.array([ids], np.int32), "reader_types": np.array([types], np.int32),
      "body_positions": np.array([positions], np.int32),
      "body_len": np.array([body_len], np.int32), "gold_spans": gold_spans,
  }, np.array(block_mask, bool), gold, np.array(body_start)


def test_span_logits_loss_and_prediction(parity_errors):
  config = _hf_config()
  reader = _randomised(hf.RealmReader(config), seed=4)
  embedder = _randomised(hf.RealmEmbedder(config), seed=5)
  arch = {"num_layers": LAYERS, "num_heads": HEADS}
  state = _state(reader)
  params = {"retriever": {"embedder": hf_realm.embedder_params(_state(embedder), "", **arch)},
            "reader": hf_realm.bert_params(state, "realm.", **arch),
            "span_head": hf_realm.span_head_params(state)}
  model = models.OpenQAModel(retriever_config=OUR_CONFIG, reader_config=OUR_CONFIG,
                             proj_dim=PROJ, span_hidden=SPAN_HIDDEN, max_span_len=MAX_SPAN,
                             sep_id=SEP)
  batch, block_mask, gold, body_start = _reader_inputs()
  forward = jax.jit(model._forward)  # pylint: disable=protected-access
  scores, span_logits, valid = map(np.asarray, forward(params, batch))
  ids, types = _t(batch["reader_ids"][0]).long(), _t(batch["reader_types"][0]).long()
  relevance = _t(scores[0])
  with torch.no_grad():
    query = embedder(input_ids=_t(batch["query_ids"]).long(),
                     attention_mask=_mask(batch["query_ids"])).projected_score
    hidden = reader.realm(ids, attention_mask=_mask(ids), token_type_ids=types)[0]
    span_only, starts, ends = reader.qa_outputs(hidden, _t(block_mask))
    hf_logits = span_only + relevance[:R, None]           # as RealmReader.forward adds it
    gold_starts = torch.full((R, 1), -1, dtype=torch.long)
    gold_ends = torch.full((R, 1), -1, dtype=torch.long)
    gold_starts[1, 0], gold_ends[1, 0] = gold[0], gold[0] + gold[1]
    out = reader(input_ids=ids, attention_mask=_mask(ids), token_type_ids=types,
                 relevance_score=relevance, block_mask=_t(block_mask),
                 start_positions=gold_starts, end_positions=gold_ends,
                 has_answers=_t(batch["retrieved_has_answer"][0] > 0))
  hf_scores = query.numpy() @ batch["retrieved_doc_emb"][0].T
  _check(parity_errors, "retrieval score (open QA)", scores, hf_scores)
  starts, ends = starts.numpy(), ends.numpy()
  hf_valid = (block_mask[:, starts] & block_mask[:, ends])           # [R, spans]
  # The same (start, end)s in our body frame (clipped where HF's lie outside every body).
  in_body = np.clip(starts[None, :] - body_start[:, None], 0, span_logits.shape[2] - 1)
  pick = (np.arange(R)[:, None], in_body, np.broadcast_to(ends - starts, in_body.shape))
  ours = span_logits[0][pick]
  assert valid[0][pick][hf_valid].all() and valid[0].sum() == hf_valid.sum()
  # The span head alone (the retrieval score, compared above, is most of a logit's size).
  _check(parity_errors, "span logits (span head alone)",
         (ours - scores[0, :R, None])[hf_valid], span_only.numpy()[hf_valid])
  _check(parity_errors, "span logits (with the retrieval score)", ours[hf_valid],
         hf_logits.numpy()[hf_valid])
  loss, _ = jax.jit(model.loss_fn)(params, batch, jax.random.PRNGKey(0))
  _check(parity_errors, "reader + retriever loss", loss, out.loss.numpy())
  pred = jax.jit(model.predict_batch)(params, {k: v for k, v in batch.items()
                                               if k != "gold_spans"})
  block = int(pred["block"][0])
  assert block == int(out.block_idx)
  assert (int(pred["start"][0]) + body_start[block], int(pred["end"][0]) + body_start[block]) \
      == (int(out.start_pos[0]), int(out.end_pos[0]))
