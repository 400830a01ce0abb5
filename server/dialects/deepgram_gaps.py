"""When a Deepgram stream says an utterance ended: ``speech_final`` once ``endpointing`` ms of
silence follow the last word, ``UtteranceEnd`` once ``utterance_end_ms`` do.

Our VAD ends utterances after its own hangover (500 ms), and that is where the session decodes
an utterance's end. A client that asks for a longer silence (LiveKit and Pipecat users raise
them so that a pause inside a sentence does not end the user's turn) gets it here, by the
stream's clock, instead of a longer VAD hangover: that put seconds of silence inside windows,
and Whisper stretched words over them and invented some. Speech that resumes sooner means the
pause was no end. Pure: times in, verdicts out (stream seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Gaps"]


@dataclass
class Gaps:
    endpointing: float | None  # seconds of silence for speech_final (None: never)
    utterance_end: float | None  # ... for UtteranceEnd (None: never)
    quiet_from: float | None = None  # the last word's end, once its utterance ended
    speaking: bool = False  # the VAD is inside an utterance
    # VAD starts since ``quiet_from``: speech or noise, as the words (or none) will tell
    starts: list[float] = field(default_factory=list)
    final_due: bool = False
    end_due: bool = False
    heard: bool = False  # words since the last utterance end
    spoke: bool = False  # words since the last UtteranceEnd
    last_word_end: float = 0.0
    # the VAD's utterance went on past the last end (a finalize's): what it heard after the
    # answer's last word is speech whose words are still to come, or, if the utterance ends
    # with none, noise
    going_on: bool = False

    def words(self, start: float, end: float) -> None:
        """A final with words: the silence before them is over (what it reached before them
        was said when it did), and they are the utterance's latest. The VAD starts before
        their end were theirs; one after is speech still to be decoded (audio sent faster than
        real time is heard ahead of the decoder), and the silence before it ends there."""
        if self.quiet_from is not None and start >= self.quiet_from:
            self.final_due = self.end_due = False
        self.starts = [t for t in self.starts if t > end]
        self.heard = self.spoke = True
        self.going_on = False
        self.last_word_end = max(self.last_word_end, end)

    def speech(self, t: float) -> None:
        self.speaking = True
        self.starts.append(t)

    def silence(self) -> None:
        self.speaking = False

    def ended(self, goes_on: bool = False) -> None:
        """The session ended an utterance (its VAD, or a finalize). After words, the silence
        after the last one starts to count; without (a cough, a breath, a finalize with
        nothing left) there was no speech, and the silence before goes on. ``goes_on``: the
        end answered a finalize while speech after it was still to be decoded (the session
        says so when it makes the answer)."""
        if not self.heard:
            if self.going_on:  # (the utterance a finalize answered ended with no more words)
                self.going_on = False
            else:
                self.starts = self.starts[1:]  # its own start: later ones are speech to come
            return
        self.heard = False
        self.quiet_from = self.last_word_end
        self.starts = [t for t in self.starts if t > self.quiet_from]
        # a finalize inside an utterance (jfk finalized at 6.5 s): "For you." was still being
        # decoded when 1.4 s of "silence" after "can do." said speech_final and UtteranceEnd
        # (speech the VAD started after the last word has its own start, above)
        # (not whether the VAD hears speech when the answer is written: a decoder behind the
        # VAD wrote it after the VAD's end, and "For you." came after the silence was said;
        # nor whether it did at the Finalize: one end decode of the whole utterance then
        # answered it, and no end came after to say the silence at all)
        self.going_on = goes_on and not self.starts
        self.final_due = self.endpointing is not None
        self.end_due = self.utterance_end is not None and self.spoke

    def _gap(self, now: float) -> float:
        """The silence after the last word so far: up to a VAD start after it (until the
        words tell whether that was speech), none while a finalize's speech goes on."""
        assert self.quiet_from is not None
        if self.going_on:
            return -1.0
        if self.starts:
            return self.starts[0] - self.quiet_from
        if self.speaking:
            return -1.0
        return now - self.quiet_from

    def _fires(self, now: float) -> tuple[bool, bool]:
        if self.quiet_from is None or not (self.final_due or self.end_due):
            return False, False
        gap = self._gap(now)
        return (self.final_due and gap >= (self.endpointing or 0.0),
                self.end_due and gap >= (self.utterance_end or 0.0))

    def ripe(self, now: float) -> bool:
        """Whether :meth:`due` would say something now (it does not change anything)."""
        return any(self._fires(now))

    def due(self, now: float) -> tuple[bool, bool]:
        """Whether ``speech_final`` and ``UtteranceEnd`` are to be said now (each once)."""
        final, end = self._fires(now)
        self.final_due = self.final_due and not final
        self.end_due = self.end_due and not end
        if end:
            self.spoke = False
        return final, end
