"""Train-step speed of REALM pre-training (and tiny Open-QA) against this machine's matmul peak.

The denominator is measured in the same run, not taken from a datasheet: a shared 2-core CPU's
throughput moves with its neighbours' load, so only a same-run peak makes "% of peak" mean
something. The peak is a large jitted matmul in three forms, because on CPUs with AVX-512 BF16
(or AMX) bf16 x bf16 -> f32 dots run on the bf16 units while bf16-output dots may not.

Each precision variant is the model's own gin knob (`bert.BertConfig.dtype` and
`bert.BertConfig.accumulate_fp32`) applied on top of `gin/sizes/<shape>.gin`, and every step is
`Trainer.train_step` with BERT's AdamW, i.e. exactly what a training run executes, dropout and
the non-finite guard included.

Model FLOPs (2 per multiply-add, forward matmuls only, x3 for forward + backward):
  enc(L)   = layers * (2*L*H*(4*H + 2*F) + 4*L^2*H)      Q,K,V,out + MLP; QK^T and PV
  tower(L) = enc(L) + 2*H^2 + 2*H*P                     + pooler + retriever projection
  pre-training step = 3 * B * (tower(Lq) + K*tower(Ld) + K*enc(Lq + Ld)
                               + K*M*(2*H^2 + 2*H*V) + 2*K*P)   MLM head at M masked slots
  Open-QA step      = 3 * B * (tower(Lq) + R*enc(Lr) + R*(4*Lb*H*S + 2*Lb*W*S) + 2*N*P)
H hidden, F mlp, V vocab, P retriever projection, K candidates (null doc included), M mask slots,
R read blocks of length Lr = Lq + Ld, Lb = Ld - 2 body positions (the span head's), N retrieved
embeddings, S span hidden, W max span width.
Embedding gathers, softmax, LayerNorm, GELU, dropout and the optimizer are not counted: they are
what separates the achieved rate from the peak, and `--profile` times them.

  python benchmarks/train_step.py [--shapes tiny,base] [--steps tiny=10,base=1]
      [--batch tiny=8,base=1] [--precisions fp32,bf16,bf16out] [--profile]
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import glob
import os
import platform
import re
import resource
import shlex
import statistics
import sys
import tempfile
import time
from typing import Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gin  # pylint: disable=g-import-not-at-top
import jax
import jax.numpy as jnp
import numpy as np

from realm_bench import gin_utils, models, optim
from realm_bench.networks import bert
from realm_bench.pipelines import batching
from realm_bench.trainer import Trainer

SHAPES = ("tiny", "base")
DEFAULT_STEPS = {"tiny": 10, "base": 1}
DEFAULT_BATCH = {"tiny": 8, "base": 1}
# tiny: the quickstart's learned WordPiece vocabulary; base: BERT's uncased vocabulary.
DEFAULT_VOCAB = {"tiny": 2000, "base": 30522}
# name -> (gin bindings on bert.BertConfig, what the table calls it)
PRECISIONS = {
    "fp32": ((), "fp32"),
    "bf16": (("bert.BertConfig.dtype = 'bfloat16'", "bert.BertConfig.accumulate_fp32 = True"),
             "bf16 in, f32 acc"),
    "bf16out": (("bert.BertConfig.dtype = 'bfloat16'",
                 "bert.BertConfig.accumulate_fp32 = False"), "bf16 in, bf16 out"),
}
PROJ_DIM = 128          # gin/models/retriever.gin
NUM_MASKS = 10          # realm.RealmPipeline.max_masks
NUM_READ = 5            # open_qa.OpenQAPipeline.num_read
NUM_RETRIEVED = 5000    # open_qa.OpenQAPipeline.num_retrieved
SPAN_HIDDEN = 256       # gin/models/open_qa.gin
MAX_SPAN_LEN = 10


# ------------------------------------------------------------------------------------------
# Shapes and analytic FLOPs.
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Shape:
  name: str
  config: bert.BertConfig
  query_len: int
  block_len: int

  @property
  def joint_len(self) -> int:
    """Query then block: the pipelines' joint length is at most this."""
    return self.query_len + self.block_len

  @property
  def num_masks(self) -> int:
    """RealmPipeline's mask slots; never [CLS], so at most query_len - 1."""
    return min(NUM_MASKS, self.query_len - 1)


