"""Transcripts as SRT, WebVTT, JSON and plain text, built from finals' word timings.

Cues follow broadcast habits: at most ``max_lines`` lines of at most ``max_chars`` display
columns (a CJK character takes two), at most ``max_seconds`` long, broken between units (Latin
words, single CJK characters), preferably after punctuation, after sentence ends and at
utterance ends, and on screen at least ``min_seconds`` where the timing allows. Text is joined
by :mod:`.text`'s rules, so Chinese gets no spaces. Pure functions of the finals.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Callable, Iterable

from .text import (closes, display_width, finals_text, glue_piece, is_piece, join_units,
                   split_units, whole_words, wrap_units)
from .wire import Final, UtteranceEnd, Word

__all__ = ["Cue", "CueOptions", "at_turns", "cues", "to_json", "to_srt", "to_txt", "to_vtt"]

_SENTENCE_END = (".", "?", "!", "。", "？", "！", "…")


@dataclass(frozen=True)
class CueOptions:
    max_chars: int = 42  # display columns
    max_lines: int = 2
    max_seconds: float = 7.0
    # long enough to read a short cue (Netflix's guide: 5/6 s, 20 frames at 24 fps; the BBC's
    # is alike): "他稱" alone was a cue of 0.48 s, gone before it could be read
    min_seconds: float = 5 / 6


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    lines: tuple[str, ...]


def _units(w: Word, width: int) -> list[Word]:
    """A word as the units a line may break between, its time shared out by length; a unit
    wider than a line (a URL) is cut into line-sized pieces, so no cue needs more lines than
    allowed."""
    parts: list[str] = []
    for u in split_units(w.word):
        while display_width(u.strip()) > width:
            core = u.strip()
            n = 1
            while display_width(core[: n + 1]) <= width:
                n += 1
            parts.append(" " + core[:n])
            u = " " + core[n:]
        parts.append(u)
    total = sum(len(p.strip()) for p in parts) or 1
    out, done = [], 0
    for p in parts:
        start = w.start + (w.end - w.start) * done / total
        done += len(p.strip())
        out.append(Word(p, start, w.start + (w.end - w.start) * done / total, w.probability))
    return out


def _break_at(ws: list[Word], nxt: Word) -> int:
    """Where a full cue is best cut (the rest starts the next cue, ``nxt`` after it): after the
    last punctuation in its second half, else at its end; never before a closing mark, which
    stays with the text before it (a cue began "，台灣的夜市文化。" where the comma came as
    the next final's first word): the unit before the mark goes down with it."""
    seq = ws + [nxt]
    can = [c for c in range(1, len(ws) + 1) if not closes(seq[c].word)]
    for marks in (_SENTENCE_END, (",", "，", "、", ";", "；", ":", "：")):
        for c in reversed(can):
            if c > len(ws) // 2 and ws[c - 1].word.rstrip().endswith(marks):
                return c
    return can[-1] if can else len(ws)


def _latest_end(groups: list[list[Word]], i: int, audio_end: float | None) -> float:
    """The latest cue ``i`` may end: the next cue's start (cues never overlap), and the
    audio's end where it is known."""
    limit = groups[i + 1][0].start if i + 1 < len(groups) else math.inf
    return min(limit, math.inf if audio_end is None else audio_end)


def _too_short(groups: list[list[Word]], i: int, opt: CueOptions, audio_end: float | None) -> bool:
    """Cue ``i`` is shown less than ``min_seconds``, even extended into the gap after it."""
    ws = groups[i]
    room = max(ws[-1].end, _latest_end(groups, i, audio_end)) - ws[0].start
    return room < opt.min_seconds - 1e-9


def _merge_partner(groups: list[list[Word]], i: int, fits: Callable[[list[Word]], bool]) -> int | None:
    """The neighbour a short cue ``i`` joins: of those it still fits a cue with (lines, width,
    length), the nearer in time, the next on a tie (what follows is usually the rest of the
    sentence: "他稱" | "他製作了..."); None if neither fits."""
    ws = groups[i]
    gaps = {}
    if i + 1 < len(groups) and fits(ws + groups[i + 1]):
        gaps[i + 1] = groups[i + 1][0].start - ws[-1].end
    if i > 0 and fits(groups[i - 1] + ws):
        gaps[i - 1] = ws[0].start - groups[i - 1][-1].end
    return min(gaps, key=lambda j: (gaps[j], -j)) if gaps else None


def _merge_short(groups: list[list[Word]], opt: CueOptions, fits: Callable[[list[Word]], bool],
                 audio_end: float | None) -> list[list[Word]]:
    """Each cue too short to read, with no room after it to stay longer, joined to a neighbour
    it fits a cue with; the words keep their order."""
    groups = [list(g) for g in groups]
    i = 0
    while i < len(groups):
        j = _merge_partner(groups, i, fits) if _too_short(groups, i, opt, audio_end) else None
        if j is None:
            i += 1
            continue
        lo = min(i, j)
        groups[lo:lo + 2] = [groups[lo] + groups[lo + 1]]
        i = max(0, lo - 1)  # (the joined cue, and a short one before it, may need another look)
    return groups


def _timed(groups: list[list[Word]], opt: CueOptions, lines: Callable[[list[Word]], list[str]],
           audio_end: float | None) -> list[Cue]:
    """The cues, each a short one extended into the gap after it up to ``min_seconds``."""
    out = []
    for i, ws in enumerate(groups):
        start = ws[0].start
        latest = _latest_end(groups, i, audio_end)
        # (a zero-length cue, where nothing leaves room, still shows a moment: the overlap
        # rule in cues() takes it back to the next cue's start)
        shown = max(min(start + opt.min_seconds, latest),
                    min(start + 0.2, math.inf if audio_end is None else audio_end))
        out.append(Cue(start, max(ws[-1].end, shown), tuple(lines(ws))))
    return out


def cues(finals: Iterable[Final], opt: CueOptions | None = None, *,
         audio_end: float | None = None) -> list[Cue]:
    """``audio_end``: where the audio ends (the channel's clock), when known: no cue is
    extended past it."""
    opt = opt or CueOptions()
    groups: list[list[Word]] = []
    cur: list[Word] = []

    def lines(ws: list[Word]) -> list[str]:
        return wrap_units([w.word for w in ws], opt.max_chars)

    def fits(ws: list[Word], alone: bool = False) -> bool:
        """Within the cue's limits; ``alone``: a single word, on one line."""
        width = display_width(ws[0].word.strip()) <= opt.max_chars if alone else \
            len(lines(ws)) <= opt.max_lines
        return width and ws[-1].end - ws[0].start <= opt.max_seconds

    def emit(n: int | None = None) -> None:
        n = len(cur) if n is None else n
        if n:
            groups.append(cur[:n])
            del cur[:n]

    done = False  # the cue is complete: it ends before the next unit that is no closing mark
    for f in finals:
        words = list(f.words) or [Word(" " + f.text, f.start, f.end, 1.0)]
        for w in (u for word in whole_words(words) for u in _units(word, opt.max_chars)):
            if not w.word.strip():
                continue
            if done and not closes(w.word):
                emit()
            done = done and bool(cur)
            # (a word Whisper split across two finals, while the whole still fits a cue alone:
            # a number written in pieces over 8 finals made one cue of 132 columns and 18 s)
            if cur and is_piece(cur[-1], w) and fits([glue_piece(cur[-1], w)], alone=True):
                w = glue_piece(cur.pop(), w)
            while cur and not fits(cur + [w]):
                if closes(w.word) and len(lines(cur + [w])) <= opt.max_lines:
                    # the mark stays with the text before it, the cue a little longer, and
                    # timed with it (a "，" 12 s later, after a pause, held the cue up 12 s)
                    w = dataclasses.replace(w, start=cur[-1].end, end=cur[-1].end)
                    break
                emit(_break_at(cur, w))
            cur.append(w)
            # prefer to end a cue at a sentence end once it holds a line's worth
            done = done or w.word.rstrip().endswith(_SENTENCE_END) and display_width(
                join_units(x.word for x in cur)) >= opt.max_chars
        done = done or f.eou and bool(cur)
    emit()
    out = _timed(_merge_short(groups, opt, fits, audio_end), opt, lines, audio_end)
    # cues never overlap
    for i in range(1, len(out)):
        if out[i].start < out[i - 1].end:
            prev = out[i - 1]
            out[i - 1] = Cue(prev.start, max(prev.start, out[i].start), prev.lines)
    return out


def _ts(t: float, sep: str) -> str:
    ms = int(round(max(0.0, t) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def to_srt(finals: Iterable[Final], opt: CueOptions | None = None, *,
           audio_end: float | None = None) -> str:
    blocks = [
        f"{i}\n{_ts(c.start, ',')} --> {_ts(c.end, ',')}\n" + "\n".join(c.lines) + "\n"
        for i, c in enumerate(cues(finals, opt, audio_end=audio_end), 1)
    ]
    return "\n".join(blocks)


def to_vtt(finals: Iterable[Final], opt: CueOptions | None = None, *,
           audio_end: float | None = None) -> str:
    blocks = [
        f"{_ts(c.start, '.')} --> {_ts(c.end, '.')}\n" + "\n".join(c.lines) + "\n"
        for c in cues(finals, opt, audio_end=audio_end)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def to_txt(finals: Iterable[Final]) -> str:
    """One line per utterance."""
    lines, cur = [], []
    for f in finals:
        cur.append(f)
        if f.eou:
            lines.append(finals_text(cur))
            cur = []
    if cur:
        lines.append(finals_text(cur))
    return "\n".join(lines) + ("\n" if lines else "")


def close_utterance(finals: list[Final]) -> None:
    """An ``utterance_end`` came after ``finals``' last: that final closes its utterance, so
    lines and cues break after it as after a final sent with ``eou``. Every word of it was
    final before the speaker stopped, so no final could carry the end ("... for your
    country." and, 4 s later, "And so my fellow Americans." made one line, where the same
    pause after a final with ``eou`` made two). Only the flag changes, never the text."""
    if finals and not finals[-1].eou:
        finals[-1] = dataclasses.replace(finals[-1], eou=True)


def utterances(msgs: Iterable[object]) -> list[Final]:
    """The finals among a stream's messages, each that an ``utterance_end`` followed closing
    its utterance (:func:`close_utterance`): what a saved file renders."""
    out: list[Final] = []
    for m in msgs:
        if isinstance(m, Final):
            out.append(m)
        elif isinstance(m, UtteranceEnd):
            close_utterance(out)
    return out


def at_turns(finals: list[Final], turns: Iterable[int]) -> list[Final]:
    """The finals for a download, each speaker's last one closing its utterance: a speaker's
    end is one, but that final may have gone out without ``eou`` (made final before the
    client closed: "... for your country." and the next speaker's "in being comparatively
    modern." made one line and one cue). ``turns``: the index of each later speaker's first
    final. The finals themselves never change; this is a copy for rendering."""
    out = list(finals)
    for i in turns:
        if 0 < i <= len(out) and not out[i - 1].eou:
            out[i - 1] = dataclasses.replace(out[i - 1], eou=True)
    return out


def to_json(session: str, finals: list[Final], live: bool, turns: Iterable[int] = (),
            **channel: object) -> str:
    """The finals as they were sent (one that an ``utterance_end`` closed with ``eou``),
    ``turns``: the index of each later speaker's first, and
    what else the server says of the channel (``channel``: its ``offset`` and ``instance``)."""
    return json.dumps(
        {"session": session, "live": live, "text": finals_text(finals),
         "finals": [f.to_json() for f in finals], "turns": list(turns), **channel},
        ensure_ascii=False,
    )
