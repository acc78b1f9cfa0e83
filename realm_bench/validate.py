"""Checks of an entry function's arguments, made before it touches the disk.

Gin passes whatever the files and bindings say: `--gin.NUM_STEPS="'abc'"` arrives as a string
and a negative batch size as a negative number, and either would otherwise fail minutes later
deep inside JAX or numpy, naming some other field. Each check names the parameter and, when a
macro feeds it, the macro the user actually typed.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Sequence

import gin

from realm_bench.errors import InputError


def _macro_feeding(configurable: str, param: str) -> str | None:
  """The macro bound to `configurable.param` in the current gin config, if any."""
  for (_, selector), params in gin.config._CONFIG.items():  # pylint: disable=protected-access
    if selector.split(".")[-1] == configurable and param in params:
      value = params[param]
      if isinstance(value, gin.config.ConfigurableReference) and value.selector == "gin.macro":
        return value.scoped_selector[:-len("/gin.macro")]
  return None


def _refuse(configurable: str, param: str, expected: str, value,
            field: str | None = None) -> InputError:
  macro = _macro_feeding(configurable, param)
  where = f" (set by the gin macro {macro})" if macro else ""
  return InputError(f"expected {expected}, got {value!r}{where}", field=field or param)


def whole(configurable: str, param: str, value, *, minimum: int | None = None,
          maximum: int | None = None, optional: bool = False,
          field: str | None = None) -> None:
  """`field` names the value in the error when `param` alone would not (default: param)."""
  if value is None and optional:
    return
  ok = isinstance(value, Integral) and not isinstance(value, bool)
  bounds = [b for b in (minimum is not None and f">= {minimum}",
                        maximum is not None and f"<= {maximum}") if b]
  expected = "a whole number" + (f" {' and '.join(bounds)}" if bounds else "")
  if not ok or (minimum is not None and value < minimum) or (
      maximum is not None and value > maximum):
    raise _refuse(configurable, param, expected, value, field)


def number(configurable: str, param: str, value, *, minimum: float | None = None) -> None:
  ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
  if not ok or (minimum is not None and value < minimum):
    expected = "a finite number" + (f" >= {minimum:g}" if minimum is not None else "")
    raise _refuse(configurable, param, expected, value)


def text(configurable: str, param: str, value, *, choices: Sequence[str] | None = None) -> None:
  if not isinstance(value, str) or not value or (choices and value not in choices):
    expected = f"one of {', '.join(map(repr, choices))}" if choices else "a non-empty string"
    raise _refuse(configurable, param, expected, value)