def load_shape(name: str, precision: str, vocab_size: int) -> Shape:
  """The size from gin/sizes/<name>.gin with the precision's gin bindings on top."""
  bindings = [f"bert.BertConfig.vocab_size = {vocab_size}", *PRECISIONS[precision][0]]
  gin_utils.parse_gin([f"sizes/{name}.gin"], bindings, finalize=False)
  return Shape(name, bert.BertConfig(), gin.query_parameter("%QUERY_LEN"),
               gin.query_parameter("%BLOCK_LEN"))


def encoder_flops(cfg: bert.BertConfig, length: int) -> int:
  h, f = cfg.hidden_size, cfg.mlp_dim
  return cfg.num_layers * (2 * length * h * (4 * h + 2 * f) + 4 * length * length * h)


def tower_flops(cfg: bert.BertConfig, length: int) -> int:
  h = cfg.hidden_size
  return encoder_flops(cfg, length) + 2 * h * h + 2 * h * PROJ_DIM


def pretrain_flops(shape: Shape, batch: int, candidates: int) -> int:
  cfg, k = shape.config, candidates
  h = cfg.hidden_size
  forward = (tower_flops(cfg, shape.query_len) + k * tower_flops(cfg, shape.block_len)
             + k * encoder_flops(cfg, shape.joint_len)
             + k * shape.num_masks * (2 * h * h + 2 * h * cfg.vocab_size) + 2 * k * PROJ_DIM)
  return 3 * batch * forward


def openqa_flops(shape: Shape, batch: int) -> int:
  cfg, lr, body = shape.config, shape.joint_len, shape.block_len - 2
  span = 4 * body * cfg.hidden_size * SPAN_HIDDEN + 2 * body * MAX_SPAN_LEN * SPAN_HIDDEN
  forward = (tower_flops(cfg, shape.query_len) + NUM_READ * (encoder_flops(cfg, lr) + span)
             + 2 * NUM_RETRIEVED * PROJ_DIM)
  return 3 * batch * forward


# ------------------------------------------------------------------------------------------
# Batches (random ids, no padding: every position is computed, as in a full batch).
# ------------------------------------------------------------------------------------------

def _ids(rng, vocab_size, *shape):
  return rng.integers(5, vocab_size, size=shape).astype(np.int32)


def pretrain_batch(shape: Shape, batch: int, candidates: int, seed: int = 0) -> dict:
  """A full REALM_BATCH (keys, shapes and dtypes from the pipelines' spec) of random ids."""
  rng = np.random.default_rng(seed)
  b, k, lq, ld, v = batch, candidates, shape.query_len, shape.block_len, shape.config.vocab_size
  out = batching.REALM_BATCH.zeros(batch=b, candidates=k, query_len=lq, block_len=ld,
                                   joint_len=shape.joint_len, masks=shape.num_masks)
  out["query_ids"][:] = _ids(rng, v, b, lq)
  out["cand_doc_ids"][:] = _ids(rng, v, b, k, ld)
  out["joint_ids"][:] = np.concatenate(
      [np.broadcast_to(out["query_ids"][:, None], (b, k, lq)), out["cand_doc_ids"]], axis=-1)
  out["joint_types"][..., lq:] = 1
  positions = np.sort(rng.permutation(np.arange(1, lq))[:shape.num_masks])
  out["mlm_positions"][:] = positions
  out["mlm_targets"][:] = _ids(rng, v, b, shape.num_masks)
  out["mlm_weights"][:] = 1.0
  out["cand_valid"][:] = 1.0
  return out


def openqa_batch(shape: Shape, batch: int, seed: int = 0) -> dict:
  """A full OPEN_QA_BATCH of random ids, one gold span per example."""
  rng = np.random.default_rng(seed)
  b, lq, lr, v = batch, shape.query_len, shape.joint_len, shape.config.vocab_size
  out = batching.OPEN_QA_BATCH.zeros(batch=b, query_len=lq, retrieved=NUM_RETRIEVED,
                                     proj_dim=PROJ_DIM, read=NUM_READ, reader_len=lr,
                                     body=shape.block_len - 2, max_span_len=MAX_SPAN_LEN)
  out["query_ids"][:] = _ids(rng, v, b, lq)
  out["retrieved_doc_emb"][:] = rng.normal(size=(b, NUM_RETRIEVED, PROJ_DIM))
  out["retrieved_valid"][:] = 1.0
  out["retrieved_has_answer"][:] = rng.uniform(size=(b, NUM_RETRIEVED)) < 0.01
  out["reader_ids"][:] = _ids(rng, v, b, NUM_READ, lr)
  out["reader_types"][..., lq:] = 1
  out["body_positions"][:] = lq + 1 + np.arange(shape.block_len - 2)
  out["body_len"][:] = shape.block_len - 2
  out["gold_spans"][:, 0, 2, 1] = 1.0
  return out


