"""The Open-QA span head's forward and backward time: the fused head against ORQA's
layer-by-layer form, on the whole reader input and on the body window.

  python benchmarks/span_head.py [--batch 12 --read 5 --reader_len 39 --body 19] [--one_thread]

The span head scores every (start, width) pair through ReLU -> LayerNorm -> score, so its
activations are [batch, read, positions, max_span_len, span_hidden]: at the quickstart's sizes
it was about 43% of a fine-tuning step (E119). Rows, in one run on the same input:
  layer-by-layer, whole input  the head as it was: every layer applied in turn, all positions
  layer-by-layer, body window  the same on the body's positions only (spans never leave it)
  fused, body window           `networks.reader.SpanHead`: LayerNorm and score as one
                               expression, ends gathered
Defaults are the quickstart's fine-tuning (12 questions, 5 read blocks, reader input 39, longest
body 19, hidden 128, span hidden 256, width 10). `--one_thread` sets one XLA thread, as a
reproduction lane has (must be given before JAX starts, so it is read from argv first).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from realm_bench.lanes import ONE_THREAD_XLA

if "--one_thread" in sys.argv:
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {ONE_THREAD_XLA}".strip()

import flax.linen as nn  # pylint: disable=g-import-not-at-top
import jax
import jax.numpy as jnp
import numpy as np

from realm_bench.networks import bert
from realm_bench.networks.reader import SpanHead


class LayerByLayer(nn.Module):
  """ORQA's span head with each layer applied in turn (the project's until E119)."""
  config: bert.BertConfig
  hidden: int
  max_span_len: int

  @nn.compact
  def __call__(self, hidden_states):
    cfg = self.config
    start = bert.Projection(cfg, (self.hidden,), ("embed", "mlp"), name="start")(hidden_states)
    end = bert.Projection(cfg, (self.hidden,), ("embed", "mlp"), name="end")(hidden_states)
    length = hidden_states.shape[-2]
    end = jnp.pad(end, [(0, 0)] * (end.ndim - 2) + [(0, self.max_span_len), (0, 0)])
    ends = jnp.stack([end[..., w:w + length, :] for w in range(self.max_span_len)], axis=-2)
    h = bert.LayerNorm(1e-3, axis="mlp", name="hidden_norm")(
        nn.relu(start[..., :, None, :] + ends))
    return bert.Projection(cfg, (1,), ("mlp", None), name="score")(h)[..., 0]


def time_grad(module, params, x, reps: int) -> float:
  """Median seconds of one jitted forward + backward (loss and both gradients)."""
  grad = jax.jit(jax.grad(lambda p, h: jnp.sum(jnp.tanh(module.apply(p, h))), argnums=(0, 1)))
  jax.block_until_ready(grad(params, x))
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    jax.block_until_ready(grad(params, x))
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  for name, default in (("batch", 12), ("read", 5), ("reader_len", 39), ("body", 19),
                        ("hidden", 128), ("span_hidden", 256), ("max_span_len", 10),
                        ("reps", 10)):
    parser.add_argument(f"--{name}", type=int, default=default)
  parser.add_argument("--one_thread", action="store_true")
  args = parser.parse_args(argv)
  if not 0 < args.body <= args.reader_len:
    parser.error(f"--body must be in 1..--reader_len ({args.reader_len}), got {args.body}")
  cfg = bert.BertConfig(vocab_size=100, hidden_size=args.hidden, num_layers=1, num_heads=1,
                        mlp_dim=args.hidden, max_len=args.reader_len)
  rng = np.random.default_rng(0)
  whole = jnp.asarray(rng.normal(size=(args.batch, args.read, args.reader_len, args.hidden)),
                      jnp.float32)
  body = whole[..., :args.body, :]
  reference = LayerByLayer(cfg, args.span_hidden, args.max_span_len)
  fused = SpanHead(cfg, args.span_hidden, args.max_span_len)
  params = reference.init(jax.random.PRNGKey(0), whole)
  rows = [("layer-by-layer, whole input", reference, whole),
          ("layer-by-layer, body window", reference, body),
          ("fused, body window", fused, body)]
  print(f"command: `python benchmarks/span_head.py {' '.join(argv or sys.argv[1:])}`".rstrip())
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; median of {args.reps}")
  print("\n| head | positions | forward + backward ms | x the first row |\n|---|---:|---:|---:|")
  baseline = None
  for name, module, x in rows:
    seconds = time_grad(module, params, x, args.reps)
    baseline = baseline or seconds
    print(f"| {name} | {x.shape[-2]} | {1000 * seconds:.1f} | {baseline / seconds:.2f}x |")
  gap = float(jnp.max(jnp.abs(fused.apply(params, body) - reference.apply(params, body))))
  print(f"\nlargest |fused - layer-by-layer| on the body window: {gap:.1e}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
