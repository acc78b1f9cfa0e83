"""`realm-bench blocks`: a Wikipedia dump -> corpus blocks and pre-training sentences, in Beam.

One pipeline for every scale: the DirectRunner on this machine, and unchanged on Dataflow,
Flink or Spark (the runner and its options come after `--` on the command line). Its stages:

1. read: each input file (a glob may match many, e.g. the 27 `pages-articlesN.xml-p...bz2`
   parts of a dump or WikiExtractor's `wiki_NN` files) is read by one worker, a stream of
   pages; redirects, other namespaces and ORQA's dropped titles go no further;
2. blocks: pages are reshuffled across workers and each is cleaned, split into sentences and
   packed into blocks (`packing`), its sentences tagged with salient spans (`salient_spans`);
3. write: blocks are grouped into SHARDS by a hash of their page, sorted within a shard by
   (file, page, block), and numbered consecutively across shards in shard order, so the ids
   are the row numbers of the shards read in order and the same input gives the same files
   on any runner; each shard is written under a temporary name and renamed;
4. manifest: written last (`corpus/manifest.json`), with each shard's counts and sha256 and a
   checksum over them; no manifest means the run did not finish.

The layout is the one the tasks read (`realm_bench/tasks/data.py`): `corpus/blocks-SSSSS-of-
NNNNN.jsonl` ({"id", "title", "body"}) and `pretrain/sentences-SSSSS-of-NNNNN.jsonl` ({"text",
"spans", "block_id"}; only sentences with a salient span, as REALM pre-trains on).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import tempfile
import zlib
from typing import Any, Iterable, Iterator, Sequence, Tuple

from realm_bench import validate
from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_path, dumps
from realm_bench.preprocess import packing, salient_spans, wiki_dump

MANIFEST = "corpus/manifest.json"
BLOCK_SHARD = "corpus/blocks-{:05d}-of-{:05d}.jsonl"
SENTENCE_SHARD = "pretrain/sentences-{:05d}-of-{:05d}.jsonl"
PAPER_BLOCK_LEN = 288


@dataclasses.dataclass(frozen=True)
class BlockSettings:
  """What shapes the blocks, shipped to every worker (the vocabulary by value, so a worker
  on another machine needs no access to the launcher's files)."""
  vocab_tokens: tuple[str, ...]
  max_length: int
  punkt_dir: str | None
  tagger: str


def _join(root: str, relpath: str) -> str:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  return FileSystems.join(root, *relpath.split("/"))


def expand_inputs(patterns: Sequence[str]) -> list[str]:
  """Every file the patterns match, sorted (file order fixes the block ids)."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  paths = []
  for pattern in patterns:
    matched = [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]
    if not matched:
      raise InputError("matches no file", path=pattern, field="--input")
    paths.extend(sorted(matched))
  for path in paths:
    wiki_dump.input_format(path)   # refuse a file of unknown format before starting
  if len(set(paths)) != len(paths):
    raise InputError("an input file is matched twice; its pages would be blocks twice",
                     field="--input")
  return paths


# ------------------------------------------------------------------------------------------
# Stage 1: pages.
# ------------------------------------------------------------------------------------------

def read_pages(item: tuple[int, str]) -> Iterator:
  """(file index, path) -> (file index, page index, Page) of the kept pages, and each
  dropped page's reason on the "pages" output."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  file_index, path = item
  read = (wiki_dump.iter_xml_pages if wiki_dump.input_format(path) == "xml"
          else wiki_dump.iter_jsonl_pages)
  with FileSystems.open(path) as stream:   # .bz2 / .gz decompressed by their suffix
    for page_index, page in enumerate(read(stream, path=path)):
      reason = wiki_dump.skip_reason(page)
      if reason is None:
        yield file_index, page_index, page
      else:
        yield beam.pvalue.TaggedOutput("pages", reason)


# ------------------------------------------------------------------------------------------
# Stage 2: blocks.
# ------------------------------------------------------------------------------------------

class PageBlocker:
  """A page -> its blocks, each with its sentences' salient spans. Built once per worker."""

  def __init__(self, settings: BlockSettings):
    from realm_bench.preprocess import wikitext  # pylint: disable=g-import-not-at-top
    from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
    self._settings = settings
    self._wikitext = wikitext
    folder = tempfile.mkdtemp(prefix="realm_bench_vocab_")
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("".join(t + "\n" for t in settings.vocab_tokens))
    self.vocab = vocab_lib.WordPieceVocabulary(path)
    self._continuation = [t.startswith(vocab_lib.SUFFIX) for t in settings.vocab_tokens]
    self._split = packing.make_splitter(settings.punkt_dir)
    self._tagger = salient_spans.TAGGERS[settings.tagger]()
    self._count = None

  def _lengths(self, texts: list[str]) -> list[int]:
    """Wordpieces of each text, by the tasks' own tokenizer, in one traced call: run eagerly,
    its ~30 TensorFlow ops cost more in Python dispatch than the tokenizing itself."""
    from realm_bench.tf_runtime import tf  # pylint: disable=g-import-not-at-top
    if self._count is None:
      self._count = tf.function(lambda t: self.vocab.encode_tf(t).row_lengths(),
                                input_signature=[tf.TensorSpec([None], tf.string)],
                                autograph=False)
    return self._count(tf.constant(texts, dtype=tf.string)).numpy().tolist()

  def blocks(self, page: wiki_dump.Page) -> tuple[str | None, list[dict]]:
    """(why the page gave no block or None, [{"title", "body", "length", "sentences"}])."""
    if page.markup == "wikitext":
      paragraphs, disambiguation = self._wikitext.clean(page.text)
      if disambiguation:
        return "disambiguation_template", []
    else:
      paragraphs = self._wikitext.plain_paragraphs(page.text)
    sentences = [s.strip() for p in paragraphs for s in self._split(p) if s.strip()]
    if not sentences:
      return "no_text", []
    title_length, *lengths = self._lengths([page.title, *sentences])
    budget = self._settings.max_length - 3 - title_length
    if budget < 1:
      return "title_over_block_length", []
    pieces = []
    for sentence, length in zip(sentences, lengths):
      if length == 0:
        continue
      if length <= budget:
        pieces.append(packing.Piece(sentence, length))
      else:
        ids, starts, _ = self.vocab.encode_with_offsets(sentence)
        pieces.extend(packing.cut_long(sentence, ids.tolist(), starts.tolist(),
                                       lambda i: self._continuation[i], budget))
    out = []
    for block in packing.pack(title_length, pieces, self._settings.max_length):
      out.append({
          "title": page.title,
          "body": " ".join(p.text for p in block),
          "length": 3 + title_length + sum(p.length for p in block),
          "sentences": [{"text": p.text, "spans": spans} for p in block
                        if (spans := salient_spans.salient_spans(p.text, self._tagger))],
      })
    return (None if out else "no_text"), out


def _blocks_fn(settings: BlockSettings, shards: int):
  import apache_beam as beam  # pylint: disable=g-import-not-at-top

  class BlockPages(beam.DoFn):
    """(file, page, Page) -> (shard, ((file, page, block), block)); outcomes on "pages"."""

    def setup(self):
      self.blocker = PageBlocker(settings)

    def process(self, item):
      file_index, page_index, page = item
      reason, blocks = self.blocker.blocks(page)
      yield beam.pvalue.TaggedOutput("pages", reason or "kept")
      shard = zlib.crc32(f"{file_index}:{page_index}".encode()) % shards
      for block_index, block in enumerate(blocks):
        yield shard, ((file_index, page_index, block_index), block)

  return BlockPages()


# ------------------------------------------------------------------------------------------
# Stages 3 and 4: shards and manifest.
# ------------------------------------------------------------------------------------------

def _is_local(path: str) -> bool:
  return "://" not in path


def write_lines(path: str, lines: Iterable[str]) -> str:
  """Writes `lines` to `path` under a temporary name, then renames; returns the sha256."""
  digest = hashlib.sha256()
  if _is_local(path):
    with atomic_path(path) as tmp:
      with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
          f.write(line)
          digest.update(line.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    return digest.hexdigest()
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  tmp = f"{path}.tmp-{os.getpid()}-{id(digest)}"
  with FileSystems.create(tmp) as f:
    for line in lines:
      data = line.encode("utf-8")
      f.write(data)
      digest.update(data)
  FileSystems.rename([tmp], [path])
  return digest.hexdigest()


def write_shard(item, *, out: str, shards: int, counts: dict) -> dict:
  """One shard's blocks and sentences; ids start after the blocks of the shards before it."""
  shard, entries = item
  entries = sorted((e for e in entries if e is not None), key=lambda e: e[0])
  first_id = sum(counts.get(s, 0) for s in range(shard))
  block_lines, sentence_lines, max_length, sentences = [], [], 0, 0
  for offset, (_, block) in enumerate(entries):
    block_id = first_id + offset
    block_lines.append(dumps({"id": block_id, "title": block["title"],
                              "body": block["body"]}) + "\n")
    for sentence in block["sentences"]:
      sentence_lines.append(dumps({"text": sentence["text"], "spans": sentence["spans"],
                                   "block_id": block_id}) + "\n")
    sentences += len(block["sentences"])
    max_length = max(max_length, block["length"])
  return {
      "shard": shard,
      "first_id": first_id,
      "blocks": len(entries),
      "sentences": sentences,
      "max_block_length": max_length,
      "blocks_file": BLOCK_SHARD.format(shard, shards),
      "blocks_sha256": write_lines(_join(out, BLOCK_SHARD.format(shard, shards)), block_lines),
      "sentences_file": SENTENCE_SHARD.format(shard, shards),
      "sentences_sha256": write_lines(_join(out, SENTENCE_SHARD.format(shard, shards)),
                                      sentence_lines),
  }


def manifest(shard_results: list[dict], pages: dict, *, header: dict) -> dict:
  shard_results = sorted(shard_results, key=lambda r: r["shard"])
  checksum = hashlib.sha256("".join(r["blocks_sha256"] + "\n" for r in shard_results).encode())
  return {
      **header,
      "blocks": sum(r["blocks"] for r in shard_results),
      "sentences": sum(r["sentences"] for r in shard_results),
      "max_block_length": max((r["max_block_length"] for r in shard_results), default=0),
      "checksum": checksum.hexdigest(),
      "checksum_rule": "sha256 of the blocks shards' sha256 (hex), one per line, shard order",
      "pages": dict(sorted(pages.items())),
      "shards": shard_results,
  }


def _write_manifest(results, pages, *, out: str, header: dict) -> dict:
  result = manifest(list(results), dict(pages), header=header)
  write_lines(_join(out, MANIFEST), [json.dumps(result, indent=1, sort_keys=True) + "\n"])
  return result


# ------------------------------------------------------------------------------------------
# The entry function.
# ------------------------------------------------------------------------------------------

def _prepare_out(out: str) -> None:
  """Refuses a finished corpus; removes shards an unfinished run left (no manifest)."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  for relpath, what in ((MANIFEST, "a finished `blocks` run"),
                        ("corpus/blocks.jsonl", "a corpus"), ("corpus/passages.tsv", "a corpus"),
                        ("pretrain/sentences.jsonl", "pre-training sentences")):
    if FileSystems.exists(_join(out, relpath)):
      raise InputError(f"already holds {what}; choose another --out or remove it",
                       path=_join(out, relpath))
  stale = [m.path for pattern in ("corpus/blocks-*-of-*.jsonl",
                                  "pretrain/sentences-*-of-*.jsonl")
           for r in FileSystems.match([_join(out, pattern)]) for m in r.metadata_list]
  if stale:
    FileSystems.delete(stale)


def build_blocks(*, inputs: Sequence[str], out: str, vocab: str,
                 max_length: int = PAPER_BLOCK_LEN, shards: int = 64,
                 punkt_dir: str | None = None, tagger: str = "capitalized-runs",
                 pipeline_args: Sequence[str] = ()) -> dict:
  """Runs the pipeline to the end and returns the manifest it wrote."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  validate.whole("blocks", "max_length", max_length, minimum=4, field="--max_length")
  validate.whole("blocks", "shards", shards, minimum=1, maximum=99999, field="--shards")
  if tagger not in salient_spans.TAGGERS:
    raise InputError(f"unknown tagger {tagger!r}; expected one of "
                     f"{', '.join(salient_spans.TAGGERS)}", field="--tagger")
  packing.make_splitter(punkt_dir)   # a bad --punkt folder fails here, not on a worker
  paths = expand_inputs(inputs)
  tokens = tuple(vocab_lib.WordPieceVocabulary(vocab).tokens)
  settings = BlockSettings(tokens, max_length, punkt_dir, tagger)
  _prepare_out(out)
  header = {
      "inputs": paths,
      "max_length": max_length,
      "num_shards": shards,
      "vocab": {"path": str(vocab), "size": len(tokens),
                "sha256": hashlib.sha256("".join(t + "\n" for t in tokens).encode()).hexdigest()},
      "sentence_splitter": packing.splitter_name(punkt_dir),
      "entity_tagger": tagger,
      "date_spans": "regular expression (realm_bench.preprocess.salient_spans.DATE)",
      "apache_beam": beam.__version__,
  }
  options = PipelineOptions(list(pipeline_args))
  standard = options.view_as(StandardOptions)
  if standard.runner is None:
    standard.runner = "DirectRunner"
  with beam.Pipeline(options=options) as p:
    read = (p | "files" >> beam.Create(list(enumerate(paths)))
            | "read" >> beam.FlatMap(read_pages).with_outputs("pages", main="pages_kept"))
    blocked = (read.pages_kept | "spread" >> beam.Reshuffle()
               | "blocks" >> beam.ParDo(_blocks_fn(settings, shards)).with_outputs(
                   "pages", main="blocks"))
    pages = ((read.pages, blocked.pages) | "outcomes" >> beam.Flatten()
             | "count" >> beam.combiners.Count.PerElement())
    every_shard = p | "every shard" >> beam.Create([(s, None) for s in range(shards)])
    # (The blocks stage's outputs are typed by hand: Beam cannot infer a tagged DoFn's.)
    grouped = ((blocked.blocks, every_shard)
               | "with empty" >> beam.Flatten().with_output_types(Tuple[int, Any])
               | "by shard" >> beam.GroupByKey()
               | "listed" >> beam.MapTuple(lambda shard, entries: (shard, list(entries))))
    counts = grouped | "sizes" >> beam.MapTuple(
        lambda shard, entries: (shard, sum(e is not None for e in entries)))
    written = grouped | "write" >> beam.Map(write_shard, out=out, shards=shards,
                                             counts=beam.pvalue.AsDict(counts))
    (written | "all shards" >> beam.combiners.ToList()
     | "manifest" >> beam.Map(_write_manifest, beam.pvalue.AsDict(pages), out=out,
                              header=header))
  return _read_manifest(_join(out, MANIFEST))


def _read_manifest(path: str) -> dict:
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=g-import-not-at-top
  with FileSystems.open(path) as f:
    return json.loads(f.read().decode("utf-8"))


_WHILE_RUNNING = re.compile(r"( \[while running '[^\]]*'\])+$")
_EXTRA = ("`realm-bench blocks` needs the `beam` extra (Apache Beam, mwparserfromhell, NLTK): "
          "pip install -c constraints.txt 'realm-bench[beam]'")


def run_blocks(**kwargs) -> dict:
  """`build_blocks` for the command line: a missing extra, and bad input met by a worker
  (which Beam re-raises wrapped in its own error), become an InputError naming the file."""
  root = logging.getLogger()
  level = root.level
  root.setLevel(logging.ERROR)   # Beam warns at import about Google Cloud clients it lacks
  try:
    for module in ("apache_beam", "mwparserfromhell", "nltk"):
      try:
        __import__(module)
      except ImportError:
        raise InputError(f"{_EXTRA} ({module} is not installed)") from None
  finally:
    root.setLevel(level)
  # A worker's exception is logged with its traceback before it is re-raised here, where the
  # command reports it; the error itself still propagates.
  logging.getLogger("apache_beam.runners.common").setLevel(logging.CRITICAL)
  try:
    return build_blocks(**kwargs)
  except Exception as e:  # pylint: disable=broad-except
    cause = e
    while cause is not None:
      if isinstance(cause, InputError):
        # Beam re-raises a worker's error as the same type with " [while running 'STEP']"
        # appended to its message: the step names our code, not the user's input.
        raise InputError(_WHILE_RUNNING.sub("", cause.reason), path=cause.path,
                         line=cause.line, field=cause.field) from None
      cause = cause.__cause__ or cause.__context__
    found = re.search(r"InputError: ([^\n]*?)(?: \[while running|$)", str(e), re.MULTILINE)
    if found:
      raise InputError(found.group(1)) from None
    raise
