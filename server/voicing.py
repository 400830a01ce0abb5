"""Whether audio holds a voice: two 30 ms frames in a row that repeat themselves at a pitch
period.

Whisper doubts some short answers as much as the words it invents on a breath: tiny.en's end
decode of espeak's lone "Sure." says it at p 0.18 with no-speech probability 0.56, and of the
breath that opens real/en-07 "Yeah." at p 0.18 with 0.55. The words cannot tell them apart;
the audio can. A vowel is periodic: each frame correlates with itself one pitch period later
(2.5 to 17.5 ms, 57 to 400 Hz). A breath, a click or a burst of noise does not, for two frames
running. Below 200 Hz is cut first: a DC offset, mains hum (50 or 60 Hz and their first
harmonics) and rumble correlate at any short lag and made en-07's breath read 0.88-0.92; a
voice keeps its period in its harmonics. Frames more than 30 dB below the loudest are not
judged (the filter's ringing in the silence around a word is periodic).

Measured (the smaller of two neighbouring frames' best correlation, the best pair): over the
130 utterances the VAD finds in ../shared/speech (real/, jfk, six LJ and four zh/ files), the
lowest but en-07's breath 0.83 (en-03's archival interview), 0.83 at the 1st percentile;
espeak's "Sure." 0.86, "I agree." 0.92. en-07's breath (to where the VAD heard its sound
stop, 0.21 s) 0.42, and the same with a DC offset or a 60 or 100 Hz hum added 0.42; the bench's
keyboard clicks at most 0.27 over 12 frame alignments, noise bursts 0.15, a 50 Hz hum 0.26,
low-passed noise (a 40-sample moving average) 0.46.
"""

from __future__ import annotations

import numpy as np

from .audio import MODEL_RATE
from .vad import VadOptions, spectral_peaks

__all__ = ["VOICED", "a_voice", "last_voiced", "voiced", "voicing"]

VOICED = 0.6  # between the breath's 0.42 and the weakest speech's 0.83

_FRAME = MODEL_RATE * 30 // 1000
_LAGS = (MODEL_RATE // 400, MODEL_RATE * 35 // 2000)  # 2.5 to 17.5 ms
_GATE_DB = 30.0
_CUT_HZ = 200.0
_TAPS = 321


def _high_pass() -> np.ndarray:
    """A linear-phase FIR high-pass at ``_CUT_HZ`` (windowed sinc)."""
    n = np.arange(_TAPS) - (_TAPS - 1) / 2
    fc = _CUT_HZ / MODEL_RATE
    h = -2 * fc * np.sinc(2 * fc * n) * np.hamming(_TAPS)
    h[(_TAPS - 1) // 2] += 1.0
    return h


_HIGH_PASS = _high_pass()


def _frame_voicing(x: np.ndarray, i: int) -> float:
    """Frame ``i``'s best correlation with itself shifted by a pitch period."""
    lo, hi = _LAGS
    f = x[i : i + _FRAME + hi]
    a = f[:_FRAME]
    r = np.correlate(f[lo:], a, "valid")[: hi - lo + 1]
    c = np.concatenate([[0.0], np.cumsum(f * f)])
    shifted = c[lo + _FRAME : hi + _FRAME + 1] - c[lo : hi + 1]
    return float(np.max(r / np.sqrt(float(a @ a) * shifted + 1e-12)))


def _pairs(x: np.ndarray) -> list[float]:
    """Each pair of neighbouring 30 ms frames' weaker voicing, in order (none: too short)."""
    x = np.asarray(x, np.float64)
    n = (len(x) - _LAGS[1]) // _FRAME
    if n < 2:
        return []
    x = np.convolve(x, _HIGH_PASS, "same")
    energy = np.array([x[k * _FRAME : (k + 1) * _FRAME] @ x[k * _FRAME : (k + 1) * _FRAME]
                       for k in range(n)])
    floor = max(float(energy.max()) * 10 ** (-_GATE_DB / 10), 1e-9)
    v = [_frame_voicing(x, k * _FRAME) if energy[k] >= floor else 0.0 for k in range(n)]
    return [min(a, b) for a, b in zip(v, v[1:])]


def voicing(x: np.ndarray) -> float:
    """The best of the frame pairs' weaker voicing, over 16 kHz audio (0: too short or silent)."""
    return max(_pairs(x), default=0.0)


def last_voiced(x: np.ndarray, threshold: float = VOICED) -> int:
    """Where in ``x`` (16 kHz) the last two voiced frames in a row end (a sample index), or -1."""
    pairs = _pairs(x)
    k = next((k for k in range(len(pairs) - 1, -1, -1) if pairs[k] >= threshold), None)
    return -1 if k is None else (k + 2) * _FRAME


def voiced(x: np.ndarray, threshold: float = VOICED) -> bool:
    """Whether ``x`` (16 kHz) holds two voiced frames in a row."""
    return voicing(x) >= threshold


def _tonal_share(x: np.ndarray) -> float:
    """The share of the 30 ms frames within ``_GATE_DB`` of the loudest whose spectrum is a few
    pure lines (:func:`.vad.spectral_peaks`, at most the VAD's ``tone_peaks``)."""
    n = len(x) // _FRAME
    frames = [x[k * _FRAME : (k + 1) * _FRAME] for k in range(n)]
    energy = np.array([float(f @ f) for f in frames])
    if not n or energy.max() <= 0:
        return 0.0
    floor = energy.max() * 10 ** (-_GATE_DB / 10)
    judged = [f for f, e in zip(frames, energy) if e >= floor]
    peaks = VadOptions().tone_peaks
    return sum(spectral_peaks(f) <= peaks for f in judged) / len(judged)


def a_voice(x: np.ndarray) -> bool:
    """Whether ``x`` (16 kHz) is a voice: periodic (:func:`voiced`) and not a tone. A tone, a
    beep, a chord, a ring or a siren is as periodic as a vowel, but its spectrum is a few pure
    lines in (almost) every frame; speech's frames are combs of harmonics and broadband
    noise. Over ``bench.nonspeech``'s sounds the tonal ones have 98-100 % tonal frames (voicing
    0.87-1.0), hum, clicks and noise bursts voicing 0.14-0.26; the first 10 s of each file of
    real/ and LJ 0-2 % tonal frames (voicing 0.96-1.0), espeak's phrases 0 % (0.86-0.98)."""
    x = np.asarray(x, np.float64)
    return voiced(x) and _tonal_share(x) < 0.5
