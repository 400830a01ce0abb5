"""Read any audio file PyAV can open as mono PCM at the rate the client will declare."""

from __future__ import annotations

import numpy as np

__all__ = ["read_audio"]


def read_audio(path: str, sample_rate: int = 16000) -> np.ndarray:
    """The whole file as int16 mono at ``sample_rate`` (FFmpeg's resampler does the work)."""
    import av

    chunks = []
    with av.open(path) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    return np.concatenate(chunks).astype(np.int16) if chunks else np.zeros(0, np.int16)
