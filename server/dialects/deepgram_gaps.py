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
    quiet_from: float | None = None  # the last word's end, once the utterance ended
    speaking: bool = False  # the VAD is inside an utterance
    starts: list[float] = field(default_factory=list)  # VAD speech starts since quiet_from
    final_due: bool = False
    end_due: bool = False
    spoke: bool = False  # words went out since the last UtteranceEnd

    def words(self) -> None:
        self.spoke = True

    def speech(self, t: float) -> None:
        self.speaking = True
        self.starts.append(t)

    def silence(self) -> None:
        self.speaking = False

    def ended(self, last_word_end: float) -> None:
        """The session ended an utterance (its VAD, or a finalize) after words ending here."""
        self.quiet_from = last_word_end
        self.starts = [t for t in self.starts if t > last_word_end]
        self.final_due = self.endpointing is not None
        self.end_due = self.utterance_end is not None and self.spoke

    def _gap(self, now: float) -> tuple[float, bool]:
        """The silence after the last word so far, and whether it is over."""
        assert self.quiet_from is not None
        if self.starts:  # speech resumed: the silence was this long
            return self.starts[0] - self.quiet_from, True
        if self.speaking:  # a finalize inside speech that goes on: no silence at all
            return -1.0, True
        return now - self.quiet_from, False

    def ripe(self, now: float) -> bool:
        """Whether :meth:`due` would say something now (it does not change anything)."""
        if self.quiet_from is None or not (self.final_due or self.end_due):
            return False
        gap, _ = self._gap(now)
        return (self.final_due and gap >= (self.endpointing or 0.0)) or (
            self.end_due and gap >= (self.utterance_end or 0.0))

    def due(self, now: float) -> tuple[bool, bool]:
        """Whether ``speech_final`` and ``UtteranceEnd`` are to be said now (each once)."""
        if self.quiet_from is None or not (self.final_due or self.end_due):
            return False, False
        gap, over = self._gap(now)
        final = self.final_due and gap >= (self.endpointing or 0.0)
        end = self.end_due and gap >= (self.utterance_end or 0.0)
        if final or over:
            self.final_due = False
        if end or over:
            self.end_due = False
        if end:
            self.spoke = False
        return final, end
