"""Transcripts as SRT, WebVTT, JSON and plain text, built from finals' word timings.

Cues follow broadcast habits: at most ``max_lines`` lines of at most ``max_chars`` characters,
at most ``max_seconds`` long, broken at word boundaries, preferably after sentence ends and at
utterance ends. Pure functions of the finals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from .wire import Final, Word

__all__ = ["Cue", "CueOptions", "cues", "to_json", "to_srt", "to_txt", "to_vtt"]


@dataclass(frozen=True)
class CueOptions:
    max_chars: int = 42
    max_lines: int = 2
    max_seconds: float = 7.0


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    lines: tuple[str, ...]


def _wrap(words: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for w in words:
        if lines and len(lines[-1]) + 1 + len(w) <= width:
            lines[-1] += " " + w
        else:
            lines.append(w[:width] if len(w) > width else w)
            # a single word longer than a line is hard-split (rare: URLs, CJK runs)
            rest = w[width:]
            while rest:
                lines.append(rest[:width])
                rest = rest[width:]
    return lines


def _pieces(w: Word, width: int) -> list[Word]:
    """A word longer than a line (a URL, a run of CJK) as line-sized words, its time shared out
    by length, so that no cue needs more lines than allowed."""
    text = w.word.strip()
    if len(text) <= width:
        return [w]
    n = len(text)
    out = []
    for i in range(0, n, width):
        start = w.start + (w.end - w.start) * i / n
        end = w.start + (w.end - w.start) * min(n, i + width) / n
        out.append(Word(" " + text[i : i + width], start, end, w.probability))
    return out


def cues(finals: Iterable[Final], opt: CueOptions | None = None) -> list[Cue]:
    opt = opt or CueOptions()
    out: list[Cue] = []
    cur: list[Word] = []

    def fits(ws: list[Word]) -> bool:
        texts = [w.word.strip() for w in ws]
        return (
            len(_wrap(texts, opt.max_chars)) <= opt.max_lines
            and ws[-1].end - ws[0].start <= opt.max_seconds
        )

    def emit() -> None:
        if cur:
            lines = _wrap([w.word.strip() for w in cur], opt.max_chars)
            out.append(Cue(cur[0].start, max(cur[-1].end, cur[0].start + 0.2), tuple(lines)))
            cur.clear()

    for f in finals:
        words = list(f.words) or [Word(" " + f.text, f.start, f.end, 1.0)]
        for w in (p for word in words for p in _pieces(word, opt.max_chars)):
            if not w.word.strip():
                continue
            if cur and not fits(cur + [w]):
                emit()
            cur.append(w)
            # prefer to end a cue at a sentence end once it holds a line's worth
            if w.word.rstrip().endswith((".", "?", "!", "。", "？", "！")) and sum(
                len(x.word) for x in cur
            ) >= opt.max_chars:
                emit()
        if f.eou:
            emit()
    emit()
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


def to_srt(finals: Iterable[Final], opt: CueOptions | None = None) -> str:
    blocks = [
        f"{i}\n{_ts(c.start, ',')} --> {_ts(c.end, ',')}\n" + "\n".join(c.lines) + "\n"
        for i, c in enumerate(cues(finals, opt), 1)
    ]
    return "\n".join(blocks)


def to_vtt(finals: Iterable[Final], opt: CueOptions | None = None) -> str:
    blocks = [
        f"{_ts(c.start, '.')} --> {_ts(c.end, '.')}\n" + "\n".join(c.lines) + "\n"
        for c in cues(finals, opt)
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


def to_txt(finals: Iterable[Final]) -> str:
    """One line per utterance."""
    lines, cur = [], []
    for f in finals:
        cur.append(f.text)
        if f.eou:
            lines.append(" ".join(cur))
            cur = []
    if cur:
        lines.append(" ".join(cur))
    return "\n".join(lines) + ("\n" if lines else "")


def to_json(session: str, finals: list[Final], live: bool) -> str:
    return json.dumps(
        {"session": session, "live": live, "text": " ".join(f.text for f in finals),
         "finals": [f.to_json() for f in finals]},
        ensure_ascii=False,
    )
