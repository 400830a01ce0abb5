"""Read any audio file PyAV can open as mono PCM at the rate the client will declare."""

from __future__ import annotations

import os

import numpy as np

from .connect import ClientFault

__all__ = ["AudioFileError", "read_audio"]


class AudioFileError(ClientFault, ValueError):
    """The file is missing or holds no audio PyAV can decode; the message says which."""


def read_audio(path: str, sample_rate: int = 16000) -> np.ndarray:
    """The whole file as int16 mono at ``sample_rate`` (FFmpeg's resampler does the work).
    Raises :class:`AudioFileError` for a missing file or one without decodable audio, or
    without a single sample of it."""
    import av

    if not os.path.exists(path):
        raise AudioFileError(f"no such file: {path}")
    if os.path.isdir(path):
        raise AudioFileError(f"{path} is a directory, not an audio file")
    chunks = []
    try:
        with av.open(path) as container:
            if not container.streams.audio:
                raise AudioFileError(f"{path} has no audio in it")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except av.error.FFmpegError as exc:
        # FFmpeg's reason ("Invalid data found when processing input") names no file type
        raise AudioFileError(f"{path} is not an audio or video file this client can read "
                             f"({getattr(exc, 'strerror', None) or exc})") from None
    pcm = np.concatenate(chunks).astype(np.int16) if chunks else np.zeros(0, np.int16)
    if not len(pcm):  # a header and nothing after it (the HTTP dialects refuse it the same way)
        raise AudioFileError(f"{path} holds no audio samples")
    return pcm
