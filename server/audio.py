"""Audio in: PCM bytes of the declared encoding to float32, and streaming resampling to 16 kHz.

Pure numpy and stateful per stream, so chunk boundaries never click or drop samples: feeding a
signal in any split gives the same output as feeding it whole (up to float rounding).
"""

from __future__ import annotations

import numpy as np
import soxr

from .errors import AudioError

__all__ = ["MODEL_RATE", "Resampler", "pcm_to_float"]

MODEL_RATE = 16000


def pcm_to_float(data: bytes, encoding: str) -> np.ndarray:
    """Raw mono PCM to float32 in [-1, 1]; raises AudioError for odd lengths or NaN/Inf."""
    if encoding == "pcm_s16le":
        if len(data) % 2:
            raise AudioError("bad_audio", "pcm_s16le frame length must be a multiple of 2 bytes")
        # one new array, scaled in place (by 2**-15: exactly the division): an OpenAI append of
        # 230 s took 9.5 ms with a second array, 2.5 ms so; under a flood, with its pages
        # touched for the first time, the loop was seen held 0.19 s here
        x = np.frombuffer(data, dtype="<i2").astype(np.float32)
        x *= 1.0 / 32768.0
        return x
    if encoding == "pcm_f32le":
        if len(data) % 4:
            raise AudioError("bad_audio", "pcm_f32le frame length must be a multiple of 4 bytes")
        x = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if not np.isfinite(x).all():
            raise AudioError("bad_audio", "pcm_f32le audio contains NaN or Inf")
        return np.clip(x, -1.0, 1.0, out=x)
    raise AudioError("bad_encoding", f"unknown encoding {encoding!r}")


class Resampler:
    """Streaming resampler from ``in_rate`` to ``out_rate`` (libsoxr, "HQ" quality).

    ``process(x)`` returns the output samples whose input has arrived; ``flush()`` returns the
    rest, as if the stream were followed by silence. libsoxr keeps its filter state between
    chunks and compensates its delay, so any split of a signal gives the same output as the
    whole, output sample ``k`` sits at input time ``k * in_rate / out_rate`` and timing never
    drifts over hours. It runs in C: a 48 kHz browser stream costs the event loop next to
    nothing (the numpy windowed sinc it replaces recomputed its weights for every sample).
    """

    def __init__(self, in_rate: int, out_rate: int = MODEL_RATE) -> None:
        self.in_rate, self.out_rate = in_rate, out_rate
        self._stream = (soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality="HQ")
                        if in_rate != out_rate else None)

    def process(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        if self._stream is None:
            return x
        return self._stream.resample_chunk(x, last=False)

    def flush(self) -> np.ndarray:
        if self._stream is None:
            return np.zeros(0, np.float32)
        return self._stream.resample_chunk(np.zeros(0, np.float32), last=True)
