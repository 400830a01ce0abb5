"""``whisperwire stream FILE``: play a file to the server at real-time pace (or faster) and
print the captions, the way to try the server without a microphone.

The command sends through :mod:`.speaker` (as ``whisperwire mic`` does), which comes back after
a dropped connection. :func:`stream_chunks` is one connection and no more, for the tests and the
benchmarks, which measure exactly what one connection does."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from whisperwire.server import wire
from whisperwire.server.text import finals_text

from .audio_file import read_audio
from .connect import (ClientFault, bearer, check_output, check_token, listen_url, parse_event, run_client,
                      ws_url)
from .printer import CaptionPrinter

__all__ = ["CaptionPrinter", "StreamResult", "finish", "paced", "stream_chunks", "stream_file",
           "stream_pcm", "until_stopped", "write_output"]


@dataclass
class StreamResult:
    """Every message received, with its arrival time (seconds since the first audio was sent)
    and how much audio (seconds) had been sent by then."""

    messages: list[tuple[float, float, wire.Message]] = field(default_factory=list)
    sends: list[tuple[float, float]] = field(default_factory=list)  # (time, audio s sent so far)
    close_code: int | None = None  # how the server closed the socket (None: never closed)
    close_reason: str = ""
    gave_up: bool = False  # the client stopped trying (and said why): no closed is coming
    unsent_s: float = 0.0  # audio heard while disconnected, past what is held, never sent
    # where the source's 0 lies on the channel's clock, which finals count on (a channel an
    # earlier speaker used: a final delay of -5.3 s compared its end with the source's time)
    source_at: float = 0.0

    @property
    def finals(self) -> list[wire.Final]:
        return [m for _, _, m in self.messages if isinstance(m, wire.Final)]

    @property
    def utterances(self) -> list[wire.Final]:
        """The finals, each that an ``utterance_end`` followed closing its utterance: what a
        saved file renders (lines and cues break there)."""
        from whisperwire.server.subtitles import utterances

        return utterances(m for _, _, m in self.messages)

    @property
    def text(self) -> str:
        return finals_text(self.finals)

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
        return [t - self.sent_at(m.end - self.source_at) for t, _, m in self.messages
                if isinstance(m, wire.Final)]


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
    Cancelling ``chunks`` early (Ctrl-C on a microphone) still ends with a proper close. A
    server that refuses the session or goes away mid-stream ends the sending; what it said up
    to then is in the result (``close_code``, the ``error`` events), nothing is raised."""
    import websockets

    bps = params.bytes_per_sample
    res = StreamResult()
    sent = 0
    # No keepalive timeout: a speaker faster than the decoder is held back by TCP, and a ping
    # then waits behind its own audio; the audio flowing is the sign of life.
    async with websockets.connect(listen_url(url, params), max_size=None, open_timeout=30,
                                  ping_timeout=None, additional_headers=bearer(token)) as ws:

        async def reader() -> None:
            try:
                async for raw in ws:
                    m = parse_event(raw)
                    if m is None:
                        continue
                    res.messages.append((time.monotonic() - t0, sent / bps / params.sample_rate, m))
                    if on_message:
                        on_message(m)
            except websockets.ConnectionClosed:
                pass

        def on_sent(n: int) -> None:
            nonlocal sent
            sent += n
            res.sends.append((time.monotonic() - t0, sent / bps / params.sample_rate))

        rtask = asyncio.create_task(reader())
        t0 = time.monotonic()
        await _send_all(ws, chunks, on_sent)
        if end == "drop":
            ws.transport.abort()  # hang up at the transport level, like a crashed client
            rtask.cancel()
            return res
        try:
            if end == "finalize":
                await ws.send(json.dumps({"type": "finalize"}))
            await ws.send(json.dumps({"type": "close"}))
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(rtask, close_timeout)
    res.close_code, res.close_reason = ws.close_code, ws.close_reason or ""
    return res


