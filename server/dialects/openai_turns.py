"""OpenAI realtime's conversation items, kept apart from the socket (sans-I/O).

OpenAI's order per item is ``committed``, then ``delta``..., then ``completed``, once each.
Our session's finals come in time order but do not know about items: under backlog one final
spans several turns, a client's commit may fall inside a word, and a ``clear`` discards audio
whose words are still being decoded. :class:`Turns` takes the stream's VAD marks, the client's
commits and clears and the session's finals (all in stream seconds) and returns the OpenAI
events they make, so the rules are tested with numbers (``tests/test_openai_turns.py``) and
the connection (:mod:`.openai_realtime`) only parses and writes.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass
from typing import Any

from .. import wire
from ..agreement import join_words
from ..text import append_piece, glued

__all__ = ["Item", "Turns", "new_id"]

Event = tuple[str, dict[str, Any]]  # (OpenAI event type, its fields but type and event_id)


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(10)


def _mid(w: wire.Word) -> float:
    return (w.start + w.end) / 2


@dataclass
class Item:
    """One turn, from the VAD's start or a commit to its completion. Before ``committed`` it
    is open (server_vad: speech under way): its final words' text waits in ``held``, since
    OpenAI sends no delta before the item's ``committed``."""

    id: str
    start: float | None = None  # seconds of stream: the VAD's (server_vad) or the commits'
    end: float | None = None
    committed: bool = False
    held: str = ""  # the delta of words final before ``committed``
    text: str = ""

    def add(self, words: list[wire.Word]) -> str:
        """Append final words; the delta that extends the transcript by them (a word split
        across two finals stays whole: :func:`.text.glued`)."""
        new = append_piece(self.text, join_words(words), glued(words))
        delta, self.text = new[len(self.text):], new
        return delta


