"""`realm-bench blocks` on a small dump in the MediaWiki export format (and WikiExtractor JSON
lines): which pages become blocks, how their text is cleaned, that every block fits the
budget by ORQA's packing rule, the ids, shards and manifest, and the salient spans.

The pipeline tests need the `beam` extra and skip without it; the rules underneath (dates,
the entity tagger, packing, the XML reader, the shard reader) are checked without Beam.
"""
from __future__ import annotations

import bz2
import hashlib
import io
import json
from pathlib import Path

import gin
import pytest
import seqio

import wiki_dump_factory as factory
from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.gin_utils import parse_gin
from realm_bench.preprocess import packing, salient_spans, wiki_dump
from realm_bench.tasks import data
from realm_bench.tasks import vocab as vocab_lib

MAX_LEN = 64
SHARDS = 3


# ------------------------------------------------------------------------------------------
# Rules, without Beam.
# ------------------------------------------------------------------------------------------

def _spans(sentence, kind):
  return [sentence[s["start"]:s["end"]] for s in
          salient_spans.salient_spans(sentence, salient_spans.CapitalizedRunTagger())
          if s["kind"] == kind]


def test_dates_by_regular_expression():
  sentence = ("On 14 July 1789 the Bastille fell; on December 20, 2018 a dump was cut; "
              "in March 1990, on May 4 and through the 1990s, 3,000 people and 12345 did not.")
  assert _spans(sentence, "date") == ["14 July 1789", "December 20, 2018", "March 1990",
                                      "May 4", "1990s"]


def test_entities_are_capitalised_runs_and_never_overlap_dates():
  sentence = "In 1944 Charles de Gaulle entered Paris with the Free French Forces in August 1944."
  spans = salient_spans.salient_spans(sentence, salient_spans.CapitalizedRunTagger())
  assert _spans(sentence, "entity") == ["Charles de Gaulle", "Paris", "Free French Forces"]
  assert all(a["end"] <= b["start"] for a, b in zip(spans, spans[1:]))
  # A sentence-initial function word is not an entity; "August 1944" is a date, not a name.
  assert "In" not in _spans(sentence, "entity") and "August 1944" in _spans(sentence, "date")


def test_a_tagger_span_outside_the_sentence_is_refused():
  class Broken:
    name = "broken"

    def __call__(self, sentence):
      return [(0, len(sentence) + 1)]

  with pytest.raises(ValueError, match="broken"):
    salient_spans.salient_spans("Paris.", Broken())


def test_packing_follows_orqas_greedy_rule():
  pieces = [packing.Piece(f"s{i}", n) for i, n in enumerate([5, 5, 5, 9, 1])]
  # [CLS] title(3) [SEP] ... [SEP] within 20: 6 + 5 + 5 = 16 fits, + 5 does not.
  blocks = packing.pack(3, pieces, 20)
  assert [[p.text for p in b] for b in blocks] == [["s0", "s1"], ["s2", "s3"], ["s4"]]


def test_a_long_sentence_is_cut_at_word_starts():
  # aaa | bbb ##ccc | ddd | eee ##fff | ggg: ids 1 and 3 are the `##` continuations.
  text = "aaa bbbccc ddd eeefff ggg"
  ids, starts = [10, 11, 1, 12, 13, 3, 14], [0, 4, 7, 11, 15, 18, 22]
  pieces = packing.cut_long(text, ids, starts, lambda i: i in (1, 3), 2)
  assert [(p.text, p.length) for p in pieces] == [
      ("aaa", 1), ("bbbccc", 2), ("ddd", 1), ("eeefff", 2), ("ggg", 1)]
  # One word longer than the budget is the only mid-word cut.
  assert [p.length for p in packing.cut_long("bbbccc", [11, 1], [0, 3], lambda i: i == 1, 1)] \
      == [1, 1]


