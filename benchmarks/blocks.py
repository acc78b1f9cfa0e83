"""`realm-bench blocks` speed: blocks/s on this CPU and the time for the paper's dump.

What is timed, in one run, on the same pages:

- **pipeline**: `build_blocks` end to end under the DirectRunner (bz2 + XML read, cleaning,
  sentence splitting, wordpiece counting, packing, span tagging, shuffle, sort, shard writes,
  manifest), one worker process unless `--workers` says more;
- **baseline**: the same per-page work (`PageBlocker.blocks` over pages read with
  `iter_xml_pages`) in a plain Python loop, no Beam: the floor the pipeline is compared with,
  so "pipeline / baseline" is what Beam's machinery costs;
- **stages** of the baseline, each alone: reading (bz2 + expat), wikitext cleaning
  (mwparserfromhell), and the rest (Punkt, TensorFlow wordpiece counts, packing, spans).

The pages are generated (seeded) in the MediaWiki export format with what the real ones carry:
an infobox and citation templates, piped links, references, a table, headings, lists and
category links, about 2.3 blocks of text per article as the 2018-12-20 dump has (13,353,718
blocks from about 5.8 million articles). No dump can be downloaded here, so the figures are for
this text, not Wikipedia's; the vocabulary is learned from it (`--vocab_size`).

The extrapolation divides 13,353,718 blocks by the measured rate, for one worker and for
`--scale_workers` workers assuming the runner scales linearly over pages (Dataflow and Flink
split the dump by file, so the 27 part files of a dump bound the read stage's parallelism).

  python benchmarks/blocks.py [--pages 600] [--workers 1] [--max_length 288]
      [--vocab_size 8000] [--scale_workers 1,16,64] [--seed 0]
"""
from __future__ import annotations

import argparse
import bz2
import io
import os
import platform
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PAPER_BLOCKS = 13_353_718

_WORDS = ("the of and in to a was is for on as by with he that at from his it an were are "
          "which this also be had first one their its new after who they has but two been "
          "her she time during world city state national university school war team film "
          "river population century government church party army album series season years "
          "built around between known including people public became under early several "
          "north south east west later second three since most many other where than more "
          "while about large small high main part members local area number family").split()
_NAMES = ("Paris London Berlin Charles Gaulle Anna Maria Seine Thames Oxford Cambridge Mercury "
          "Jupiter Victoria Albert Henry Elizabeth Lyon Munich Vienna Prague Danube Rhine "
          "Bank England France Germany Spain Italy Royal Society National Assembly").split()
_MONTHS = ("January February March April May June July August September October November "
           "December").split()


def _sentence(rng: random.Random) -> str:
  words = []
  for _ in range(rng.randint(8, 30)):
    r = rng.random()
    if r < 0.12:
      name = " ".join(rng.choice(_NAMES) for _ in range(rng.randint(1, 3)))
      words.append(f"[[{name}]]" if rng.random() < 0.4 else
                   f"[[{name} (place)|{name}]]" if rng.random() < 0.3 else name)
    elif r < 0.15:
      words.append(f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(1500, 2018)}"
                   if rng.random() < 0.5 else str(rng.randint(1500, 2018)))
    else:
      words.append(rng.choice(_WORDS))
  text = " ".join(words)
  text = text[0].upper() + text[1:] + "."
  if rng.random() < 0.3:
    text += f"<ref>{{{{cite web|url=http://example.org/{rng.randint(0, 9999)}|title=Source}}}}</ref>"
  return text


def article(rng: random.Random, title: str) -> str:
  parts = [f"{{{{Infobox settlement\n| name = {title}\n| population = {rng.randint(1, 10**6)}\n"
           f"| image = [[File:{title}.jpg|thumb|A view of [[{title}]]]]\n}}}}\n"
           f"'''{title}''' " + _sentence(rng)]
  for section in range(rng.randint(2, 5)):
    parts.append(f"\n== Section {section} ==\n")
    parts.append(" ".join(_sentence(rng) for _ in range(rng.randint(3, 12))))
    if rng.random() < 0.3:
      parts.append("\n{| class=\"wikitable\"\n|-\n! Year !! Value\n|-\n| 1901 || 42\n|}\n")
    if rng.random() < 0.3:
      parts.append("\n* a list item\n* another list item\n")
  parts.append(f"\n[[Category:{rng.choice(_NAMES)}]]\n")
  return "".join(parts)


