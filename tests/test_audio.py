"""PCM decoding and the streaming resampler."""

from __future__ import annotations

import numpy as np
import pytest

from whisperwire.server.audio import Resampler, pcm_to_float
from whisperwire.server.errors import AudioError


def test_s16_and_f32_decode():
    x = np.array([0, 16384, -32768], "<i2").tobytes()
    assert pcm_to_float(x, "pcm_s16le").tolist() == [0.0, 0.5, -1.0]
    f = np.array([0.25, -0.5], "<f4").tobytes()
    assert pcm_to_float(f, "pcm_f32le").tolist() == [0.25, -0.5]


@pytest.mark.parametrize(
    "data, enc",
    [(b"\x00\x01\x02", "pcm_s16le"), (b"\x00" * 6, "pcm_f32le"),
     (np.array([np.nan], "<f4").tobytes(), "pcm_f32le"),
     (np.array([np.inf], "<f4").tobytes(), "pcm_f32le")],
)
def test_bad_audio(data, enc):
    with pytest.raises(AudioError):
        pcm_to_float(data, enc)


def _dominant_hz(y: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    return float(np.argmax(spec) * rate / len(y))


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 44100, 48000])
def test_resampler_keeps_pitch_length_and_is_chunk_invariant(rate):
    t = np.arange(rate * 2) / rate
    x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    whole = Resampler(rate)
    y1 = np.concatenate([whole.process(x), whole.flush()])
    parts = Resampler(rate)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.integers(0, len(x), 40))
    y2 = np.concatenate([parts.process(c) for c in np.split(x, cuts)] + [parts.flush()])
    assert len(y1) == len(y2) == 32000
    np.testing.assert_allclose(y1, y2, atol=1e-5)
    assert abs(_dominant_hz(y1, 16000) - 440) < 2
    ref = 0.5 * np.sin(2 * np.pi * 440 * np.arange(32000) / 16000)
    assert np.abs(y1[200:-200] - ref[200:-200]).max() < 0.01


def test_downsampling_removes_what_16k_cannot_hold():
    rate = 48000
    t = np.arange(rate) / rate
    x = (0.5 * np.sin(2 * np.pi * 12000 * t)).astype(np.float32)  # above 8 kHz Nyquist
    r = Resampler(rate)
    y = np.concatenate([r.process(x), r.flush()])
    assert np.sqrt(np.mean(y[200:-200] ** 2)) < 0.02  # no alias left


def test_same_rate_passes_through():
    x = np.arange(10, dtype=np.float32)
    r = Resampler(16000)
    assert r.process(x).tolist() == x.tolist()
    assert len(r.flush()) == 0
