"""Captions in a terminal as flowing text, the way a reader wants them.

Finals are appended to the running line and wrapped at the terminal's width; a line ends after a
sentence or before speech that follows a pause. On a terminal the partial is drawn dim after the
running line and redrawn in place. ``--lines`` gives the older form, one final per line.

:class:`Flow` is pure (text in, the characters to write out), so the layout is tested without a
terminal; :class:`CaptionPrinter` feeds it the server's messages and writes what it returns.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import unicodedata
from typing import TextIO

from whisperwire.server import wire
from whisperwire.server.text import closes, glued, is_unspaced, needs_space, split_units

from .connect import DEFAULT_URL, server_error_sentence

__all__ = ["CaptionPrinter", "Flow", "flow_lines"]

SENTENCE_ENDS = (".", "?", "!", "…", "。", "？", "！")
PAUSE_S = 1.0  # silence before a final that starts a new line
ERASE = "\r\033[K"
DIM, RESET = "\033[2m", "\033[0m"


def cells(text: str) -> int:
    """Terminal columns: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _split_word(word: str, width: int) -> list[str]:
    """A word wider than a line (a URL, a run of CJK) cut into pieces that fit."""
    pieces, cur = [], ""
    for c in word:
        if cur and cells(cur + c) > width:
            pieces.append(cur)
            cur = ""
        cur += c
    return pieces + [cur] if cur else pieces


_PAIRS = ("「」", "『』", "《》", "〈〉", "【】", "〔〕", "（）", "“”", "‘’", "()")


def _open_quotes(text: str) -> int:
    """How many quotations (or brackets) ``text`` opened and has not closed: a sentence ended
    inside them ("他说：「我们走吧。") is closed by marks the next final may open with."""
    return sum(max(0, text.count(o) - text.count(c)) for o, c in _PAIRS)


def _room_for_mark(last: str) -> str:
    """What a final's last unit keeps room for after it: a Chinese (or Japanese) final may be
    followed by a final whose first word is "，" (Whisper starts the next final with it), and
    a line once started with it ("…寒氣尚未" / "，街頭黔女已著裙裝。"); written text is never
    taken back, so the room is kept now. A unit of a spaced script carries its own marks."""
    core = last.strip()
    return "，" if core and is_unspaced(core[-1]) and not closes(core) else ""


class Flow:
    """The layout of captions as text, one event at a time.

    Call :meth:`final` and :meth:`partial` as messages arrive and write what they return;
    :meth:`end` returns what closes the last line. ``tty``: the partial is shown and redrawn in
    place (the output then holds ``\\r`` and ANSI codes); otherwise only finals are written and
    the output is plain text, never rewritten. ``one_per_line``: each final on exactly one
    line, never wrapped, so a script reading the output gets one line per final.
    """

    def __init__(self, width: int = 80, tty: bool = False, one_per_line: bool = False) -> None:
        self.width = max(20, width)
        self.tty = tty
        self.one_per_line = one_per_line
        self.line = ""  # finals written on the current line, no newline after them yet
        self.partial_text = ""
        self.level_bar = ""  # mic input level, drawn before the partial
        self._last_end: float | None = None
        # a sentence ended inside a quotation: the line ends after the closing mark, which
        # the next final may open with ("」然后…"), not before it
        self._held = False
        self._said = ""  # the text since the line before ended at a sentence or a pause

    def final(self, text: str, start: float = 0.0, end: float = 0.0, glue: bool = False) -> str:
        """``glue``: the final goes on the last word (a word split across finals, "Cost" |
        "as": :func:`~whisperwire.server.text.glued`)."""
        out = [ERASE + self.line] if self.tty else []  # wipe the partial
        words = split_units(text)  # Latin words, and CJK one character at a time
        if self._held:
            self._held = False
            lead = list(itertools.takewhile(closes, words))
            words, marks = words[len(lead):], "".join(lead).replace(" ", "")
            self.line += marks
            self._said += marks
            out += [marks, self._newline(True)]
            glue = False
        elif self.line and (self.one_per_line or (
                self._last_end is not None and start - self._last_end >= PAUSE_S
                and not (words and closes(words[0])))):  # (a mark stays after its text)
            out.append(self._newline(True))
        width = sys.maxsize if self.one_per_line else self.width
        for i, word in enumerate(words):
            # a closing mark never starts a line: the character before it goes down with it
            # (with every mark after it: "好。”")
            trailing = list(itertools.takewhile(closes, words[i + 1:]))
            mark = "".join(trailing).replace(" ", "")
            if i == len(words) - 1:
                mark = _room_for_mark(word)
            if i + len(trailing) == len(words) - 1:  # (the final's last unit and its marks)
                # ... and room for the closing marks of every quotation still open ("』」"),
                # which the next final may open with
                mark += "」" * _open_quotes(self._said + "".join(words[i:]))
            for piece in _split_word(word.strip(), width):
                sep = " " if self.line and not glue and needs_space(self.line, piece) else ""
                glue = False
                if self.line and cells(self.line) + len(sep) + cells(piece + mark) > width:
                    out.append(self._newline())
                    sep = ""
                piece = sep + piece
                self.line += piece
                self._said += piece
                out.append(piece)
        self._last_end = end
        if self.line and (self.one_per_line or text.rstrip().endswith(SENTENCE_ENDS)):
            if not self.one_per_line and _open_quotes(self._said):
                self._held = True
            else:
                out.append(self._newline(True))
        self.partial_text = ""
        if self.tty:
            out.append(self._tail())
        return "".join(out)

    def partial(self, text: str) -> str:
        if not self.tty:
            return ""
        self.partial_text = text.strip()
        return ERASE + self.line + self._tail()

    def level(self, rms: float) -> str:
        if not self.tty:
            return ""
        n = min(8, int(rms * 40))
        self.level_bar = "[" + "#" * n + " " * (8 - n) + "]"
        return ERASE + self.line + self._tail()

    def end(self) -> str:
        out = ERASE + self.line if self.tty else ""
        self._held = False
        return out + (self._newline(True) if self.line else "")

    def _newline(self, break_: bool = False) -> str:
        """Ends the line: wrapped, or with ``break_`` at a sentence or a pause."""
        self.line = ""
        if break_:
            self._said = ""
        return "\n"

    def _tail(self) -> str:
        """The level bar and the partial after the running line, cut to the room that is left
        (never wrapping, so ``\\r`` always returns to the start of the line)."""
        tail = " ".join(x for x in (self.level_bar, self.partial_text) if x)
        if not tail:
            return ""
        # (a Chinese partial goes on a Chinese line without a space, as its final will)
        sep = " " if self.line and (self.level_bar or needs_space(self.line, tail)) else ""
        room = self.width - cells(self.line) - len(sep)
        if room < 4:
            return ""
        if cells(tail) > room:
            while cells(tail) > room - 1:
                tail = tail[1:]
            tail = "…" + tail
        return sep + DIM + tail + RESET


