"""Reading a Hugging Face `save_pretrained` folder without needing its framework.

`config.json` gives the sizes the weights alone cannot (attention heads, span widths, the
activation); the weights come from `model.safetensors` (read here with numpy: the format is an
8-byte header length, a JSON header and the raw little-endian arrays, so neither torch nor the
`safetensors` package is needed), from `pytorch_model.bin` (needs torch) or from either's
sharded form (`*.index.json` with a `weight_map`).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from realm_bench.errors import InputError

CONFIG = "config.json"
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_config(folder: Path) -> dict[str, Any]:
  path = folder / CONFIG
  if not path.is_file():
    raise InputError(f"no {CONFIG} here: expected a Hugging Face save_pretrained folder",
                     path=folder)
  return read_json_object(path)


def read_json_object(path: Path) -> dict[str, Any]:
  """A JSON config file (HF's config.json, TF BERT's bert_config.json), refused cleanly."""
  try:
    config = json.loads(path.read_text(encoding="utf-8"))
  except (ValueError, UnicodeDecodeError) as e:
    raise InputError(f"not valid JSON ({e})", path=path) from None
  if not isinstance(config, dict):
    raise InputError("expected a JSON object", path=path)
  return config


def _dtype(name: str, path: Path, key: str):
  if name == "BF16":
    import ml_dtypes  # pylint: disable=g-import-not-at-top  # a JAX dependency
    return ml_dtypes.bfloat16
  if name not in _DTYPES:
    raise InputError(f"unsupported dtype {name!r}", path=path, field=key)
  return _DTYPES[name]


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
  """Every tensor of a .safetensors file as a float32 (or its own integer) numpy array."""
  data = path.read_bytes()
  try:
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size].decode("utf-8"))
  except (struct.error, ValueError, UnicodeDecodeError):
    raise InputError("not a safetensors file (bad header)", path=path) from None
  base, out = 8 + size, {}
  for key, entry in header.items():
    if key == "__metadata__":
      continue
    try:
      start, stop = entry["data_offsets"]
      dtype = _dtype(entry["dtype"], path, key)
      shape = tuple(entry["shape"])
    except (KeyError, TypeError, ValueError):
      raise InputError("malformed tensor entry in the header", path=path, field=key) from None
    if base + stop > len(data):
      raise InputError(f"tensor ends at byte {base + stop}, the file has {len(data)} "
                       "(truncated?)", path=path, field=key)
    array = np.frombuffer(data, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)),
                          offset=base + start).reshape(shape)
    out[key] = array.astype(np.float32) if np.issubdtype(array.dtype, np.floating) or \
        dtype.__name__ == "bfloat16" else array.copy()
  return out


def _read_torch(path: Path) -> dict[str, np.ndarray]:
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise InputError("reading pytorch_model.bin needs torch (pip install torch, or save the "
                     "model with safe_serialization=True to get model.safetensors)",
                     path=path) from None
  try:
    state = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # pylint: disable=broad-except  # torch raises many kinds
    raise InputError(f"could not be read by torch.load ({type(e).__name__}: {e})",
                     path=path) from None
  return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
          for k, v in state.items()}


def _read_one(path: Path) -> dict[str, np.ndarray]:
  return read_safetensors(path) if path.suffix == ".safetensors" else _read_torch(path)


def read_weights(folder: Path) -> tuple[dict[str, np.ndarray], list[Path]]:
  """(state dict, the files it came from): safetensors first, as `from_pretrained` does."""
  for name in ("model.safetensors", "pytorch_model.bin"):
    if (folder / name).is_file():
      return _read_one(folder / name), [folder / name]
    index = folder / f"{name}.index.json"
    if index.is_file():
      try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
      except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError("expected a JSON object with a weight_map", path=index,
                         field="weight_map") from None
      state: dict[str, np.ndarray] = {}
      for shard in shards:
        if not (folder / shard).is_file():
          raise InputError(f"shard {shard!r} named by {index.name} is missing", path=folder)
        state.update(_read_one(folder / shard))
      return state, [folder / s for s in shards]
  raise InputError("no model.safetensors or pytorch_model.bin (or their sharded "
                   "*.index.json) here", path=folder)