# ------------------------------------------------------------------------------------------
# Timing.
# ------------------------------------------------------------------------------------------

def time_calls(fn: Callable[[], object], reps: int, warmup: int = 1) -> list[float]:
  """Seconds of each of `reps` calls after `warmup` untimed ones."""
  for _ in range(warmup):
    jax.block_until_ready(fn())
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return times


@dataclasses.dataclass
class Peak:
  """A matmul rate measured before and after the step benchmarks.

  Neighbours' load on a shared machine moves both; the better of the two is what the machine
  can do, so it is the denominator, which keeps "% of peak" from being flattered by a peak
  that happened to be measured under load.
  """
  label: str
  start: float
  end: float = 0.0

  @property
  def tflops(self) -> float:
    return max(self.start, self.end)


_PEAK_FORMS = {"fp32": (jnp.float32, None), "bf16": (jnp.bfloat16, jnp.float32),
               "bf16out": (jnp.bfloat16, None)}


def matmul_tflops(size: int, reps: int) -> dict[str, float]:
  """TFLOP/s of a jitted [size, size] @ [size, size] matmul in each precision, best of reps.

  Best rather than median: a neighbour's burst can only slow a rep down, never speed it up.
  """
  rng = np.random.default_rng(0)
  a = rng.standard_normal((size, size), np.float32)
  b = rng.standard_normal((size, size), np.float32)
  rates = {}
  for name, (dtype, preferred) in _PEAK_FORMS.items():
    x, y = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    matmul = jax.jit(lambda p, q, pref=preferred: jnp.matmul(p, q, preferred_element_type=pref))
    seconds = min(time_calls(lambda m=matmul, p=x, q=y: m(p, q), reps, warmup=2))
    rates[name] = 2 * size ** 3 / seconds / 1e12
  return rates


@dataclasses.dataclass
class Row:
  shape: str
  model: str
  precision: str
  batch: int
  step_s: float
  compile_s: float
  queries: int
  sequences: int
  flops: int
  rss_gb: float


class _CompileClock:
  """Seconds JAX spends tracing, lowering and compiling, from its own monitoring events."""

  def __init__(self):
    self.seconds = 0.0
    jax.monitoring.register_event_duration_secs_listener(self._record)

  def _record(self, event: str, duration: float, **_) -> None:
    if event.startswith("/jax/core/compile/"):
      self.seconds += duration


COMPILE_CLOCK = _CompileClock()


def _max_rss_gb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def bench_step(model, batch: dict, steps: int):
  """(median step seconds, compile seconds, trainer, state) of Trainer.train_step.

  The first call compiles; it is not timed as a step. The trainer and its (live) state are
  returned so that --profile traces the very executable that was timed.
  """
  trainer = Trainer(model, optim.make_optimizer(learning_rate=1e-4, warmup_steps=10,
                                                total_steps=1000))
  state = trainer.init_state(jax.random.PRNGKey(0), batch)
  jax.block_until_ready(state)
  compiled_before = COMPILE_CLOCK.seconds
  state, metrics = trainer.train_step(state, batch)
  jax.block_until_ready((state, metrics))
  compile_s = COMPILE_CLOCK.seconds - compiled_before
  if not np.isfinite(float(metrics["loss"])):
    raise FloatingPointError(f"non-finite loss {float(metrics['loss'])} in the benchmark step")
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = trainer.train_step(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - start)
  return statistics.median(times), compile_s, trainer, state


# The learned vocabularies' [SEP] id, where documents split into title and body segments
# (no vocabulary here; the random ids hold no [SEP], and the segment lookup costs the same).
SEP_ID = 3


def realm_model(shape: Shape) -> models.RealmPretrainModel:
  return models.RealmPretrainModel(retriever_config=shape.config, reader_config=shape.config,
                                   proj_dim=PROJ_DIM, share_embedders=True, sep_id=SEP_ID)


