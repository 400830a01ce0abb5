"""``whisperwire captions SESSION``: print a session's captions as a viewer.

A fixed session id is a channel: the server keeps a viewer's socket open when a speaker ends
(it sends ``closed``) and the next speaker under the same id continues on it. So by default this
command follows the channel across restarts until Ctrl-C; ``--once`` stops at the first
``closed``. A connection that drops (a server restarted, a Ray replica scaled down or lost
while the session goes on elsewhere) is opened again, as the viewer page does, and the finals
the server replays are not printed twice; when the server cannot be reached again, or
``--once`` loses it before ``closed``, the command says so and exits 1.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from whisperwire.server import wire
from whisperwire.server.hub import on_channel_clock
from whisperwire.server.subtitles import utterances

from .connect import bearer, check_output, check_token, parse_event, run_client, ws_url
from .printer import CaptionPrinter
from .stream import ctrl_c_sets, write_output

__all__ = ["Lost", "follow_channel", "main", "watch", "watch_when_live"]


class Lost(Exception):
    """The viewer's connection ended before it was done (no ``closed`` with ``--once``, or the
    server gone while following and not back)."""


RETRIES_S = (0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10)  # as the page's: 12 tries, ~85 s
UP_S = 10.0  # a connection up this long was good: the count of failed tries starts again


async def watch(url: str, session: str, on_message: Callable[[wire.Message], None],
                token: str | None = None, *, follow: bool = False,
                stop: asyncio.Event | None = None) -> list[wire.Message]:
    """Everything the server sends a viewer of ``session``: up to the first ``closed``, or with
    ``follow`` until the server closes the socket. Setting ``stop`` ends it early (the messages
    so far are returned). Messages of unknown types are skipped. Whether the socket closed
    before it was done: :func:`answered`."""
    import websockets

    out: list[wire.Message] = []
    full = f"{url.rstrip('/')}/v1/sessions/{quote(session, safe='')}/events"
    async with websockets.connect(full, max_size=None, open_timeout=30,
                                  additional_headers=bearer(token)) as ws:

        async def read() -> None:
            try:
                async for raw in ws:
                    m = parse_event(raw)
                    if m is None:
                        continue
                    out.append(m)
                    on_message(m)
                    if isinstance(m, wire.Closed) and not follow:
                        return
            except websockets.ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        waits = {reader} | ({asyncio.ensure_future(stop.wait())} if stop else set())
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for t in waits:
            t.cancel()
    return out


def answered(msgs: list[wire.Message], follow: bool) -> bool:
    """Whether a viewer's connection that returned ``msgs`` ended as the server meant it to:
    a refusal (an ``error`` first: ``unknown_session`` ...), or without ``follow`` the
    ``closed`` it waited for. Anything else is a loss (the socket closed before)."""
    return bool(msgs) and (isinstance(msgs[0], wire.Error) or (
        not follow and any(isinstance(m, wire.Closed) for m in msgs)))


class _Lives:
    """What a viewer that follows one id across reconnects and server restarts shows: each
    final once, on the first life's clock. Pure: messages in, messages out."""

    def __init__(self, on_message: Callable[[wire.Message], None]):
        self.on_message = on_message
        self.seen, self.life = -1, None
        self.shift = 0.0  # where the id's current life starts on the first life's clock
        self.base = 0.0  # ... and where the life before it was final to
        self.last_end = 0.0

    def take(self, m: wire.Message) -> None:
        if isinstance(m, wire.Channel):  # another life of the id numbers its finals from 0
            if self.life is not None and m.instance != self.life:
                # ... and its clock starts at 0 again: it goes on where the old life was
                # final to, less what its speaker sent again (``said``), as the speaker's own
                # file puts it (the saved file ran back to 0.3 s, with a cue of no length
                # where the two met; then, with every cue after a restart 1 s late)
                self.seen, self.base = -1, self.last_end
            if self.life is not None:
                self.shift = max(0.0, self.base - (m.said or 0.0))
            self.life = m.instance
            return
        if isinstance(m, wire.Final):
            if m.segment <= self.seen:
                if m.segment == self.seen and m.eou:  # its utterance_end came while away
                    self.show(on_channel_clock(wire.UtteranceEnd(m.end), self.shift))
                return
            self.seen = m.segment
        self.show(on_channel_clock(m, self.shift))

    def show(self, m: wire.Message) -> None:
        if isinstance(m, wire.Final):
            self.last_end = max(self.last_end, m.end)
        self.on_message(m)


