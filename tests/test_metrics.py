"""The Open-QA metrics decide every edge case the way the official ORQA/DPR evaluation does."""
from __future__ import annotations

import subprocess
import sys
import unicodedata

import pytest

from realm_bench.tasks import metrics

CAFE_NFC = "caf\u00e9"
CAFE_NFD = "cafe\u0301"


# Exact match and its normalisation.


def test_nfc_and_nfd_spellings_are_equal():
  assert unicodedata.normalize("NFC", CAFE_NFD) == CAFE_NFC != CAFE_NFD
  assert metrics.exact_match(CAFE_NFC, [CAFE_NFD])
  assert metrics.exact_match(CAFE_NFD, [CAFE_NFC])


def test_accents_are_kept_not_stripped():
  assert not metrics.exact_match(CAFE_NFC, ["cafe"])
  assert metrics.normalize_answer(CAFE_NFC) == CAFE_NFD


def test_lowercase_and_whitespace_collapse():
  assert metrics.normalize_answer("  Barack\t\nOBAMA  ") == "barack obama"
  assert metrics.exact_match("BARACK   obama", ["Barack Obama"])


def test_articles_are_removed_as_whole_words_only():
  assert metrics.normalize_answer("The Theater") == "theater"
  assert metrics.normalize_answer("an answer at the end") == "answer at end"
  assert metrics.normalize_answer("Anthem") == "anthem"
  assert metrics.exact_match("the Beatles", ["Beatles"])
  assert not metrics.exact_match("theater", ["ater"])


def test_punctuation_goes_before_articles_as_in_the_official_order():
  # "the." loses its dot first, so "the" then stands alone and is removed.
  assert metrics.normalize_answer("the.") == ""
  # "a-ha": the hyphen goes first, leaving the word "aha".
  assert metrics.normalize_answer("a-ha") == "aha"


def test_articles_go_after_nfd_so_a_trailing_combining_mark_is_a_word_boundary():
  # NFD splits "é" into "e" + U+0301, which is not a word character for `\b`.
  assert metrics.normalize_answer("th\u00e9") == "\u0301"


def test_ascii_punctuation_inside_numbers_is_dropped():
  assert metrics.exact_match("10,605", ["10605"])
  assert metrics.exact_match("3.14", ["314"])
  assert metrics.exact_match("U.S.A.", ["usa"])


def test_curly_quotes_and_dashes_are_not_ascii_punctuation():
  assert not metrics.exact_match("\u201cx\u201d", ["x"])
  assert metrics.exact_match('"x"', ["x"])
  assert not metrics.exact_match("1914\u20131918", ["19141918"])
  assert not metrics.exact_match("a\u2014b", ["ab"])
  # An en dash is not a word character, so "a" before it is an article and goes.
  assert metrics.normalize_answer("a\u2013b") == "\u2013b"


def test_any_gold_counts():
  assert metrics.exact_match("Paris", ["Lyon", "paris", "Nice"])
  assert not metrics.exact_match("Paris", ["Lyon", "Nice"])


def test_empty_gold_list_is_a_clear_error():
  for fn in (metrics.exact_match, metrics.regex_match):
    with pytest.raises(ValueError, match="empty gold answer list"):
      fn("x", [])
  with pytest.raises(ValueError, match="empty gold answer list"):
    metrics.exact_match_metric([["a"], []], ["a", "b"])


def test_a_bare_string_as_golds_is_refused():
  with pytest.raises(TypeError, match="list of strings"):
    metrics.exact_match("a", "abc")


# CuratedTREC regex match.


def test_regex_matches_at_the_start_of_the_raw_prediction():
  assert metrics.regex_match("1873", ["1873"])
  assert not metrics.regex_match(" 1873", ["1873"])  # re.match, not search
  assert not metrics.regex_match("in 1873", ["1873"])
  assert metrics.regex_match("1873", ["18"])  # a prefix counts: not fullmatch
  assert metrics.regex_match("1873 AD", ["1873"])


def test_regex_is_case_insensitive_and_not_normalised():
  assert metrics.regex_match("PARIS", ["paris"])
  assert metrics.regex_match("Écrit", ["écrit"])
  # No normalisation: the article is not stripped from the prediction.
  assert not metrics.regex_match("the Beatles", ["Beatles"])
  assert not metrics.regex_match("U.S.A.", ["USA"])


def test_regex_multiline_lets_anchors_work_per_line():
  assert metrics.regex_match("first\nsecond", ["first$"])


def test_uncompilable_pattern_counts_as_wrong_not_an_exception():
  assert not metrics.regex_match("(abc", ["(abc"])
  assert metrics.regex_match("abc", ["(abc", "ab"])
  assert not metrics.pattern_compiles("(abc")
  assert metrics.pattern_compiles("a|b")


# seqio metric functions and the Score.


def test_seqio_metric_functions_return_percentages():
  targets = [["Paris"], ["1873|1874"], ["x"], ["the moon"]]
  predictions = ["paris", "1874", "y", "the Moon"]
  assert metrics.exact_match_metric(targets, predictions) == {"exact_match": 50.0}
  assert metrics.regex_match_metric(targets, predictions) == {"exact_match": 75.0}


