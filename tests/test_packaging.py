"""The package is self-contained: every data folder is declared (so a wheel carries it and
setuptools has nothing to warn about), the dependency ranges admit the pinned known-good set,
and a wheel installed outside the checkout runs `check`, `tables` and the gin files."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _data_folders() -> dict[str, str]:
  """package -> file pattern for every folder of shipped data in the checkout."""
  out = {}
  for folder in [ROOT / "gin", *(p for p in (ROOT / "gin").rglob("*") if p.is_dir())]:
    out[".".join(["realm_bench", *folder.relative_to(ROOT).parts])] = "*.gin"
  out["realm_bench.results.specs"] = "*.yaml"
  out["realm_bench.results.reported"] = "*.yaml"
  return out


def test_every_data_folder_is_a_declared_package_with_its_files():
  for package, pattern in _data_folders().items():
    assert package in SETUPTOOLS["packages"], package
    assert pattern in SETUPTOOLS["package-data"].get(package, []), package


def test_every_code_package_is_declared():
  """An undeclared subpackage is missing from the wheel, though an editable install (and so
  every other test) still finds it."""
  for init in (ROOT / "realm_bench").rglob("__init__.py"):
    package = ".".join(init.parent.relative_to(ROOT).parts)
    assert package in SETUPTOOLS["packages"], package


def _pins() -> dict[str, str]:
  pins = {}
  for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
    line = line.split("#")[0].strip()
    if line:
      name, version = line.split("==")
      pins[name.lower()] = version
  return pins


def test_ranges_admit_the_pinned_set_and_make_uses_it():
  pins = _pins()
  extras = PYPROJECT["project"]["optional-dependencies"]
  requirements = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]
                  + [r for group in extras.values() for r in group]]
  for req in requirements:
    assert req.name.lower() in pins, f"{req.name} has no pin in constraints.txt"
    assert req.specifier.contains(pins[req.name.lower()]), (req, pins[req.name.lower()])
    assert any(op in str(req.specifier) for op in ("<", "~=")), f"{req} has no upper bound"
  assert "-c constraints.txt" in (ROOT / "Makefile").read_text(encoding="utf-8")


def _copy_sources(dest: Path) -> None:
  """What a source distribution holds: the package folders and the build files."""
  for name in ("realm_bench", "tasks", "gin", "results/specs", "results/reported"):
    shutil.copytree(ROOT / name, dest / name, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "tasks"))
  for name in ("pyproject.toml", "README.md", "constraints.txt"):
    shutil.copy(ROOT / name, dest / name)


@pytest.mark.slow
def test_wheel_installed_outside_the_checkout_works(tmp_path):
  src, dist, venv, outside = (tmp_path / d for d in ("src", "dist", "venv", "outside"))
  _copy_sources(src)
  build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w",
                          str(dist), str(src)], capture_output=True, text=True, timeout=600)
  assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
  log = build.stdout + build.stderr
  for warning in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "is absent from"):
    assert warning not in log, log[log.find(warning) - 500:][:1500]
  wheel = next(dist.glob("realm_bench-*.whl"))
  # A throwaway venv that sees this environment's dependencies but not its realm_bench.
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
  python = venv / "bin" / "python"
  purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                            "['purelib'])"], capture_output=True, text=True, check=True)
  Path(purelib.stdout.strip(), "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
  subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                  "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
  outside.mkdir()
  records = shutil.copytree(ROOT / "results" / "records" / "staleness", outside / "records")

  def realm_bench(*args):
    return subprocess.run([str(venv / "bin" / "realm-bench"), *args], cwd=outside,
                          capture_output=True, text=True, timeout=300)

  where = subprocess.run([str(python), "-c", "import realm_bench; print(realm_bench.__file__)"],
                         cwd=outside, capture_output=True, text=True, check=True)
  assert where.stdout.startswith(str(venv))
  # One seed without per-question outcomes: the claims are INCONCLUSIVE, which --strict fails.
  check = realm_bench("check", "--runs", str(records), "--format", "json", "--strict")
  assert check.returncode == 1 and '"staleness/refresh_1x_above_30x_em"' in check.stdout, check
  assert '"INCONCLUSIVE"' in check.stdout, check
  tables = realm_bench("tables", "--runs", str(records), "--out", "tables")
  assert tables.returncode == 0, tables.stderr
  assert (outside / "tables" / "staleness.md").read_text() == (
      ROOT / "results" / "tables" / "staleness_generator1" / "staleness.md").read_text().replace(
          "results/records/staleness", str(records)).replace(
              "--format md,csv --out results/tables/staleness_generator1",
              "--format md --out tables")
  train = realm_bench("train", "--gin_file=runs/ict.gin", "--gin.RUN_DIR='r'",
                      "--gin.NUM_STEP=5")  # the shipped gin files, found from the wheel
  assert train.returncode == 2 and "did you mean NUM_STEPS?" in train.stderr, train.stderr
