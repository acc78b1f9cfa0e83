"""`--gin_file` / `--gin_bindings` / `--gin.KEY=VALUE` / `--gin_search_paths`, as in t5x.

Gin files are looked up relative to the working directory, then in each `--gin_search_paths`
folder, then in the shipped gin folder, so `--gin_file=runs/pretrain.gin` works from anywhere
and a user's own folder of files that `include` each other works once it is a search path.
Parse errors are re-raised as InputError naming the file (or the command-line binding).

Strictness (`strict=True`, what the command line uses): gin accepts any macro, so a misspelt
`--gin.NUM_STEP=5` would silently train the default NUM_STEPS. A macro set on the command line
or in a user's own file that no binding of the parsed config reads is refused, naming it and
the closest macro that is read. Shipped files are exempt: overlays such as `sizes/tiny.gin`
set macros for several kinds of run at once.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

import gin

from realm_bench import resources
from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text

GIN_FLAG = "--gin."
# A macro definition at the top level of a gin file: `NAME = ...` or `scope/NAME = ...`
# (a name without a dot; `a.b = ...` binds a parameter, and block bodies are indented).
_MACRO_LINE = re.compile(r"^([A-Za-z_][\w/]*)\s*=(?!=)")
# What a `--gin.KEY=` key may be: a macro or `Configurable.param`, scoped or not (no spaces,
# so it needs no shell quoting).
_FLAG_KEY = re.compile(r"[A-Za-z_][\w./]*")
_GIN_ERRORS = (ValueError, ImportError, SyntaxError, KeyError, OSError)


_UNSET = object()


def gin_dir() -> Path:
  """The shipped gin folder: `gin/` of a source checkout, or `realm_bench/gin` in a wheel."""
  return resources.shipped_folder("gin")


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


def macro_of(binding: str) -> str | None:
  """The macro (`NAME` or `scope/NAME`) a one-line binding sets, None for a parameter's."""
  m = _MACRO_LINE.match(binding.strip())
  return m.group(1) if m else None


def is_flag_key(key: str) -> bool:
  """Whether `--gin.KEY=VALUE` can carry a binding of `key` (split_gin_args' grammar)."""
  return bool(_FLAG_KEY.fullmatch(key))


def split_search_paths(values: Iterable[str]) -> list[str]:
  """t5x's `--gin_search_paths` is a comma-separated list; here it may also be repeated."""
  return [p for value in values for p in value.split(",") if p.strip()]


def resolve_gin_file(name: str, search_paths: Sequence[str] = ()) -> str:
  for candidate in (Path(name), *(Path(p) / name for p in search_paths), gin_dir() / name):
    if candidate.is_file():
      return str(candidate.resolve())  # absolute: gin tries its search path first
  where = ", ".join(["the working directory", *search_paths, str(gin_dir())])
  raise InputError(f"gin file not found (looked in {where})", path=name)


def _required_macros_unset() -> list[str]:
  """Macros still bound to %gin.REQUIRED after parsing: a run must not start with them."""
  missing = []
  for (scope, selector), params in gin.config._CONFIG.items():  # pylint: disable=protected-access
    value = params.get("value")
    if selector == "gin.macro" and repr(value) == "%gin.REQUIRED":
      missing.append(scope)
  return sorted(missing)


def _read_macros() -> frozenset[str]:
  """Macros that some binding of the current config refers to (`%NAME`)."""
  refs = gin.config.iterate_references(gin.config._CONFIG)  # pylint: disable=protected-access
  return frozenset(r.scoped_selector[:-len("/gin.macro")] for r in refs
                   if r.selector == "gin.macro")


@dataclasses.dataclass(frozen=True)
class Parsed:
  """What one parse_gin call read: every file (includes too, resolved) and the read macros."""
  files: tuple[Path, ...]
  read: frozenset[str]
  # (binding text, (scope, configurable selector)) of each command-line binding of a
  # configurable's parameter (not of a macro).
  bound: tuple[tuple[str, tuple[str, str]], ...] = ()


def _included_files(result, prefixes: Sequence[str]) -> list[Path]:
  """The files a gin parse result includes, found the way gin finds them (its prefixes)."""
  out = []
  for included in result.includes:
    name = included.filename
    for prefix in ([""] if os.path.isabs(name) else prefixes):
      if os.path.isfile(os.path.join(prefix, name)):
        out.append(Path(os.path.join(prefix, name)).resolve())
        break
    out += _included_files(included, prefixes)
  return out


def _hint(name: str, known: Iterable[str]) -> str:
  close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
  return f" (did you mean {close[0]}?)" if close else ""


