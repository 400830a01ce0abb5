"""One run of speech inside a stream, and what a decode of it is for: the state the session's
policy (:mod:`.session`) works on, kept apart so the rules that judge a decode
(:mod:`.judging`) can read it without the session.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .agreement import HypothesisBuffer
from .audio import MODEL_RATE
from .decoding import DecodeRequest, DecodeResult
from .voicing import last_voiced
from .wire import Word

__all__ = ["ATTEMPTS", "Asking", "Attempt", "Early", "EndMark", "Kind", "Run", "WholeAsk"]

_VOICE_OVERLAP = MODEL_RATE // 10  # two 30 ms frames, a 17.5 ms pitch lag and the filter's


class Kind(enum.Enum):
    """What a window's decode is for."""

    STEP = "step"  # new speech arrived: a hypothesis for agreement and the partial
    FULL = "full"  # the window reached ``max_window_ms``: commit what it holds, move on
    FORCED = "forced"  # the client asked for finals now
    END = "end"  # the utterance ended: everything in the window becomes final
    # greedy decodes doubt a word, or disagree on it, or (under load) loop where it waited: a
    # careful decode decides
    CHECK = "check"
    # the VAD heard a pause that may be the utterance's end: its end decode, asked before the
    # hangover decides and kept only if no speech came (``VadOptions.pause_ms``)
    EARLY = "early"


@dataclass(frozen=True)
class Attempt:
    """What a careful decode hears, by how many times the guards rejected it before. Each retry
    drops more of the context that may have led Whisper astray: the prompt, then the forced
    prefix, then the final audio itself (after it Whisper may read the final words again and
    stop there: "... on a plane." and nothing of the next speaker's clip, en-07 over the
    WebSocket). Audio that is not final is never skipped for a rejection."""

    prompt: bool
    prefix: bool
    final_audio: bool


ATTEMPTS = (Attempt(True, True, True), Attempt(False, True, True), Attempt(False, False, False))


@dataclass
class Early:
    """An end decode asked at a pause (``Kind.EARLY``). Its words wait for the VAD: the
    hangover's ``SpeechEnd`` makes them the utterance's end decode; speech first makes them a
    step's hypothesis. An utterance's end words then come the hangover's rest sooner (240 of
    480 ms by default): on en-03 and en-07 replayed, end words' final p50 1.26 -> 1.03 s. On all
    of real/ (bench.replay --threads 1 --offsets 0.11,0.37) WER 21.66 -> 21.75 %, final p95
    2.01 -> 2.03 s, 1 % fewer decodes; dropping the words when speech came instead cost a step
    each time: 22.84 %, p95 2.06 s."""

    at: int  # the pause's sample, where the window ends
    resume_to: int  # the window's ``decoded_to`` before it: steps go on from there
    req: DecodeRequest | None = None  # (None while it is out)
    result: DecodeResult | None = None
    unsure: bool = False


class WholeAsk(NamedTuple):
    """The window ending at stream sample ``at`` is asked on Whisper's whole 30 s input (with
    its retries after that): for a verdict of silence over a voice (``silence``,
    ``Judge.hushed``), whose 30 s reading then stands only where ``Judge.overturns``; or for
    a loop that left no new word (``Judge.looped_short``), judged as any reading."""

    at: int
    silence: bool


@dataclass
class Asking:
    """How the careful decodes of a run's window are asked, by what the guards made of the
    ones before: one state, not flags to keep in step. Back to the start once a decode's words
    are taken."""

    retries: int = 0  # careful decodes of this window the guards rejected: ``ATTEMPTS[retries]``
    jumped: bool = False  # ... one of them for jumping over held words (``skip_retry_words``)
    # ... one Whisper called silence over a voice, or that looped: asked on its whole 30 s input
    whole: WholeAsk | None = None

    @property
    def attempt(self) -> Attempt:
        return ATTEMPTS[self.retries]

    def retry(self, jumped: bool) -> bool:
        """Ask again differently (the next of ``ATTEMPTS``), if any way is left; ``jumped``:
        the rejected decode jumped over held words (noted until the words are taken)."""
        if self.retries >= len(ATTEMPTS) - 1:
            return False
        self.retries += 1
        self.jumped = self.jumped or jumped
        return True

    def unforced(self) -> bool:
        """Ask again as the last of ``ATTEMPTS`` (no prompt, no forced words, only the audio
        not yet final), if not asked so already."""
        if self.retries >= len(ATTEMPTS) - 1:
            return False
        self.retries = len(ATTEMPTS) - 1
        return True

    def whole_at(self, at: int) -> bool:
        """The window ending at sample ``at`` is asked on the whole input."""
        return self.whole is not None and self.whole.at == at


class EndMark(NamedTuple):
    """An utterance end the VAD called (in samples): where its speech stopped (the hangover
    comes after) and where that utterance's speech began."""

    spoken_to: int
    began: int