def flow_lines(finals: list[wire.Final], width: int = 80, one_per_line: bool = False) -> list[str]:
    """The lines a pipe or file gets for these finals."""
    flow = Flow(width, tty=False, one_per_line=one_per_line)
    text = "".join(flow.final(f.text, f.start, f.end, glued(f.words)) for f in finals) + flow.end()
    return text.splitlines()


class CaptionPrinter:
    """Writes the server's captions to ``out`` through a :class:`Flow` sized to the terminal;
    errors go to stderr as sentences."""

    def __init__(self, out: TextIO | None = None, show_level: bool = False,
                 one_per_line: bool = False, width: int | None = None,
                 url: str | None = None, viewer: bool = False) -> None:
        self.viewer = viewer  # (``whisperwire captions``: a channel's viewer, not its speaker)
        out = self.out = out or sys.stdout  # (at construction: a redirected stdout counts)
        tty = bool(getattr(out, "isatty", lambda: False)())
        width = width or (shutil.get_terminal_size().columns if tty else 80)
        self.flow = Flow(width, tty=tty, one_per_line=one_per_line)
        self.show_level = show_level and tty
        self.session: str | None = None  # the speaker's session, once the server took it
        # the server, as viewers must name it (none for the default: the command needs none)
        self.url = url if url and url.rstrip("/") != DEFAULT_URL else None

    def set_level(self, rms: float) -> None:
        if self.show_level:
            self._write(self.flow.level(rms))

    def __call__(self, m: wire.Message) -> None:
        if isinstance(m, wire.Ready) and m.session != self.session:
            # (once: a stream that comes back after a drop is the same session)
            self.session = m.session
            token = f" --token {m.view_token}" if m.view_token else ""
            url = f" --url {self.url}" if self.url else ""  # (left out, a pasted hint failed)
            print(f"whisperwire: session {m.session} (viewers: whisperwire captions "
                  f"{m.session}{url}{token})", file=sys.stderr)
        elif isinstance(m, wire.Partial):
            self._write(self.flow.partial(m.text))
        elif isinstance(m, wire.Final):
            self._write(self.flow.final(m.text, m.start, m.end, glued(m.words)))
        elif isinstance(m, wire.Closed):  # a speaker's end ends its line (the next one's
            self._write(self.flow.end())  # first final may come within a pause's time)
        elif isinstance(m, wire.Error):
            self._write(self.flow.end())
            print(f"whisperwire: {server_error_sentence(m)}", file=sys.stderr)
        elif isinstance(m, wire.Language):  # (stderr: captions stay clean)
            # a speaker is told a language detected (language=auto); a viewer each speaker's
            how = "" if self.viewer else f" (detected, p={m.probability:.2f})"
            print(f"whisperwire: language {m.language}{how}", file=sys.stderr)

    def notice(self, text: str) -> None:
        """A sentence about the connection, on stderr, after the running line has ended."""
        self._write(self.flow.end())
        print(f"whisperwire: {text}", file=sys.stderr)

    def close(self) -> None:
        """End the running line (call once, when the captions stop)."""
        self._write(self.flow.end())

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