def test_punkt_parameters_can_replace_the_shipped_abbreviations(tmp_path):
  pytest.importorskip("nltk", reason="the `beam` extra is not installed")
  sentence = "Dr. Guillotin spoke. He left."
  assert packing.make_splitter()(sentence) == ["Dr. Guillotin spoke.", "He left."]
  # An NLTK data folder's punkt_tab model that knows no abbreviation: "Dr." ends a sentence.
  model = tmp_path / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
  model.mkdir(parents=True)
  for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
    (model / name).write_text("")
  assert packing.make_splitter(str(tmp_path / "nltk_data"))(sentence) == [
      "Dr.", "Guillotin spoke.", "He left."]
  with pytest.raises(InputError, match="field '--punkt': no NLTK Punkt model here"):
    packing.make_splitter(str(tmp_path / "elsewhere"))


def test_xml_reader_keeps_line_numbers_and_names_a_bad_page(tmp_path):
  pages = list(wiki_dump.iter_xml_pages(io.BytesIO(factory.dump_text().encode()), path="d.xml"))
  assert [p.title for p in pages] == [t for t, *_ in factory.PAGES]
  assert [p.redirect for p in pages] == [r is not None for _, _, r, _ in factory.PAGES]
  assert pages[0].line == factory.dump_text().splitlines().index("  <page>") + 1
  bad = factory.dump_text().replace("<ns>1</ns>", "<ns>talk</ns>")
  line = bad.splitlines().index("    <ns>talk</ns>") - 1   # its <page> line, 1-based
  with pytest.raises(InputError, match=rf"d.xml:{line}: field 'ns': expected an integer"):
    list(wiki_dump.iter_xml_pages(io.BytesIO(bad.encode()), path="d.xml"))


def test_orqa_title_rule():
  for title in ("List of cities", "Index of France-related articles", "Outline of France",
                "Java (disambiguation)"):
    assert wiki_dump.orqa_drops_title(title)
  for title in ("Paris", "Lists of lists? no: A List of cities", "Disambiguation"):
    assert not wiki_dump.orqa_drops_title(title)


