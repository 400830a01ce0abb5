"""Agreement between successive hypotheses: which words are stable enough to become final.

LocalAgreement-2 (Macháček et al., whisper_streaming's ``HypothesisBuffer``): a word is committed
once two successive decodes of a growing window agree on it and on everything before it. Three
changes from the original:

* Units, not whitespace words. Text in scripts written without spaces (Chinese, Japanese, Thai,
  ...) is split into one unit per character, so a growing sentence agrees character by character
  instead of never (a whole unspaced sentence would be one "word" that changes every step).
* Units are compared on a normalised key (case and punctuation folded), so "you," then "you"
  still agree; the newer hypothesis's form is the one committed.
* A number is never the last unit agreement commits: it may still grow ("14" before "fifty-five"
  is heard), so it waits for the word after it. Nor does a final end inside a written word
  (" $3" and ".5" are one word on the page).
* Optionally (``alone_until``), the units of the newer hypothesis that end well before its window's
  end need no second opinion (AlignAtt's idea): for steps under load, which come far apart.

Pure: words in, committed words out; times are stream seconds.
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from typing import Iterable

from .text import glued
from .wire import Word

__all__ = ["HypothesisBuffer", "split_units", "unit_key", "join_words"]

# Unicode ranges of scripts written without spaces between words.
_UNSPACED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x9FFF),  # CJK radicals, Kana, CJK ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables (spaced, but Whisper often glues them)
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # full-width forms
    (0x20000, 0x2FA1F),  # CJK extensions
)


def _unspaced(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _UNSPACED)


def split_units(words: Iterable[Word]) -> list[Word]:
    """Split words holding unspaced-script text into one unit per character (times spread
    evenly over the word); other words pass unchanged."""
    out: list[Word] = []
    for w in words:
        core = w.word.strip()
        if len(core) <= 1 or not any(_unspaced(c) for c in core):
            out.append(w)
            continue
        lead = w.word[: len(w.word) - len(w.word.lstrip())]
        n = len(core)
        dur = (w.end - w.start) / n
        for i, ch in enumerate(core):
            out.append(
                Word(
                    (lead if i == 0 else "") + ch,
                    w.start + i * dur,
                    w.start + (i + 1) * dur,
                    w.probability,
                )
            )
    return out


def unit_key(text: str) -> str:
    """Comparison form of a unit: case-folded, whitespace and punctuation removed."""
    t = "".join(c for c in text.casefold() if not unicodedata.category(c).startswith(("P", "Z")))
    return t.strip() or text.strip()


def _glued(a: Word, b: Word) -> bool:
    """``b`` goes on writing the word ``a`` began, in a script written with spaces: Whisper
    writes "$3.5" as " $3" and ".5", "COVID-19" as " COVID" and "-19". A final that ended
    between them gives a Deepgram client "$3" and ".5" as two results' words, and "$3 .5"
    where it joins their transcripts with a space, so finals end only between written words
    (our own clients glue such a piece back on: the same :func:`.text.glued`). Not between two units of an
    unspaced script, which agree one by one; a Latin or digit piece among them ("20" "20" in
    "在2020年") is glued."""
    return glued([b]) and not any(_unspaced(c) for c in a.word + b.word)


def _growing(w: Word) -> bool:
    """Whether the unit is a number, which Whisper writes as digits only once it has heard
    all of it: a window that ends inside "fourteen fifty-five" hears "14", and the decode after
    a committed "14", forced past it, says "1455" from the same start. So agreement keeps a
    number at its edge until the word after it agrees too."""
    key = unit_key(w.word)
    return key[-1:].isdigit()


def join_words(words: Iterable[Word]) -> str:
    return "".join(w.word for w in words).strip()


class HypothesisBuffer:
    """LocalAgreement-2 over units.

    Call :meth:`insert` with each new hypothesis (stream-time words, in order), then
    :meth:`commit_agreed` to take the newly stable prefix, or :meth:`commit_all` at the end of an
    utterance. :attr:`pending` is the uncommitted rest of the latest hypothesis (the partial).
    """

    def __init__(self, committed_end: float = 0.0) -> None:
        self.committed_end = committed_end
        self.committed: list[Word] = []
        self._previous: list[Word] = []
        self._new: list[Word] = []
        # where the first doubted unit two hypotheses agree on (or the first they disagree on)
        # ends, once it has waited long enough (see :meth:`commit_agreed`); None when none has
        self.undecided_end: float | None = None
        # where the unit the last agreement stopped at for doubt ends, waited or not, and
        # whether it was a disagreement (True) or a doubted unit the two agree on (False)
        self.doubted: tuple[float, bool] | None = None

    @property
    def pending(self) -> list[Word]:
        return list(self._new)

    def insert(self, words: Iterable[Word]) -> None:
        """Take a new hypothesis: the words the decoder heard after the committed text (the
        committed words of the window are forced as its prefix, so they never come back)."""
        self._new = [w for w in split_units(words) if unit_key(w.word)]

    def commit_agreed(self, until: float = float("inf"), min_probability: float = 0.0,
                      unsure_until: float = float("inf"), checked_until: float = -1.0,
                      stuck_until: float = float("-inf"),
                      alone_until: float = float("-inf")) -> list[Word]:
        """Commit the longest prefix on which the last two hypotheses agree (or that the newer
        one alone holds, up to the units that end by ``alone_until``), up to the units
        that end by stream time ``until``, and before the first unit the newer hypothesis
        gives less than ``min_probability`` (and never ending on a number, see
        :func:`_growing`): agreement commits a doubted unit only once it
        ends by ``checked_until`` (a careful decode was asked and gave nothing better). If
        a doubted unit ends by ``unsure_until``, :attr:`undecided_end` says where (it is for a
        careful decode to decide); so does the first unit the two disagree on, if it ends by
        ``stuck_until`` and after ``checked_until``. :attr:`doubted` says where either stopped
        it, however long ago the unit ended."""
        n = 0
        self.undecided_end = None
        self.doubted = None
        for i, b in enumerate(self._new):
            if b.end > until:
                break
            a = self._previous[i] if i < len(self._previous) else None
            if b.end <= alone_until:
                pass  # no second opinion needed
            elif a is None:
                break
            elif unit_key(a.word) != unit_key(b.word):
                if b.end > checked_until:
                    self.doubted = (b.end, True)
                if checked_until < b.end <= stuck_until:
                    self.undecided_end = b.end
                break
            if b.probability < min_probability and b.end > checked_until:
                self.doubted = (b.end, False)
                if b.end <= unsure_until:
                    self.undecided_end = b.end
                break
            n += 1
        n = self._whole(n)
        commit = self._take(n)
        self._previous = list(self._new)
        return commit

    def commit_until(self, t: float, starting_before: float = float("inf"),
                     move_on: bool = False) -> list[Word]:
        """Commit every pending unit that ends by stream time ``t`` (and starts before
        ``starting_before``): the window is full and the agreement has stalled, so move on
        rather than grow without bound (``move_on``); or a careful decode decides a doubted
        stretch, and the unit it hears in its place too. Never inside a written word (see
        :func:`_glued`), but where the window must move on and the word begins the stretch."""
        self.doubted = None
        n = 0
        while n < len(self._new) and self._new[n].end <= t and self._new[n].start < starting_before:
            n += 1
        # (a written word cut off with nothing before it is taken as cut where the window
        # must move on)
        commit = self._take(self._before_word(n) or (n if move_on else 0))
        self._previous = list(self._new)
        return commit

    def forget(self) -> None:
        """The latest hypothesis stays the partial but is no opinion: the next one commits
        nothing by agreeing with it."""
        self._previous = []
        self.doubted = None

    def commit_all(self) -> list[Word]:
        self.doubted = None
        commit = self._take(len(self._new))
        self._previous = []
        return commit

    def _before_word(self, n: int) -> int:
        """The first ``n`` units less the start of a written word they would cut (its rest
        waits with it: a piece may be stretched over seconds the decoder did not write)."""
        while 0 < n < len(self._new) and _glued(self._new[n - 1], self._new[n]):
            n -= 1
        return n

    def _whole(self, n: int) -> int:
        """The first ``n`` units less a written word they would cut, then less a number at
        their end (back to its first unit; see :func:`_growing`): "about 14 COVID" before an
        unagreed "-19" is "about", not "about 14"."""
        n = m = self._before_word(n)
        while m and _growing(self._new[m - 1]):  # the number's units, back to its first
            m -= 1
            if self._new[m].word[:1].isspace():
                break
        return n if m == n else self._before_word(m)

    def _take(self, n: int) -> list[Word]:
        out: list[Word] = []
        end = self.committed_end
        for w in self._new[:n]:
            # committed units never overlap and never go back in time
            start = max(w.start, end)
            w = replace(w, start=start, end=max(w.end, start))
            end = w.end
            out.append(w)
        self._new = self._new[n:]
        if out:
            self.committed_end = end
            self.committed = (self.committed + out)[-64:]  # the window's prefix comes from here
        return out