def openqa_model(shape: Shape) -> models.OpenQAModel:
  return models.OpenQAModel(retriever_config=shape.config, reader_config=shape.config,
                            proj_dim=PROJ_DIM, share_embedders=True, span_hidden=SPAN_HIDDEN,
                            max_span_len=MAX_SPAN_LEN, sep_id=SEP_ID)


# ------------------------------------------------------------------------------------------
# --profile: where the step's time goes, per XLA op of the real Trainer.train_step.
# ------------------------------------------------------------------------------------------

# Substrings of an op's metadata (its JAX name stack) -> what the op is doing.
_KINDS = (
    ("dropout RNG", ("_bernoulli", "_uniform", "threefry", "random_bits")),
    ("LayerNorm", ("/norm/",)),
    ("GELU", ("erf", "gelu")),
    ("softmax / log-softmax", ("softmax", "logsumexp", "/exp", "reduce_max", "/log")),
    ("embedding gather/scatter", ("gather", "scatter", "take_along_axis", "token_embed/")),
    ("dtype convert", ("convert_element_type",)),
    ("transpose / copy", ("transpose[", "/transpose", "/copy")),
)
_REGIONS = ("mlm_head", "reader", "retriever", "span_head")


def _dump_flags(dump_dir: str) -> str:
  return (f" --xla_dump_to={dump_dir} --xla_dump_hlo_as_text"
          " --xla_dump_hlo_module_re=.*train_step.*")


