"""Speech segmentation: which stretches of the stream go to the decoder at all.

webrtcvad alone calls any steady noise "speech" (white noise at -20 dBFS is 100 % speech at
every aggressiveness), so a frame counts as speech only when webrtcvad says so *and* its energy
stands ``energy_margin_db`` above a tracked noise floor (the minimum frame energy over the last
``floor_window_ms``). Steady noise sits on its own floor and never opens an utterance; speech
does. The decoder's no-speech check is the second gate behind this one.

Pure: the frame classifier is injected (:func:`webrtc_classifier` makes the real one), time is
counted in 16 kHz samples, and no clock is read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from .audio import MODEL_RATE

__all__ = [
    "SpeechAudio",
    "SpeechEnd",
    "SpeechPause",
    "SpeechResume",
    "SpeechStart",
    "Tone",
    "VadEvent",
    "VadOptions",
    "VadSegmenter",
    "utterance_spans",
    "webrtc_classifier",
]

Classifier = Callable[[bytes], bool]


@dataclass(frozen=True)
class VadOptions:
    aggressiveness: int = 2
    frame_ms: int = 30
    pre_roll_ms: int = 300
    onset_frames: int = 3  # this many speech frames ...
    onset_window: int = 5  # ... among the last this many open an utterance
    hangover_ms: int = 500  # this much non-speech closes it
    # ... and this much may be its end: ``SpeechPause`` lets the session start the end decode
    # before the hangover decides, and keep it only if no speech came (0: never)
    pause_ms: int = 240
    energy_margin_db: float = 6.0
    floor_window_ms: int = 1500
    min_energy_db: float = -55.0  # frames quieter than this (dBFS) are never speech
    # a frame whose spectrum has at most this many peaks is tonal (0: no check; see
    # :func:`spectral_peaks`; 30 ms frames only: a shorter window cannot resolve a low voice's
    # harmonics). Tonal frames alone never open an utterance; once the last ``tone_ms`` of
    # frames webrtcvad called speech were all tonal, they and everything since the last
    # frame of speech count as silence, and the hangover ends the utterance (speech had runs
    # of at most 180 ms on real/, a beep lasts 300 ms, a ring or a tone seconds)
    tone_peaks: int = 4
    tone_ms: int = 240
    # a stream's audio before its first utterance, up to this long, is judged again when that
    # utterance opens, against the floor known by then: the floor was seeded by the stream's
    # own first frames, so a stream that starts in the middle of speech (a page or a meeting
    # bot joining while someone talks, a speaker's new stream after a drop) lost what came
    # before its first quieter frame (0: never)
    opening_ms: int = 10000

    def __post_init__(self) -> None:
        if self.frame_ms not in (10, 20, 30):
            raise ValueError("webrtcvad frames are 10, 20 or 30 ms")
        if not 0 <= self.aggressiveness <= 3:
            raise ValueError("aggressiveness is 0..3")

    @property
    def frame_samples(self) -> int:
        return MODEL_RATE * self.frame_ms // 1000


@dataclass(frozen=True)
class SpeechStart:
    sample: int  # stream position of the first sample of the utterance (pre-roll included)
    # ... and of the first speech frame among those that opened it: where the speech itself
    # began, as a listener times it (a silence before the utterance ends here, not at the
    # pre-roll, which reaches 0.15-0.3 s into that silence)
    onset: int | None = None


@dataclass(frozen=True)
class SpeechAudio:
    sample: int  # stream position of samples[0]
    samples: np.ndarray


@dataclass(frozen=True)
class SpeechEnd:
    sample: int  # one past the last sample of the utterance
    # one past the last frame heard as speech: ``sample`` less the hangover's silence (None:
    # not known, take ``sample``)
    spoken_to: int | None = None
    # the ``SpeechPause`` this end confirms (no speech came since it): its ``sample``
    paused_at: int | None = None


@dataclass(frozen=True)
class Tone:
    """Audio of the utterance, already delivered, from ``sample`` to ``end`` is a tone, not a
    voice: webrtcvad called its first frames speech before the tone check could tell (from
    where the tone began, beeps before it included; then frame by frame while it goes on).
    Decoders should not hear it: an end decode that did wrote "F***." for a 1 kHz tone's
    first 240 ms after jfk's "your country." in half of the replays."""

    sample: int
    end: int


