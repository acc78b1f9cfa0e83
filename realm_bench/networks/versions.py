"""Parameters the networks gained when they were made REALM's exactly, and the way back; and
the two layer layouts of `BertConfig.scan_layers`.

Runs trained before that change have no span-head LayerNorm; their other differences (GELU's
erf form, documents as one segment) change no parameter shape. `gin/models/networks_v0.gin`
builds the networks as they were, so those runs still load; without it, restoring, evaluating
or warm-starting from one names the missing parameter and that file, instead of a bare
shape mismatch (or the guess that the run is of another kind).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

V0_GIN = "models/networks_v0.gin"
# Path fragments of parameters that only the current networks have.
_ADDED = ("span_head/hidden_norm/",)


def _added(name: str) -> bool:
  return any(f"/{part}" in f"/{name}" for part in _ADDED)


# A path segment of a layer in either layout: `layer_3` (unscanned) or `layers` (stacked).
_UNSCANNED = re.compile(r"(^|/)layer_\d+/")
_SCANNED = re.compile(r"(^|/)layers/")


def _scanned(names: Iterable[str]) -> bool | None:
  """True/False when `names` hold encoder layers of one layout; None without layers."""
  names = list(names)
  if any(_SCANNED.search(n) for n in names):
    return True
  if any(_UNSCANNED.search(n) for n in names):
    return False
  return None


def scan_hint(checkpoint_names: Iterable[str], model_names: Iterable[str]) -> str | None:
  """The fix when one side's layers are stacked (`scan_layers`) and the other's are not."""
  saved, wanted = _scanned(checkpoint_names), _scanned(model_names)
  if saved is None or wanted is None or saved == wanted:
    return None
  if saved:
    return ("the run was trained with BertConfig.scan_layers=True (its layers stacked under "
            "'layers/') but this model's are not: set SCAN_LAYERS=True (or "
            "bert.BertConfig.scan_layers=True), or convert the parameters with "
            "realm_bench.networks.layer_stack.unstack_layers")
  return ("the run was trained with BertConfig.scan_layers=False (layers 'layer_0/' ...) but "
          "this model stacks them: drop SCAN_LAYERS=True (bert.BertConfig.scan_layers), or "
          "convert the parameters with realm_bench.networks.layer_stack.stack_layers")


def mismatch_hint(name: str, in_checkpoint: Any, in_model: Any, *,
                  checkpoint_names: Iterable[str] = (),
                  model_names: Iterable[str] = ()) -> str | None:
  """What to do when parameter `name` is present on one side only because of a known change
  (each side: its shape entry, None when absent; the names: all parameters of each side, for
  the layer layout); None for any other mismatch."""
  if (in_checkpoint is None) != (in_model is None) and (
      _UNSCANNED.search(name) or _SCANNED.search(name)):
    hint = scan_hint(checkpoint_names, model_names)
    if hint is not None:
      return hint
  if not _added(name) or (in_checkpoint is None) == (in_model is None):
    return None
  if in_checkpoint is None:
    return (f"the run was trained before the span head had ORQA's LayerNorm ({name!r} is "
            f"absent there): load it with the networks it was trained with, "
            f"--gin_file={V0_GIN} (last)")
  return (f"the run was trained with the span head's LayerNorm ({name!r}) but this model has "
          f"none: drop {V0_GIN} (or SPAN_LAYER_NORM=False)")