def _hlo_ops(dump_dir: str, program_id: int) -> dict[str, tuple[str, str, str]]:
  """hlo op name -> (opcode, result shape, JAX op_name) from XLA's optimized-HLO dump."""
  pattern = f"module_{program_id:04d}.*cpu_after_optimizations.txt"
  ops = {}
  for path in glob.glob(os.path.join(dump_dir, pattern)):
    with open(path, encoding="utf-8") as f:
      for line in f:
        match = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (.*?) ([a-z][a-z0-9\-]*)\(", line)
        if match:
          op_name = re.search(r'op_name="([^"]*)"', line)
          ops[match.group(1)] = (match.group(3), match.group(2),
                                 op_name.group(1) if op_name else "")
  return ops


def _classify(opcode: str, op_name: str) -> tuple[str, str, str]:
  """(region, kind, direction) of one XLA op."""
  region = next((r for r in _REGIONS if f"/{r}/" in op_name or f"({r}" in op_name), None)
  if not op_name:
    region = "unattributed (XLA-made op)"
  elif region is None:
    region = "loss (outside the net)" if ("jvp(" in op_name or "transpose(" in op_name) \
        else "optimizer, grad norm, guard"
  if opcode in ("dot", "convolution") or "ynn" in opcode or op_name.endswith("dot_general"):
    kind = "matmul"
  else:
    kind = next((k for k, keys in _KINDS if any(key in op_name for key in keys)),
                "other elementwise / reduce")
  direction = "bwd" if "transpose(" in op_name else "fwd"
  return region, kind, direction


def profile_step(trainer: Trainer, state, batch: dict, dump_dir: str, steps: int):
  """Traces `steps` train steps; returns (state, step wall seconds, rows of top costs).

  Each XLA op ("thunk") of the step is timed by the profiler and named by the dumped HLO, so
  the rows say which part of the model (reader, retriever, MLM head, optimizer), which kind
  of work (matmul, dropout RNG, softmax, LayerNorm, ...) and which pass (fwd/bwd) cost what.
  """
  with tempfile.TemporaryDirectory() as trace_dir:
    start = time.perf_counter()
    with jax.profiler.trace(trace_dir):
      for _ in range(steps):
        state, metrics = trainer.train_step(state, batch)
        jax.block_until_ready((state, metrics))
    wall = (time.perf_counter() - start) / steps
    (path,) = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    data = jax.profiler.ProfileData.from_file(path)
  per_op = collections.Counter()
  program = None
  for plane in data.planes:
    for line in plane.lines:
      for event in line.events:
        stats = dict(event.stats)
        if "train_step" in str(stats.get("hlo_module", "")) and "hlo_op" in stats:
          per_op[stats["hlo_op"]] += event.duration_ns / 1e9 / steps
          program = stats["program_id"]
  ops = _hlo_ops(dump_dir, program) if program is not None else {}
  by_class = collections.Counter()
  for name, seconds in per_op.items():
    opcode, _, op_name = ops.get(name, ("?", "", ""))
    by_class[_classify(opcode, op_name)] += seconds
  total = sum(per_op.values())
  rows = [(f"{region}: {kind} ({direction})", seconds, seconds / total)
          for (region, kind, direction), seconds in by_class.most_common(12)]
  rows.append(("sum of all XLA ops (ops may overlap on the 2 threads)", total, 1.0))
  for name, seconds in per_op.most_common(8):
    opcode, result, op_name = ops.get(name, ("?", "?", ""))
    where = "/".join(op_name.split("/")[-3:])
    rows.append((f"op {name} ({opcode} -> {result.split('{')[0]}): {where}", seconds,
                 seconds / total))
  return state, wall, rows


# ------------------------------------------------------------------------------------------
# The command.
# ------------------------------------------------------------------------------------------

def _per_shape(text: str | None, defaults: dict[str, int], flag: str) -> dict[str, int]:
  """`--steps 5` (every shape) or `--steps tiny=10,base=2`."""
  values = dict(defaults)
  if not text:
    return values
  for part in text.split(","):
    name, sep, value = part.rpartition("=")
    try:
      number = int(value)
    except ValueError:
      raise SystemExit(f"{flag}: expected N or SHAPE=N[,SHAPE=N], got {text!r}") from None
    if number < 1:
      raise SystemExit(f"{flag}: must be at least 1, got {number}")
    if not sep:
      values = {s: number for s in values}
    elif name in values:
      values[name] = number
    else:
      raise SystemExit(f"{flag}: unknown shape {name!r} (shapes: {', '.join(SHAPES)})")
  return values


def _names(text: str, known: Sequence[str], flag: str) -> list[str]:
  names = [n.strip() for n in text.split(",") if n.strip()]
  unknown = [n for n in names if n not in known]
  if unknown or not names:
    raise SystemExit(f"{flag}: unknown {unknown or text!r}; choose from {', '.join(known)}")
  return names


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  p.add_argument("--shapes", default="tiny,base", help="comma list of: tiny, base")
  p.add_argument("--precisions", default="fp32,bf16,bf16out",
                 help="comma list of: fp32, bf16 (bf16 in, f32 acc), bf16out (bf16 out)")
  p.add_argument("--steps", help="timed steps after the compile step: N or tiny=N,base=N "
                                 f"(default {DEFAULT_STEPS})")
  p.add_argument("--batch", help="queries per step: N or tiny=N,base=N "
                                 f"(default {DEFAULT_BATCH})")
  p.add_argument("--candidates", type=int, default=8, help="K, the null doc included")
  p.add_argument("--vocab", help=f"vocabulary size: N or tiny=N,base=N (default {DEFAULT_VOCAB})")
  p.add_argument("--openqa_shapes", default="tiny", help="shapes that also time Open-QA")
  p.add_argument("--peak_size", type=int, default=2048, help="n of the n x n peak matmul")
  p.add_argument("--peak_reps", type=int, default=8)
  p.add_argument("--profile", action="store_true",
                 help="trace one step of every variant and print its top costs per XLA op")
  args = p.parse_args(argv)
  args.shapes = _names(args.shapes, SHAPES, "--shapes")
  args.precisions = _names(args.precisions, tuple(PRECISIONS), "--precisions")
  args.openqa_shapes = [] if not args.openqa_shapes else _names(
      args.openqa_shapes, SHAPES, "--openqa_shapes")
  args.steps = _per_shape(args.steps, DEFAULT_STEPS, "--steps")
  args.batch = _per_shape(args.batch, DEFAULT_BATCH, "--batch")
  args.vocab = _per_shape(args.vocab, DEFAULT_VOCAB, "--vocab")
  if args.candidates < 2:
    raise SystemExit("--candidates: need the null doc and at least one retrieved block")
  return args


def _table(rows: list[Row], peaks: dict[str, Peak]) -> list[str]:
  fp32, bf16 = peaks["fp32"].tflops, peaks["bf16"].tflops
  lines = ["| shape | model | precision | batch | step ms | queries/s | enc seq/s | GFLOP/step "
           "| TFLOP/s | % fp32 peak | % bf16 peak | compile s | max RSS GB |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
  for r in rows:
    tflops = r.flops / r.step_s / 1e12
    lines.append(
        f"| {r.shape} | {r.model} | {r.precision} | {r.batch} | {r.step_s * 1e3:.1f} "
        f"| {r.queries / r.step_s:.2f} | {r.sequences / r.step_s:.1f} | {r.flops / 1e9:.1f} "
        f"| {tflops:.3f} | {100 * tflops / fp32:.0f}% | {100 * tflops / bf16:.0f}% "
        f"| {r.compile_s:.0f} | {r.rss_gb:.1f} |")
  return lines


def run(args: argparse.Namespace, dump_dir: str | None) -> tuple[dict, list[Row], list]:
  """Peaks, then every (shape, precision) variant; profiles when `dump_dir` is set."""
  peaks = {name: Peak(PRECISIONS[name][1], rate)
           for name, rate in matmul_tflops(args.peak_size, args.peak_reps).items()}
  for peak in peaks.values():
    print(f"peak {args.peak_size}x{args.peak_size} matmul, {peak.label}: "
          f"{peak.start:.3f} TFLOP/s", flush=True)
  rows, profiles = [], []
  k = args.candidates
  for shape_name in args.shapes:
    for precision in args.precisions:
      shape = load_shape(shape_name, precision, args.vocab[shape_name])
      label, b, steps = PRECISIONS[precision][1], args.batch[shape_name], args.steps[shape_name]
      variants = [(f"REALM pre-train K={k}", realm_model(shape), pretrain_batch(shape, b, k),
                   b + 2 * b * k, pretrain_flops(shape, b, k))]
      if shape_name in args.openqa_shapes:
        variants.append((f"Open-QA R={NUM_READ}", openqa_model(shape), openqa_batch(shape, b),
                         b + b * NUM_READ, openqa_flops(shape, b)))
      for name, model, batch, sequences, flops in variants:
        step_s, compile_s, trainer, state = bench_step(model, batch, steps)
        rows.append(Row(shape_name, name, label, b, step_s, compile_s, b, sequences, flops,
                        _max_rss_gb()))
        print(_table(rows[-1:], peaks)[-1], flush=True)
        if dump_dir is not None:
          state, wall, parts = profile_step(trainer, state, batch, dump_dir,
                                            steps=min(steps, 2))
          profiles.append((f"{shape_name}, {name}, {label}: traced step {wall * 1e3:.0f} ms "
                           f"(untraced {step_s * 1e3:.0f} ms)", parts))
        del trainer, state
  for name, rate in matmul_tflops(args.peak_size, args.peak_reps).items():
    peaks[name].end = rate
  return peaks, rows, profiles


def main(argv: Sequence[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  command = f"python benchmarks/train_step.py {shlex.join(argv)}".rstrip()
  with tempfile.TemporaryDirectory() as dump_dir:
    if args.profile:
      # Read when the CPU backend starts, i.e. at the first computation below.
      os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + _dump_flags(dump_dir)
    print(f"command: {command}", flush=True)
    load_start = os.getloadavg()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"jax {jax.__version__} on {jax.devices()[0].platform}; load average at start "
          f"{load_start:.2f}", flush=True)
    peaks, rows, profiles = run(args, dump_dir if args.profile else None)

  print()
  print(f"command: `{command}`")
  print(f"load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}, "
        f"on {os.cpu_count()} CPUs")
  print()
  print("| peak matmul | TFLOP/s at start | at end | used (the better) |")
  print("|---|---:|---:|---:|")
  for peak in peaks.values():
    print(f"| {args.peak_size}x{args.peak_size}, {peak.label} | {peak.start:.3f} "
          f"| {peak.end:.3f} | {peak.tflops:.3f} |")
  print()
  print("\n".join(_table(rows, peaks)))
  print("\nenc seq/s counts B query + B*K doc + B*K joint encoder sequences (Open-QA: B query + "
        "B*R reader); GFLOP/step is the analytic matmul count in the module docstring; "
        "% bf16 peak is against the bf16-in, f32-acc matmul.")
  for title, parts in profiles:
    print(f"\nprofile: {title}")
    print("| where: what (pass) | ms/step | share of op time |")
    print("|---|---:|---:|")
    for name, seconds, share in parts:
      print(f"| {name} | {seconds * 1e3:.1f} | {100 * share:.0f}% |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
