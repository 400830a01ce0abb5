"""``whisperwire mic``: live captions from a microphone (sounddevice/PortAudio).

The capture source is anything with sounddevice's ``InputStream`` interface (a callback
receiving int16 blocks); :class:`FileSource` plays a file through the same interface, for tests
and machines without a sound card.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, AsyncIterator, Callable

import numpy as np

from whisperwire.server import wire

from .stream import CaptionPrinter, stream_chunks, write_output

__all__ = ["FileSource", "capture", "main"]

PORTAUDIO_HINT = (
    "PortAudio is not installed. Debian/Ubuntu: sudo apt-get install libportaudio2; "
    "Fedora: sudo dnf install portaudio; macOS: brew install portaudio"
)


class FileSource:
    """Plays a file as if it were a microphone: same constructor keywords and callback as
    ``sounddevice.InputStream`` (int16, mono), called from its own thread at real-time pace."""

    def __init__(self, path: str, *, samplerate: int, blocksize: int, callback: Callable,
                 channels: int = 1, dtype: str = "int16", device: Any = None, speed: float = 1.0
                 ) -> None:
        from .audio_file import read_audio

        self.samplerate, self.blocksize, self.callback = samplerate, blocksize, callback
        self.speed = speed
        self._pcm = read_audio(path, samplerate)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.finished = threading.Event()

    def _run(self) -> None:
        t0 = time.monotonic()
        for i in range(0, len(self._pcm), self.blocksize):
            if self._stop.is_set():
                break
            block = self._pcm[i : i + self.blocksize].reshape(-1, 1)
            due = t0 + i / self.samplerate / self.speed
            if (d := due - time.monotonic()) > 0:
                time.sleep(d)
            self.callback(block, len(block), None, None)
        self.finished.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> "FileSource":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_microphone(device: Any, samplerate: int, blocksize: int, callback: Callable) -> Any:
    import sounddevice as sd

    return sd.InputStream(device=device, channels=1, dtype="int16", samplerate=samplerate,
                          blocksize=blocksize, callback=callback)


async def capture(source_factory: Callable[..., Any], samplerate: int, *,
                  on_level: Callable[[float], None] | None = None,
                  stop: asyncio.Event | None = None) -> AsyncIterator[bytes]:
    """Blocks from a callback-driven source as an async stream of pcm_s16le bytes; ends when
    ``stop`` is set or the source finishes."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[bytes | None] = asyncio.Queue()

    def callback(indata: np.ndarray, frames: int, t: Any, status: Any) -> None:
        data = np.asarray(indata, dtype=np.int16).reshape(-1)
        if on_level:
            on_level(float(np.sqrt(np.mean((data / 32768.0) ** 2))) if len(data) else 0.0)
        loop.call_soon_threadsafe(q.put_nowait, data.astype("<i2").tobytes())

    src = source_factory(samplerate=samplerate, blocksize=samplerate // 10, callback=callback)
    stop = stop or asyncio.Event()
    with src:
        while not stop.is_set():
            getter = asyncio.ensure_future(q.get())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({getter, stopper}, timeout=0.5,
                                         return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if getter in done:
                yield getter.result()  # type: ignore[misc]
            else:
                getter.cancel()
                finished = getattr(src, "finished", None)
                if finished is not None and finished.is_set() and q.empty():
                    break
    while not q.empty():  # what was captured before the stop still goes out
        item = q.get_nowait()
        if item:
            yield item


def main(args: Any) -> int:
    if args.list_devices:
        try:
            import sounddevice as sd
        except OSError:
            print(PORTAUDIO_HINT, file=sys.stderr)
            return 2
        print(sd.query_devices())
        return 0
    if args.input_file:
        rate = 16000

        def factory(**kw: Any) -> FileSource:
            return FileSource(args.input_file, **kw)
    else:
        try:
            import sounddevice as sd
        except OSError:
            print(PORTAUDIO_HINT, file=sys.stderr)
            return 2
        try:
            info = sd.query_devices(args.device, "input")
        except (ValueError, sd.PortAudioError) as exc:
            print(f"no input device{'' if args.device is None else ' ' + repr(args.device)}: {exc}. "
                  "Try --list-devices.", file=sys.stderr)
            return 2
        rate = int(info["default_samplerate"])

        def factory(**kw: Any) -> Any:
            return open_microphone(args.device, **kw)

    printer = CaptionPrinter(show_level=True)
    params = wire.ListenParams(sample_rate=rate, language=args.language, session=args.session)

    async def go() -> Any:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            import signal

            loop.add_signal_handler(signal.SIGINT, stop.set)  # Ctrl-C: flush, wait for finals
        except (NotImplementedError, RuntimeError):
            pass
        chunks = capture(factory, rate, on_level=printer.set_level, stop=stop)
        return await stream_chunks(args.url, chunks, params, on_message=printer, token=args.token)

    try:
        res = asyncio.run(go())
    except OSError as exc:
        print(f"cannot reach the server at {args.url}: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_output(args.output, res.finals)
    return 0
