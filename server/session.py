"""One speaker's stream as a state machine: audio in, decode requests and caption events out.

The policy of WhisperWire lives here, with its settings (:mod:`.stream_options`), the state of
one run of speech (:mod:`.utterance`) and the guards that judge a decode's words
(:mod:`.judging`, :mod:`.rereads`):

* VAD (:mod:`.vad`) cuts the stream into utterances; audio outside them is never decoded.
* Inside an utterance a window runs from a little before the committed point (``overlap_ms`` of
  context) to the newest audio. Every ``step_ms`` of new audio the window is decoded again; the
  prefix two successive hypotheses agree on becomes ``final`` (:mod:`.agreement`), the rest is
  the ``partial``. The committed audio then leaves the window, so each decode costs the
  uncommitted audio plus the overlap, not the whole utterance.
* At the end of an utterance (VAD hangover, ``finalize``, ``close`` or a dropped connection) the
  window is decoded once more and everything in it becomes final with ``eou``.
* Recently committed text is the prompt of the next decode, so sentences read on.

No sockets, threads, clocks or model: the transport calls :meth:`StreamSession.feed_audio`,
:meth:`next_decode`, :meth:`decoded` and drains :meth:`events`; times are counted in samples.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from .agreement import join_words, unit_key
from .audio import MODEL_RATE
from .decoding import DecodeRequest, DecodeResult
from .judging import Judge, Verdict
from .rereads import held_end, read_again_past, spoken, words_from
from .speech_spans import SpeechSpans
from .stream_options import StreamOptions
from .text import (caption_script, cjk_marks, convert_words, is_unspaced, join_texts,
                   split_words)
from .utterance import Asking, Attempt, Early, EndMark, Kind, Run, WholeAsk
from .vad import (SpeechAudio, SpeechEnd, SpeechPause, SpeechResume, SpeechStart, Tone,
                  VadSegmenter)
from .wire import Final, Language, Message, Partial, UtteranceEnd, Word

__all__ = ["StreamOptions", "StreamSession"]

# the channel's last word heard again in a new stream is that word within this much after its
# end (a word said twice at a seam by one speaker is rarer than the aligner's slack)
SEAM_SLACK_S = 0.15


class _InFlight(NamedTuple):
    """The decode out: what was asked, for which utterance, why, and how."""

    req: DecodeRequest
    run: Run
    kind: Kind
    asked_at: int  # samples_in when it was asked (a step answered later than a step lags)
    busy_step: bool  # a step asked while busy: short context, so its loops ask a check


class StreamSession:
    """Call order: ``feed_audio``/``finalize`` whenever input arrives; then loop on
    ``next_decode()`` (at most one request is out at a time), hand each result back with
    ``decoded()`` and send whatever ``events()`` returns. ``flushed`` is true once everything
    heard has been decoded and finalised."""

    def __init__(
        self,
        options: StreamOptions,
        vad: VadSegmenter,
        *,
        language: str | None = None,
        task: str = "transcribe",
        prompt: str | None = None,
        name: str = "",
        zh_script: str | None = None,
    ) -> None:
        self.opt = options
        self.judge = Judge(options)
        self.name = name
        self._vad = vad
        self.language, self.task, self.user_prompt = language, task, prompt or ""
        self.samples_in = 0
        self.segment = 0
        self._utts: deque[Run] = deque()
        self._events: list[Message] = []
        self._last_word_end = 0.0  # where the last final's last word ends (utterance_end)
        self._said = 0.0  # the stream's first seconds, made final before it began (:meth:`said`)
        self._said_last: Word | None = None  # the channel's last word before them
        self._ids = itertools.count(1)
        self._in_flight: _InFlight | None = None
        self._partial = ""
        self._committed_text = ""
        self.detected_language: str | None = None
        self.zh_script = zh_script
        self._detect_pending = language in (None, "auto")
        # utterances that ended by here wait for nothing more (``finish``, ``finalize``)
        self._settled = 0
        # each ``finalize`` not answered yet: samples_in then, and the run it forced (if one was
        # open) with the mark it set there
        self._asked: list[tuple[int, Run | None, int]] = []
        self._answer: tuple[Message, int] | None = None  # (see :meth:`answers`)
        self._slow_until = 0  # steps are busy until samples_in reaches this (slow_hold_ms)
        self._spans = SpeechSpans()  # where the VAD heard speech: final words' times stay in it

    # -- input ---------------------------------------------------------------------------
    def feed_audio(self, samples: np.ndarray) -> None:
        """Take 16 kHz float32 mono samples, the next ones of the stream."""
        self.samples_in += len(samples)
        self._vad_events(self._vad.feed(samples))

    def finalize(self) -> None:
        """The client wants finals now: everything heard so far becomes final (``eou``, or
        ``utterance_end`` when nothing was left to make final), and the utterance goes on with
        its context (the VAD keeps its state and pre-roll). Waits until the utterance holds
        ``min_final_ms`` past its committed point, or ends."""
        self._settled = self.samples_in
        u = self._utts[-1] if self._utts and self._utts[-1].open else None
        self._asked.append((self.samples_in, u, u.available if u is not None else 0))
        if u is not None:
            # (a new forced end waits for its own audio: a short one before it, still out,
            # was for the audio then, and a sliver decoded alone invents words)
            u.force_at, u.force_short = u.available, False
        elif self.flushed:  # nothing heard since the last final: answered at once
            self._events.append(UtteranceEnd(self._last_word_end))

    @property
    def finalize_waits(self) -> bool:
        """A ``finalize`` waits for audio: its utterance holds less than ``min_final_ms`` past
        its committed point, and Whisper invents words for slivers decoded on their own."""
        u = self._utts[-1] if self._utts else None
        return u is not None and u.open and u.force_at is not None and not u.force_short

    def finalize_now(self) -> None:
        """No audio came after a ``finalize`` (push-to-talk, a muted microphone, a file's end):
        none will fill ``min_final_ms``, so what was heard becomes final now, however short.
        Deepgram's ``Finalize`` and OpenAI's ``commit`` promise the words at once; they came
        only when the client hung up."""
        if self.finalize_waits:
            self._utts[-1].force_short = True

    def finish(self) -> None:
        """End of stream: the open utterance ends here and everything heard becomes final."""
        self._vad_events(self._vad.flush())
        self._settled = self.samples_in

    def _vad_events(self, events: list) -> None:
        for ev in events:
            if isinstance(ev, SpeechStart):
                self._spans.start(ev.sample)
                self._start_speech(ev.sample)
            elif isinstance(ev, SpeechAudio):
                self._utts[-1].append(ev.samples)
            elif isinstance(ev, Tone):
                self._tone(self._utts[-1], ev)
            elif isinstance(ev, SpeechPause):
                self._utts[-1].pause = ev.sample
            elif isinstance(ev, SpeechResume):
                self._utts[-1].pause = None
                self._settle_early(self._utts[-1])
            elif isinstance(ev, SpeechEnd):
                spoken_to = ev.sample if ev.spoken_to is None else ev.spoken_to
                self._spans.end(spoken_to)
                # words are made final only from audio a run holds: the spans before the
                # oldest are done (noise that never became a word kept one each, for ever)
                self._spans.forget_before(min(r.base for r in self._utts) / MODEL_RATE - 1.0)
                u = self._utts[-1]
                u.ends[ev.sample] = EndMark(spoken_to, u.speech_from)
                u.open = False
                u.pause = None
                if ev.paused_at is not None:
                    u.pause_ends[ev.paused_at] = ev.sample
                self._settle_early(u)

    def _tone(self, u: Run, ev: Tone) -> None:
        """Audio the VAD delivered as speech was a tone: every decode from now on hears
        digital silence there, as in the gaps between joined utterances, and an end decode
        asked at a pause that heard it is asked again (a beep, a pause, and a second beep
        that the tone check knew at once: the first's decode would have been the end's)."""
        u.mute(ev.sample, ev.end)
        if u.early is not None and u.early.at > ev.sample:
            self._drop_early(u)

    def _start_speech(self, sample: int) -> None:
        last = self._utts[-1] if self._utts else None
        if last is not None and sample - last.available >= self.opt.samples(
                self.opt.redetect_pause_ms) and self.language in (None, "auto"):
            self._detect_pending = True  # after a long pause, perhaps someone else speaks
        if last is not None and sample - last.available <= self.opt.samples(self.opt.join_gap_ms):
            last.append(np.zeros(sample - last.available, np.float32))
            last.open = True
            last.speech_from = sample
            if self._detect_pending and self.language == "auto":
                # a held short utterance goes on: detect on both together (its voice counts for
                # the words of both: needs_voice)
                last.held_from = min([m.began for m in last.ends.values()] + [sample])
                last.ends.clear()
                last.tail = None  # ... its end decode's words too: the window is read again
                if last.read_on is not None:  # ... and a read-on's, with how it asked again
                    last.read_on, last.asking = None, Asking()
            return
        while self._utts and self._utts[-1].idle and self._in_flight is None:
            self._utts.pop()  # context too old to help
        self._utts.append(Run(sample))

    # -- decoding ------------------------------------------------------------------------
    @property
    def flushed(self) -> bool:
        return self._in_flight is None and all(u.idle for u in self._utts)

    @property
    def undecided(self) -> bool:
        """Speech heard is not all final: an utterance the VAD has not ended, or one whose end
        is still to be decoded (after a finalize's answer: the speech that goes on)."""
        return any(not u.idle for u in self._utts)

    @property
    def lag(self) -> float:
        """Seconds of speech received but not yet final (silence does not count)."""
        total = 0.0
        for u in self._utts:
            if not u.idle:
                total += max(0.0, u.available / MODEL_RATE - u.buffer.committed_end)
        return total

    @property
    def backlog(self) -> float:
        """Seconds of speech received but not yet sent to the decoder at all."""
        total = 0.0
        for u in self._utts:
            if not u.idle:
                total += max(0, u.available - u.decoded_to) / MODEL_RATE
        return total

    @property
    def audio_seconds(self) -> float:
        return self.samples_in / MODEL_RATE

    @property
    def final_to(self) -> float:
        """Stream seconds up to which every word heard is final (or nothing was said): where
        a stream cut short ends its channel, so that its speaker, coming back to that channel
        (on Ray Serve, another replica continues it), sends the rest again."""
        return max(self._said, min((u.buffer.committed_end for u in self._utts if not u.idle),
                                   default=self.audio_seconds))

    def next_decode(self, busy: bool = False) -> DecodeRequest | None:
        """The next window to decode, or None while one is out or nothing is due. ``busy``:
        the decoder is saturated, and a partial step keeps only ``busy_overlap_ms`` of
        committed context (also while this stream's own steps lag, ``slow_hold_ms``)."""
        if self._in_flight is not None:
            return None
        lagging = self.samples_in < self._slow_until
        alone_slow = lagging and not busy
        # under load a careful decode keeps less context (``busy_careful_context_ms``), but not
        # a full window's, nor any of a stream that has more than a full window of speech not
        # yet decoded: reading a backlog whole is what keeps flat-out input (a file, four
        # streams sent flat out at once) as right as offline decoding
        loaded = busy and self.backlog * 1000 < self.opt.max_window_ms
        busy = busy or lagging
        while len(self._utts) > 1 and self._utts[0].idle:
            self._utts.popleft()
        if not self._utts or self._utts[0].idle:
            return None
        u = self._utts[0]
        due = self._due(u, busy)
        if u.main_for is not None and u.early is None and (due is None or due[1] == Kind.STEP):
            due = (u.main_for, Kind.STEP)  # the main model reads the window the draft read
        u.main_for = None
        if due is None:
            return None
        end, kind = due
        if kind == Kind.EARLY:
            u.early = Early(end, u.decoded_to)
        elif u.early is not None:
            self._drop_early(u)  # other work came first; asked again after it if still due
        draft = kind == Kind.STEP and self.opt.draft_partials and end > u.decoded_to
        careful = kind != Kind.STEP
        busy_step = busy and not careful
        start = self._window_from(u, end, careful, busy_step, alone_slow, u.asking.attempt,
                                  loaded and kind != Kind.FULL)
        req = self._request(u, kind, start, end, draft)
        u.decoded_to = end
        if not draft:
            u.main_to = end
        self._in_flight = _InFlight(req, u, kind, self.samples_in, busy_step)
        return req

    def _request(self, u: Run, kind: Kind, start: int, end: int, draft: bool) -> DecodeRequest:
        """The decode of ``u``'s audio from sample ``start`` to ``end``, for ``kind``, as the
        window's rejected decodes so far have it asked (``Run.asking``)."""
        attempt = u.asking.attempt
        careful = kind != Kind.STEP
        prefix = words_from(u.buffer.committed, start / MODEL_RATE)
        # read on past the words an end decode stopped at: they are forced, not committed (the
        # prompt is the committed text before the window, as ever)
        forced = prefix + u.tail if kind == Kind.END and u.tail is not None else prefix
        return DecodeRequest(
            id=next(self._ids),
            audio=np.ascontiguousarray(u.audio(start, end), dtype=np.float32),
            offset=start / MODEL_RATE,
            prompt=self._prompt(prefix) if attempt.prompt else "",
            user_prompt=self.user_prompt if attempt.prompt else "",
            prefix=join_words(forced) if attempt.prefix else "",
            language=self.detected_language if self.language in (None, "auto")
            and not self._detect_pending else self.language,
            task=self.task,
            final=kind in (Kind.END, Kind.EARLY),
            careful=careful,
            session=self.name,
            draft=draft,
            whole=careful and u.asking.whole_at(end),
        )

    def _window_from(self, u: Run, end: int, careful: bool, busy_step: bool, alone_slow: bool,
                     attempt: Attempt, loaded: bool = False) -> int:
        """Where the window of the next decode of ``u`` starts (it ends at ``end``)."""
        o = self.opt
        # a careful decode reaches further back: more of what was said before is heard again
        # (as forced prefix), which is what Whisper needs to get short or hard speech right
        start = self._context_start(u, o.careful_context_ms) if careful else u.window_start
        # ... but less of it while the decoder is pressed: the tightest cap that applies
        caps = [ms for pressed, ms in ((alone_slow, o.slow_careful_context_ms),
                                       (loaded, o.busy_careful_context_ms)) if pressed and ms]
        if careful and caps:
            start = max(start, self._overlap_start(u, min(caps)))
        if busy_step:
            start = max(start, min(self._overlap_start(u, o.busy_overlap_ms), u.decoded_to))
        if careful and not attempt.final_audio:
            at = int(u.buffer.committed_end * MODEL_RATE)
            if end - at >= o.samples(o.min_window_ms):  # never a sliver
                start = max(start, at)
        return start

    def _due(self, u: Run, busy: bool = False) -> tuple[int, Kind] | None:
        """Where the next window of ``u`` ends and what its decode is for, if one is due."""
        o = self.opt
        full = u.window_start + o.samples(o.max_window_ms)
        ends = [e for e in u.ends if e <= full]
        if ends and self._waits_for_language(u, ends[-1]):
            return None
        if ends:  # under backlog, several ended utterances become final in one window
            return ends[-1], Kind.END
        if u.available >= full:
            return full, Kind.FULL
        if u.check_until is not None:
            if u.check_until > u.buffer.committed_end:
                return u.available, Kind.CHECK
            u.check_until = None
        if u.force_at is not None:
            ready = u.force_at if u.force_short else max(u.force_at, int(
                u.buffer.committed_end * MODEL_RATE) + o.samples(o.min_final_ms))
            if u.available >= ready:
                return ready, Kind.FORCED
        if u.early is not None:
            return None  # out or held: no step until the VAD says whether the pause ended it
        # (not under load: a pause that was no end costs it; nor for a window shorter than
        # ``min_final_ms``: every 240 ms less of a sliver is more room for Whisper to invent,
        # zh-05 replayed: "作词 作曲 作曲 ..." for its first 0.48 s, then a file of loops)
        if u.pause is not None and u.open and not busy and u.pause - u.window_start >= o.samples(
                o.min_final_ms) and not self._waits_for_language(u, u.pause):
            return u.pause, Kind.EARLY
        end = u.available
        if not u.open or end - u.decoded_to < o.samples(o.step_ms) or end - u.window_start < o.samples(
            o.min_window_ms
        ):
            return None
        if (at := self._check_instead(u, end)) is not None:
            u.check_until = at
            return end, Kind.CHECK
        return end, Kind.STEP

    def _check_instead(self, u: Run, end: int) -> float | None:
        """Where the doubted word ends that a step ending at ``end`` would only hand on to a
        careful decode (it has waited ``unsure_wait_ms`` or ``stuck_wait_ms`` by then): that
        decode is asked in the step's place, a step's decode time sooner. Before, the step ran
        first, and a check's words were final one greedy decode later."""
        if not self.opt.check_instead_of_step or u.buffer.doubted is None:
            return None
        at, disagreed = u.buffer.doubted
        wait = self.opt.stuck_wait_ms if disagreed else self.opt.unsure_wait_ms
        if (disagreed and not wait) or at <= max(u.checked_to, u.buffer.committed_end):
            return None  # (stuck_wait_ms 0: never; unsure_wait_ms 0: at once)
        return at if end / MODEL_RATE - wait / 1000 >= at else None

    def _context_start(self, u: Run, ms: int) -> int:
        """Where a window with ``ms`` of committed context starts: at the first committed word
        of the ``ms`` before the window start (or the last final, if later) whose audio is still
        held, and never after the window start. Measured from the window, not from the last
        word: a window that moved on past audio without words leaves old words behind."""
        start = u.window_start
        end = max(u.buffer.committed_end, u.window_start / MODEL_RATE)
        for w in reversed(u.buffer.committed):
            s = int((w.start - 0.05) * MODEL_RATE)
            if end - w.start > ms / 1000 or s < u.base:
                break
            start = min(start, s)
        return max(start, u.base)

    def _prompt(self, prefix: list[Word]) -> str:
        """Committed text before the window (the window's own committed words are its prefix);
        none while the language is detected again after a long pause: English text as the
        prompt made base write English partials over the Mandarin that came next."""
        redetecting = self._detect_pending and self.detected_language is not None
        before = "" if redetecting and self.language == "auto" else self._committed_text
        if prefix:
            before = before[: len(before) - len(join_words(prefix))].rstrip()
        tail = before[-self.opt.prompt_chars :]
        space = tail.find(" ")
        if len(before) > self.opt.prompt_chars and 0 <= space < 20:
            tail = tail[space + 1 :]  # start on a word, where words are spaced
        return tail.strip()

    def failed(self, request_id: int) -> None:
        """The engine could not decode this request; its audio stays and is asked for again."""
        if self._in_flight is not None and self._in_flight.req.id == request_id:
            u = self._in_flight.run
            u.decoded_to, u.early = u.window_start, None
            self._in_flight = None

    def abandon(self) -> None:
        """Drop all undecoded audio (the engine keeps failing); ``flushed`` becomes true, and
        audio fed after it starts afresh."""
        self._vad.flush()
        self._utts.clear()
        self._in_flight = None
        self._spans = SpeechSpans()  # (its open span never ends)

    def decoded(self, request_id: int, result: DecodeResult) -> None:
        """Hand back the result of the request with this id; events become available."""
        if self._in_flight is None or self._in_flight.req.id != request_id:
            raise ValueError(f"no decode request {request_id} is outstanding")
        req, u, kind, asked_at, busy_step = self._in_flight
        self._in_flight = None
        lagged = self.samples_in - asked_at > self.opt.samples(self.opt.step_ms)
        if kind == Kind.STEP and lagged and not self.opt.draft_partials:
            self._slow_until = self.samples_in + self.opt.samples(self.opt.slow_hold_ms)
        result = self._in_script(req, result, u)
        unsure = self._note_language(req, result)
        win_end = req.offset + req.duration
        if result.draft:  # a partial only; the main model reads the same window next
            self._draft_partial(u, req, result, win_end)
            return
        if kind == Kind.EARLY:
            if u.early is not None:
                u.early.req, u.early.result, u.early.unsure = req, result, unsure
                self._settle_early(u)
            return
        self._take(req, u, kind, result, win_end, unsure, busy_step)

    def _settle_early(self, u: Run) -> None:
        """An early end decode's words, once it is back: the utterance's end decode if the
        hangover ended the utterance at its pause; a step's if speech came first; else held."""
        e = u.early
        if e is None or e.result is None or e.req is None:
            return
        end = u.pause_ends.pop(e.at, None)
        if end is not None:
            u.early = None
            self._take(e.req, u, Kind.END, e.result, end / MODEL_RATE, e.unsure,
                       busy_step=False)  # an early decode is careful, never a busy step
        elif u.pause != e.at:
            # speech came: a careful reading of the window up to the pause is a hypothesis
            # like a step's (the step it kept from running)
            u.early = None  # (no careful decode's retries for a step)
            self._take(replace(e.req, careful=False), u, Kind.STEP, e.result,
                       e.at / MODEL_RATE, e.unsure, busy_step=False)

    def _drop_early(self, u: Run) -> None:
        if u.early is not None and u.decoded_to == u.early.at:
            u.decoded_to = u.early.resume_to
        u.early = None

    def _take(self, req: DecodeRequest, u: Run, kind: Kind, result: DecodeResult,
              win_end: float, unsure: bool, busy_step: bool) -> None:
        """A decode's words, judged by the guards: committed by what the decode was for, or
        asked again differently."""
        if kind == Kind.END and u.tail is not None:
            self._take_read_on(req, u, result, win_end, unsure)
            return
        words, verdict = self.judge.accepted_words(req, result, win_end, u.buffer.committed_end,
                                              u.buffer.committed,
                                              self.judge.silent_from(u, win_end),
                                              self._asked_for_silence(req, u))
        # a careful decode Whisper called silence over a voice, or that loops and leaves no new
        # word, on a shorter input than its own 30 s, is asked on that once (and so are the
        # window's retries after it)
        at = int(round(win_end * MODEL_RATE))
        if self._not_asked_whole(u, kind, at):
            hushed = verdict == Verdict.NO_SPEECH and self.judge.hushed(
                req, result, u.buffer.committed_end)
            if hushed or self.judge.looped_short(req, result, verdict, words):
                self._ask_whole(u, at, silence=hushed)
                return
        # a full window that would move past its audio with nothing committed, because the
        # guards cut what Whisper heard there, asks again too: audio is never skipped for a loop
        keep_from = win_end - self.opt.stall_keep_ms / 1000
        stalls = kind == Kind.FULL and verdict == Verdict.TRIMMED and not any(
            w.end <= keep_from for w in words)
        # so does a careful decode that heard no word in seconds of new speech: after a forced
        # prefix Whisper may only close its sentence ("Cajun loves China" + ".") and stop
        mute = (req.careful and not any(spoken(w) for w in words)
                and verdict != Verdict.NO_SPEECH
                and win_end - u.buffer.committed_end >= self.opt.mute_retry_ms / 1000)
        skipped = req.careful and self.judge.skips(u, req, words)
        if (verdict == Verdict.REJECTED or stalls or mute or skipped) and req.careful \
                and u.asking.retry(jumped=skipped):  # retried differently, never skipped
            u.decoded_to = u.window_start
            return
        if u.asking.jumped and req.careful:  # asked again after a jump: what it leaves out
            words = self.judge.with_jumped_over(u, words)
        u.asking = Asking()
        if kind == Kind.END and u.read_on is not None:  # asked without forced words after it
            read_on, u.read_on = u.read_on, None
            if not any(spoken(w) for w in words):
                words = read_on
        if kind == Kind.END and (self.judge.all_doubt(u, words, win_end, result.no_speech_prob)
                                 or self.judge.unvoiced_doubt(u, words, win_end, req.task)):
            words = []  # (not even its punctuation: no final of "...")
        if kind == Kind.END and self.judge.stops_short(u, words, win_end):
            u.tail, u.tail_for = words, int(round(win_end * MODEL_RATE))
            u.decoded_to = u.window_start
            return
        if kind == Kind.END and self.judge.lone_doubt(u, words, win_end, req.task):
            words = []
        self._commit(u, kind, result, words, req.duration, win_end, unsure, busy_step)

    def _voiced(self, u: Run) -> bool:
        """Whether a decode's words may stand: the utterances of ``u`` not yet all final hold
        a voice, or the rule is off (``needs_voice``)."""
        return not self.opt.needs_voice or u.voice_after(u.undecided_from)

    def _take_read_on(self, req: DecodeRequest, u: Run, result: DecodeResult, win_end: float,
                      unsure: bool) -> None:
        """An end decode's window read again past the words it stopped at (``u.tail``): they
        and what it hears after them are final. A loop that leaves nothing after them is read
        on once more, on the whole input (:meth:`.Judge.looped_short`)."""
        tail, u.tail = u.tail, None
        assert tail is not None
        words, verdict = self.judge.accepted_words(req, result, win_end, held_end(tail),
                                                   u.buffer.committed + tail,
                                                   self.judge.silent_from(u, win_end),
                                                   self._asked_for_silence(req, u))
        # it was asked for the audio after them: what it places before their end is the held
        # sentence read again (but in a stretched last word: read_again_past)
        new = words[read_again_past(tail, words):] if verdict != Verdict.REJECTED else []
        if new and new[0].start < tail[-1].end:  # (the stretched word ends where they begin)
            last = tail[-1]
            tail = tail[:-1] + [replace(last, end=max(last.start, new[0].start))]
        at = int(round(win_end * MODEL_RATE))
        if self._not_asked_whole(u, Kind.END, at) and self.judge.looped_short(
                req, result, verdict, new):
            u.tail = tail
            self._ask_whole(u, at, silence=False)
            return
        u.asking.whole = None
        if self.judge.lone_doubt(u, tail + new, win_end, req.task) \
                or self.judge.unvoiced_doubt(u, tail + new, win_end, req.task):
            tail, new = [], []
        elif self.judge.doubted_read_on(new) and u.asking.unforced():
            u.read_on = tail + new  # (they stand if the window is heard as nothing now)
            u.decoded_to = u.window_start
            return
        self._commit(u, Kind.END, result, tail + new, req.duration, win_end, unsure,
                     busy_step=False)  # (an end decode is careful, never a busy step)

    @staticmethod
    def _not_asked_whole(u: Run, kind: Kind, at: int) -> bool:
        """Whether the window ending at sample ``at`` may be asked on the whole input: not yet,
        and its end is fixed (an utterance's end, a full window). A check's or a forced
        window's end moves with the audio that keeps coming: asked again, it is another window,
        and would be asked so again and again."""
        return kind in (Kind.END, Kind.FULL) and not u.asking.whole_at(at)

    @staticmethod
    def _ask_whole(u: Run, at: int, silence: bool) -> None:
        """Ask the window ending at sample ``at`` again, on the whole input (``Asking.whole``)."""
        u.asking.whole = WholeAsk(at, silence)
        u.decoded_to = u.window_start

    @staticmethod
    def _asked_for_silence(req: DecodeRequest, u: Run) -> bool:
        """``req`` asks again, on the whole input, a verdict of silence (``Judge.hushed``)."""
        whole = u.asking.whole
        return req.whole and whole is not None and whole.silence

    @property
    def _agrees(self) -> bool:
        """Whether steps that agree make words final before their utterance ends. Not in a
        translation: its English has no place in the audio (one clause of it may come from
        words said after another), so two decodes agree on words whose times say nothing, and
        a later decode, forced past them, translated the same audio again ("... the low-level
        crisis.-level crisis and the effect of the low-level crisis."). A translation is
        final by the utterance (a pause, a finalize, a full window), as a sentence is."""
        return self.task != "translate"

    def _commit(self, u: Run, kind: Kind, result: DecodeResult, words: list[Word],
                duration: float, win_end: float, unsure: bool, busy_step: bool) -> None:
        """What a decode's accepted words make final, by what the decode was for."""
        if words and not self._voiced(u):
            words = []  # steady noise: no voice in the utterances not final yet (needs_voice)
        keep_from = win_end - self.opt.stall_keep_ms / 1000
        u.buffer.insert(words)
        u.held_by = kind
        if kind == Kind.END:
            self._end_utterance(u.buffer.commit_all())
            self._end_sentence(u)
            done = int(round(win_end * MODEL_RATE))
            u.forced_to = max(u.forced_to, done)
            for e in [e for e in u.ends if e <= done]:
                del u.ends[e]
            u.held_from = None  # (the joined utterances' words are final)
            u.pause_ends = {p: e for p, e in u.pause_ends.items() if e > done}
            if u.force_at is not None and u.force_at <= done:
                u.force_at, u.force_short = None, False
            self._slide_window(u)
        elif kind == Kind.FORCED:
            self._end_utterance(u.buffer.commit_all())
            u.forced_to = max(u.forced_to, int(round(win_end * MODEL_RATE)))
            # (a finalize that came while it was out forces more: its mark stays for the next)
            if u.force_at is not None and u.force_at <= int(round(win_end * MODEL_RATE)):
                u.force_at, u.force_short = None, False
            self._slide_window(u)
        elif kind == Kind.FULL:
            # a full window commits what it holds up to its last ``stall_keep_ms``; it moves
            # past audio without committed words only when a careful decode found none there
            committed = u.buffer.commit_until(keep_from, move_on=True)
            self._emit_final(committed, False)
            self._slide_window(u, 0 if committed else int(keep_from * MODEL_RATE))
        elif kind == Kind.CHECK:
            self._commit_check(u, win_end)
        elif kind == Kind.STEP and self.judge.degenerate(result):
            # Its words before the loop are shown, but they are no opinion to agree with: two
            # such decodes in a row often loop the same way ("biscuit does he know that he's
            # good does he know that he's good ...", twice, after the final "does he know that")
            u.buffer.forget()
            if self.opt.loop_asks_check and busy_step and not unsure and self._agrees:
                self._check_after_loop(u, win_end)
            self._slide_window(u)
        else:
            if duration * 1000 >= self.opt.commit_after_ms and not unsure and self._agrees:
                until = win_end - self.opt.holdback_ms / 1000
                alone = win_end - self.opt.busy_alone_ms / 1000 if (
                    busy_step and self.opt.busy_alone_ms) else float("-inf")
                agreed = u.buffer.commit_agreed(until, self.opt.commit_probability,
                                                win_end - self.opt.unsure_wait_ms / 1000,
                                                u.checked_to, self._stuck_until(win_end),
                                                alone_until=alone)
                self._emit_final(agreed, eou=False)
                u.check_until = u.buffer.undecided_end
            else:
                u.buffer.commit_until(-1.0)  # too little audio to trust: remember, commit nothing
            self._slide_window(u)
        self._update_partial(u)

    def _commit_check(self, u: Run, win_end: float) -> None:
        """A careful decode asked for ``check_until`` (the doubted or disagreed word, or the
        first word before a loop): its words up to there, and the word it hears in that
        place, are final."""
        at = u.check_until or 0.0
        decided = u.buffer.commit_until(win_end - self.opt.holdback_ms / 1000,
                                        starting_before=at)
        if self.opt.check_decides_waited:
            # ... and so is every word after it that has as much speech after it in this
            # decode as a doubted word waits for: the next doubted word waited for a step and
            # a check of its own, one after the other (en-03: "this", "I", "want")
            wait = max(self.opt.unsure_wait_ms, self.opt.holdback_ms)
            decided += u.buffer.commit_until(win_end - wait / 1000)
        self._emit_final(decided, False)
        u.check_until = None
        u.checked_to = max(u.checked_to, at)
        self._slide_window(u)

    def _stuck_until(self, win_end: float) -> float:
        return win_end - self.opt.stuck_wait_ms / 1000 if self.opt.stuck_wait_ms else float("-inf")

    def _draft_partial(self, u: Run, req: DecodeRequest, r: DecodeResult, win_end: float
                       ) -> None:
        words, _ = self.judge.accepted_words(req, r, win_end, u.buffer.committed_end,
                                        u.buffer.committed)
        words = self._unsaid(words) if self._voiced(u) else []
        end = int(round(win_end * MODEL_RATE))
        if end - u.main_to >= self.opt.samples(self.opt.main_step_ms):
            u.main_for = end
        text = join_words(cjk_marks(words, self._committed_text))
        if words and text != self._partial:
            self._partial = text
            self._events.append(Partial(self.segment, text, words[0].start, words[-1].end))

    def _in_script(self, req: DecodeRequest, r: DecodeResult, u: Run) -> DecodeResult:
        """Words of unspaced scripts as one unit per character, spaced by the text rules and,
        for Chinese, in the session's script: before agreement, so that two decodes writing
        one character in two scripts still agree."""
        if not any(is_unspaced(c) for w in r.words for c in w.word):
            return r
        lang = req.language if req.language not in (None, "auto") else r.language
        script = caption_script(lang, self.zh_script) or "as_is"
        # (a new run's first word follows the last final: a Latin word after "…用Python" is
        # spaced from it, not glued as if Whisper had split one word across two finals)
        before = u.buffer.committed[-1].word if u.buffer.committed else self._committed_text
        return replace(r, words=tuple(convert_words(split_words(r.words), script, before)))

    def _waits_for_language(self, u: Run, end: int) -> bool:
        """An utterance too short to tell its language (language=auto, still unsure) is not
        finalised alone while the next may still join it: Whisper hears "他称" (0.4 s) as
        Korean, and the words after it as Chinese."""
        o = self.opt
        return (self._detect_pending and self.language == "auto"
                and end - u.window_start < o.samples(o.detect_ms)
                and end > self._settled and self.samples_in - end <= o.samples(o.join_gap_ms))

    def _note_language(self, req: DecodeRequest, r: DecodeResult) -> bool:
        """language=auto (or the model's own): the first window long enough, where Whisper is
        sure enough, fixes the session's language until the next long pause. Until then
        agreement commits nothing: a window in a misheard language only shows a partial.
        Returns whether the language is still unsure."""
        if not self._detect_pending or not r.language or req.language not in (None, "auto"):
            return False
        ms = req.duration * 1000
        if ms < self.opt.detect_ms and (ms < self.opt.detect_min_ms
                                        or r.language_probability < self.opt.detect_sure):
            return True
        self._detect_pending = False
        if self.detected_language not in (None, r.language):
            self._committed_text = ""  # another language now: no prompt in the last one
        self.detected_language = r.language
        if self.language == "auto":
            self._events.append(Language(r.language, round(r.language_probability, 3), req.offset,
                                         caption_script(r.language, self.zh_script)))
        return False

    def _slide_window(self, u: Run, at_least: int = 0) -> None:
        """Start the window at the first committed word of the last ``overlap_ms`` (those words
        become the next decode's prefix; the audio before them leaves the window), and never
        before ``at_least``."""
        start = max(u.window_start, at_least, self._overlap_start(u, self.opt.overlap_ms))
        start = min(max(start, u.start), u.decoded_to)
        if start > u.window_start:
            u.window_start = start
            u.trim(self._context_start(u, self.opt.careful_context_ms))

    @staticmethod
    def _overlap_start(u: Run, ms: int) -> int:
        """Where a window holding the last ``ms`` of committed speech starts: 50 ms before its
        first committed word (0 when nothing is committed)."""
        committed = u.buffer.committed
        if not committed:
            return 0
        end = u.buffer.committed_end
        i = len(committed) - 1
        while i > 0 and end - committed[i - 1].start <= ms / 1000:
            i -= 1
        return int((committed[i].start - 0.05) * MODEL_RATE)

    def _check_after_loop(self, u: Run, win_end: float) -> None:
        """A looping step is no opinion, and steps that loop every other time never give two
        in a row: once the first word its hypothesis heard has waited ``unsure_wait_ms``, a
        careful decode (beam search, temperature fallback) decides it (and, with
        ``check_decides_waited``, every word that waited as long).
        en-05 under load: steps ending in a pause looped "One person was killed. One person
        was killed ..." in 4 of 7, and the sentence was final 4.5 s after its first word."""
        pending = u.buffer.pending
        if pending and max(u.checked_to, u.buffer.committed_end) < pending[0].end <= (
                win_end - self.opt.unsure_wait_ms / 1000):
            u.check_until = pending[0].end

    # -- events --------------------------------------------------------------------------
    def events(self) -> list[Message]:
        """Caption events produced since the last call, in order."""
        out, self._events = self._events, []
        self._answer = None
        if self._asked:
            self._answer_finalizes(out)
        return out

    def answers(self, msg: Message) -> int:
        """How many ``finalize`` calls ``msg``, of the last :meth:`events`, answers: the end
        event (a final with ``eou``, or ``utterance_end``) after which everything heard
        before them is final. Deepgram marks it ``from_finalize``, and a voice agent ends
        its turn there: the first end after the ``Finalize`` was the answer before, and when
        decoding lagged that was an earlier utterance's, with the turn's words still to come."""
        return self._answer[1] if self._answer is not None and self._answer[0] is msg else 0

    def _answer_finalizes(self, out: list[Message]) -> None:
        ends = [m for m in out if isinstance(m, UtteranceEnd) or (isinstance(m, Final) and m.eou)]
        n = 0
        while n < len(self._asked) and self._final_through(self._asked[n]):
            n += 1  # (marks in order: a later one final through means every earlier one is)
        if ends and n:
            self._answer, self._asked = (ends[-1], n), self._asked[n:]

    def _final_through(self, asked: tuple[int, Run | None, int]) -> bool:
        """Every utterance heard before a ``finalize`` (``asked``) is final: none has an end
        at or before it still to decode, nor a forced end; and the run it forced, where a
        later finalize's mark replaced its own (``force_at`` holds the latest), was decoded
        past its mark (``forced_to``)."""
        sample, forced, mark = asked
        return all(all(e > sample for e in u.ends) and (
            u.force_at is None or u.force_at > sample) and (
            u is not forced or u.force_at is None or u.forced_to >= mark) for u in self._utts)

    def said(self, seconds: float, last: Word | None = None) -> None:
        """The stream's first ``seconds`` were made final before it began: a speaker back on
        a server that lost its stream (restarted; a Ray replica gone) sends them again as
        context, so that the word after them is heard whole. Their words are decoded and
        kept as context, never said again: a word is said if its middle lies after them.
        ``last``: the channel's last final word, on this stream's clock, where the channel
        goes on; a word of the same text that overlaps it in time is that word, not said
        again (a stream cut mid-word, by a drop or a drain, made final the part it heard:
        "most if not" then "not from all")."""
        self._said = self._last_word_end = max(0.0, seconds)
        self._said_last = last

    @property
    def said_seconds(self) -> float:
        return self._said

    def _unsaid(self, words: list[Word]) -> list[Word]:
        """The words to say: those whose middle lies after the said seconds, none starting in
        them (a channel that goes on has its finals up to there)."""
        if not self._said:
            return words
        return [replace(w, start=max(w.start, self._said)) for w in words
                if (w.start + w.end) / 2 >= self._said and not self._was_last(w)]

    def _was_last(self, w: Word) -> bool:
        """(Within ``SEAM_SLACK_S`` of it: the new stream's aligner may put the word heard
        whole a little after the end of the one made final, 70 ms after a Ray redeploy.)"""
        last = self._said_last
        return last is not None and w.start < last.end + SEAM_SLACK_S and w.end > last.start \
            and unit_key(w.word) == unit_key(last.word)

    def _emit_final(self, words: list[Word], eou: bool) -> None:
        if not words:
            return
        if self.opt.word_times_in_speech:
            words = self._spans.clamp(words)
            self._spans.forget_before(words[0].start - 1.0)
        text = join_words(words)  # (Whisper's, for later decodes' context)
        new = self._unsaid(words)
        if new:
            shown = cjk_marks(new, self._committed_text)
            self._events.append(Final(self.segment, join_words(shown), new[0].start,
                                      new[-1].end, tuple(shown), eou))
            self._last_word_end = new[-1].end
            self.segment += 1
        elif eou:  # (an utterance of words said before: its end is still said)
            self._events.append(UtteranceEnd(self._last_word_end))
        self._partial = ""
        self._committed_text = join_texts([self._committed_text, text])[-4 * self.opt.prompt_chars :]

    def _end_utterance(self, words: list[Word]) -> None:
        """The utterance's last words, with ``eou``; or, when agreement already made every
        word final, ``utterance_end``: a voice agent waits for one or the other to answer
        (Deepgram's ``speech_final``, a ``Finalize``'s reply), and got neither."""
        if words:
            self._emit_final(words, eou=True)
        else:
            self._events.append(UtteranceEnd(self._last_word_end))

    def _end_sentence(self, u: Run) -> None:
        """The VAD ended the utterance: its last word ends a sentence in the context of later
        decodes (the window's forced prefix and the prompt), full stop or not. Whisper
        continues the style of the text it is given, and one utterance written without its
        full stop ("Cajun loves China") made it write a child's whole reading unpunctuated
        and worse. The finals keep what Whisper wrote."""
        c = u.buffer.committed
        last = c[-1].word.strip() if c else ""
        if not self.opt.end_sentences or not last[-1:].isalnum() or is_unspaced(last[-1]):
            return
        c[-1] = replace(c[-1], word=c[-1].word.rstrip() + ".")
        if self._committed_text.endswith(last):
            self._committed_text += "."

    def _update_partial(self, u: Run) -> None:
        pending = self._unsaid(u.buffer.pending)
        text = join_words(cjk_marks(pending, self._committed_text))
        if text == self._partial:
            return
        self._partial = text
        if pending:
            self._events.append(Partial(self.segment, text, pending[0].start, pending[-1].end))
        else:
            t = max(u.buffer.committed_end, self._said)
            self._events.append(Partial(self.segment, "", t, t))
