"""What every foreign API shares: how its clients carry a token, G.711 audio, whole files read
from request bodies, and running a file through a normal session flat out.

A file is decoded the way a speaker's stream is: an in-memory socket feeds all of its audio to a
:class:`~whisperwire.server.listen.ListenConnection` at once and says ``close``, so it opens a
normal channel (viewers and transcript downloads can follow its id), counts against the session
limit, uses the one engine, and gets the careful windows a backlog of speech gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .. import wire
from ..audio import MODEL_RATE
from ..errors import ClientError
from ..listen import ListenConnection
from ..text import finals_text

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["G711", "ClientGone", "FileResult", "check_speaker", "decode_file", "g711_to_float",
           "load_media", "off_loop", "read_media", "speaker_token", "while_awaited"]

T = TypeVar("T")


def speaker_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """``Authorization: Token X`` (Deepgram's keys) or ``Bearer X``; ``Sec-WebSocket-Protocol:
    token, X`` (browsers, which cannot set headers); or ``?token=``."""
    auth = headers.get("authorization", "").strip()
    scheme, _, value = auth.partition(" ")
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip()
    protocols = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    if len(protocols) == 2 and protocols[0].lower() in ("token", "bearer") and protocols[1]:
        return protocols[1]
    return query.get("token") or None


def check_speaker(server: WhisperWire, token: str | None) -> None:
    """Before a request body is read at all: may this token speak?"""
    if not server.config.auth.can_speak(token):
        raise ClientError("unauthorized", "a valid speak token is required")


def _mulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.float32) / 32768.0


def _alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = (a & 0x0F) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(a & 0x80, t, -t).astype(np.float32) / 32768.0


G711 = {"mulaw": _mulaw_table(), "alaw": _alaw_table()}


def g711_to_float(data: bytes, law: str) -> np.ndarray:
    """G.711 bytes (telephony: Twilio and most SIP trunks send mu-law at 8 kHz) as float32."""
    return G711[law][np.frombuffer(data, np.uint8)]


# Below telephony's 8 kHz no speech is left to hear; a header that says 1 Hz would have the
# resampler write 16,000 samples for each one in the file (100 kB of WAV: 10 GB of audio).
MIN_FILE_RATE = 4000


def read_media(data: bytes, max_seconds: float, rate: int = MODEL_RATE) -> np.ndarray:
    """Any container and codec PyAV opens, as float32 mono at ``rate``. Raises ClientError:
    ``bad_file`` for bytes that hold no decodable audio or a rate no speech has, and
    ``file_too_long`` as soon as the file says or proves it holds more than ``max_seconds``
    (a small compressed file can hold hours: nothing past the limit is decoded)."""
    import av

    if not data:
        raise ClientError("bad_file", "the request has no audio in it")
    limit = int(max_seconds * rate)
    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.audio:
                raise ClientError("bad_file", "the file has no audio stream")
            _check_stream(container, max_seconds)
            out = _Samples(min(limit, _said_length(container, rate)))
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            # lazily: decoding stops at the limit (a tuple of them would decode all first)
            for frame in itertools.chain(container.decode(audio=0), [None]):
                for o in resampler.resample(frame):
                    out.add(o.to_ndarray().reshape(-1))
                if out.n > limit:
                    raise ClientError("file_too_long",
                                      f"files are limited to {max_seconds:.0f} s of audio")
    except (av.error.FFmpegError, ValueError, IndexError) as exc:
        raise ClientError("bad_file", "the file is not audio or video that FFmpeg can decode "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    if not out.n:
        raise ClientError("bad_file", "the file holds no audio samples")
    return out.samples()


def _said_length(container: Any, rate: int) -> int:
    """The samples at ``rate`` the container says it holds (0 if it does not say)."""
    if container.duration and container.duration > 0:  # (in av.time_base units, microseconds)
        return int(container.duration / 1_000_000 * rate) + rate
    return 0


class _Samples:
    """Decoded samples written into one float32 array as they come: a 5 MB Ogg/Opus file of
    4 h of silence held them as a list of pieces and then their concatenation (2 × 0.9 GB),
    and three such uploads at once took the server to 4.2 GB. Sized from the container's
    word where it gives one, grown by half when it runs out (in place: ``realloc``, which for
    arrays this large moves pages instead of copying them)."""

    def __init__(self, expected: int) -> None:
        self.buf = np.empty(max(expected, MODEL_RATE), np.float32)
        self.n = 0

    def add(self, x: np.ndarray) -> None:
        if self.n + len(x) > len(self.buf):
            # (no view of it is out before :meth:`samples`: nothing else refers to it)
            self.buf.resize(max(self.n + len(x), len(self.buf) * 3 // 2), refcheck=False)
        self.buf[self.n : self.n + len(x)] = x
        self.n += len(x)

    def samples(self) -> np.ndarray:
        return self.buf[: self.n]


def _check_stream(container: Any, max_seconds: float) -> None:
    """Refuse before decoding what the headers already say is no speech or too long."""
    stream = container.streams.audio[0]
    rate = stream.codec_context.sample_rate or stream.rate or 0
    if rate and rate < MIN_FILE_RATE:
        raise ClientError("bad_file", f"the file's sample rate is {rate} Hz; speech needs at "
                          f"least {MIN_FILE_RATE} Hz")
    seconds = (float(stream.duration * stream.time_base) if stream.duration and stream.time_base
               else (container.duration or 0) / 1e6)
    if seconds > max_seconds + 1:
        raise ClientError("file_too_long", f"files are limited to {max_seconds:.0f} s of audio")


# Files are decoded on threads of their own: decoding a long one takes seconds, and neither
# the event loop nor the default executor (the worker pool's decode round trips) may wait for
# it; two at a time, the rest queue.
_MEDIA = ThreadPoolExecutor(max_workers=2, thread_name_prefix="whisperwire-media")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a media thread."""
    return await asyncio.get_running_loop().run_in_executor(_MEDIA, fn, *args)


async def load_media(data: bytes, max_seconds: float) -> np.ndarray:
    """:func:`read_media` on a media thread."""
    return await off_loop(read_media, data, max_seconds)


@dataclass(frozen=True)
class FileResult:
    session: str
    finals: list[wire.Final]
    language: str  # the one asked for, else the one Whisper heard
    seconds: float

    @property
    def text(self) -> str:
        return finals_text(self.finals).strip()


class _FileSocket:
    """The part of a WebSocket a ListenConnection uses: all of a file's audio, then
    ``close``; whatever the connection writes is dropped (the finals land in the channel)."""

    CHUNK = MODEL_RATE  # one second of pcm_f32le per frame, well under max_message_bytes

    def __init__(self, audio: np.ndarray) -> None:
        self._audio, self._at = audio, 0  # (each frame made as it is read: no second copy)

    async def receive(self) -> dict[str, Any]:
        if self._at < len(self._audio):
            piece = self._audio[self._at : self._at + self.CHUNK].astype("<f4").tobytes()
            self._at += self.CHUNK
            return {"type": "websocket.receive", "bytes": piece}
        return {"type": "websocket.receive", "text": json.dumps({"type": "close"})}

    async def send_text(self, text: str) -> None:
        pass

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        pass


class ClientGone(Exception):
    """The client of a file request hung up before its answer was ready."""


async def while_awaited(receive: Callable[[], Awaitable[dict[str, Any]]],
                        work: Awaitable[T]) -> T:
    """``work`` (a file's decode: minutes for a long one) while its HTTP client still waits
    for the answer. A client that hangs up (``http.disconnect`` from the ASGI ``receive``,
    once the body is read) cancels it: a 37-minute file POSTed with a 20 s client timeout went
    on decoding for minutes, holding a session and the decoder, and a shutdown waited 90 s for
    it. Raises :class:`ClientGone` then. (``stream=true`` answers as it goes: not for it.)"""

    async def hung_up() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    job, gone = asyncio.ensure_future(work), asyncio.ensure_future(hung_up())
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the handler itself (Ray Serve cancels a gone client's)
        await _stop(job)
        raise
    finally:
        gone.cancel()
    if job.done():
        return job.result()
    await _stop(job)
    raise ClientGone


async def _stop(job: asyncio.Future) -> None:
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError, ClientError):
        await job


async def decode_file(server: WhisperWire, token: str | None, audio: np.ndarray, *,
                      language: str | None = None, task: str = "transcribe",
                      prompt: str | None = None, zh_script: str | None = None,
                      api: str = "file",
                      admitted: Callable[[Any], None] | None = None) -> FileResult:
    """Decode 16 kHz float32 audio as a session of its own, flat out. Raises ClientError when
    the speaker may not (auth, room, language, duration). ``admitted`` gets the session's
    transcript once it is taken (its finals grow as they are made: for streaming them)."""
    cfg = server.config
    if len(audio) / MODEL_RATE > cfg.max_session_s:
        raise ClientError("file_too_long",
                          f"files are limited to {cfg.max_session_s:.0f} s of audio")
    params, transcript = server.admit(token, lambda: wire.ListenParams(
        sample_rate=MODEL_RATE, encoding="pcm_f32le", language=language, task=task,
        prompt=prompt, zh_script=zh_script))
    if admitted is not None:
        admitted(transcript)
    conn = ListenConnection(_FileSocket(audio), params, server.engine, server.hub,  # type: ignore[arg-type]
                            transcript, cfg, server.metrics, whole_input=True)
    conn.idle_timeout_s = max(cfg.idle_timeout_s, 3600.0)  # the file never goes quiet
    conn.api = api
    await server.speak(conn)
    if conn.decode_failed:
        raise ClientError("decode_failed", "decoding failed; try again")
    if conn.cut:
        raise ClientError("shutting_down", "the server stopped before the file was "
                          "transcribed; send it again")
    lang = language or conn.session.detected_language or (server.engine.languages or ("",))[0]
    return FileResult(transcript.session, list(transcript.finals), lang,
                      len(audio) / MODEL_RATE)
