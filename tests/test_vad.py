"""VAD segmentation: scripted frame decisions for the arithmetic, real webrtcvad for the signal
cases (silence, tones, steady noise, espeak-ng speech)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.nonspeech import NOT_TONAL, sounds
from conftest import espeak, load16k
from whisperwire.server.vad import (
    SpeechAudio,
    SpeechEnd,
    SpeechPause,
    SpeechResume,
    SpeechStart,
    Tone,
    VadOptions,
    VadSegmenter,
    webrtc_classifier,
)

N = 480  # 30 ms at 16 kHz


def run(seg: VadSegmenter, x: np.ndarray, chunk: int = 1600, flush: bool = True):
    ev = []
    for i in range(0, len(x), chunk):
        ev += seg.feed(x[i : i + chunk])
    if flush:
        ev += seg.flush()
    return ev


def spans(ev) -> list[tuple[float, float]]:
    out, start = [], None
    for e in ev:
        if isinstance(e, SpeechStart):
            start = e.sample
        elif isinstance(e, SpeechEnd):
            out.append((start / 16000, e.sample / 16000))
    return out


def real() -> VadSegmenter:
    o = VadOptions()
    return VadSegmenter(o, webrtc_classifier(o.aggressiveness))


def test_scripted_onset_preroll_and_hangover():
    # frames are "speech" where the scripted pattern says so; energy and tone gates off (loud
    # frames of one value)
    pattern = [0] * 20 + [1] * 30 + [0] * 30
    frames = iter(pattern)
    opt = VadOptions(energy_margin_db=-100, min_energy_db=-200, tone_peaks=0)
    seg = VadSegmenter(opt, lambda f: bool(next(frames)))
    x = np.full(N * len(pattern), 0.1, np.float32)
    ev = run(seg, x, chunk=777, flush=False)
    (start, end), = spans(ev)
    onset_frame = 20 + opt.onset_frames - 1  # third speech frame triggers
    assert start == pytest.approx((onset_frame + 1 - opt.pre_roll_ms // 30) * 0.03)
    hang = opt.hangover_ms // 30
    assert end == pytest.approx((50 + hang) * 0.03)
    # ... says where the speech itself began, without the pre-roll: its first speech frame
    # (a pattern with a gap in it: the first of the frames that opened it)
    (first,) = [e for e in ev if isinstance(e, SpeechStart)]
    assert first.onset == 20 * N and first.sample == start * 16000
    frames = iter([0] * 20 + [1, 0, 1, 1] + [1] * 26 + [0] * 30)
    (gappy,) = [e for e in run(VadSegmenter(opt, lambda f: bool(next(frames))), x, flush=False)
                if isinstance(e, SpeechStart)]
    assert gappy.onset == 20 * N
    # ... and says where the speech itself stopped: at the end of the last speech frame
    (last,) = [e for e in ev if isinstance(e, SpeechEnd)]
    assert last.spoken_to == 50 * N
    # every sample inside the utterance is delivered once, in order
    audio = [e for e in ev if isinstance(e, SpeechAudio)]
    pos = audio[0].sample
    for a in audio:
        assert a.sample == pos
        pos += len(a.samples)
    assert pos / 16000 == pytest.approx(end)


def test_silence_gives_nothing():
    assert run(real(), np.zeros(16000 * 10, np.float32)) == []


def test_steady_noise_and_tone_give_at_most_their_onset():
    rng = np.random.default_rng(0)
    noise = (0.1 * rng.standard_normal(16000 * 20)).astype(np.float32)
    t = np.arange(16000 * 20) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    for x in (noise, tone):
        # a stream that starts with the steady sound: the floor is the sound itself
        assert spans(run(real(), x)) == []
        # silence, then the sound: at most one short utterance while the floor adapts
        s = spans(run(real(), np.concatenate([np.zeros(16000 * 5, np.float32), x])))
        assert len(s) <= 1 and all(b - a < 3.0 for a, b in s)


SR = 16000


def gap(seconds: float) -> np.ndarray:
    return np.zeros(int(SR * seconds), np.float32)


# the sounds ``python -m bench.nonspeech`` measures; these are the tonal ones
SOUNDS = sounds()
TONAL = sorted(k for k in SOUNDS if k not in NOT_TONAL)


@pytest.mark.parametrize("name", TONAL)
def test_beeps_tones_and_chords_open_no_utterance(name):
    """webrtcvad calls all of these speech (each opened one utterance or more before, the
    beeps one per beep), and Whisper wrote words for them that offline decoding does not."""
    x = np.concatenate([gap(1), SOUNDS[name], gap(1)])
    assert spans(run(real(), x)) == []
    off = VadOptions(tone_peaks=0)
    assert spans(run(VadSegmenter(off, webrtc_classifier(off.aggressiveness)), x)) != []


def test_speech_next_to_beeps_keeps_its_own_bounds():
    """A beep 0.1 s before speech does not start its utterance at the beep; a tone 50 ms after
    the speech, before the hangover ended it, is not heard as more of it: the utterance ends
    where the speech did, soon after the tone check, not after the tone and a hangover."""
    speech = load16k("jfk.wav")[: int(2.4 * SR)]  # "And so my fellow Americans", a pause
    quiet = spans(run(real(), np.concatenate([gap(1.4), speech, gap(1)])))
    beep = np.concatenate([gap(1), SOUNDS["beeps"][: int(0.3 * SR)], gap(0.1), speech, gap(1)])
    assert spans(run(real(), beep)) == quiet
    alone = [e for e in run(real(), np.concatenate([speech, gap(1)])) if isinstance(e, SpeechEnd)]
    ev = run(real(), np.concatenate([speech, gap(0.05), SOUNDS["tone 1000 Hz"][: 3 * SR], gap(1)]))
    ends = [e for e in ev if isinstance(e, SpeechEnd)]
    assert len(ends) == 1 and ends[0].spoken_to == alone[0].spoken_to
    assert ends[0].sample <= alone[0].sample + 0.1 * SR  # (before: 1.8 s later)
    assert not [e for e in ev if isinstance(e, SpeechStart) and e.sample > 2.4 * SR]
    tones = [e for e in ev if isinstance(e, Tone)]  # what the session mutes: the tone
    assert abs(tones[0].sample - (len(speech) + 0.05 * SR)) <= N, tones[0]
    assert tones[-1].end == ends[0].sample
    assert all(a.end == b.sample for a, b in zip(tones, tones[1:]))


def test_a_tone_inside_the_hangover_ends_the_utterance_where_the_speech_stopped():
    """A tone 0.4 s after the speech, while the hangover still ran: its first frames, before
    the tone check can tell, resume the utterance as speech would. The end still falls where
    the speech stopped, and the tone is named from its first frame: the end decode heard its
    first 240 ms and wrote "F***." after "your country." in one replay of two."""
    speech = load16k("jfk.wav")[: int(2.4 * SR)]
    alone = [e for e in run(real(), np.concatenate([speech, gap(1)])) if isinstance(e, SpeechEnd)]
    ev = run(real(), np.concatenate([speech, gap(0.15), SOUNDS["tone 1000 Hz"][: 3 * SR], gap(1)]))
    ends = [e for e in ev if isinstance(e, SpeechEnd)]
    assert len(ends) == 1 and ends[0].spoken_to == alone[0].spoken_to
    assert any(isinstance(e, SpeechResume) for e in ev)  # (the case: the tone resumed it)
    tones = [e for e in ev if isinstance(e, Tone)]
    assert tones and abs(tones[0].sample - (len(speech) + 0.15 * SR)) <= N, tones[0]
    assert tones[-1].end == ends[0].sample


def test_a_tone_is_muted_from_where_it_began_not_from_the_speech_s_tonal_tail():
    """The session mutes what a ``Tone`` names. A word's last voiced frames are often tonal
    too (4 peaks or fewer): a speaker on en-01, then a 1 kHz tone 60 ms later. The tone is
    muted from its own first frame, not from the last non-tonal frame of speech (150 ms of
    the word at -15 dBFS were zeroed), and two beeps with a pause between are one tone from
    the first."""
    speech = load16k("real/en-01.wav")[90 * SR : int(96.54 * SR)]
    ev = run(real(), np.concatenate([speech, gap(0.06), SOUNDS["tone 1000 Hz"][: 2 * SR],
                                     gap(1)]))
    tones = [e for e in ev if isinstance(e, Tone)]
    assert tones and tones[0].sample >= len(speech), tones[0].sample / SR
    beep = SOUNDS["beeps"][: int(0.2 * SR)]
    short = load16k("jfk.wav")[: int(2.16 * SR)]
    ev = run(real(), np.concatenate([short, gap(0.06), beep, gap(0.3), SOUNDS["beeps"][
        : int(0.3 * SR)], gap(1)]))
    tones = [e for e in ev if isinstance(e, Tone)]
    assert tones and len(short) <= tones[0].sample <= len(short) + int(0.09 * SR)


@pytest.mark.parametrize("name", ["jfk.wav", "LJ001-0001.wav", "real/en-04.wav",
                                  "real/en-06.wav", "zh/zh-01.wav"])
def test_the_tone_check_moves_no_bound_of_real_speech(name):
    """The rule's risk is speech: a hesitant reader (en-04) has frames with as few peaks as
    a chord, in runs of up to 6. Every event of these files is what it was without it."""
    x = load16k(name)
    off = VadOptions(tone_peaks=0)
    without = [e for e in run(VadSegmenter(off, webrtc_classifier(off.aggressiveness)), x)
               if not isinstance(e, SpeechAudio)]
    assert [e for e in run(real(), x) if not isinstance(e, SpeechAudio)] == without


def test_espeak_speech_between_silences():
    speech = espeak("The quick brown fox jumps over the lazy dog.")
    pad = np.zeros(16000 * 2, np.float32)
    x = np.concatenate([pad, speech, pad])
    s = spans(run(real(), x))
    assert len(s) >= 1
    voiced = np.flatnonzero(np.abs(speech) > 0.02)
    first, last = (2 * 16000 + voiced[0]) / 16000, (2 * 16000 + voiced[-1]) / 16000
    assert s[0][0] <= first  # pre-roll: the first syllable is not clipped
    assert s[-1][1] >= last
    assert s[0][0] >= 2.0 - 0.35 and s[-1][1] <= last + 1.0


def test_real_speech_is_kept_and_chunking_does_not_matter():
    x = load16k("LJ001-0002.wav")
    a = spans(run(real(), x, chunk=160))
    b = spans(run(real(), x, chunk=16000))
    assert a == b and len(a) >= 1
    covered = sum(e - s for s, e in a)
    assert covered >= 0.8 * len(x) / 16000


def test_flush_closes_open_utterance_with_tail():
    x = load16k("LJ001-0002.wav")[: 16000]  # cut mid-speech, not frame aligned
    x = x[: len(x) - 123]
    ev = run(real(), x)
    assert isinstance(ev[-1], SpeechEnd) and ev[-1].sample == len(x)


def test_flush_says_where_speech_stopped_before_trailing_silence():
    # speech, then fewer silent frames than the hangover, then the stream ends mid-frame
    pattern = [1] * 10 + [0] * 4 + [0]
    frames = iter(pattern)
    seg = VadSegmenter(VadOptions(energy_margin_db=-100, min_energy_db=-200, tone_peaks=0),
                       lambda f: bool(next(frames)))
    x = np.full(N * 14 + 100, 0.1, np.float32)
    ev = run(seg, x, chunk=500)
    end = ev[-1]
    assert isinstance(end, SpeechEnd) and end.sample == len(x)
    assert end.spoken_to == len(x) - 4 * N  # the partial frame, unclassified, counts as heard


@pytest.mark.parametrize("pause_ms", [240, 0])
def test_a_pause_is_reported_before_the_hangover_and_confirmed_or_spoken_past(pause_ms):
    """``SpeechPause`` after ``pause_ms`` of non-speech lets the session start an end decode
    early; ``SpeechResume`` says the pause was no end; the ``SpeechEnd`` that closes the same
    silence names the pause it confirms. ``pause_ms=0``: none of it."""
    opt = VadOptions(energy_margin_db=-100, min_energy_db=-200, tone_peaks=0, pause_ms=pause_ms)
    pause, hang = pause_ms // 30, opt.hangover_ms // 30
    # speech; a silence longer than the pause but shorter than the hangover; speech; silence
    pattern = [0] * 5 + [1] * 20 + [0] * (pause + 2) + [1] * 10 + [0] * (hang + 5)
    frames = iter(pattern)
    seg = VadSegmenter(opt, lambda f: bool(next(frames)))
    ev = run(seg, np.full(N * len(pattern), 0.1, np.float32), chunk=1000, flush=False)
    marks = [e for e in ev if isinstance(e, (SpeechPause, SpeechResume, SpeechEnd))]
    if not pause_ms:
        assert [type(e) for e in marks] == [SpeechEnd] and marks[0].paused_at is None
        return
    assert [type(e) for e in marks] == [SpeechPause, SpeechResume, SpeechPause, SpeechEnd]
    assert marks[0].sample == (25 + pause) * N  # one past the pause's last frame
    assert marks[1].sample == (25 + pause + 2) * N  # the frame heard as speech again
    second = 25 + pause + 2 + 10
    assert marks[2].sample == (second + pause) * N
    assert marks[3].paused_at == marks[2].sample and marks[3].spoken_to == second * N
    # the stream ending inside a pause confirms it too
    frames = iter([1] * 20 + [0] * (pause + 1))
    seg = VadSegmenter(opt, lambda f: bool(next(frames)))
    ev = run(seg, np.full(N * (21 + pause), 0.1, np.float32))
    (p,) = [e for e in ev if isinstance(e, SpeechPause)]
    assert isinstance(ev[-1], SpeechEnd) and ev[-1].paused_at == p.sample


# -- a stream that starts in the middle of speech (a review's finding) ----------------------
def test_a_stream_that_starts_on_steady_speech_keeps_its_first_word():
    """The noise floor was seeded by the stream's own first frames: a stream that opens on a
    word at one level (no quieter frame before it) had none of that word 6 dB above the
    floor, and it never reached the decoder."""
    rng = np.random.default_rng(0)
    word = (0.3 * rng.standard_normal(int(0.4 * SR))).astype(np.float32)
    audio = np.concatenate([word, gap(0.3), word, gap(1.0)])
    ev = run(VadSegmenter(VadOptions(), lambda frame: True), audio)
    assert min(e.sample for e in ev if isinstance(e, SpeechStart)) == 0, spans(ev)


@pytest.mark.parametrize("cut", [6.11, 10.22, 18.44])
def test_a_noisy_recording_joined_mid_speech_keeps_the_speech_before_its_first_pause(cut):
    """real/en-03 (a 1949 field recording, noise 18 dB under the speech) from ``cut`` s on, as
    a stream that starts while someone talks (a page or a meeting bot joining, a speaker's
    new connection after a drop): "remember I" (0.0-2.0 s), "that around." (0.0-1.4 s), "when
    I'm laying down and I" (0.0-1.4 s) were outside every utterance: the first opened at
    3.3, 1.4 and 2.7 s."""
    x = load16k("real/en-03.wav")[int(cut * SR):int((cut + 8) * SR)]
    first = spans(run(real(), x))[0]
    assert first[0] <= 0.1, spans(run(real(), x))


def test_a_stream_that_starts_on_steady_noise_still_opens_nothing_then_speech_opens():
    """The frames before a stream's first utterance are judged again against the floor known
    then; steady noise is that floor, so none of it joins the speech after it."""
    rng = np.random.default_rng(0)
    noise = (0.02 * rng.standard_normal(SR * 4)).astype(np.float32)
    speech = load16k("jfk.wav")[: SR * 3]
    x = np.concatenate([noise, noise[: SR * 3] + speech, noise[: SR]])
    s = spans(run(real(), x))
    assert s and s[0][0] >= 3.6, s


def test_the_look_back_stops_at_a_flush():
    """A review's finding: an OpenAI manual commit flushes the VAD and the session goes on
    feeding it; a first turn that opened no utterance (a short steady phrase) was reached
    back into by the next turn's first utterance, its audio labelled 260 samples late."""
    rng = np.random.default_rng(0)
    word = (0.3 * rng.standard_normal(6500)).astype(np.float32)  # (not whole 30 ms frames)
    seg = VadSegmenter(VadOptions(), lambda frame: True)
    assert not [e for e in seg.feed(word) + seg.flush() if isinstance(e, SpeechStart)]
    later = np.concatenate([gap(0.3), word, gap(1.0)])
    stream = np.concatenate([word, later])
    ev = seg.feed(later) + seg.flush()
    assert all(np.array_equal(e.samples, stream[e.sample:e.sample + len(e.samples)])
               for e in ev if isinstance(e, SpeechAudio))
    assert min(e.sample for e in ev if isinstance(e, SpeechStart)) >= len(word)


