"""From recorded messages to the published figures (definitions in bench/README.md)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from whisperwire.client.stream import StreamResult
from whisperwire.server import wire
from whisperwire.server.wer import normalize


@dataclass
class RefWord:
    key: str
    end: float  # stream seconds, from the offline decode's word timestamps


def reference_words(offline_words: list[tuple[str, float]]) -> list[RefWord]:
    """Offline words (text, end) normalised the way WER normalises (a word may become several)."""
    out = []
    for text, end in offline_words:
        for k in normalize(text):
            out.append(RefWord(k, end))
    return out


def _match(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(blk.a + k, blk.b + k) for blk in sm.get_matching_blocks() for k in range(blk.size)]


def percentiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"n": 0, "p50": None, "p90": None, "p95": None, "max": None}
    a = np.asarray(xs)
    return {"n": len(xs), "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p95": float(np.percentile(a, 95)), "max": float(a.max())}


@dataclass
class StreamLatency:
    final: list[float]
    partial: list[float]
    final_by_time: list[tuple[float, float]]  # (word end in stream s, latency)
    matched: int
    reference: int


def word_latencies(res: StreamResult, ref: list[RefWord]) -> StreamLatency:
    """Final latency of a word: arrival of the first final containing it minus the moment the
    client had sent the audio up to the word's end. Partial latency: the same with the first
    message of any kind showing the word at its place."""
    ref_keys = [w.key for w in ref]
    # every final word, with its arrival
    fwords: list[tuple[str, float]] = []
    for t, _, m in res.messages:
        if isinstance(m, wire.Final):
            fwords += [(k, t) for k in normalize(m.text)]
    pairs = _match(ref_keys, [k for k, _ in fwords])
    seen: dict[int, float] = {}
    final_at: dict[int, float] = {}
    hyp_to_ref = {h: r for r, h in pairs}
    for r, h in pairs:
        final_at[r] = fwords[h][1]
        seen[r] = fwords[h][1]
    # partials: align each against the reference just after the finals so far
    n_final_words = 0
    for t, _, m in res.messages:
        if isinstance(m, wire.Final):
            n_final_words += len(normalize(m.text))
        elif isinstance(m, wire.Partial) and m.text:
            keys = normalize(m.text)
            last = max((hyp_to_ref[h] for h in range(n_final_words) if h in hyp_to_ref), default=-1)
            lo = last + 1
            window = ref_keys[lo : lo + len(keys) + 8]
            for r, _ in _match(window, keys):
                j = lo + r
                if j not in seen or t < seen[j]:
                    seen[j] = t
    fin, par, by_time = [], [], []
    for j, w in enumerate(ref):
        sent = res.sent_at(w.end)
        if j in final_at:
            fin.append(final_at[j] - sent)
            by_time.append((w.end, final_at[j] - sent))
        if j in seen:
            par.append(seen[j] - sent)
    return StreamLatency(fin, par, by_time, len(final_at), len(ref))


def lag_growth(by_time: list[tuple[float, float]]) -> float | None:
    """Median final latency in the last quarter of the stream minus the first quarter."""
    if len(by_time) < 8:
        return None
    t_end = max(t for t, _ in by_time)
    first = [lat for t, lat in by_time if t <= t_end / 4]
    last = [lat for t, lat in by_time if t >= 3 * t_end / 4]
    if not first or not last:
        return None
    return float(np.median(last) - np.median(first))
