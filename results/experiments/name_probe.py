"""Does a document index encode its people's first names? A linear probe over the embeddings
(E97).

  python results/experiments/name_probe.py WORLD_DIR INDEX_DIR [INDEX_DIR ...]

INDEX_DIR holds an index's embeddings.npy and ids.npy (e.g. a fine-tuning run's index/frozen:
ORQA's is ICT's document tower, REALM's is REALM pre-training's). Over the blocks about people,
split 80/20 by block (seeded), a ridge-regression probe from the embedding to the one-hot first
name, and one to the one-hot surname, is fitted on the 80 and scored on the 20 (accuracy of its
argmax), beside the rate of the training rows' most frequent name. A person's passages name them
by surname only, so what the index knows of the first name comes from the title; E97 found every
dense retriever returning namesakes' blocks, and this tells an index that cannot separate them
from a query tower that does not.
"""
import json
import sys
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError

RIDGE = 1.0
SEED = 0


def probe(x: np.ndarray, labels: list[str], train: np.ndarray) -> tuple[float, float]:
  """(held-out accuracy of a ridge probe, majority-class rate on the held-out rows)."""
  classes = sorted(set(labels))
  index = {c: i for i, c in enumerate(classes)}
  y = np.zeros((len(labels), len(classes)))
  y[np.arange(len(labels)), [index[c] for c in labels]] = 1.0
  x = np.hstack([x, np.ones((len(x), 1))])
  xt, yt = x[train], y[train]
  w = np.linalg.solve(xt.T @ xt + RIDGE * np.eye(x.shape[1]), xt.T @ yt)
  test = ~train
  accuracy = float(np.mean(np.argmax(x[test] @ w, axis=1) == np.argmax(y[test], axis=1)))
  majority = float(np.mean(y[test][:, np.argmax(yt.sum(axis=0))]))
  return accuracy, majority


def main(world: str, indexes: list[str]) -> None:
  world = Path(world)
  path = world / "corpus" / "blocks.jsonl"
  if not path.exists():
    raise InputError("no such file", path=path)
  blocks = {b["id"]: b for b in map(json.loads, path.read_text().splitlines())}
  entities = [json.loads(line) for line in
              (world / "truth" / "entities.jsonl").read_text().splitlines()]
  people = {e["name"] for e in entities if e["kind"] == "person"}
  print("| index | people's blocks | first name: probe / majority | surname: probe / majority |")
  print("|---|---:|---:|---:|")
  for folder in map(Path, indexes):
    for name in ("embeddings.npy", "ids.npy"):
      if not (folder / name).exists():
        raise InputError("no such file", path=folder / name)
    emb = np.load(folder / "embeddings.npy")
    ids = np.load(folder / "ids.npy")
    rows = [i for i, b in enumerate(ids) if blocks[int(b)]["title"] in people]
    titles = [blocks[int(ids[i])]["title"].split() for i in rows]
    x = np.asarray(emb[rows], np.float64)
    train = np.random.default_rng(SEED).random(len(rows)) < 0.8
    first = probe(x, [t[0] for t in titles], train)
    last = probe(x, [t[-1] for t in titles], train)
    print(f"| {folder} | {len(rows)} | {100 * first[0]:.1f} / {100 * first[1]:.1f} | "
          f"{100 * last[0]:.1f} / {100 * last[1]:.1f} |")


if __name__ == "__main__":
  if len(sys.argv) < 3:
    sys.exit(__doc__)
  try:
    main(sys.argv[1], sys.argv[2:])
  except InputError as e:
    sys.exit(f"name_probe.py: {e}")