async def _send_all(ws: Any, chunks: AsyncIterator[bytes], on_sent: Callable[[int], None]
                    ) -> None:
    """Send until the source ends, is cancelled (Ctrl-C) or the server hangs up (a refusal:
    the reader has its last words), then release the source (a microphone stops capturing)."""
    import websockets

    try:
        async for piece in chunks:
            await ws.send(piece)
            on_sent(len(piece))
    except (asyncio.CancelledError, KeyboardInterrupt):
        pass  # stop sending; the caller still closes properly
    except websockets.ConnectionClosed:
        pass
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


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


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def write_output(path: str, finals: list[wire.Final], session: str = "",
                 closed: wire.Closed | None = None) -> str:
    """Save finals as .srt, .vtt, .json or .txt, by the file's extension (checked beforehand
    with :func:`~.connect.check_output`). Returns what the file holds ("4 cues", "2 lines"):
    the finals are regrouped into cues or utterance lines, so their count would not say it.
    ``closed``: the ``closed`` that ended the finals' audio; no cue is held on screen past it
    (a short last cue, lengthened to be readable, went past the end of the recording, as the
    server's downloads do not). Raises ClientFault if the file cannot be written."""
    from whisperwire.server import subtitles

    ext = path.rsplit(".", 1)[-1].lower()
    end = None if closed is None else max([closed.audio_seconds] + [f.end for f in finals[-1:]])
    if ext in ("srt", "vtt"):
        write = subtitles.to_srt if ext == "srt" else subtitles.to_vtt
        text = write(finals, audio_end=end)
        held = plural(len(subtitles.cues(finals, audio_end=end)), "cue")
    elif ext == "json":
        text = subtitles.to_json(session, finals, False)
        held = plural(len(finals), "final")
    else:
        text = subtitles.to_txt(finals)
        held = plural(text.count("\n"), "line")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ClientFault(f"cannot write {path}: {exc.strerror or exc}") from None
    return held


async def until_stopped(chunks: AsyncIterator[bytes], stop: asyncio.Event
                        ) -> AsyncIterator[bytes]:
    """``chunks`` until ``stop`` is set (Ctrl-C): the stream then ends with a proper close and
    the server's last finals still arrive."""
    try:
        async for piece in chunks:
            if stop.is_set():
                break
            yield piece
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def ctrl_c_sets(stop: asyncio.Event, then: asyncio.Event | None = None) -> None:
    """On the running loop: the first Ctrl-C sets ``stop`` instead of raising; with ``then``,
    a second one sets that (quit without waiting). SIGTERM and SIGHUP (``timeout``, ``docker
    stop``, systemd, a closed terminal) do the same: they killed the client at once, and
    ``--output`` was never written. A SIGHUP that was ignored (``nohup``) stays ignored."""
    import signal

    def on_ctrl_c() -> None:
        (then if then is not None and stop.is_set() else stop).set()

    def on_hangup() -> None:
        _off_the_terminal()
        on_ctrl_c()

    handlers = [(signal.SIGINT, on_ctrl_c), (getattr(signal, "SIGTERM", None), on_ctrl_c)]
    hup = getattr(signal, "SIGHUP", None)
    if hup is not None and signal.getsignal(hup) is not signal.SIG_IGN:
        handlers.append((hup, on_hangup))
    for sig, handler in handlers:
        if sig is None:
            continue
        try:
            asyncio.get_running_loop().add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread; Windows
            pass


def _off_the_terminal() -> None:
    """The terminal is gone (SIGHUP): what would be written to it goes nowhere, so that the
    last finals and ``--output`` are still made (every write to a hung-up terminal fails with
    EIO, and the first one ended the command before it saved anything)."""
    import os
    import stat

    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            try:  # (a character device: the terminal; isatty() fails on a hung-up one)
                if stat.S_ISCHR(os.fstat(fd).st_mode):
                    os.dup2(null, fd)
            except OSError:
                pass
    finally:
        os.close(null)