@dataclass(frozen=True)
class SpeechPause:
    """``pause_ms`` of non-speech inside an utterance: perhaps its end. The ``SpeechEnd``
    whose ``paused_at`` is this ``sample`` confirms it (no speech came in between)."""

    sample: int  # one past the last sample delivered


@dataclass(frozen=True)
class SpeechResume:
    """Speech again after a ``SpeechPause``, before the hangover ended the utterance."""

    sample: int  # stream position of the frame heard as speech


VadEvent = Union[SpeechStart, SpeechAudio, SpeechPause, SpeechResume, SpeechEnd, Tone]


_FFT = 512
_WINDOWS: dict[int, np.ndarray] = {}


def spectral_peaks(frame: np.ndarray, range_db: float = 25.0) -> int:
    """How many peaks the frame's spectrum (60 Hz to 8 kHz, pre-emphasised) has within
    ``range_db`` of its strongest: voiced speech is a comb of harmonics shaped by formants,
    and fricatives are broadband, while a beep, a ring, a dial tone, a chord or a whistle is a
    few pure lines. webrtcvad calls all of them speech, and Whisper writes "Beep beep", "F***."
    or "Thank you." for them where offline decoding of the same audio writes nothing. Over
    real/, LJ and jfk (30 ms frames within 30 dB of a file's loudest) the median speech frame
    has 15-47 peaks and at most 5 % of frames (a hesitant reader's) 4 or fewer; tones, beeps,
    DTMF, a ring, a siren and a four-note chord have 1-4 in almost every frame."""
    x = np.asarray(frame, np.float64)
    x = np.append(x[:1], x[1:] - 0.97 * x[:-1])
    w = _WINDOWS.get(len(x))
    if w is None:
        w = _WINDOWS[len(x)] = np.hanning(len(x))
    p = np.abs(np.fft.rfft(x * w, _FFT)) ** 2
    lo, hi = 2 * _FFT // 512, 256 * _FFT // 512  # 62.5 Hz and 8 kHz (31.25 Hz bins)
    p = p[lo : hi + 1]
    floor = p.max() * 10 ** (-range_db / 10)
    mid = p[1:-1]
    return int(np.count_nonzero((mid > p[:-2]) & (mid >= p[2:]) & (mid > floor)))


def webrtc_classifier(aggressiveness: int) -> Classifier:
    import webrtcvad

    vad = webrtcvad.Vad(aggressiveness)
    return lambda frame: vad.is_speech(frame, MODEL_RATE)


