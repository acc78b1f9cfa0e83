"""Parameters the networks gained when they were made REALM's exactly, and the way back.

Runs trained before that change have no span-head LayerNorm; their other differences (GELU's
erf form, documents as one segment) change no parameter shape. `gin/models/networks_v0.gin`
builds the networks as they were, so those runs still load; without it, restoring, evaluating
or warm-starting from one names the missing parameter and that file, instead of a bare
shape mismatch (or the guess that the run is of another kind).
"""
from __future__ import annotations

from typing import Any

V0_GIN = "models/networks_v0.gin"
# Path fragments of parameters that only the current networks have.
_ADDED = ("span_head/hidden_norm/",)


def _added(name: str) -> bool:
  return any(f"/{part}" in f"/{name}" for part in _ADDED)


def mismatch_hint(name: str, in_checkpoint: Any, in_model: Any) -> str | None:
  """What to do when parameter `name` is present on one side only because of that change
  (each side: its shape entry, None when absent); None for any other mismatch."""
  if not _added(name) or (in_checkpoint is None) == (in_model is None):
    return None
  if in_checkpoint is None:
    return (f"the run was trained before the span head had ORQA's LayerNorm ({name!r} is "
            f"absent there): load it with the networks it was trained with, "
            f"--gin_file={V0_GIN} (last)")
  return (f"the run was trained with the span head's LayerNorm ({name!r}) but this model has "
          f"none: drop {V0_GIN} (or SPAN_LAYER_NORM=False)")
