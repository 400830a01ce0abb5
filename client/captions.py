"""``whisperwire captions SESSION``: print a session's captions as a viewer.

A fixed session id is a channel: the server keeps a viewer's socket open when a speaker ends
(it sends ``closed``) and the next speaker under the same id continues on it. So by default this
command follows the channel across restarts until Ctrl-C or until the server closes the socket;
``--once`` stops at the first ``closed``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from whisperwire.server import wire

from .connect import check_output, parse_event, run_client, ws_url
from .printer import CaptionPrinter
from .stream import ctrl_c_sets, write_output

__all__ = ["main", "watch", "watch_when_live"]


async def watch(url: str, session: str, on_message: Callable[[wire.Message], None],
                token: str | None = None, *, follow: bool = False,
                stop: asyncio.Event | None = None) -> list[wire.Message]:
    """Everything the server sends a viewer of ``session``: up to the first ``closed``, or with
    ``follow`` until the server closes the socket. Setting ``stop`` ends it early (the messages
    so far are returned). Messages of unknown types are skipped."""
    import websockets

    out: list[wire.Message] = []
    full = f"{url.rstrip('/')}/v1/sessions/{quote(session, safe='')}/events"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(full, max_size=None, open_timeout=30,
                                  additional_headers=headers) as ws:

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
        url = ws_url(args.url)
        check_output(args.output)
        printer = CaptionPrinter(one_per_line=getattr(args, "lines", False))

        async def go() -> list[wire.Message]:
            stop = asyncio.Event()
            ctrl_c_sets(stop)  # Ctrl-C: stop watching, still save --output
            return await watch_when_live(url, args.session, printer, token=args.token,
                                         follow=not getattr(args, "once", False), stop=stop)

        msgs = asyncio.run(go())
        printer.close()
        finals = [m for m in msgs if isinstance(m, wire.Final)]
        errors = [m for m in msgs if isinstance(m, wire.Error)]
        if args.output:
            held = write_output(args.output, finals)
            print(f"-- saved {held} to {args.output}", file=sys.stderr)
        if errors and not finals:
            return 1
        return 0

    return run_client(body, args.url)
