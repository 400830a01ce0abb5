"""Word error rate with one normaliser, shared by tests and benchmarks."""

from __future__ import annotations

import difflib
import unicodedata

__all__ = ["extra_repeats", "longest_missing", "normalize", "wer", "word_errors"]


def normalize(text: str) -> list[str]:
    """Lower case, punctuation out (apostrophes inside words stay), whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().replace("-", " ")
    text = "".join(c if (c.isalnum() or c in " '") else " " for c in text)
    return [w.strip("'") for w in text.split() if w.strip("'")]


def word_errors(ref: list[str], hyp: list[str]) -> int:
    """Levenshtein distance over words (substitutions + deletions + insertions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def wer(reference: str, hypothesis: str) -> float:
    ref, hyp = normalize(reference), normalize(hypothesis)
    return word_errors(ref, hyp) / max(1, len(ref))


def longest_missing(ref: list[str], hyp: list[str]) -> int:
    """The longest run of reference words that the hypothesis does not have at their place: a
    stretch of speech lost, where WER alone would only say "some words"."""
    hit = [False] * len(ref)
    for b in difflib.SequenceMatcher(None, ref, hyp, autojunk=False).get_matching_blocks():
        hit[b.a : b.a + b.size] = [True] * b.size
    best = run = 0
    for h in hit:
        run = 0 if h else run + 1
        best = max(best, run)
    return best


def extra_repeats(ref: list[str], hyp: list[str]) -> list[str]:
    """Words the hypothesis says twice in a row where the reference never does (a seam
    decoded twice)."""
    pairs = set(zip(ref, ref[1:]))
    return [a for a, b in zip(hyp, hyp[1:]) if a == b and (a, b) not in pairs]