def write_dump(path: Path, pages: int, seed: int) -> str:
  rng = random.Random(seed)
  out = io.StringIO()
  out.write('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n')
  for i in range(pages):
    title = f"{rng.choice(_NAMES)} {i}"
    text = article(rng, title)
    out.write(f"  <page>\n    <title>{title}</title>\n    <ns>0</ns>\n    <id>{i + 1}</id>\n"
              f"    <revision>\n      <text xml:space=\"preserve\">{escape(text)}</text>\n"
              "    </revision>\n  </page>\n")
  out.write("</mediawiki>\n")
  text = out.getvalue()
  path.write_bytes(bz2.compress(text.encode("utf-8")))
  return text


def main(argv: Sequence[str] | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--pages", type=int, default=600)
  parser.add_argument("--workers", type=int, default=1,
                      help="DirectRunner worker processes (multi_processing above 1)")
  parser.add_argument("--max_length", type=int, default=288)
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--scale_workers", default="1,16,64")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  command = f"python benchmarks/blocks.py {shlex.join(argv)}".rstrip()
  print(f"command: {command}", flush=True)

  import apache_beam  # pylint: disable=g-import-not-at-top
  from realm_bench.preprocess import blocks_pipeline, wiki_dump  # pylint: disable=g-import-not-at-top
  from realm_bench.preprocess import wikitext  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top

  work = Path(tempfile.mkdtemp(prefix="blocks_bench_"))
  dump = work / "enwiki-bench-pages-articles.xml.bz2"
  text = write_dump(dump, args.pages, args.seed)
  vocab_lib.learn_vocabulary(texts=[text], size=args.vocab_size, out=work / "vocab.txt")
  tokens = vocab_lib.WordPieceVocabulary(work / "vocab.txt").tokens

  # Baseline: the per-page work in a plain loop, stage by stage.
  t = time.perf_counter()
  with open(dump, "rb") as raw, bz2.open(raw) as stream:
    pages = [p for p in wiki_dump.iter_xml_pages(stream, path=str(dump))
             if wiki_dump.skip_reason(p) is None]
  read_s = time.perf_counter() - t
  t = time.perf_counter()
  for page in pages:
    wikitext.clean(page.text)
  clean_s = time.perf_counter() - t
  blocker = blocks_pipeline.PageBlocker(blocks_pipeline.BlockSettings(
      tuple(tokens), args.max_length, None, "capitalized-runs"))
  blocker.blocks(pages[0])   # TensorFlow's first call traces the tokenizer
  t = time.perf_counter()
  baseline_blocks = sum(len(blocker.blocks(page)[1]) for page in pages)
  page_s = time.perf_counter() - t
  baseline_s = read_s + page_s

  pipeline_args = ["--runner=DirectRunner"]
  if args.workers > 1:
    pipeline_args += [f"--direct_num_workers={args.workers}",
                      "--direct_running_mode=multi_processing"]
  t = time.perf_counter()
  manifest = blocks_pipeline.run_blocks(inputs=[str(dump)], out=str(work / "out"),
                                        vocab=str(work / "vocab.txt"),
                                        max_length=args.max_length, shards=8,
                                        pipeline_args=pipeline_args)
  pipeline_s = time.perf_counter() - t
  assert manifest["blocks"] == baseline_blocks, (manifest["blocks"], baseline_blocks)
  blocks = manifest["blocks"]

  print()
  print(f"command: `{command}`")
  print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"apache-beam {apache_beam.__version__}, Python {platform.python_version()}")
  print(f"input: {args.pages} generated articles, {len(text) / 1e6:.1f} MB of XML, "
        f"{blocks} blocks of <= {args.max_length} wordpieces ({blocks / args.pages:.2f} per "
        f"article), vocabulary {len(tokens)}")
  print()
  print("| what | seconds | blocks/s | pages/s |")
  print("|---|---:|---:|---:|")
  rows = [("pipeline, DirectRunner, "
           f"{args.workers} worker{'s' if args.workers > 1 else ''}", pipeline_s),
          ("baseline: plain loop, no Beam", baseline_s),
          ("  read (bz2 + expat)", read_s),
          ("  clean (mwparserfromhell)", clean_s),
          ("  split, count, pack, tag (incl. clean)", page_s)]
  for name, seconds in rows:
    print(f"| {name} | {seconds:.2f} | {blocks / seconds:,.0f} | {len(pages) / seconds:,.0f} |")
  print()
  print(f"pipeline / baseline time: {pipeline_s / baseline_s:.2f}x")
  rate = blocks / pipeline_s
  print()
  print(f"| 2018-12-20 dump ({PAPER_BLOCKS:,} blocks) | hours at the pipeline's rate |")
  print("|---|---:|")
  per_worker = rate / args.workers
  for workers in (int(w) for w in args.scale_workers.split(",")):
    print(f"| {workers} worker{'s' if workers > 1 else ''} (linear scaling assumed) | "
          f"{PAPER_BLOCKS / (per_worker * workers) / 3600:.1f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