def test_tasks_refuse_an_incomplete_shard_set(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  for i in (0, 2):
    (corpus / f"blocks-{i:05d}-of-00003.jsonl").write_text(
        json.dumps({"id": i, "title": "t", "body": "b"}) + "\n")
  with pytest.raises(InputError, match=r"1 of 3 shards missing .*blocks-00001-of-00003"):
    list(data.iter_blocks(tmp_path, kind="data"))
  (corpus / "blocks-00001-of-00003.jsonl").write_text(
      json.dumps({"id": 1, "title": "t", "body": "b"}) + "\n")
  assert [b.id for b in data.iter_blocks(tmp_path, kind="data")] == [0, 1, 2]


# ------------------------------------------------------------------------------------------
# The pipeline (DirectRunner).
# ------------------------------------------------------------------------------------------

def _run(args) -> int:
  return cli.main(["blocks", *map(str, args)])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  for module in ("apache_beam", "mwparserfromhell", "nltk"):
    pytest.importorskip(module, reason="the `beam` extra is not installed")
  root = tmp_path_factory.mktemp("blocks")
  factory.write_dump(root / "enwiki-20181220-pages-articles.xml.bz2")
  factory.write_extracted(root / "wiki_00")
  vocab_lib.learn_vocabulary(texts=[factory.plain_text()] * 3, size=400, out=root / "vocab.txt")
  inputs = ["--input", root / "enwiki-*-pages-articles.xml.bz2", "--input", root / "wiki_*"]
  common = [*inputs, "--vocab", root / "vocab.txt", "--max_length", MAX_LEN,
            "--shards", SHARDS]
  assert _run([*common, "--out", root / "data"]) == 0
  assert _run([*common, "--out", root / "again"]) == 0
  return root, common


def _manifest(folder: Path) -> dict:
  return json.loads((folder / "corpus" / "manifest.json").read_text())


def _blocks(folder: Path) -> list[data.Block]:
  return list(data.iter_blocks(folder, kind="data"))


def test_pages_kept_and_dropped(built):
  root, _ = built
  assert {b.title for b in _blocks(root / "data")} == {"Paris", "Seine", "Lyon"}
  assert _manifest(root / "data")["pages"] == {
      "kept": 3, "redirect": 1, "not_an_article": 1, "disambiguation_template": 1,
      "no_text": 1, "list_index_outline_or_disambiguation_title": 3}


def test_wikitext_is_cleaned_as_wikiextractor_would(built):
  root, _ = built
  paris = " ".join(b.body for b in _blocks(root / "data") if b.title == "Paris")
  assert paris.startswith("Paris is the capital and most populous city of France. The city")
  assert "Dr. Guillotin spoke at the Assembly of the National Assembly in July 1789." in paris
  assert "History. On 14 July 1789" in paris        # a heading is its own short sentence
  for markup in ("{{", "}}", "[[", "]]", "'''", "<ref", "cite", "Infobox", "population_total",
                 "wikitable", "2,714,068", "list item", "See also", "Category", "de:Paris",
                 "Eiffel", "Outline"):
    assert markup not in paris, markup
  lyon = [b.body for b in _blocks(root / "data") if b.title == "Lyon"]
  assert lyon == ["Lyon is a city in France on the Rhône. It was founded on 9 October 43 BC "
                  "by Lucius Munatius Plancus."]        # HTML entities unescaped, as ORQA


def _corpus_examples(folder: Path, vocab: Path) -> list[dict]:
  bindings = [f"DATA_DIR = {str(folder)!r}", f"WORLD_DIR = {str(folder)!r}",
              f"VOCAB_PATH = {str(vocab)!r}", f"BLOCK_LEN = {MAX_LEN}", "QUERY_LEN = 32"]
  parse_gin(["tasks.gin"], bindings, finalize=False)
  try:
    ds = seqio.get_mixture_or_task("realm_bench.corpus").get_dataset(
        sequence_length={"inputs": MAX_LEN}, split="train", shuffle=False)
    return list(ds.as_numpy_iterator())
  finally:
    gin.clear_config()


def test_every_block_fits_and_is_packed_full(built):
  root, _ = built
  vocab = vocab_lib.WordPieceVocabulary(root / "vocab.txt")
  rows = _corpus_examples(root / "data", root / "vocab.txt")
  blocks = _blocks(root / "data")
  assert len(rows) == len(blocks) == _manifest(root / "data")["blocks"]
  lengths = []
  for row, block in zip(rows, blocks):
    # Nothing cut off by the task: every body wordpiece is in `inputs`.
    assert len(row["body_ids"]) == len(vocab.encode(block.body))
    assert len(row["inputs"]) == 3 + len(vocab.encode(block.title)) + len(row["body_ids"])
    lengths.append(len(row["inputs"]))
  assert max(lengths) <= MAX_LEN and max(lengths) == _manifest(root / "data")["max_block_length"]
  seine = [b for b in blocks if b.title == "Seine"]
  assert len(seine) > 5
  # ORQA's rule: a block ends only where its page's next sentence would not have fitted.
  split = packing.make_splitter()
  title = len(vocab.encode("Seine"))
  for block, after in zip(seine, seine[1:]):
    first = split(after.body)[0]
    assert 3 + title + len(vocab.encode(block.body)) + len(vocab.encode(first)) > MAX_LEN
  # The over-long sentence is cut at word starts, losing no text.
  assert " ".join(b.body for b in seine) == factory.long_article()


def test_ids_shards_and_manifest(built):
  root, _ = built
  folder = root / "data"
  manifest = _manifest(folder)
  assert [b.id for b in _blocks(folder)] == list(range(manifest["blocks"]))
  assert len(manifest["shards"]) == SHARDS
  for shard in manifest["shards"]:
    path = folder / shard["blocks_file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == shard["blocks_sha256"]
    assert len(path.read_text().splitlines()) == shard["blocks"]
  joined = "".join(s["blocks_sha256"] + "\n" for s in manifest["shards"])
  assert manifest["checksum"] == hashlib.sha256(joined.encode()).hexdigest()
  assert manifest["max_length"] == MAX_LEN and manifest["num_shards"] == SHARDS
  # The same input gives the same files.
  assert _manifest(root / "again")["checksum"] == manifest["checksum"]
  assert not list(folder.rglob("*.tmp"))


def test_sentences_carry_spans_and_their_block(built):
  root, _ = built
  blocks = {b.id: b for b in _blocks(root / "data")}
  sentences = list(data.iter_sentences(root / "data", kind="data"))
  assert len(sentences) == _manifest(root / "data")["sentences"] > 40
  found = {}
  for s in sentences:
    assert s.text in blocks[s.block_id].body and s.starts
    for start, end in zip(s.starts, s.ends):
      found.setdefault(s.text[start:end], s.block_id)
  for span in ("14 July 1789", "July 1789", "Charles de Gaulle", "Bastille", "France",
               "Lucius Munatius Plancus", "9 October"):
    assert span in found, span
  assert blocks[found["Lucius Munatius Plancus"]].title == "Lyon"


def test_a_finished_corpus_is_not_overwritten(built, capsys):
  root, common = built
  before = (root / "data" / "corpus" / "manifest.json").read_bytes()
  assert _run([*common, "--out", root / "data"]) == 2
  assert "already holds a finished `blocks` run" in capsys.readouterr().err
  assert (root / "data" / "corpus" / "manifest.json").read_bytes() == before


def test_bad_input_names_file_and_line_and_writes_no_manifest(built, tmp_path, capsys):
  root, _ = built
  broken = factory.dump_text().replace("</title>\n    <ns>0</ns>\n    <id>7</id>",
                                       "\n    <ns>0</ns>\n    <id>7</id>", 1)
  line = broken.splitlines().index("    <id>7</id>")
  dump = tmp_path / "enwiki-x-pages-articles.xml.bz2"
  dump.write_bytes(bz2.compress(broken.encode()))
  code = _run(["--input", dump, "--vocab", root / "vocab.txt", "--out", tmp_path / "out",
               "--shards", 2])
  err = capsys.readouterr().err
  assert code == 2 and f"{dump}:" in err and "Traceback" not in err, err
  assert int(err.split(f"{dump}:")[1].split(":")[0]) >= line - 3
  assert not (tmp_path / "out" / "corpus" / "manifest.json").exists()
  lines = tmp_path / "wiki_01"
  lines.write_text(json.dumps(factory.EXTRACTED[0]) + "\n" + json.dumps({"title": "B"}) + "\n")
  assert _run(["--input", lines, "--vocab", root / "vocab.txt", "--out", tmp_path / "out"]) == 2
  assert f"{lines}:2: field 'text': missing" in capsys.readouterr().err
  assert _run(["--input", tmp_path / "nothing-*.xml", "--vocab", root / "vocab.txt", "--out",
               tmp_path / "out"]) == 2
  assert "matches no file" in capsys.readouterr().err


def test_data_check_reads_the_shards_as_one_corpus(built):
  from realm_bench import data_check  # pylint: disable=g-import-not-at-top
  root, _ = built
  manifest = _manifest(root / "data")
  files = {f["role"]: f for f in data_check.check(data_dir=root / "data")["files"]}
  corpus, text = files["corpus"], files["pre-training text"]
  assert corpus["path"] == f"corpus/blocks-*-of-{SHARDS:05d}.jsonl ({SHARDS} shards)"
  assert corpus["rows"] == corpus["distinct"] == manifest["blocks"]
  assert f"{manifest['blocks']:,} blocks, as manifest.json says" in corpus["notes"]
  assert text["rows"] == manifest["sentences"] and not text["problems"]
  assert "not read by any task" not in {f["role"] for f in files.values()}
