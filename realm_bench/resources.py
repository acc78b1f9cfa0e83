"""The data folders shipped with the package: gin files, table specs, reported numbers.

In a source checkout they sit at the top of the repository (`gin/`, `results/specs`,
`results/reported`), where people edit them; an installed wheel carries them inside the
package (`realm_bench/gin`, `realm_bench/results/...`, mapped in pyproject.toml) and they are
found through importlib.resources. A checkout is recognised by its pyproject.toml, not by a
bare `gin/` beside the package: in site-packages, `gin/` is the gin-config library itself.
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent


def in_checkout() -> bool:
  return (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "gin").is_dir()


def shipped_folder(name: str) -> Path:
  """`name` ("gin", "results/specs", ...) of the checkout, or else of the installed package."""
  if in_checkout():
    folder = _CHECKOUT / name
  else:
    folder = importlib.resources.files("realm_bench").joinpath(name)
    # Wheels install as plain folders; gin and the YAML loaders need real paths.
    folder = Path(str(folder))
  if not folder.is_dir():
    raise FileNotFoundError(f"realm_bench is missing its data folder {name!r} (looked in "
                            f"{folder}); reinstall the package")
  return folder
