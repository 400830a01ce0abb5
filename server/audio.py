"""Audio in: PCM bytes of the declared encoding to float32, and streaming resampling to 16 kHz.

Pure numpy and stateful per stream, so chunk boundaries never click or drop samples: feeding a
signal in any split gives the same output as feeding it whole (up to float rounding).
"""

from __future__ import annotations

import numpy as np

from .errors import AudioError

__all__ = ["MODEL_RATE", "Resampler", "pcm_to_float"]

MODEL_RATE = 16000


def pcm_to_float(data: bytes, encoding: str) -> np.ndarray:
    """Raw mono PCM to float32 in [-1, 1]; raises AudioError for odd lengths or NaN/Inf."""
    if encoding == "pcm_s16le":
        if len(data) % 2:
            raise AudioError("bad_audio", "pcm_s16le frame length must be a multiple of 2 bytes")
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    if encoding == "pcm_f32le":
        if len(data) % 4:
            raise AudioError("bad_audio", "pcm_f32le frame length must be a multiple of 4 bytes")
        x = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if not np.isfinite(x).all():
            raise AudioError("bad_audio", "pcm_f32le audio contains NaN or Inf")
        return np.clip(x, -1.0, 1.0)
    raise AudioError("bad_encoding", f"unknown encoding {encoding!r}")


class Resampler:
    """Band-limited (windowed-sinc) streaming resampler from ``in_rate`` to ``out_rate``.

    ``process(x)`` returns every output sample whose input support has arrived; ``flush()``
    returns the rest, as if the stream were followed by silence. Output sample ``k`` sits at
    input time ``k * in_rate / out_rate`` exactly, so timing never drifts over hours.
    """

    def __init__(self, in_rate: int, out_rate: int = MODEL_RATE, half_taps: int = 16) -> None:
        self.in_rate, self.out_rate = in_rate, out_rate
        self.step = in_rate / out_rate
        self.cutoff = min(1.0, out_rate / in_rate) * 0.95
        self.half = int(np.ceil(half_taps / min(1.0, out_rate / in_rate)))
        self._buf = np.zeros(self.half, np.float32)  # history; index 0 is input sample _base
        self._base = -self.half
        self._k = 0  # next output index

    def process(self, x: np.ndarray) -> np.ndarray:
        if self.in_rate == self.out_rate:
            return np.asarray(x, np.float32)
        self._buf = np.concatenate([self._buf, np.asarray(x, np.float32)])
        return self._emit(final=False)

    def flush(self) -> np.ndarray:
        if self.in_rate == self.out_rate:
            return np.zeros(0, np.float32)
        self._buf = np.concatenate([self._buf, np.zeros(self.half + 1, np.float32)])
        return self._emit(final=True)

    def _emit(self, final: bool) -> np.ndarray:
        end = self._base + len(self._buf)  # one past the last input sample held
        limit = end - self.half - (1 if final else 0)
        # outputs k with k*step + half < end, and when flushing only up to the real input's end
        k_end = int(np.floor((limit - 1e-9) / self.step)) + 1 if limit > 0 else 0
        if k_end <= self._k:
            return np.zeros(0, np.float32)
        ks = np.arange(self._k, k_end)
        t = ks * self.step - self._base  # position inside _buf
        left = np.floor(t).astype(np.int64) - self.half + 1
        offs = np.arange(2 * self.half)
        idx = left[:, None] + offs[None, :]
        d = t[:, None] - idx
        w = self.cutoff * np.sinc(self.cutoff * d) * np.hanning(2 * self.half + 2)[1:-1][None, :]
        idx = np.clip(idx, 0, len(self._buf) - 1)
        y = (self._buf[idx] * w).sum(axis=1).astype(np.float32)
        self._k = k_end
        # keep what the next output still needs
        next_t = k_end * self.step - self._base
        drop = max(0, int(np.floor(next_t)) - self.half)
        self._buf = self._buf[drop:]
        self._base += drop
        return y
