"""``whisperwire stream FILE``: play a file to the server at real-time pace (or faster) and
print the captions, the way to try the server without a microphone."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlencode

import numpy as np

from whisperwire.server import wire

from .audio_file import read_audio

__all__ = ["StreamResult", "stream_file", "stream_pcm"]


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
        for t, s in self.sends:
            if s >= audio_t - 1e-6:
                return t
        return self.sends[-1][0] if self.sends else 0.0

    def final_delays(self) -> list[float]:
        """For each final: its arrival minus the moment the audio up to its end was sent."""
        return [t - self.sent_at(m.end) for t, _, m in self.messages if isinstance(m, wire.Final)]


async def stream_pcm(
    url: str,
    pcm: bytes,
    params: wire.ListenParams,
    *,
    speed: float = 1.0,
    chunk_ms: int = 100,
    on_message: Callable[[wire.Message], None] | None = None,
    end: str = "close",
) -> StreamResult:
    """Send ``pcm`` (already in ``params``' encoding and rate) in ``chunk_ms`` pieces at
    ``speed`` times real time (0: as fast as possible), then ``end`` ("close", "finalize" or
    "drop": hang up without a word), and collect everything the server says until it closes."""
    import websockets

    bps = params.bytes_per_sample
    chunk = max(1, params.sample_rate * chunk_ms // 1000) * bps
    res = StreamResult()
    base = url.rstrip("/")
    full = f"{base}/v1/listen?{urlencode(params.to_query())}"
    sent = 0
    t0 = time.monotonic()

    async with websockets.connect(full, max_size=None, open_timeout=30) as ws:

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
        for i in range(0, len(pcm), chunk):
            piece = pcm[i : i + chunk]
            if speed > 0:
                due = t0 + (sent / bps / params.sample_rate) / speed
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await ws.send(piece)
            sent += len(piece)
            res.sends.append((time.monotonic() - t0, sent / bps / params.sample_rate))
        if end == "drop":
            # hang up at the transport level, the way a crashed client would
            ws.transport.abort()
            rtask.cancel()
            return res
        await ws.send(json.dumps({"type": end}))
        if end == "finalize":
            await ws.send(json.dumps({"type": "close"}))
        await rtask
    return res


def stream_file(url: str, path: str, *, speed: float = 1.0, language: str | None = None,
                sample_rate: int = 16000, on_message: Callable[[wire.Message], None] | None = None,
                ) -> StreamResult:
    pcm = read_audio(path, sample_rate).astype("<i2").tobytes()
    params = wire.ListenParams(sample_rate=sample_rate, language=language)
    return asyncio.run(stream_pcm(url, pcm, params, speed=speed, on_message=on_message))


class CaptionPrinter:
    """Finals as lines; on a terminal, the partial is redrawn in place after them (dim)."""

    def __init__(self, out=sys.stdout) -> None:  # type: ignore[no-untyped-def]
        self.out = out
        self.tty = out.isatty()

    def __call__(self, m: wire.Message) -> None:
        if isinstance(m, wire.Partial) and self.tty:
            self.out.write(f"\r\033[K\033[2m{m.text}\033[0m")
        elif isinstance(m, wire.Final):
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
                          on_message=printer)
    except OSError as exc:
        print(f"cannot reach the server at {args.url}: {exc}", file=sys.stderr)
        return 2
    lat = res.final_delays()
    closed = res.of_type(wire.Closed)
    audio = closed[-1].audio_seconds if closed else 0.0
    print(f"-- {len(res.finals)} finals, {audio:.1f}s audio in {time.monotonic() - t0:.1f}s; "
          f"final delay after audio sent: median {np.median(lat) if lat else float('nan'):.2f}s",
          file=sys.stderr)
    return 0
