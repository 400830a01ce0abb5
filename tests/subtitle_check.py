"""Validators for SRT and WebVTT text, shared by the tests."""

from __future__ import annotations

import re

from whisperwire.server.text import display_width

HAN_SPACE_HAN = re.compile(r"[\u3400-\u9fff]\s+[\u3400-\u9fff]")

TS = r"(\d\d):(\d\d):(\d\d)[,.](\d\d\d)"


def _secs(m: tuple[str, ...]) -> float:
    h, mi, s, ms = map(int, m)
    return h * 3600 + mi * 60 + s + ms / 1000


def check_cues(text: str, vtt: bool, max_chars: int = 42, max_lines: int = 2,
               max_seconds: float = 7.0) -> list[tuple[float, float, list[str]]]:
    """Parse and validate; returns the cues. Raises AssertionError on any violation."""
    if vtt:
        assert text.startswith("WEBVTT\n\n"), "WebVTT header"
        text = text[len("WEBVTT\n\n"):]
    blocks = [b for b in text.strip("\n").split("\n\n") if b.strip()]
    cues, last_end = [], 0.0
    for i, b in enumerate(blocks, 1):
        lines = b.split("\n")
        if not vtt:
            assert lines[0] == str(i), f"SRT cue numbers run 1, 2, ...: {lines[0]!r}"
            lines = lines[1:]
        m = re.fullmatch(TS + " --> " + TS, lines[0])
        assert m, f"timing line {lines[0]!r}"
        sep = "." if vtt else ","
        assert sep in lines[0]
        start, end = _secs(m.groups()[:4]), _secs(m.groups()[4:])
        assert start < end, f"cue {i} ends after it starts"
        assert start >= last_end - 1e-6, f"cue {i} overlaps the previous one"
        assert end - start <= max_seconds + 0.21, f"cue {i} lasts {end - start:.2f}s"
        body = lines[1:]
        assert 1 <= len(body) <= max_lines, f"cue {i} has {len(body)} lines"
        assert all(0 < display_width(line) <= max_chars for line in body), \
            f"cue {i} line widths {body}"
        assert not any(HAN_SPACE_HAN.search(line) for line in body), f"cue {i}: {body}"
        cues.append((start, end, body))
        last_end = end
    return cues