def test_score_counts_and_refuses_misaligned_or_empty_input():
  s = metrics.score(["a", "b", "c"], [["a"], ["x"], ["c"]])
  assert (s.num_correct, s.num_total) == (2, 3)
  assert s.exact_match_percent == pytest.approx(200 / 3)
  with pytest.raises(ValueError, match="2 predictions for 1 targets"):
    metrics.score(["a", "b"], [["a"]])
  with pytest.raises(ValueError, match="at least one question"):
    metrics.score([], [])


def test_postprocess_takes_all_golds_from_the_example():
  example = {"answers": [b"Paris", "Lutetia".encode()]}
  assert metrics.qa_postprocess("Paris", example=example, is_target=True) == ["Paris", "Lutetia"]
  assert metrics.qa_postprocess("Paris", example={}, is_target=True) == ["Paris"]
  assert metrics.qa_postprocess(b"Lyon", example=example) == "Lyon"


# Recall@k matchers.


def test_string_matcher_is_a_raw_case_sensitive_substring():
  assert metrics.has_answer("born in Paris, France", ["Paris"])
  assert not metrics.has_answer("born in paris", ["Paris"])
  assert metrics.has_answer("Parisian food", ["Paris"])  # substring, not token
  assert not metrics.has_answer(CAFE_NFC, [CAFE_NFD])  # no normalisation at all


def test_dpr_matcher_is_a_normalised_token_sequence():
  assert metrics.has_answer("born in paris, France.", ["Paris, France"], matcher="dpr")
  assert metrics.has_answer("PARIS", ["paris"], matcher="dpr")
  assert not metrics.has_answer("Parisian food", ["Paris"], matcher="dpr")
  assert metrics.has_answer(CAFE_NFC, [CAFE_NFD], matcher="dpr")
  assert not metrics.has_answer("Paris is in France", ["Paris France"], matcher="dpr")
  # Whitespace and punctuation spacing do not matter; punctuation tokens do.
  assert metrics.has_answer("the U . S . A", ["U.S.A"], matcher="dpr")
  assert not metrics.has_answer("the USA", ["U.S.A"], matcher="dpr")


def test_dpr_tokenizer():
  assert metrics.dpr_tokens("It's 3.5 km\tcaf\u00e9!") == [
      "It", "'", "s", "3", ".", "5", "km", "caf\u00e9", "!"]
  # Combining marks stay inside the word; control and separator characters vanish.
  assert metrics.dpr_tokens("cafe\u0301\u00a0x\u200by") == ["cafe\u0301", "x", "y"]


def test_dpr_matcher_empty_answer_hits_every_block_as_in_dpr():
  assert metrics.has_answer("anything", [""], matcher="dpr")
  assert metrics.has_answer("anything", [" "], matcher="dpr")


def test_regex_matcher_searches_anywhere_case_insensitively():
  assert metrics.has_answer("He was born in 1873.", ["18[0-9]{2}"], matcher="regex")
  assert metrics.has_answer("PARIS", ["paris"], matcher="regex")
  assert not metrics.has_answer("He was born in 1873.", ["19[0-9]{2}"], matcher="regex")
  assert not metrics.has_answer("(abc", ["(abc"], matcher="regex")


def test_unknown_matcher_is_refused():
  with pytest.raises(ValueError, match="unknown recall matcher"):
    metrics.has_answer("x", ["x"], matcher="fuzzy")
  with pytest.raises(ValueError, match="unknown recall matcher"):
    metrics.recall_at_k([["x"]], [["x"]], k=1, matcher="fuzzy")


def test_recall_at_k_cuts_off_at_k():
  retrieved = [
      ["nothing", "Paris is here", "more"],  # hit at rank 2
      ["Lyon", "x", "y"],                    # hit at rank 1
      ["a", "b", "c"],                       # no hit
      ["only one block"],                    # fewer blocks than k
  ]
  answers = [["Paris"], ["Lyon"], ["Nice"], ["block"]]
  assert metrics.recall_at_k(retrieved, answers, k=1) == 0.5
  assert metrics.recall_at_k(retrieved, answers, k=2) == 0.75
  assert metrics.recall_at_k(retrieved, answers, k=100) == 0.75
  assert metrics.recall_at_k(retrieved, [["paris"], ["lyon"], ["nice"], ["BLOCK"]], k=3) == 0.0
  assert metrics.recall_at_k(retrieved, [["paris"], ["lyon"], ["nice"], ["BLOCK"]], k=3,
                             matcher="dpr") == 0.75


def test_recall_at_k_refuses_bad_arguments():
  with pytest.raises(ValueError, match="k must be a positive integer"):
    metrics.recall_at_k([["x"]], [["x"]], k=0)
  with pytest.raises(ValueError, match="retrieval lists"):
    metrics.recall_at_k([["x"]], [["x"], ["y"]], k=1)
  with pytest.raises(ValueError, match="empty gold answer list"):
    metrics.recall_at_k([[]], [[]], k=1)


def test_importing_metrics_loads_no_tensorflow_or_jax():
  code = ("import sys, realm_bench.tasks.metrics; "
          "print(sorted(m for m in ('tensorflow', 'jax', 'seqio') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "[]"
