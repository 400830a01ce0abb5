"""Word error rate with one normaliser, shared by tests and benchmarks."""

from __future__ import annotations

import unicodedata

__all__ = ["normalize", "wer", "word_errors"]


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
