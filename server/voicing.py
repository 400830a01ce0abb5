"""Whether audio holds a voice: two 30 ms frames in a row that repeat themselves at a pitch
period.

Whisper doubts some short answers as much as the words it invents on a breath: tiny.en's end
decode of espeak's lone "Sure." says it at p 0.18 with no-speech probability 0.56, and of the
breath that opens real/en-07 (0-0.69 s) "Yeah." at p 0.18 with 0.55. The words cannot tell
them apart; the audio can. A vowel is periodic: each frame correlates with itself one pitch
period later (2.5 to 17.5 ms, 57 to 400 Hz). A breath, a click or a burst of noise does not,
for two frames running. The smaller of two neighbouring frames' best normalised correlation,
over each utterance the VAD finds in ../shared/speech (real/, jfk, six LJ and four zh/
files: 130 utterances): 0.77 for the noisiest (en-03's archival interview), 0.79 at the 1st
percentile, 0.90 at the 5th; espeak's "Sure." 0.87, "I agree." 0.92. en-07's breath 0.41; the
bench's keyboard clicks 0.20, noise bursts 0.14, a 50 Hz hum 0.45 (its period is 20 ms, below
a voice's pitch).
"""

from __future__ import annotations

import numpy as np

__all__ = ["VOICED", "voicing", "voiced"]

VOICED = 0.6  # between the breath's 0.41 and the noisiest speech's 0.77

_FRAME = 480  # 30 ms
_LAGS = (40, 280)  # samples: 2.5 to 17.5 ms


def _frame_voicing(x: np.ndarray, i: int) -> float:
    """Frame ``i``'s best correlation with itself shifted by a pitch period (0: silent)."""
    lo, hi = _LAGS
    f = x[i : i + _FRAME + hi]
    a = f[:_FRAME]
    e0 = float(a @ a)
    if e0 < 1e-9:
        return 0.0
    r = np.correlate(f[lo:], a, "valid")[: hi - lo + 1]
    c = np.concatenate([[0.0], np.cumsum(f * f)])
    shifted = c[lo + _FRAME : hi + _FRAME + 1] - c[lo : hi + 1]
    return float(np.max(r / np.sqrt(e0 * shifted + 1e-12)))


def voicing(x: np.ndarray) -> float:
    """The best of the frame pairs' weaker voicing, over 16 kHz audio."""
    x = np.asarray(x, np.float64)
    n = (len(x) - _LAGS[1]) // _FRAME
    v = [_frame_voicing(x, k * _FRAME) for k in range(max(n, 0))]
    return max((min(a, b) for a, b in zip(v, v[1:])), default=0.0)


def voiced(x: np.ndarray, threshold: float = VOICED) -> bool:
    return voicing(x) >= threshold
