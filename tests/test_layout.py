"""The layers of the library, checked on its imports: tasks -> pipelines -> trainer -> entry
functions, reporting reads records only, no import circle, no oversized module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Source folder -> package, as pyproject.toml maps them.
PACKAGES = {ROOT / "realm_bench": "realm_bench", ROOT / "tasks": "realm_bench.tasks"}
MAX_LINES = 500
# Modules every layer may use: errors, atomic files, the loop/pipeline contract, the shipped
# data folders, TensorFlow kept off the accelerators, which process holds which rows.
BASE = ("realm_bench.errors", "realm_bench.io_utils", "realm_bench.iteration",
        "realm_bench.resources", "realm_bench.tf_runtime", "realm_bench.distributed")
ENTRY = ("realm_bench.train", "realm_bench.eval", "realm_bench.infer", "realm_bench.indexing",
         "realm_bench.quickstart", "realm_bench.sweep", "realm_bench.reproduce",
         "realm_bench.stages", "realm_bench.cli", "realm_bench.score")


def _modules() -> dict[str, Path]:
  out = {}
  for folder, package in PACKAGES.items():
    for path in folder.rglob("*.py"):
      if "gin" in path.relative_to(folder).parts:
        continue
      parts = list(path.relative_to(folder).with_suffix("").parts)
      if parts[-1] == "__init__":
        parts = parts[:-1]
      out[".".join([package, *parts])] = path
  return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
  """Project modules imported anywhere in the file (lazy imports included)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      # `from package import module` imports the module; `from module import name`, the module.
      names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
               else node.module for a in node.names]
    found.update(n for n in names if n in MODULES)
  return found


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _violations(prefix: str, allowed: tuple[str, ...]) -> list[str]:
  return [f"{m} imports {i}" for m, deps in IMPORTS.items() if m.startswith(prefix)
          for i in deps if not i.startswith(allowed + BASE)]


@pytest.mark.parametrize("prefix,allowed", [
    ("realm_bench.tasks", ("realm_bench.tasks",)),
    ("realm_bench.networks", ("realm_bench.networks",)),
    ("realm_bench.retrieval", ("realm_bench.retrieval", "realm_bench.tasks")),
    ("realm_bench.pipelines", ("realm_bench.pipelines", "realm_bench.retrieval",
                               "realm_bench.tasks")),
    ("realm_bench.reporting", ("realm_bench.reporting",)),
    ("realm_bench.trainer", ("realm_bench.optim", "realm_bench.checkpoints",
                             "realm_bench.metrics_io", "realm_bench.models_base",
                             "realm_bench.partitioning", "realm_bench.train_state")),
])
def test_no_module_imports_upward(prefix, allowed):
  assert _violations(prefix, allowed) == []


def test_only_entry_functions_import_the_trainer_or_each_other():
  users = {m for m, deps in IMPORTS.items() if "realm_bench.trainer" in deps}
  assert users <= set(ENTRY)


def test_no_import_circle():
  visiting, done = set(), set()

  def visit(module, path):
    if module in done:
      return
    assert module not in visiting, " -> ".join(path + [module])
    visiting.add(module)
    for dep in sorted(IMPORTS[module]):
      visit(dep, path + [module])
    visiting.discard(module)
    done.add(module)

  for module in sorted(MODULES):
    visit(module, [])


def test_no_library_module_is_oversized():
  big = {m: n for m, p in MODULES.items()
         if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
         and m != "realm_bench.tasks.world_text"}   # data: templates and word lists
  assert big == {}


def test_tensorflow_is_imported_only_through_tf_runtime():
  """`from realm_bench.tf_runtime import tf` hides the GPUs from TensorFlow; a plain
  `import tensorflow` elsewhere would let it claim their memory before JAX."""
  direct = []
  for module, path in MODULES.items():
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      if any(n == "tensorflow" or n.startswith("tensorflow.") for n in names):
        direct.append(module)
  assert set(direct) <= {"realm_bench.tf_runtime"}
