"""``whisperwire stream FILE``: play a file to the server at real-time pace (or faster) and
print the captions, the way to try the server without a microphone."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable
from urllib.parse import urlencode

import numpy as np

from whisperwire.server import wire

from .audio_file import read_audio

__all__ = ["CaptionPrinter", "StreamResult", "stream_chunks", "stream_file", "stream_pcm",
           "write_output"]


@dataclass
class StreamResult:
    """Every message received, with its arrival time (seconds since the first audio was sent)
    and how much audio (seconds) had been sent by then."""

    messages: list[tuple[float, float, wire.Message]] = field(default_factory=list)
    sends: list[tuple[float, float]] = field(default_factory=list)  # (time, audio s sent so far)

    @property
    def finals(self) -> list[wire.Final]:
        return [m for _, _, m in self.messages if isinstance(m, wire.Final)]

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.finals)

    def of_type(self, cls: type) -> list:
        return [m for _, _, m in self.messages if isinstance(m, cls)]

    def sent_at(self, audio_t: float) -> float:
        """When the audio up to stream time ``audio_t`` had been sent."""
        import bisect

        i = bisect.bisect_left(self.sends, audio_t - 1e-6, key=lambda x: x[1])
        if i < len(self.sends):
            return self.sends[i][0]
        return self.sends[-1][0] if self.sends else 0.0

    def final_delays(self) -> list[float]:
        """For each final: its arrival minus the moment the audio up to its end was sent."""
        return [t - self.sent_at(m.end) for t, _, m in self.messages if isinstance(m, wire.Final)]


async def paced(pcm: bytes, params: wire.ListenParams, speed: float, chunk_ms: int = 100
                ) -> AsyncIterator[bytes]:
    """``pcm`` in ``chunk_ms`` pieces at ``speed`` times real time (0: as fast as possible)."""
    bps = params.bytes_per_sample
    chunk = max(1, params.sample_rate * chunk_ms // 1000) * bps
    t0 = time.monotonic()
    for i in range(0, len(pcm), chunk):
        if speed > 0:
            delay = t0 + (i / bps / params.sample_rate) / speed - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        yield pcm[i : i + chunk]


async def stream_chunks(
    url: str,
    chunks: AsyncIterator[bytes],
    params: wire.ListenParams,
    *,
    on_message: Callable[[wire.Message], None] | None = None,
    end: str = "close",
    close_timeout: float = 120.0,
    token: str | None = None,
) -> StreamResult:
    """Send each chunk of PCM as it comes, then ``end`` ("close", "finalize" then close, or
    "drop": hang up without a word), and collect everything the server says until it closes.
    Cancelling ``chunks`` early (Ctrl-C on a microphone) still ends with a proper close."""
    import websockets

    bps = params.bytes_per_sample
    res = StreamResult()
    full = f"{url.rstrip('/')}/v1/listen?{urlencode(params.to_query())}"
    sent = 0
    t0 = time.monotonic()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(full, max_size=None, open_timeout=30,
                                  additional_headers=headers) as ws:

        async def reader() -> None:
            try:
                async for raw in ws:
                    m = wire.decode(raw)
                    res.messages.append((time.monotonic() - t0, sent / bps / params.sample_rate, m))
                    if on_message:
                        on_message(m)
            except websockets.ConnectionClosed:
                pass

        rtask = asyncio.create_task(reader())
        t0 = time.monotonic()
        try:
            async for piece in chunks:
                await ws.send(piece)
                sent += len(piece)
                res.sends.append((time.monotonic() - t0, sent / bps / params.sample_rate))
        except (asyncio.CancelledError, KeyboardInterrupt):
            pass  # stop sending; still close properly below
        if end == "drop":
            ws.transport.abort()  # hang up at the transport level, like a crashed client
            rtask.cancel()
            return res
        if end == "finalize":
            await ws.send(json.dumps({"type": "finalize"}))
        await ws.send(json.dumps({"type": "close"}))
        await asyncio.wait_for(rtask, close_timeout)
    return res


async def stream_pcm(url: str, pcm: bytes, params: wire.ListenParams, *, speed: float = 1.0,
                     chunk_ms: int = 100, on_message: Callable[[wire.Message], None] | None = None,
                     end: str = "close") -> StreamResult:
    """Stream ready-made PCM (in ``params``' encoding and rate) at ``speed`` times real time."""
    return await stream_chunks(url, paced(pcm, params, speed, chunk_ms), params,
                               on_message=on_message, end=end)


def stream_file(url: str, path: str, *, speed: float = 1.0, language: str | None = None,
                sample_rate: int = 16000, on_message: Callable[[wire.Message], None] | None = None,
                session: str | None = None, token: str | None = None) -> StreamResult:
    pcm = read_audio(path, sample_rate).astype("<i2").tobytes()
    params = wire.ListenParams(sample_rate=sample_rate, language=language, session=session)
    return asyncio.run(stream_chunks(url, paced(pcm, params, speed), params,
                                     on_message=on_message, token=token))


def write_output(path: str, finals: list[wire.Final]) -> None:
    """Save finals as .srt, .vtt, .json or .txt, by the file's extension."""
    from whisperwire.server import subtitles

    ext = path.rsplit(".", 1)[-1].lower()
    if ext == "srt":
        text = subtitles.to_srt(finals)
    elif ext == "vtt":
        text = subtitles.to_vtt(finals)
    elif ext == "json":
        text = subtitles.to_json("", finals, False)
    else:
        text = subtitles.to_txt(finals)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class CaptionPrinter:
    """Finals as lines; on a terminal, the partial is redrawn in place after them (dim)."""

    def __init__(self, out=sys.stdout, show_level: bool = False) -> None:  # type: ignore[no-untyped-def]
        self.out = out
        self.tty = out.isatty()
        self.show_level = show_level and self.tty
        self.level = 0.0
        self.partial = ""

    def set_level(self, rms: float) -> None:
        self.level = rms
        if self.show_level:
            self._draw()

    def _draw(self) -> None:
        bar = ""
        if self.show_level:
            n = min(8, int(self.level * 40))
            bar = "[" + "#" * n + " " * (8 - n) + "] "
        self.out.write(f"\r\033[K{bar}\033[2m{self.partial[-150:]}\033[0m")
        self.out.flush()

    def __call__(self, m: wire.Message) -> None:
        if isinstance(m, wire.Partial) and self.tty:
            self.partial = m.text
            self._draw()
        elif isinstance(m, wire.Final):
            self.partial = ""
            self.out.write(("\r\033[K" if self.tty else "") + m.text + "\n")
        elif isinstance(m, wire.Error):
            self.out.write(f"\n[error {m.code}] {m.message}\n" if self.tty else "")
            print(f"error {m.code}: {m.message}", file=sys.stderr)
        self.out.flush()


def main(args) -> int:  # type: ignore[no-untyped-def]
    printer = CaptionPrinter()
    t0 = time.monotonic()
    try:
        res = stream_file(args.url, args.file, speed=args.speed, language=args.language,
                          on_message=printer, session=args.session, token=args.token)
    except OSError as exc:
        print(f"cannot reach the server at {args.url}: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_output(args.output, res.finals)
    lat = res.final_delays()
    closed = res.of_type(wire.Closed)
    audio = closed[-1].audio_seconds if closed else 0.0
    print(f"-- {len(res.finals)} finals, {audio:.1f}s audio in {time.monotonic() - t0:.1f}s; "
          f"final delay after audio sent: median {np.median(lat) if lat else float('nan'):.2f}s",
          file=sys.stderr)
    return 0
