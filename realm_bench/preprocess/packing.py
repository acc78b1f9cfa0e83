"""Sentences -> blocks of at most BLOCK_LEN wordpieces, by ORQA's rule.

ORQA (`wiki_preprocessor.py`) splits a page into sentences with NLTK's Punkt and fills a block
greedily: a sentence joins the current block while `[CLS] title [SEP] block sentence [SEP]`
stays within the budget, else it starts the next block; a block's text is its sentences joined
by single spaces. Two differences, both so that every block fits the budget (the tasks would
otherwise cut the end of an over-long block off without a word):

- a sentence longer than the budget on its own is cut into pieces at word starts (ORQA put it
  in a block of its own, over the budget, and its featuriser truncated it);
- paragraphs are split separately, so a sentence never runs across a paragraph break.

The splitter: ORQA downloads Punkt's `english.pickle` at run time. Nothing may be downloaded
here, so the default runs the same Punkt algorithm with an abbreviation list shipped below
(titles, months, initials, "U.S.", "e.g."); it splits after an unlisted abbreviation that the
trained model knows. `--punkt DIR` loads NLTK's trained English model from an NLTK data folder
(`python -m nltk.downloader -d DIR punkt_tab`) for ORQA's sentence boundaries.
"""
from __future__ import annotations

import dataclasses
import string
from typing import Callable, Sequence

from realm_bench.errors import InputError

ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "sen", "rep", "gov", "gen", "col",
    "lt", "maj", "sgt", "capt", "cmdr", "adm", "rev", "hon", "fr", "mt", "ft", "ave", "blvd",
    "inc", "ltd", "co", "corp", "bros", "assn", "dept", "univ", "no", "nos", "vol", "vols",
    "pp", "p", "ed", "eds", "fig", "figs", "approx", "est", "ca", "cf", "vs", "etc", "al",
    "e.g", "i.e", "u.s", "u.k", "u.n", "u.s.a", "d.c", "a.m", "p.m", "ph.d", "b.a", "m.a",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    *string.ascii_lowercase})


def make_splitter(punkt_dir: str | None = None) -> Callable[[str], list[str]]:
  """A paragraph -> sentences function (Punkt, shipped abbreviations or NLTK's English)."""
  import nltk.data  # pylint: disable=g-import-not-at-top
  from nltk.tokenize import punkt  # pylint: disable=g-import-not-at-top
  if punkt_dir is None:
    params = punkt.PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    return punkt.PunktSentenceTokenizer(params).tokenize
  try:
    model = nltk.data.find("tokenizers/punkt_tab/english/", paths=[punkt_dir])  # only there
    # NLTK opens model files only inside its data folders, so this one joins them.
    if punkt_dir not in nltk.data.path:
      nltk.data.path.append(punkt_dir)
    return punkt.PunktSentenceTokenizer(punkt.load_punkt_params(model)).tokenize
  except (LookupError, OSError, ValueError):
    raise InputError("no NLTK Punkt model here: expected tokenizers/punkt_tab/english/ inside "
                     "(python -m nltk.downloader -d DIR punkt_tab)", path=punkt_dir,
                     field="--punkt") from None


def splitter_name(punkt_dir: str | None) -> str:
  return f"punkt:{punkt_dir}" if punkt_dir else "punkt:shipped-abbreviations"


@dataclasses.dataclass(frozen=True)
class Piece:
  """A sentence (or a cut of an over-long one) and its wordpiece count."""
  text: str
  length: int


def cut_long(text: str, ids: Sequence[int], starts: Sequence[int],
             continuation: Callable[[int], bool], budget: int) -> list[Piece]:
  """`text` (its wordpieces `ids` with character `starts`) in pieces of at most `budget`
  wordpieces, cut before a word that follows a space; failing that before any piece that is
  not a `##` continuation (punctuation), and mid-word only when one word is over the budget."""

  def cut_point(first: int) -> int:
    last = first + budget
    rules = (lambda i: text[starts[i] - 1:starts[i]].isspace() and not continuation(ids[i]),
             lambda i: not continuation(ids[i]))
    for allowed in rules:
      for cut in range(last, first, -1):
        if allowed(cut):
          return cut
    return last

  pieces, first = [], 0
  while len(ids) - first > budget:
    cut = cut_point(first)
    pieces.append(Piece(text[starts[first]:starts[cut]].strip(), cut - first))
    first = cut
  pieces.append(Piece(text[starts[first]:].strip(), len(ids) - first))
  return pieces


def pack(title_length: int, pieces: Sequence[Piece], max_length: int) -> list[list[Piece]]:
  """ORQA's greedy fill: [CLS] title [SEP] current next [SEP] must stay within max_length."""
  blocks, current, count = [], [], 0
  for piece in pieces:
    if 3 + title_length + count + piece.length <= max_length:
      current.append(piece)
      count += piece.length
    else:
      if current:
        blocks.append(current)
      current, count = [piece], piece.length
  if current:
    blocks.append(current)
  return blocks
