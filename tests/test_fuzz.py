"""Fuzzing the parser and the audio path: whatever arrives, only client errors come out, and the
session stays usable."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from whisperwire.server import wire
from whisperwire.server.audio import Resampler, pcm_to_float
from whisperwire.server.errors import ClientError
from whisperwire.server.session import StreamOptions, StreamSession
from whisperwire.server.vad import VadOptions, VadSegmenter, webrtc_classifier

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["type", "segment", "text", "start", "end", "words",
                                        "eou", "code", "message", "reason", "audio_seconds"]),
                       json_values) | json_values)
def test_parser_takes_any_json(value):
    import json

    try:
        text = json.dumps(value)
    except ValueError:
        return
    try:
        m = wire.decode(text)
    except ClientError:
        return
    assert wire.decode(wire.encode(m)) == m


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["pcm_s16le", "pcm_f32le"]),
    st.sampled_from([8000, 11025, 16000, 44100, 48000]),
    st.lists(st.binary(max_size=3000) | st.sampled_from(["finalize"]), max_size=12),
)
def test_audio_path_takes_any_bytes(encoding, rate, frames):
    vad = VadOptions()
    s = StreamSession(StreamOptions(), VadSegmenter(vad, webrtc_classifier(vad.aggressiveness)))
    r = Resampler(rate)
    for f in frames:
        if f == "finalize":
            s.finalize()
            continue
        try:
            x = pcm_to_float(f, encoding)
        except ClientError:
            continue
        assert np.isfinite(x).all() and (np.abs(x) <= 1.0).all()
        s.feed_audio(r.process(x))
        while (req := s.next_decode()) is not None:
            assert np.isfinite(req.audio).all() and req.duration * 1000 <= 15000 + 1
            s.failed(req.id)  # no model here; the request must come back intact
            break
    s.feed_audio(r.flush())
    s.finalize()
