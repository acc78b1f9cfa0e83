"""The leaderboard page: read back with the standard library's HTML parser, its cells are the
records' numbers, its verdicts the check's, and its text is escaped and self-contained."""
from __future__ import annotations

import math
import shlex
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from realm_bench import cli
from realm_bench.reporting import check as check_lib, render
from record_factory import write_run, write_seeds


class _Page(HTMLParser):
  """Every element carrying data-field (its attributes and text), every tag and attribute,
  and the text of each <pre>."""

  def __init__(self):
    super().__init__(convert_charrefs=True)
    self.cells, self.tags, self.pres, self._open = [], [], [], []

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    self.tags.append((tag, attrs))
    for item in self._open:
      item["depth"] += 1
    if "data-field" in attrs or tag == "pre":
      self._open.append({"tag": tag, "attrs": attrs, "text": "", "depth": 0})

  def handle_endtag(self, tag):
    for item in list(self._open):
      if item["depth"] == 0:
        self._open.remove(item)
        (self.pres if item["tag"] == "pre" else self.cells).append(item)
      else:
        item["depth"] -= 1

  def handle_data(self, data):
    for item in self._open:
      item["text"] += data

  def cell(self, **want):
    found = [c for c in self.cells
             if all(c["attrs"].get(f"data-{k}") == v for k, v in want.items())]
    assert len(found) == 1, (want, found)
    return found[0]["text"].strip()


def _mean_pm(values):
  x = np.asarray(values, dtype=float)
  if len(x) < 2:
    return f"{x.mean():.1f}"
  half = scipy_stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
  return f"{x.mean():.1f} ± {half:.1f}"


SCRIPT = '<script>alert("x")</script> & co'


@pytest.fixture
def page(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)   # a relative --runs, as the page prints it
  runs = Path("runs")
  realm = write_seeds(runs, "realm-test", value=48.0, experiment="realm",
                      gin_config=f"NOTE = '{SCRIPT}'\n")
  write_seeds(runs, "orqa-test", value=40.0, experiment="orqa", shift=100)
  write_seeds(runs, "closed-test", value=5.0, experiment="closed_book", jitter=0.5)
  for i, value in enumerate((33.0, 34.0)):
    write_run(runs / "paper", f"orqa-paper-{i}", experiment="orqa", scale="paper",
              metrics={"exact_match": value})
  for every, em in ((1, 40.0), (3, 38.0), (10, 33.0), (30, 30.0)):
    write_seeds(runs, f"stale-{every}", value=em, experiment="staleness", split="dev",
                params={"refresh_every_steps": every}, stats={"staleness_mean": every / 2})
  write_seeds(runs, "ict-recall", value=12.0, metric="recall@5", experiment="ict", split="dev")
  written = render.render_tables(runs_dir=runs, formats=["md", "html"], out_dir=tmp_path / "t",
                                 command="realm-bench tables --runs runs", commit="abc123")
  path = tmp_path / "t" / "leaderboard.html"
  assert path in written and (tmp_path / "t" / "table1.html") in written
  assert (tmp_path / "t" / "staleness.png") in written
  parsed = _Page()
  text = path.read_text(encoding="utf-8")
  parsed.feed(text)
  return parsed, text, runs, realm


def test_cells_are_the_records_numbers(page):
  parsed, _, _, _ = page
  synthetic = dict(spec="table1", section="synthetic", col="NQ")
  assert parsed.cell(**synthetic, experiment="realm", field="ours") == _mean_pm([47, 48, 49])
  assert parsed.cell(**synthetic, experiment="realm", field="n") == "3"
  assert parsed.cell(**synthetic, experiment="realm", field="paper") == "39.2"   # T1 row 10
  assert parsed.cell(**synthetic, experiment="closed_book", field="ours") == _mean_pm(
      [4.5, 5.0, 5.5])
  assert parsed.cell(**synthetic, experiment="closed_book", field="paper") == "—"
  paper = dict(spec="table1", section="paper", col="NQ", experiment="orqa")
  assert parsed.cell(**paper, field="ours") == _mean_pm([33.0, 34.0])
  assert parsed.cell(**paper, field="n") == "2"
  assert parsed.cell(**paper, field="paper") == "33.3"
  assert parsed.cell(spec="table2", section="synthetic", col="EM", experiment="realm",
                     field="n") == "0"
  for every, em in ((1, 40.0), (3, 38.0), (10, 33.0), (30, 30.0)):
    point = dict(spec="staleness", section="synthetic", point=f"synthetic:{every}")
    assert parsed.cell(**point, col="EM", field="ours") == _mean_pm([em - 1, em, em + 1])
    assert parsed.cell(**point, col="n", field="n") == "3"
    assert parsed.cell(**point, col="mean staleness (steps)", field="ours") == f"{every / 2:.1f}"