class VadSegmenter:
    """Feed 16 kHz float32 audio in any chunking; get utterance events back.

    Every sample inside an utterance is delivered exactly once, in order, between its
    ``SpeechStart`` and ``SpeechEnd``; samples outside utterances are dropped. ``flush()`` closes
    an open utterance (end of stream) and delivers a trailing partial frame with it.
    """

    def __init__(self, options: VadOptions, classify: Classifier) -> None:
        self.opt = options
        self._classify = classify
        self._n = options.frame_samples
        self._pending = np.zeros(0, np.float32)
        self._pos = 0  # stream position of _pending[0]
        self._pre: deque[np.ndarray] = deque(maxlen=max(1, options.pre_roll_ms // options.frame_ms))
        # the last frames before an utterance: 0 not speech, 1 speech, 2 speech but tonal
        self._recent: deque[int] = deque(maxlen=options.onset_window)
        self._tone_frames = max(1, options.tone_ms // options.frame_ms)
        self._tonal_run = 0  # frames webrtcvad called speech, all tonal, since one that was not
        self._voice_end = 0  # one past the last frame heard as speech that was not tonal
        # where the audio a ``Tone`` has not yet named began (if the tonal frames since
        # ``_voice_end`` are a tone): the first tonal frame after the first non-speech frame
        # since then, else after ``_voice_end`` (a word's last voiced frames are often tonal
        # too: they are speech, not muted); once named, the next tonal frame
        self._tone_from: int | None = None
        self._gap = False  # a non-speech frame came since ``_voice_end``
        self._energies: deque[float] = deque(
            maxlen=max(1, options.floor_window_ms // options.frame_ms)
        )
        self._hang = max(1, options.hangover_ms // options.frame_ms)
        self._pause = options.pause_ms // options.frame_ms
        self._silent_run = 0
        self._paused_at: int | None = None  # the pause of the current silent run
        self.in_speech = False
        # the frames before the stream's first utterance, with their energies (None: it
        # opened, or the stream went on longer than ``opening_ms`` without one)
        # and webrtcvad's verdict where it was asked (None: the energy gate said no first)
        self._opening: list[tuple[np.ndarray, float, bool | None]] | None = []

    def feed(self, samples: np.ndarray) -> list[VadEvent]:
        self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32)])
        out: list[VadEvent] = []
        n = self._n
        while len(self._pending) >= n:
            frame, self._pending = self._pending[:n], self._pending[n:]
            out.extend(self._frame(frame, self._pos))
            self._pos += n
        return out

    def flush(self) -> list[VadEvent]:
        out: list[VadEvent] = []
        if self.in_speech:
            if len(self._pending):
                out.append(SpeechAudio(self._pos, self._pending))
            end = self._pos + len(self._pending)
            out.append(SpeechEnd(end, end - self._silent_run * self._n, self._paused_at))
            self.in_speech = False
        self._pos += len(self._pending)
        self._pending = np.zeros(0, np.float32)
        # (the frames before a flush are another turn's: an OpenAI manual commit flushes and
        # the session goes on; its partial frame dropped, they are no longer contiguous. The
        # look-back starts again after it: a stream joined mid-speech and committed before
        # its first utterance opened still keeps what is said after the commit)
        if self._opening is not None:
            self._opening = []
        self._pre.clear()
        self._recent.clear()
        self._tonal_run = 0
        self._silent_run = 0
        self._paused_at = None
        return out

    def is_speech_frame(self, frame: np.ndarray) -> bool:
        energy = _energy_db(frame)
        self._energies.append(energy)
        heard = self._heard(frame, energy, min(self._energies))
        if self._opening is not None:
            self._opening.append((frame, energy, heard))
            if len(self._opening) * self.opt.frame_ms > self.opt.opening_ms:
                self._opening = None
        return bool(heard)

    def _heard(self, frame: np.ndarray, energy: float, floor: float,
               verdict: bool | None = None) -> bool | None:
        """webrtcvad's verdict on a frame loud enough over ``floor`` (asked unless known);
        None for one that is not."""
        if energy < self.opt.min_energy_db or energy < floor + self.opt.energy_margin_db:
            return None
        if verdict is None:
            pcm = (np.clip(frame, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
            verdict = bool(self._classify(pcm))
        return verdict

    def _opened_at(self) -> int | None:
        """The first stream's first utterance opens: the index of the first frame of the
        earliest onset among the frames before it, judged against the lowest floor seen by
        now, if earlier than the ``_recent`` frames' (None: it is not)."""
        frames, self._opening = self._opening, None
        if not frames or self.opt.opening_ms <= 0:
            return None
        floor = min(e for _, e, _ in frames)
        recent: deque[tuple[int, int]] = deque(maxlen=self.opt.onset_window)
        for i, (frame, energy, verdict) in enumerate(frames[: -len(self._recent)]):
            speech = bool(self._heard(frame, energy, floor, verdict))
            recent.append((i, 2 if speech and self._tonal(frame) else int(speech)))
            if self._opens([k for _, k in recent]):
                return next(j for j, k in recent if k)
        return None

    def _opens(self, recent: Sequence[int]) -> bool:
        """Whether the last frames (0 not speech, 1 speech, 2 speech but tonal) open an
        utterance: enough speech among them, not mostly tonal."""
        voiced = sum(k > 0 for k in recent)
        return voiced >= self.opt.onset_frames and 2 * sum(k == 2 for k in recent) <= voiced

    def _tonal(self, frame: np.ndarray) -> bool:
        o = self.opt
        return o.frame_ms == 30 and 0 < o.tone_peaks >= spectral_peaks(frame)

    def _frame(self, frame: np.ndarray, pos: int) -> list[VadEvent]:
        speech = self.is_speech_frame(frame)
        tonal = speech and self._tonal(frame)
        if speech:
            self._tonal_run = self._tonal_run + 1 if tonal else 0
        tone = tonal and self._tonal_run >= self._tone_frames
        if not self.in_speech:
            self._pre.append(frame)
            self._recent.append(2 if tonal else int(speech))
            if not self._opens(self._recent):
                return []
            self.in_speech = True
            self._silent_run = 0
            self._voice_end = pos + self._n
            self._tone_from, self._gap = None, False
            pre = np.concatenate(list(self._pre))
            start = pos + self._n - len(pre)
            first = next(i for i, k in enumerate(self._recent) if k)
            onset = max(start, pos - (len(self._recent) - 1 - first) * self._n)
            frames = self._opening or []
            at = self._opened_at()
            if at is not None:  # (the stream began in speech: from there, with its pre-roll)
                begin = max(0, at - len(self._pre) + 1)
                pre = np.concatenate([f for f, _, _ in frames[begin:]])
                start, onset = pos + self._n - len(pre), pos + self._n - (len(frames) - at) * self._n
            self._pre.clear()
            self._recent.clear()
            return [SpeechStart(start, onset), SpeechAudio(start, pre)]
        out: list[VadEvent] = [SpeechAudio(pos, frame)]
        if speech and not tonal:
            self._voice_end = pos + self._n
            self._tone_from, self._gap = None, False
        elif not speech and not self._gap:
            self._gap, self._tone_from = True, None
        elif speech and self._tone_from is None:
            self._tone_from = pos
        if tone:  # a tone, not a voice: silent since the last frame of speech
            speech = False
            out.append(Tone(pos if self._tone_from is None else self._tone_from, pos + self._n))
            self._tone_from = None
            self._silent_run = (pos + self._n - self._voice_end) // self._n
        else:
            self._silent_run = 0 if speech else self._silent_run + 1
        if speech and self._paused_at is not None:
            self._paused_at = None
            out.append(SpeechResume(pos))
        elif not speech and self._paused_at is None and 0 < self._pause <= self._silent_run < self._hang:
            self._paused_at = pos + self._n
            out.append(SpeechPause(self._paused_at))
        if self._silent_run >= self._hang:
            self.in_speech = False
            out.append(SpeechEnd(pos + self._n, pos + self._n - self._silent_run * self._n,
                                 self._paused_at))
            self._silent_run = 0
            self._paused_at = None
        return out


def _energy_db(frame: np.ndarray) -> float:
    return 10.0 * np.log10(float(np.mean(frame.astype(np.float64) ** 2)) + 1e-12)


def utterance_spans(x: np.ndarray, options: VadOptions | None = None
                    ) -> list[tuple[int, int, int]]:
    """The utterances the VAD finds in a whole clip (16 kHz): (start, end, where its sound
    stopped) in samples, the end with the hangover. For measurements over a corpus."""
    vo = options or VadOptions()
    vad = VadSegmenter(vo, webrtc_classifier(vo.aggressiveness))
    out, start = [], 0
    for e in vad.feed(x) + vad.flush():
        if isinstance(e, SpeechStart):
            start = e.sample
        elif isinstance(e, SpeechEnd):
            out.append((start, e.sample, e.spoken_to or e.sample))
    return out