ENDED_EARLY = {
    "server_shutdown": "the server is shutting down",
    "replica_lost": "the server lost the session (a Ray replica that stalled); run it again",
    "idle_timeout": "nothing was sent for too long",
    "max_duration": "the session reached the server's length limit",
    "too_many_errors": "too many errors",
    "slow_consumer": "this client read the captions too slowly",
}


def finish(res: StreamResult, url: str, output: str | None) -> int:
    """After a speaker's stream: say how it ended if it ended badly (the printer has already
    shown the server's errors), save ``output`` whatever happened, and return the exit status:
    0 when the server closed the session normally and all the audio was sent, 1 otherwise."""
    status = 0
    closed = res.of_type(wire.Closed)
    # (``shutdown_incomplete`` comes with a drop the speaker came back from, sending the
    # rest again; a comeback that failed is ``gave_up``)
    if any(e.code != "shutdown_incomplete" for e in res.of_type(wire.Error)):
        status = 1
    elif closed and closed[-1].reason != "client_close":
        why = ENDED_EARLY.get(closed[-1].reason, closed[-1].reason)
        print(f"whisperwire: the server ended the session early: {why}", file=sys.stderr)
        status = 1
    elif not closed and res.gave_up:
        status = 1
    elif not closed:
        how = f"code {res.close_code}" if res.close_code is not None else "no close frame"
        print(f"whisperwire: the server at {url} ended the connection before the session "
              f"closed ({how}{': ' + res.close_reason if res.close_reason else ''})",
              file=sys.stderr)
        status = 1
    if res.unsent_s > 0:  # words were lost (the speaker said how much audio)
        status = 1
    if output and res.of_type(wire.Ready):  # a refused session leaves an old file alone
        held = write_output(output, res.utterances, res.of_type(wire.Ready)[0].session,
                            closed[-1] if closed else None)
        print(f"-- saved {held} to {output}", file=sys.stderr)
    return status


def summary(res: StreamResult, seconds: float) -> str:
    closed = res.of_type(wire.Closed)
    # what this command sent (``closed`` counts on the channel's clock: a session continued
    # under the same id counted its earlier speakers' audio too)
    audio = res.sends[-1][1] if res.sends else (closed[-1].audio_seconds if closed else 0.0)
    head = f"-- {audio:.1f}s audio in {seconds:.1f}s"
    lat = res.final_delays()
    if not lat:
        return head + "; no captions"
    return (f"{head}; {plural(len(lat), 'final')}, final delay after audio sent: "
            f"median {float(np.median(lat)):.2f}s")


def main(args) -> int:  # type: ignore[no-untyped-def]
    def body() -> int:
        url = ws_url(args.url)
        args.token = check_token(args.token)
        check_output(args.output)  # before streaming: never lose the result at the end
        pcm = read_audio(args.file, 16000).astype("<i2").tobytes()
        params = wire.ListenParams(sample_rate=16000, language=args.language,
                                   task=getattr(args, "task", "transcribe"),
                                   zh_script=getattr(args, "zh_script", None),
                                   session=args.session)
        printer = CaptionPrinter(one_per_line=getattr(args, "lines", False), url=url)

        async def go() -> StreamResult:
            from .speaker import speak

            stop, quit_now = asyncio.Event(), asyncio.Event()
            ctrl_c_sets(stop, then=quit_now)  # Ctrl-C: stop sending, wait for the last finals
            chunks = until_stopped(paced(pcm, params, args.speed), stop)
            # a dropped connection comes back to the same session, as ``mic`` does; the file
            # waits meanwhile (read a second ahead of the sending, never all at once)
            return await speak(url, chunks, params, on_message=printer, token=args.token,
                               say=printer.notice, quit=quit_now, stop=stop, ahead_s=1.0)

        t0 = time.monotonic()
        res = asyncio.run(go())
        printer.close()
        if res.of_type(wire.Ready):  # a refused session has nothing to sum up
            print(summary(res, time.monotonic() - t0), file=sys.stderr)
        return finish(res, url, args.output)

    return run_client(body, args.url)
