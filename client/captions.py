"""``whisperwire captions SESSION``: print a session's captions as a viewer."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable
from urllib.parse import quote

from whisperwire.server import wire

from .stream import CaptionPrinter, write_output

__all__ = ["watch", "main"]


async def watch(url: str, session: str, on_message: Callable[[wire.Message], None],
                token: str | None = None) -> list[wire.Message]:
    """Everything the server sends a viewer of ``session``, until it closes."""
    import websockets

    out: list[wire.Message] = []
    full = f"{url.rstrip('/')}/v1/sessions/{quote(session, safe='')}/events"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(full, max_size=None, open_timeout=30,
                                  additional_headers=headers) as ws:
        try:
            async for raw in ws:
                m = wire.decode(raw)
                out.append(m)
                on_message(m)
        except websockets.ConnectionClosed:
            pass
    return out


async def watch_when_live(url: str, session: str, on_message: Callable[[wire.Message], None],
                          retry_s: float = 1.0, token: str | None = None) -> list[wire.Message]:
    """Like :func:`watch`, but waits for a session that has not started yet."""
    told = False
    while True:
        msgs = await watch(url, session,
                           lambda m: None if isinstance(m, wire.Error) else on_message(m), token)
        if msgs and isinstance(msgs[0], wire.Error) and msgs[0].code == "unknown_session":
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
    printer = CaptionPrinter()
    try:
        msgs = asyncio.run(watch_when_live(args.url, args.session, printer, token=args.token))
    except OSError as exc:
        print(f"cannot reach the server at {args.url}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    errors = [m for m in msgs if isinstance(m, wire.Error)]
    if args.output:
        write_output(args.output, [m for m in msgs if isinstance(m, wire.Final)])
    return 1 if errors and not any(isinstance(m, wire.Final) for m in msgs) else 0