class Turns:
    """The items of one session. ``vad``: server_vad turns (our VAD opens and closes them, a
    commit ends the one under way); else manual turns, one per commit, of the audio since the
    last commit or clear. Each method returns the events it makes, in order."""

    def __init__(self, vad: bool = True) -> None:
        self.vad = vad
        # turns not yet complete, in stream order: server_vad's from the VAD (the last may be
        # open), manual ones from the commits
        self.items: deque[Item] = deque()
        self.last_committed: str | None = None
        self.cut = 0.0  # where the uncommitted buffer starts (the last commit or clear), s
        self.loose: list[wire.Word] = []  # manual turns: final words not yet committed
        self.dropped: list[tuple[float, float]] = []  # stretches a clear discarded, s
        self._out: list[Event] = []

    def _emit(self, kind: str, **body: Any) -> None:
        self._out.append((kind, body))

    def _events(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    # -- the client's and the VAD's marks ----------------------------------------------------
    def speech_started(self, t: float) -> list[Event]:
        if self.vad:
            item = Item(new_id("item_"), start=t)
            self.items.append(item)
            self._emit("input_audio_buffer.speech_started", item_id=item.id,
                       audio_start_ms=int(t * 1000))
        return self._events()

    def speech_stopped(self, t: float) -> list[Event]:
        item = self.open()
        if self.vad and item is not None:  # (a turn committed or cleared has no VAD end)
            item.end = self.cut = t
            self._emit("input_audio_buffer.speech_stopped", item_id=item.id,
                       audio_end_ms=int(t * 1000))
            self._committed(item)
        return self._events()

    def commit(self, now: float) -> list[Event]:
        """The client's commit at stream time ``now``. server_vad: the turn under way ends
        here (the session is to finalize; its end completes the turn). Manual: a new turn of
        the audio since the last commit or clear, with the final words heard in it."""
        if self.vad:
            item = self.open()
            if item is None:  # (the VAD heard no speech since the last turn)
                item = Item(new_id("item_"), start=self.cut)
                self.items.append(item)
            item.end = self.cut = now
            self._committed(item)
            return self._events()
        item = Item(new_id("item_"), start=self.cut, end=now)
        self.cut = now
        self.items.append(item)
        self._committed(item)
        mine = [w for w in self.loose if _mid(w) < now]
        self.loose = [w for w in self.loose if _mid(w) >= now]
        self._deliver(item, mine)
        return self._events()

    def clear(self, now: float) -> list[Event]:
        """Discard the uncommitted audio: its words are dropped as they become final, and an
        open turn is no turn."""
        self.dropped.append((self.cut, now))
        self.loose = []
        item = self.open()
        if item is not None:
            self.items.remove(item)
        self.cut = now
        self._emit("input_audio_buffer.cleared")
        return self._events()

    def to_manual(self, now: float) -> tuple[list[Event], bool]:
        """``turn_detection: null``: the turn under way ends here, as a commit would end it,
        and from here on each commit makes a turn. Also says whether there was one (the
        session is then to finalize: its words come as finals after the switch, and complete
        the turn once nothing heard is left to decode)."""
        item = self.open()
        if item is not None:
            item.end = self.cut = now
            self._committed(item)
        self.vad = False
        return self._events(), item is not None

    # -- the session's output ----------------------------------------------------------------
    def final(self, words: list[wire.Word], eou: bool) -> list[Event]:
        """Each final word goes to the turn it was spoken in, by time; a word past the head
        turn completes it (with no words: it was noise). Manual turns hold words spoken after
        the last commit until the next one."""
        if words:  # (finals come in time order: a stretch they passed is done with)
            self.dropped = [(a, b) for a, b in self.dropped if b > _mid(words[0])]
        words = [w for w in words if not any(a <= _mid(w) < b for a, b in self.dropped)]
        run: list[wire.Word] = []
        for w in words:
            if self.vad and self._resumed(w):
                # speech a client's commit or clear cut, going on: the VAD, whose end has
                # passed, opens and closes no turn for it, so it is a committed turn at once
                if run:
                    self._deliver(self.items[0], run)
                run = []
                self.items.append(item := Item(new_id("item_"), start=w.start, end=w.end))
                self._committed(item)
            while self._past_head(w):
                self._deliver(self.items[0], run)
                run = []
                self._complete()
            if self.items:
                run.append(w)
            else:
                self.loose.append(w)
        if self.items:
            self._deliver(self.items[0], run)
        if self.vad and eou and words:
            self._complete(reached=words[-1].end)
        return self._events()

    def utterance_end(self, end: float) -> list[Event]:
        """An utterance whose words were all final already ended at ``end`` (as an eou)."""
        if self.vad:
            self._complete(reached=end)
        return self._events()

    def settle(self, flushed: bool) -> list[Event]:
        """A committed turn is complete when nothing heard is left to decode (also when it
        was noise and had no words)."""
        while flushed and self.items and self.items[0].committed \
                and self.items[0].end is not None:
            self._complete()
        return self._events()

    # -- rules -------------------------------------------------------------------------------
    def open(self) -> Item | None:
        """server_vad: the turn whose speech started and is not committed yet."""
        last = self.items[-1] if self.items else None
        return last if last is not None and not last.committed else None

    def _resumed(self, w: wire.Word) -> bool:
        last = self.items[-1] if self.items else None
        return last is None or (last.committed and _mid(w) >= (last.end or 0.0))

    def _past_head(self, w: wire.Word) -> bool:
        """``w`` was spoken after the head turn, which is committed (else it is still
        going). Manual turns end at their commit; server_vad's at the middle of the pause
        between the head and the next (or at the one end of it known)."""
        if not self.items or not self.items[0].committed:
            return False
        head = self.items[0]
        if not self.vad:
            return head.end is not None and _mid(w) >= head.end
        if len(self.items) < 2:
            return False
        known = [t for t in (head.end, self.items[1].start) if t is not None]
        return bool(known) and _mid(w) >= sum(known) / len(known)

    def _committed(self, item: Item) -> None:
        item.committed = True
        self._emit("input_audio_buffer.committed", item_id=item.id,
                   previous_item_id=self.last_committed)
        self.last_committed = item.id
        if item.held:
            held, item.held = item.held, ""
            self._emit("conversation.item.input_audio_transcription.delta", item_id=item.id,
                       content_index=0, delta=held)

    def _complete(self, reached: float | None = None) -> None:
        """The head turn is complete (never one not committed: its words may still come).
        ``reached``: where the utterance end that says so lies; an end before the head's start
        (a commit's end, then the VAD's end of the same speech) is an earlier turn's."""
        if not self.items or not self.items[0].committed:
            return
        if reached is not None and reached < (self.items[0].start or 0.0):
            return
        item = self.items.popleft()
        seconds = round((item.end or 0.0) - (item.start or 0.0), 3) if item.end else 0.0
        self._emit("conversation.item.input_audio_transcription.completed", item_id=item.id,
                   content_index=0, transcript=item.text,
                   usage={"type": "duration", "seconds": seconds})

    def _deliver(self, item: Item, words: list[wire.Word]) -> None:
        delta = item.add(words)
        if not delta:
            return
        if not item.committed:
            item.held += delta
            return
        self._emit("conversation.item.input_audio_transcription.delta", item_id=item.id,
                   content_index=0, delta=delta)
