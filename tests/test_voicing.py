"""Voicing: a vowel repeats itself at a pitch period; a breath, a click, noise and a hum don't.
The rule that drops an end decode Whisper doubts word for word (``doubted_end_*``) asks it."""

import numpy as np
import pytest
from conftest import espeak, load16k, sox_noise

from whisperwire.server.vad import utterance_spans
from whisperwire.server.voicing import VOICED, voiced, voicing

SR = 16000


def pulses(hz: float, seconds: float = 0.3) -> np.ndarray:
    """A glottal-like pulse train through a crude vocal tract (a decaying resonance)."""
    x = np.zeros(int(SR * seconds))
    x[:: int(SR / hz)] = 1.0
    ring = np.exp(-np.arange(200) / 40.0) * np.cos(2 * np.pi * 700 * np.arange(200) / SR)
    return (0.2 * np.convolve(x, ring)[: len(x)]).astype(np.float32)


def utterances(x: np.ndarray) -> list[np.ndarray]:
    # (to where its sound stopped, as the rule judges it)
    return [x[a:spoken_to] for a, _, spoken_to in utterance_spans(x)]


@pytest.mark.parametrize("hz", [80, 120, 220, 350])
def test_a_pitch_in_a_voice_s_range_is_voiced(hz):
    assert voiced(pulses(hz))


def test_noise_silence_and_too_little_audio_are_not_voiced():
    rng = np.random.default_rng(0)
    assert not voiced((0.1 * rng.standard_normal(SR)).astype(np.float32))
    assert not voiced(np.zeros(SR, np.float32))
    assert voicing(pulses(120, 0.04)) == 0.0  # not two frames: nothing to judge
    assert not voiced(np.zeros(0, np.float32))


def test_low_rumble_is_not_a_voice():
    """Noise below a few hundred hertz (wind, handling) correlates at short lags."""
    rng = np.random.default_rng(4)
    x = np.convolve(rng.standard_normal(SR), np.ones(40) / 40, "same") * 0.05
    assert not voiced(x)


def test_the_breath_that_opens_en_07_is_no_voice_and_its_speech_is():
    """Whisper writes "Yeah." for en-07's first 0.69 s, a breath, and doubts it as much as
    espeak's lone "Sure.": the audio tells them apart."""
    first, *rest = utterances(load16k("real/en-07.wav"))
    assert len(first) < 0.8 * SR
    assert voicing(first) < VOICED - 0.1
    assert all(voicing(u) > VOICED + 0.1 for u in rest)


@pytest.mark.parametrize("hum", ["dc", 50, 60, 100, 120])
def test_a_dc_offset_or_mains_hum_does_not_make_a_breath_a_voice(hum):
    """A microphone's DC offset or a hum under the breath correlates at any short lag: before
    the high-pass they made en-07's breath read 0.88-0.92."""
    first = utterances(load16k("real/en-07.wav"))[0].astype(np.float64)
    t = np.arange(len(first)) / SR
    x = first + (0.003 if hum == "dc" else 0.005 * np.sin(2 * np.pi * hum * t))
    assert voicing(x) < VOICED - 0.1


@pytest.mark.parametrize("text", ["Sure.", "I agree.", "Hmm."])
def test_short_answers_are_voiced(text):
    assert voicing(espeak(text)) > VOICED + 0.1


def test_every_utterance_of_the_noisy_archival_interview_is_voiced():
    """en-03: a 1949 field recording, its noise floor 18 dB below the speech (its weakest
    utterance 0.77)."""
    us = utterances(load16k("real/en-03.wav"))
    assert len(us) > 10
    assert min(voicing(u) for u in us) > VOICED + 0.1


def test_the_bench_s_clicks_bursts_and_hum_are_not_voiced_at_any_frame_alignment():
    from bench.nonspeech import sounds

    snd = sounds()
    for name in ["clicks", "noise bursts", "hum 50 Hz"]:
        for shift in range(0, 480, 40):  # wherever the frames fall
            assert voicing(snd[name][shift:]) < VOICED - 0.1, (name, shift)


def test_a_run_finds_the_voice_in_audio_as_it_comes_and_none_in_steady_noise(tmp_path):
    """``Run.voice_after``, which the session asks before any decode's words stand
    (``needs_voice``): scanned piece by piece as audio comes, it finds what one scan of the
    whole finds; sox's brown noise (-8 dBFS) has no voice anywhere."""
    from whisperwire.server.utterance import Run
    from whisperwire.server.voicing import last_voiced

    jfk = load16k("jfk.wav")[: 4 * SR]
    run = Run(0)
    seen = []
    for i in range(0, len(jfk), 1600):
        run.append(jfk[i : i + 1600])
        seen.append(run.voice_after(0))
    assert seen[0] is False and seen[-1] is True, seen
    assert abs(run.last_voice - last_voiced(jfk)) <= 480, (run.last_voice, last_voiced(jfk))
    assert not run.voice_after(run.last_voice)
    noise = sox_noise(tmp_path, "brownnoise")
    assert voicing(noise) < VOICED
    run = Run(0)
    for i in range(0, len(noise), 8000):
        run.append(noise[i : i + 8000])
        assert not run.voice_after(0)
