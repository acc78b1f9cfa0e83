"""`--gin_file` / `--gin.KEY=VALUE` handling in the t5x manner.

Gin files are looked up relative to the working directory first and then inside the
installed `realm_bench.gin` package, so `--gin_file=runs/pretrain.gin` works from anywhere.
Parse errors are re-raised as InputError naming the file (or the command-line binding).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import gin

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text

GIN_FLAG = "--gin."


def gin_dir() -> Path:
  """The shipped gin folder: `gin/` of a source checkout, or `realm_bench/gin` in a wheel."""
  package = Path(__file__).resolve().parent
  for candidate in (package.parent / "gin", package / "gin"):
    if candidate.is_dir():
      return candidate
  raise FileNotFoundError(f"no gin folder beside {package}")


def split_gin_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
  """Separates `--gin.K=V` arguments (gin bindings `K = V`) from the rest of argv."""
  rest, bindings = [], []
  for arg in argv:
    if arg.startswith(GIN_FLAG):
      key, sep, value = arg[len(GIN_FLAG):].partition("=")
      if not sep or not key:
        raise InputError(f"expected --gin.KEY=VALUE, got {arg!r}")
      bindings.append(f"{key} = {value}")
    else:
      rest.append(arg)
  return rest, bindings


def resolve_gin_file(name: str) -> str:
  for candidate in (Path(name), gin_dir() / name):
    if candidate.is_file():
      return str(candidate.resolve())  # absolute: gin tries its search path first
  raise InputError(f"gin file not found (looked in the working directory and {gin_dir()})",
                   path=name)


def _required_macros_unset() -> list[str]:
  """Macros still bound to %gin.REQUIRED after parsing: a run must not start with them."""
  missing = []
  for (scope, selector), params in gin.config._CONFIG.items():  # pylint: disable=protected-access
    value = params.get("value")
    if selector == "gin.macro" and repr(value) == "%gin.REQUIRED":
      missing.append(scope)
  return sorted(missing)


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str] = (), *,
              finalize: bool = False) -> None:
  """Parses files then bindings, so command-line bindings win, as in t5x.

  The config is not locked by default: modules are imported lazily (so `--help` and small
  commands stay fast), and a locked config refuses configurables registered after it.
  """
  gin.clear_config()
  prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
  if str(gin_dir()) not in prefixes:
    # First, so `include 'models/ict.gin'` finds the shipped file without gin logging a failed
    # look-up in the working directory; --gin_file paths are resolved above, cwd first.
    prefixes.insert(0, str(gin_dir()))
  for name in gin_files:
    path = resolve_gin_file(name)
    try:
      gin.parse_config_file(path)
    except (ValueError, ImportError, SyntaxError, KeyError) as e:
      raise InputError(f"cannot parse gin config: {e}", path=path) from None
  for binding in bindings:
    try:
      gin.parse_config(binding)
    except (ValueError, ImportError, SyntaxError, KeyError) as e:
      raise InputError(f"cannot apply --gin binding {binding!r}: {e}") from None
  missing = _required_macros_unset()
  if missing:
    files = ", ".join(gin_files) or "(no gin files)"
    raise InputError(
        f"REQUIRED macro(s) not set: {', '.join(missing)}; set them in a gin file or with "
        f"--gin.NAME=VALUE (files parsed: {files})")
  if finalize:
    gin.finalize()


def write_config(run_dir, name: str = "config.gin") -> Path:
  """Writes the full parsed config beside the run record (t5x writes config.gin too)."""
  path = Path(run_dir) / name
  atomic_write_text(path, gin.config_str())
  return path


def write_operative_config(run_dir) -> Path:
  """Writes only the bindings that were actually used, after the run has called them."""
  path = Path(run_dir) / "operative_config.gin"
  atomic_write_text(path, gin.operative_config_str())
  return path


def all_gin_files() -> list[Path]:
  return sorted(p for p in gin_dir().rglob("*.gin"))


def required_macros_in(path) -> list[str]:
  """Names a gin file declares as `NAME = %gin.REQUIRED` (documented in each run header)."""
  text = Path(path).read_text(encoding="utf-8")
  return re.findall(r"^(\w+)\s*=\s*%gin\.REQUIRED", text, flags=re.M)


def run_entry(fn, gin_files: Sequence[str], bindings: Sequence[str]):
  """Parses the config, then calls the gin-configured keyword-only entry function `fn`."""
  if not gin_files:
    raise InputError("at least one --gin_file is required")
  parse_gin(gin_files, bindings)
  return gin.get_configurable(fn)()