def test_verdicts_are_the_checks(page):
  parsed, _, runs, _ = page
  _, verdicts = check_lib.check(runs_dir=runs)
  realm_row = parsed.cell(spec="table1", section="synthetic", experiment="realm",
                          field="check")
  expected = verdicts[verdicts["item"] == "table1/realm_above_orqa"]["verdict"].item()
  assert f"{expected} REALM above ORQA (NQ)" in realm_row
  assert "MISSING REALM above ORQA (WQ)" in realm_row
  assert parsed.cell(spec="table1", section="paper", experiment="orqa",
                     field="check").startswith("OK NQ")
  rows = {(t[1].get("data-item"), t[1].get("data-scale")) for t in parsed.tags if t[0] == "tr"}
  assert ("staleness/em_decreases_with_refresh_interval", "synthetic") in rows


def test_each_row_has_its_commit_and_gin_config_escaped(page):
  parsed, text, runs, realm = page
  assert SCRIPT not in text and "<script" not in text
  commands = [p["text"] for p in parsed.pres if p["attrs"].get("class") == "cmd"]
  assert any("git checkout " + "0" * 40 in c and "realm-bench evaluate" in c and "seed_0/realm-test"
             in c for c in commands)
  configs = [p["text"] for p in parsed.pres if p["attrs"].get("class") == "gin"]
  assert f"NOTE = '{SCRIPT}'\n" in configs          # read back exactly, once per seed
  assert configs.count(f"NOTE = '{SCRIPT}'\n") == len(realm)
  # No machine paths from the records: run folders relative to the runs folder.
  assert str(runs.resolve()) not in text and "runs/seed_0" not in text


def test_the_sweep_names_its_reference_line(page):
  parsed, text, _, _ = page
  refs = [a for t, a in parsed.tags if t == "p" and a.get("class") == "refs"]
  assert refs == [{"class": "refs", "data-scale": "synthetic"}]
  assert ("synthetic: Reference line on the plot: ICT warm start (zero-shot) = "
          f"{_mean_pm([11, 12, 13])}, n = 3 (recall@5 of experiment &#x27;ict&#x27;).") in text


def test_page_is_self_contained(page):
  parsed, text, _, _ = page
  assert not [t for t, _ in parsed.tags if t in ("script", "link", "iframe")]
  for tag, attrs in parsed.tags:
    for name in ("src", "href"):
      if name in attrs:
        assert attrs[name].startswith("data:"), (tag, attrs)
  assert any(t == "img" and a["src"].startswith("data:image/png;base64,")
             for t, a in parsed.tags)
  assert "abc123" in text and "realm-bench tables --runs runs" in text


def test_page_only_with_html_and_without_runs(tmp_path, capsys):
  written = render.render_tables(runs_dir=tmp_path / "none", formats=["md"],
                                 out_dir=tmp_path / "md")
  assert not any(p.name == "leaderboard.html" for p in written)
  assert cli.main(["tables", "--runs", str(tmp_path / "none"), "--format", "html", "--out",
                   str(tmp_path / "h")]) == 0
  parsed = _Page()
  parsed.feed((tmp_path / "h" / "leaderboard.html").read_text(encoding="utf-8"))
  assert parsed.cell(spec="table1", section="paper", col="NQ", experiment="orqa",
                     field="paper") == "33.3"
  assert "No sweep records yet." in (tmp_path / "h" / "leaderboard.html").read_text()


def test_each_stage_shows_the_command_its_record_carries(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  runs = Path("runs")
  ict = ("realm-bench train --gin_file=runs/ict.gin --gin.RUN_DIR=\"'out/runs/ict'\" "
         "--gin.NOTE=\"'<b>x y</b>'\"")
  write_run(runs / "seed_0", "bert", kind="train", experiment="bert", dataset=None,
            split="train", metrics={"loss": 1.0})               # an older record: no command
  write_run(runs / "seed_0", "ict", kind="train", experiment="ict", dataset=None,
            split="train", metrics={"loss": 2.0}, lineage="bert", command=ict)
  recall = "realm-bench recall --gin_file=runs/evaluate_retrieval.gin --gin.SEED=0"
  write_run(runs / "seed_0", "ict-recall", experiment="orqa", split="dev",
            metrics={"recall@5": 20.0}, lineage="ict", command=recall)
  render.render_tables(runs_dir=runs, formats=["html"], out_dir=tmp_path / "t",
                       command="realm-bench tables", commit="abc123")
  text = (tmp_path / "t" / "leaderboard.html").read_text(encoding="utf-8")
  parsed = _Page()
  parsed.feed(text)
  block = next(p["text"] for p in parsed.pres
               if p["attrs"].get("class") == "cmd" and "seed_0/ict-recall" in p["text"])
  lines = block.splitlines()
  # Oldest first: the stage without a command is named by its kind, the others by theirs.
  assert lines[2].startswith("#   realm-bench train    seed_0/bert") and "before" in lines[2]
  assert lines[3] == "# seed_0/ict (train)"
  commands = "\n".join(lines[4:]).split("# seed_0/ict-recall (recall)\n")
  assert [shlex.split(c.replace("\\\n", " ")) for c in commands] == [
      shlex.split(ict), shlex.split(recall)]
  assert commands[0].splitlines()[2] == "    --gin.RUN_DIR=\"'out/runs/ict'\" \\"
  assert "<b>" not in text and "&lt;b&gt;x y&lt;/b&gt;" in text   # escaped