class Run:
    """Speech from the window start on, with stream sample positions: one utterance, or
    several whose pauses were short (``join_gap_ms``), held as one stretch with the pauses as
    digital silence. The previous utterance's end stays in the window as context for the next
    one (Whisper hears who speaks and how, and its words are the forced prefix), and a backlog
    of short utterances is decoded as one window instead of one by one."""

    def __init__(self, start: int) -> None:
        self.start = start
        # utterance ends not yet decoded as final, in order, each with what it closed
        self.ends: dict[int, EndMark] = {}
        self.speech_from = start  # where the last utterance in it started
        self.open = True  # an utterance is going on
        self.base = start  # stream position of the first sample held
        self.chunks: list[np.ndarray] = []
        self.length = 0
        self.window_start = start
        self.decoded_to = start
        self.buffer = HypothesisBuffer(committed_end=start / MODEL_RATE)
        self.force_at: int | None = None  # ``finalize``: commit everything heard up to here
        # ... and where the forced (or end) decodes made everything final to: ``force_at``
        # holds the latest finalize only, so an earlier one is answered by this
        self.forced_to = start
        self.force_short = False  # ... without waiting for ``min_final_ms`` (no audio is coming)
        self.asking = Asking()  # how its window's careful decodes are asked (retries)
        self.held_by: Kind | None = None  # what the decode whose words are held was for
        self.check_until: float | None = None  # a careful decode decides the words up to here
        self.checked_to = -1.0  # ... and has decided them up to here
        self.main_for: int | None = None  # the draft read a window ending here: main's turn
        self.main_to = start  # where the main model's last reading ended
        # an end decode's words, held while the window is read again past them (tail_check_ms)
        self.tail: list[Word] | None = None
        self.tail_for = -1  # ... and the utterance end they were held for (once per end)
        # a read-on's words (held and heard after them) while the window is asked again without
        # forced words (``doubted_read_on_probability``): they stand if that asking hears no word
        self.read_on: list[Word] | None = None
        self.pause: int | None = None  # a pause the VAD has not yet called an end or not
        self.pause_ends: dict[int, int] = {}  # a pause the hangover confirmed -> its end
        self.early: Early | None = None  # the end decode asked at ``pause``
        # a short utterance held for the language that the next one joined: where it began
        # (its end mark is gone; its voice counts for the words of both: ``undecided_from``)
        self.held_from: int | None = None
        self.voice_scanned = start  # the audio was scanned for a voice up to this sample ...
        self.last_voice = -1  # ... and the last voiced frames in it end here (-1: none yet)

    @property
    def available(self) -> int:
        return self.base + self.length

    def append(self, samples: np.ndarray) -> None:
        self.chunks.append(samples)
        self.length += len(samples)

    @property
    def idle(self) -> bool:
        """Everything in it is final; it is kept only as context for a continuation."""
        return not self.open and not self.ends

    def audio(self, a: int, b: int) -> np.ndarray:
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        buf = self.chunks[0] if self.chunks else np.zeros(0, np.float32)
        # (from the first sample held: a position before it must not wrap to the buffer's end)
        return buf[max(a - self.base, 0) : max(b - self.base, 0)]

    @property
    def undecided_from(self) -> int:
        """Where the first utterance in it whose words are not all final began (a stream
        sample, with the VAD's pre-roll)."""
        starts = [m.began for m in self.ends.values()] + ([self.speech_from] if self.open else [])
        if starts and self.held_from is not None:
            starts.append(self.held_from)
        return min(starts, default=int(round(self.buffer.committed_end * MODEL_RATE)))

    def voice_after(self, at: int) -> bool:
        """Whether the audio held has a voice (:func:`.voicing.last_voiced`) that ends after
        stream sample ``at``. Each sample is scanned once, as it comes (with the frames and
        pitch lags a voiced pair across the last scan's end needs), a second at most at a time:
        the voicing's gate is relative to the loudest frame scanned, and a file's audio all at
        once, with one loud click in it, left every speech frame below the gate."""
        end = self.available
        while end > self.voice_scanned:
            lo = max(self.base, self.voice_scanned - _VOICE_OVERLAP)
            hi = min(end, max(self.voice_scanned, lo) + MODEL_RATE)
            found = last_voiced(self.audio(lo, hi))
            if found >= 0:
                self.last_voice = max(self.last_voice, lo + found)
            self.voice_scanned = hi
        return self.last_voice > at

    def mute(self, a: int, b: int) -> None:
        """Make stream samples ``a`` to ``b`` digital silence, as the pauses between joined
        utterances are (a tone the VAD held as speech before it could tell). Only the chunks
        it touches are copied: a tone is muted frame by frame at the end."""
        pos = self.base
        for i, c in enumerate(self.chunks):
            lo, hi = max(a, pos) - pos, min(b, pos + len(c)) - pos
            if lo < hi:
                c = self.chunks[i] = c.copy()
                c[lo:hi] = 0.0
            pos += len(c)

    def trim(self, to: int) -> None:
        """Forget audio before stream sample ``to`` (it is committed and out of the window)."""
        drop = min(to, self.available) - self.base
        if drop <= 0:
            return
        whole = self.audio(self.base, self.available)
        self.chunks = [whole[drop:].copy()]
        self.base += drop
        self.length -= drop