def _binding_error(binding: str, error: Exception) -> InputError:
  """gin's message, plus the closest configurable or parameter name for a misspelt one."""
  message = str(error).split("\n")[0]
  hint = ""
  context = gin.config._parse_context()  # pylint: disable=protected-access
  if m := re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'", message):
    configurable = context.get_configurable(m.group(1))
    if configurable is not None:
      hint = _hint(m.group(2), inspect.signature(configurable.wrapped).parameters)
  elif m := re.search(r"No configurable matching '([\w.]+)'", message):
    selectors = gin.config._REGISTRY._selector_map  # pylint: disable=protected-access
    known = {".".join(s.split(".")[-n:]) for s in selectors for n in (1, 2)}
    hint = _hint(m.group(1), known)
  return InputError(f"cannot apply gin binding {binding!r}: {message}{hint}")


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str] = (), *,
              search_paths: Sequence[str] = (), finalize: bool = False,
              strict: bool = False) -> Parsed:
  """Parses files then bindings, so command-line bindings win, as in t5x.

  The config is not locked by default: modules are imported lazily (so `--help` and small
  commands stay fast), and a locked config refuses configurables registered after it.
  `strict` refuses macros of the bindings and the user's files that nothing reads.
  """
  gin.clear_config()
  prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
  # `include 'models/ict.gin'` looks in the user's search paths, then the shipped folder, then
  # the working directory; set afresh each time so one command's paths do not leak into the
  # next parse of the same process.
  prefixes[:] = [*(str(Path(p).resolve()) for p in search_paths), str(gin_dir()), ""]
  files = []
  for name in gin_files:
    path = resolve_gin_file(name, search_paths)
    try:
      result = gin.parse_config_file(path)
    except _GIN_ERRORS as e:
      raise InputError(f"cannot parse gin config: {e}", path=path) from None
    files += [Path(path), *_included_files(result, prefixes)]
  bound = []
  config = gin.config._CONFIG  # pylint: disable=protected-access
  for binding in bindings:
    before = {key: dict(params) for key, params in config.items()}
    try:
      gin.parse_config(binding)
    except _GIN_ERRORS as e:
      raise _binding_error(binding, e) from None
    for key, params in config.items():
      changed = any(before.get(key, {}).get(name, _UNSET) is not value
                    for name, value in params.items())
      if changed and key[1] != "gin.macro":
        bound.append((binding, key))
  parsed = Parsed(files=tuple(files), read=_read_macros(), bound=tuple(bound))
  if strict:
    refuse_unread_macros([parsed], bindings)
  missing = _required_macros_unset()
  if missing:
    names = ", ".join(gin_files) or "(no gin files)"
    raise InputError(
        f"REQUIRED macro(s) not set: {', '.join(missing)}; set them in a gin file or with "
        f"--gin.NAME=VALUE (files parsed: {names})")
  if finalize:
    gin.finalize()
  return parsed


def _user_macros(files: Iterable[Path], bindings: Sequence[str]):
  """(macro, file or None, line or None, binding text) the user set: in their own files
  (those outside the shipped gin folder) and in command-line bindings."""
  shipped = gin_dir().resolve()
  for path in dict.fromkeys(files):   # once each, in parse order
    if path.is_relative_to(shipped):
      continue
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
      if m := _MACRO_LINE.match(line):
        yield m.group(1), path, lineno, line.strip()
  for binding in bindings:
    for line in binding.splitlines():
      if m := _MACRO_LINE.match(line.strip()):
        yield m.group(1), None, None, line.strip()


def refuse_unread_macros(parses: Sequence[Parsed], bindings: Sequence[str]) -> None:
  """InputError for the first user-set macro that no parse in `parses` reads."""
  read = frozenset().union(*(p.read for p in parses))
  files = [f for p in parses for f in p.files]
  for name, path, line, text in _user_macros(files, bindings):
    if name not in read:
      where = "" if path else f"binding {text!r}: "
      raise InputError(f"{where}no configurable reads the macro {name} in this run"
                       f"{_hint(name, read)}", path=path, line=line)


def refuse_uncalled_bindings(parsed: Parsed) -> None:
  """InputError for command-line bindings of configurables this command never called.

  gin accepts `--gin.ScannIndex.num_leaves=2000` in a run that searches exactly: the name is
  real, only nothing calls it, so the binding silently changes nothing. Which configurables
  a command calls is known only once it has run (many are built by code, not referenced from
  the config), so this is checked when the command ends: its outputs are complete and do not
  depend on the binding, and the exit status says the command line was not what ran.
  """
  called = set(gin.config._OPERATIVE_CONFIG)  # pylint: disable=protected-access

  def used(key):
    scope, selector = key   # an unscoped binding applies in every scope
    return any(s == selector and (not scope or scope in c.split("/")) for c, s in called)
  unused = [text for text, key in parsed.bound if not used(key)]
  if unused:
    raise InputError("gin binding(s) never used by this command (nothing called their "
                     f"configurable; its outputs are complete without them): "
                     f"{'; '.join(map(repr, unused))}")


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


def run_entry(fn, gin_files: Sequence[str], bindings: Sequence[str], *,
              search_paths: Sequence[str] = ()):
  """Parses the config strictly, then calls the gin-configured keyword-only entry `fn`."""
  if not gin_files:
    raise InputError("at least one --gin_file is required")
  parsed = parse_gin(gin_files, bindings, search_paths=search_paths, strict=True)
  result = gin.get_configurable(fn)()
  refuse_uncalled_bindings(parsed)
  return result