def test_speech_after_a_commit_in_a_stream_that_began_mid_speech_is_kept():
    """A review's finding: the flush ended the look-back for good."""
    rng = np.random.default_rng(0)
    talk = lambda s: (0.3 * rng.standard_normal(int(s * SR))).astype(np.float32)  # noqa: E731
    gap = lambda s: np.zeros(int(s * SR), np.float32)  # noqa: E731
    first = talk(0.96)  # the stream joins in the middle of speech: no quieter frame yet
    later = np.concatenate([talk(0.96), gap(0.3), talk(0.6), gap(1.0)])

    # without a commit, the look-back finds the speech from the stream's start
    plain = VadSegmenter(VadOptions(), lambda frame: True)
    ev = plain.feed(np.concatenate([first, later])) + plain.flush()
    assert min(e.sample for e in ev if isinstance(e, SpeechStart)) == 0

    # the client commits (manual turns) at 0.96 s: the VAD is flushed, the session goes on
    seg = VadSegmenter(VadOptions(), lambda frame: True)
    assert not [e for e in seg.feed(first) + seg.flush() if isinstance(e, SpeechStart)]
    ev = seg.feed(later) + seg.flush()
    starts = [e.sample / SR for e in ev if isinstance(e, SpeechStart)]
    heard = sum(len(e.samples) for e in ev if isinstance(e, SpeechAudio)) / SR
    # the 0.96 s said right after the commit (0.96-1.92 s) belong to the next turn
    assert starts and starts[0] <= 1.0, (starts, f"{heard:.2f} s of audio delivered")
