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
        # the VAD's state, followed in manual mode too: a switch to server_vad, or speech a
        # commit cut, needs to know whether an utterance is under way (start) or ended (stop)
        self.speaking_since: float | None = None
        self.stopped_at: float | None = None
        # the manual buffer made a turn by a switch to server_vad while the VAD was quiet: the
        # next VAD start opens it instead of a new one (its words are in it already)
        self._waiting: Item | None = None
        # speech a commit or clear cut that the VAD ended before any of its words was final
        # (start, end), while no turn was open: its words' own turn (``_before_head``)
        self.unclaimed: tuple[float, float] | None = None
        self._out: list[Event] = []

    def _emit(self, kind: str, **body: Any) -> None:
        self._out.append((kind, body))

    def _events(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    # -- the client's and the VAD's marks ----------------------------------------------------
    def speech_started(self, t: float) -> list[Event]:
        self.speaking_since = t
        if not self.vad:
            return self._events()
        running = self._running()
        if running is not None:  # (its VAD end was never heard: it ended before this start)
            running.end = t
        item = self._waiting if self._waiting is not None and self.open() is self._waiting \
            else None
        self._waiting = None
        if item is None:
            item = Item(new_id("item_"), start=t)
            self.items.append(item)
        self._emit("input_audio_buffer.speech_started", item_id=item.id,
                   audio_start_ms=int(t * 1000))
        return self._events()

    def speech_stopped(self, t: float) -> list[Event]:
        self.speaking_since, self.stopped_at = None, t
        item = self.open()
        if not self.vad:
            return self._events()
        # (an end at or before the open turn's start is an earlier utterance's: a manual
        # commit's, heard after a switch to server_vad made the buffer a turn)
        if item is not None and t > (item.start or 0.0):
            item.end = self.cut = t
            self._emit("input_audio_buffer.speech_stopped", item_id=item.id,
                       audio_end_ms=int(t * 1000))
            self._committed(item)
        elif item is None and (running := self._running()) is not None:
            # the VAD's end of speech a commit or clear cut: that turn, committed at its
            # first word, ends here (no event: OpenAI's stopped would follow its committed)
            running.end = self.cut = t
        elif item is None and t > self.cut:
            # ... and before its first word is final (decoding behind): its words, when they
            # come, are a turn of their own, before the next one the VAD may start meanwhile
            self.unclaimed = (self.cut, t)
        return self._events()

    def commit(self, now: float) -> list[Event]:
        """The client's commit at stream time ``now``. server_vad: the turn under way ends
        here (the session is to finalize; its end completes the turn). Manual: a new turn of
        the audio since the last commit or clear, with the final words heard in it."""
        if self.vad:
            running = self._running()
            if running is not None:
                # speech a commit or clear cut, committed at its first word: this commit ends
                # it (its committed went out then; a second item would split one turn)
                running.end = self.cut = now
                return self._events()
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
        running = self._running()
        if running is not None:  # (committed already: it keeps the words it has)
            running.end = now
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
        elif (item := self._running()) is not None:  # (committed at its first word)
            item.end = self.cut = now
        self.vad = False
        self._waiting = None
        return self._events(), item is not None

    def to_vad(self, now: float) -> list[Event]:
        """``turn_detection: server_vad`` after manual turns. OpenAI's uncommitted buffer is
        part of the next VAD turn: the audio since the last commit or clear (its final words,
        waiting in ``loose``, and those still decoding) opens a turn here, which the VAD's
        end commits; it was never handed to a turn, and every word of it was lost. Speech
        under way is that turn's (started here); else the next VAD start opens it."""
        if self.vad:
            return self._events()
        self.vad = True
        if now <= self.cut and not self.loose:
            return self._events()  # (no buffer: the next VAD start opens a turn as ever)
        item = Item(new_id("item_"), start=self.cut)
        self.items.append(item)
        self._deliver(item, self.loose)  # (held: no delta before its committed)
        self.loose = []
        if self.speaking_since is None:
            self._waiting = item
        else:
            self._emit("input_audio_buffer.speech_started", item_id=item.id,
                       audio_start_ms=int(max(self.cut, self.speaking_since) * 1000))
        return self._events()

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
            if self.vad and (self._resumed(w) or self._before_head(w)):
                if run:
                    self._deliver(self.items[0], run)
                run = []
                self._resume(w)
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

    def _running(self) -> Item | None:
        """server_vad: the turn of speech a commit or clear cut that is still going on
        (committed at its first word, its end not known yet)."""
        last = self.items[-1] if self.items else None
        return last if last is not None and last.committed and last.end is None else None

    def _resumed(self, w: wire.Word) -> bool:
        """``w`` lies past every turn: speech a commit or clear cut, going on. (A turn of
        such speech still running takes it: it once ended at its first word, so each next
        word opened a turn of its own.)"""
        last = self.items[-1] if self.items else None
        return last is None or (last.committed and last.end is not None
                                and _mid(w) >= last.end)

    def _before_head(self, w: wire.Word) -> bool:
        """``w`` was said after the last cut and before the turn under way began: speech a
        commit cut, whose words came after the VAD had ended it and started the next turn
        (decoding behind). They went into that next turn."""
        head = self.items[0] if self.items else None
        a, b = self.unclaimed or (0.0, 0.0)
        return head is not None and not head.committed and a <= _mid(w) < b

    def _resume(self, w: wire.Word) -> None:
        """Speech a client's commit or clear cut, going on from ``w``: the VAD opens no turn
        for it (its start has passed), so it is a committed turn at once, which runs until
        the VAD's end (``speech_stopped``; here if that end was already heard), the next
        VAD start, or the client's next commit, clear or switch to manual turns."""
        if self._before_head(w):  # (before the turn under way: it goes first)
            item = Item(new_id("item_"), start=w.start, end=self.unclaimed[1])
            self.unclaimed = None
            self.items.appendleft(item)
        else:
            ended = self.speaking_since is None and self.stopped_at is not None \
                and self.stopped_at > w.start
            item = Item(new_id("item_"), start=w.start, end=self.stopped_at if ended else None)
            self.items.append(item)
            self.unclaimed = None  # (claimed)
        self._committed(item)

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
        if reached is not None and self.items[0].end is None:
            return  # (the VAD has not ended the speech this turn runs in: a finalize's eou)
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
