"""Will a training step fit this CPU host? Asked before the state is allocated.

A paper-size run started on a machine without an accelerator used to allocate, compile and
then die inside XLA with an out-of-memory traceback minutes later. XLA can say beforehand
what the compiled step needs (its memory analysis of the arguments, outputs and temporaries)
and how many FLOPs it does, so a too-large step is refused with those numbers, and a large
one is announced with its estimated time, before any of it is allocated.

Small states (the synthetic world's tiny and small sizes) are not checked: the extra
compilation would cost them more than it tells.
"""
from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from realm_bench.errors import InputError

GIB = 1 << 30
CHECKED_STATE_BYTES = 256 << 20   # states below this are not worth a second compilation


def available_bytes() -> int:
  """MemAvailable of /proc/meminfo (what can be allocated without swapping), else total RAM."""
  try:
    with open("/proc/meminfo", encoding="ascii") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cpu_flops_per_second() -> float:
  """This host's float32 matmul rate, measured (a few hundred ms): the time estimate's unit."""
  n = 1024
  a = jnp.ones((n, n), jnp.float32)
  matmul = jax.jit(lambda x: x @ x)
  matmul(a).block_until_ready()
  start, runs = time.perf_counter(), 5
  for _ in range(runs):
    matmul(a).block_until_ready()
  return 2 * n ** 3 * runs / (time.perf_counter() - start)


def state_bytes(abstract_state) -> int:
  return int(sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize
                 for x in jax.tree.leaves(abstract_state)))


def step_requirements(compiled) -> tuple[int, float]:
  """(bytes, FLOPs) of a compiled step by XLA's analyses: arguments + outputs + temporaries,
  less what the donated state lets it write in place."""
  memory = compiled.memory_analysis()
  need = (memory.argument_size_in_bytes + memory.output_size_in_bytes
          + memory.temp_size_in_bytes - memory.alias_size_in_bytes)
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return need, float((cost or {}).get("flops", 0.0))


def check_step_fits(*, trainer, rng, batch, min_state_bytes: int = CHECKED_STATE_BYTES,
                    available: int | None = None, flops_per_second: float | None = None,
                    say=print) -> dict | None:
  """Refuses (InputError, field batch_size) a step that needs more memory than the host has;
  says the estimate when it needs more than half. Returns the estimate, or None when the
  backend is an accelerator or the state is small."""
  if jax.default_backend() != "cpu":
    return None
  target = trainer.abstract_state(rng, batch)
  size = state_bytes(target)
  if size < min_state_bytes:
    return None
  need, flops = step_requirements(trainer.lower_step(target, batch).compile())
  available = available_bytes() if available is None else available
  rate = flops_per_second or cpu_flops_per_second()
  estimate = {"state_gib": size / GIB, "step_gib": need / GIB, "available_gib": available / GIB,
              "step_tflop": flops / 1e12, "step_seconds": flops / rate if rate else None}
  text = (f"a training step needs about {need / GIB:.1f} GiB on this CPU (state "
          f"{size / GIB:.1f} GiB; {available / GIB:.1f} GiB available) and "
          f"{flops / 1e12:.1f} TFLOP, about {flops / rate:.0f} s per step at this host's "
          f"measured {rate / 1e9:.0f} GFLOP/s")
  if need > available:
    raise InputError(f"{text}: it does not fit. Use an accelerator (README, Scaling out), a "
                     "smaller size (sizes/small.gin) or a smaller batch", field="batch_size")
  if need > available / 2:
    say(f"note: {text}")
  return estimate
