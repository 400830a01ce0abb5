"""Where the VAD heard speech, to keep final words' times out of the silences between
utterances.

Utterances close together, or a backlog of them (a file sent flat out), are decoded as one
window with the pauses between them as digital silence, and Whisper's word alignment spreads
words over those pauses: jfk sent flat out gave "ask" 2.26-3.88 s where it is said at
3.62-3.86 s, so a pause of 1.4 s vanished from the finals, Deepgram's ``utterances`` made one
utterance of the whole speech, and subtitles showed words over silence. Only the times sent
move (the words a session agrees on keep Whisper's); a word never grows, so finals still never
overlap. Pure: samples in, words out.
"""

from __future__ import annotations

from dataclasses import replace

from .audio import MODEL_RATE
from .wire import Word

__all__ = ["SpeechSpans"]

# a word's edge this far into a silence is the aligner's usual slack, not a pause spread over
SLACK_S = 0.1
# no word is said for longer: a longer one is stretched over speech Whisper never wrote
MAX_WORD_S = 2.0
_SENTENCE_ENDS = tuple(".?!。？！")
_CLOSING_QUOTES = "\"'”’」』》»)）"  # (a sentence may end inside them: 'am."')


class SpeechSpans:
    """The stream's utterances as the VAD heard them: (start, end) in seconds, the last one
    open (end None) while it goes on."""

    def __init__(self) -> None:
        self.spans: list[list[float | None]] = []

    def start(self, sample: int) -> None:
        self.spans.append([sample / MODEL_RATE, None])

    def end(self, spoken_to: int) -> None:
        if self.spans and self.spans[-1][1] is None:
            self.spans[-1][1] = spoken_to / MODEL_RATE

    def forget_before(self, t: float) -> None:
        """Spans that ended before stream second ``t`` (what is final already) are done."""
        while len(self.spans) > 1 and self.spans[0][1] is not None and self.spans[0][1] < t:
            self.spans.pop(0)

    def _silence_at(self, t: float) -> tuple[float, float] | None:
        """The silence between two utterances that holds ``t`` (past ``SLACK_S`` from both),
        as (previous end, next start)."""
        for (_, end), (start, _) in zip(self.spans, self.spans[1:]):
            if end is not None and end + SLACK_S < t < start - SLACK_S:
                return end, start  # type: ignore[return-value]
        return None

    def clamp(self, words: list[Word]) -> list[Word]:
        """``words`` with an edge deep in a silence moved to where the speech beside it is:
        a start to the next utterance's start, an end to the previous one's end, but a
        sentence's last word that starts in a silence keeps to that side of it (flat out, "am."
        said at 2.95 s was stretched over the pause to 4.12 s and moved after it, and
        Deepgram's utterances split "than I" / "am. And you know"); and none
        longer than ``MAX_WORD_S``: the aligner stretches a word over speech Whisper never
        wrote (English in a stream decoded as Chinese: "现" at 9.81-22.83 s, a subtitle cue
        of 13 s). A sentence's last word keeps its start (a decode that stopped there), any
        other its end (the first word after what it left out), as Whisper's own timing
        truncates long words at sentence boundaries."""
        out = []
        for w in words:
            start, end = w.start, w.end
            ends_sentence = w.word.rstrip().rstrip(_CLOSING_QUOTES).endswith(_SENTENCE_ENDS)
            gap = self._silence_at(start)
            if gap is not None and gap[1] < end:
                if ends_sentence:  # said before the silence: it stays on this side of it
                    end = start + SLACK_S
                else:
                    start = gap[1]
            gap = self._silence_at(end)
            if gap is not None and gap[0] > start:
                end = gap[0]
            if end - start > MAX_WORD_S:
                if ends_sentence:
                    end = start + MAX_WORD_S
                else:
                    start = end - MAX_WORD_S
            out.append(w if (start, end) == (w.start, w.end) else replace(w, start=start, end=end))
        return out
