"""`realm-bench blocks`: its flags and handler, kept here so that cli.py only names them (this
module imports nothing heavy, so `realm-bench --help` stays quick: Beam is loaded when the
command runs)."""
from __future__ import annotations

import argparse
import json

from realm_bench.errors import InputError
from realm_bench.preprocess import blocks_pipeline


def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("--input", action="append", default=[], required=True,
                 help="a Wikipedia dump file or glob (repeatable): MediaWiki XML "
                      "(enwiki-*-pages-articles*.xml[.bz2]) or WikiExtractor JSON lines "
                      "(*.jsonl, *.json, wiki_NN); local, gs:// or any Beam file system")
  p.add_argument("--out", required=True,
                 help="DATA_DIR to write corpus/ and pretrain/ into (shards and a manifest)")
  p.add_argument("--vocab", required=True, help="the BERT vocab.txt blocks are counted in")
  p.add_argument("--max_length", "--max-length", dest="max_length", type=int,
                 default=blocks_pipeline.PAPER_BLOCK_LEN,
                 help="wordpieces per block, counting [CLS] title [SEP] ... [SEP]")
  p.add_argument("--shards", type=int, default=64, help="files per output")
  p.add_argument("--punkt", default=None,
                 help="an NLTK data folder holding Punkt's trained English model "
                      "(python -m nltk.downloader -d DIR punkt_tab), for ORQA's sentence "
                      "boundaries (default: Punkt with shipped abbreviations)")
  p.add_argument("--tagger", default="capitalized-runs",
                 help="named-entity tagger of the salient spans")
  p.add_argument("pipeline_args", nargs=argparse.REMAINDER,
                 help="after --: Beam pipeline options, e.g. -- --runner=DataflowRunner "
                      "--project=P --region=R --temp_location=gs://B/tmp (default: DirectRunner)")


def run(args, bindings) -> int:
  if bindings:
    raise InputError(f"`blocks` takes no gin bindings, got {bindings[0]!r}")
  manifest = blocks_pipeline.run_blocks(
      inputs=args.input, out=args.out, vocab=args.vocab, max_length=args.max_length,
      shards=args.shards, punkt_dir=args.punkt, tagger=args.tagger,
      pipeline_args=[a for a in args.pipeline_args if a != "--"])
  print(json.dumps({k: manifest[k] for k in ("blocks", "sentences", "max_block_length",
                                             "checksum", "pages")}))
  return 0
