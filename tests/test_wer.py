"""The scoring helpers the tests and ``python -m bench accuracy`` share."""

from __future__ import annotations

from whisperwire.server.wer import extra_repeats, longest_missing, normalize, wer


def test_wer_normalises_case_and_punctuation():
    assert wer("Hello, World!", "hello world") == 0.0
    assert wer("a b c d", "a x c") == 0.5


def test_longest_missing_finds_a_lost_stretch_not_scattered_errors():
    ref = "one two three four five six seven eight".split()
    assert longest_missing(ref, "one two seven eight".split()) == 4
    assert longest_missing(ref, "one x three x five x seven x".split()) == 1
    assert longest_missing(ref, ref) == 0
    assert longest_missing(ref, []) == len(ref)


def test_extra_repeats_ignore_repeats_the_reference_has():
    ref = normalize("it was very very good, the book")
    assert extra_repeats(ref, normalize("it was very very good the book book")) == ["book"]
    assert extra_repeats(ref, ref) == []
