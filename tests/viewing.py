"""Test helpers for the channel model: a viewer socket stays open across speakers, so tests read
it up to the n-th ``closed`` event (or until the server closes it), never until EOF."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from whisperwire.server import wire


def _path(session: str) -> str:
    return quote(session, safe="").replace(".", "%2E")  # "." and ".." must reach the server


async def view(url: str, session: str, *, token: str | None = None, closes: int = 1,
               timeout: float = 90.0, until_socket_closes: bool = False
               ) -> tuple[list[wire.Message], int | None]:
    """A viewer's messages up to its ``closes``-th ``closed`` event (or, with
    ``until_socket_closes``, until the server ends the socket), and the close code if the socket
    was closed by then (None while it is still open)."""
    import websockets

    q = f"?token={token}" if token else ""
    full = f"{url}/v1/sessions/{_path(session)}/events{q}"
    out: list[wire.Message] = []

    async def read(ws) -> None:  # type: ignore[no-untyped-def]
        seen = 0
        async for raw in ws:
            m = wire.decode(raw)
            out.append(m)
            seen += isinstance(m, wire.Closed)
            if seen >= closes and not until_socket_closes:
                return

    async with websockets.connect(full, max_size=None, open_timeout=30) as ws:
        try:
            await asyncio.wait_for(read(ws), timeout)
        except websockets.ConnectionClosed:
            pass
        code = ws.close_code
    return out, code


async def still_open(url: str, session: str, seconds: float, token: str | None = None) -> bool:
    """Whether a viewer socket opened now is still open after reading for ``seconds``."""
    import websockets

    q = f"?token={token}" if token else ""
    async def drain(ws) -> None:  # type: ignore[no-untyped-def]
        async for _ in ws:
            pass

    async with websockets.connect(f"{url}/v1/sessions/{_path(session)}/events{q}") as ws:
        try:
            await asyncio.wait_for(drain(ws), seconds)
        except asyncio.TimeoutError:
            return True
        except websockets.ConnectionClosed:
            pass
        return False


async def speak(url: str, pcm: bytes, *, session: str | None = None, token: str | None = None,
                chunk: int = 32000, pause: float = 0.0, timeout: float = 120.0,
                said: float | None = None) -> tuple[list[wire.Message], int | None]:
    """Stream 16 kHz s16le ``pcm`` as a speaker (after ``said``, if given), then ``close``;
    everything the server said, and the close code."""
    import json
    from urllib.parse import urlencode

    import websockets

    q = urlencode({k: v for k, v in (("session", session), ("token", token)) if v})
    out: list[wire.Message] = []
    async with websockets.connect(f"{url}/v1/listen?{q}", max_size=None) as ws:

        async def read() -> None:
            async for raw in ws:
                out.append(wire.decode(raw))

        reader = asyncio.create_task(read())
        try:
            if said is not None:
                await ws.send(json.dumps({"type": "said", "seconds": said}))
            for i in range(0, len(pcm), chunk):
                await ws.send(pcm[i : i + chunk])
                await asyncio.sleep(pause)
            await ws.send(json.dumps({"type": "close"}))
        except websockets.ConnectionClosed:
            pass
        try:
            await asyncio.wait_for(reader, timeout)
        except websockets.ConnectionClosed:
            pass
        code = ws.close_code
    return out, code


def drained(v) -> list[wire.Message]:  # type: ignore[no-untyped-def]
    """Everything a hub outbox (a viewer without a socket) holds, once it is finished."""
    v.finish()

    async def go() -> list[wire.Message]:
        out = []
        while (m := await v.next()) is not None:
            out.append(m)
        return out

    return asyncio.run(go())


def directory_after(events: list[wire.Message]) -> tuple[dict, dict]:
    """A cluster directory (driven in process) after one speaker's batch of ``events`` on
    channel "chan": its snapshot (downloads, late viewers) and its news since the start (what
    replicas following the channel get)."""
    from whisperwire.server.cluster_hub import Directory

    async def go() -> tuple[dict, dict]:
        d = Directory()
        c = await d.claim("chan", "replica-a")
        await d.publish("chan", c["claim"], 0, [wire.encode(e) for e in events])
        snap, news = await d.snapshot("chan"), await d.since("chan", 0, 0.1)
        assert snap is not None and news is not None
        return snap, news

    return asyncio.run(go())