async def follow_channel(url: str, session: str, on_message: Callable[[wire.Message], None],
                         token: str | None = None, *, follow: bool = True,
                         stop: asyncio.Event | None = None,
                         waits_s: tuple[float, ...] | None = None) -> None:
    """:func:`watch_when_live`, opened again whenever the connection drops (``--once``: before
    ``closed``): finals the server replays to a viewer that joins (those up to the last segment
    shown) are skipped. Raises :class:`Lost` once the server cannot be reached again."""
    import websockets

    waits_s = RETRIES_S if waits_s is None else waits_s
    fresh = _Lives(on_message).take
    tries, dropped = 0, False
    while True:
        began = time.monotonic()
        why = f"the connection to {url} kept dropping"
        try:
            msgs = await watch_when_live(url, session, fresh, token=token, follow=follow,
                                         stop=stop)
            lost = not answered(msgs, follow)
        except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
            if not dropped:
                raise  # never reached: said at once, as every command does (exit 2)
            lost = True
            why = f"lost the server at {url} and could not reach it again ({exc})"
        if not lost or (stop is not None and stop.is_set()):
            return
        dropped = True
        if time.monotonic() - began >= UP_S:  # as the page counts: failures in a row
            tries = 0
        if tries >= len(waits_s):
            raise Lost(f"{why}; gave up after {tries} tries")
        await asyncio.sleep(waits_s[tries])
        tries += 1


async def watch_when_live(url: str, session: str, on_message: Callable[[wire.Message], None],
                          retry_s: float = 1.0, token: str | None = None, *,
                          follow: bool = False, stop: asyncio.Event | None = None
                          ) -> list[wire.Message]:
    """Like :func:`watch`, but waits for a session that has not started yet."""
    told = False
    while True:
        msgs = await watch(url, session,
                           lambda m: None if isinstance(m, wire.Error) else on_message(m), token,
                           follow=follow, stop=stop)
        if msgs and isinstance(msgs[0], wire.Error) and msgs[0].code == "unknown_session":
            if stop is not None and stop.is_set():
                return []
            if not told:
                print(f"waiting for session {session!r} to start ...", file=sys.stderr)
                told = True
            await asyncio.sleep(retry_s)
            continue
        for m in msgs:
            if isinstance(m, wire.Error):
                on_message(m)
        return msgs


def main(args: Any) -> int:
    def body() -> int:
        if not wire.valid_session_id(args.session):  # ("a/b" reached no route: HTTP 403)
            print(f"whisperwire: {args.session!r} cannot be a session id: {wire.BAD_SESSION}",
                  file=sys.stderr)
            return 1
        args.token = check_token(args.token)
        url = ws_url(args.url)
        check_output(args.output)
        printer = CaptionPrinter(one_per_line=getattr(args, "lines", False), viewer=True)

        msgs: list[wire.Message] = []

        def show(m: wire.Message) -> None:
            msgs.append(m)
            printer(m)

        async def go() -> None:
            stop = asyncio.Event()
            ctrl_c_sets(stop)  # Ctrl-C: stop watching, still save --output
            await follow_channel(url, args.session, show, token=args.token,
                                 follow=not getattr(args, "once", False), stop=stop)

        lost = None
        try:
            asyncio.run(go())
        except Lost as exc:
            lost = exc
        printer.close()
        finals = utterances(msgs)  # (a viewer gets the channel's utterance ends too)
        errors = [m for m in msgs if isinstance(m, wire.Error)]
        if args.output:  # (what came before a loss too)
            # (the audio's end is known where the last speaker ended: its ``closed``)
            last = next((m for m in reversed(msgs) if isinstance(m, (wire.Final, wire.Closed))),
                        None)
            held = write_output(args.output, finals, args.session,
                                last if isinstance(last, wire.Closed) else None)
            print(f"-- saved {held} to {args.output}", file=sys.stderr)
        if lost is not None:
            print(f"whisperwire: {lost}", file=sys.stderr)
            return 1
        if errors and not finals:
            return 1
        return 0

    return run_client(body, args.url)
