"""``whisperwire mic``: live captions from a microphone (sounddevice/PortAudio).

The capture source is anything with sounddevice's ``InputStream`` interface (a callback
receiving int16 blocks); :class:`FileSource` plays a file through the same interface
(``--input-file``), for tests and machines without a sound card.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
from whisperwire.server import wire

from .connect import ClientFault, check_output, check_token, run_client, ws_url
from .printer import CaptionPrinter
from .speaker import speak
from .stream import ctrl_c_sets, finish

__all__ = ["FileSource", "capture", "describe_devices", "input_devices", "main"]

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


NO_INPUT_ADVICE = (
    "plug in a microphone or headset (on Linux, `arecord -l` lists what ALSA sees), or pick "
    "another with --device (see --list-devices); to try WhisperWire without one, play a file: "
    "`whisperwire mic --input-file FILE` or `whisperwire stream FILE`"
)


def input_devices(devices: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(index, name) of each device that can record, from ``sounddevice.query_devices()``."""
    return [(i, str(d.get("name", "?"))) for i, d in enumerate(devices)
            if int(d.get("max_input_channels", 0)) > 0]


def describe_devices(devices: list[dict[str, Any]]) -> tuple[str, int]:
    """What ``--list-devices`` prints, and its exit status (1 when nothing can record)."""
    inputs = input_devices(devices)
    if not inputs:
        found = "no audio devices at all" if not devices else \
            f"{len(devices)} audio device(s), none of them an input"
        return f"no input device: PortAudio sees {found}; {NO_INPUT_ADVICE}", 1
    return "\n".join(f"{i:3d}  {name}" for i, name in inputs), 0


def _sounddevice() -> Any:
    try:
        import sounddevice as sd
    except OSError:
        raise ClientFault(PORTAUDIO_HINT) from None
    return sd


def _microphone(device: Any) -> tuple[int, Callable[..., Any]]:
    """The input's sample rate and a factory opening it; ClientFault when there is none."""
    sd = _sounddevice()
    if isinstance(device, str) and device.isdigit():
        device = int(device)
    try:
        info = sd.query_devices(device, "input")
    except (ValueError, sd.PortAudioError):
        devices = list(sd.query_devices())
        which = "" if device is None else f" {device!r}"
        if not input_devices(devices):
            raise ClientFault(f"no input device{which}: this machine has no microphone PortAudio "
                              f"can see; {NO_INPUT_ADVICE}") from None
        raise ClientFault(f"no input device{which}; see --list-devices") from None

    def factory(**kw: Any) -> Any:
        try:
            return open_microphone(device, **kw)
        except sd.PortAudioError as exc:  # busy, unplugged since, or a rate it cannot do
            raise ClientFault(f"cannot open the input device {info['name']!r}: {exc}") from None

    return int(info["default_samplerate"]), factory


def main(args: Any) -> int:
    def body() -> int:
        if args.list_devices:
            text, status = describe_devices(list(_sounddevice().query_devices()))
            # nothing to list is said as every other failure is: one sentence, named
            print(f"whisperwire: {text}" if status else text,
                  file=sys.stderr if status else sys.stdout)
            return status
        if args.input_file and args.device is not None:  # (the device was ignored unsaid)
            raise ClientFault("--device and --input-file: give one; --input-file plays a file "
                              "instead of a microphone")
        args.token = check_token(args.token)
        url = ws_url(args.url)
        check_output(args.output)
        if args.input_file:
            from .audio_file import read_audio

            read_audio(args.input_file, 16000)  # a missing or non-audio file is said now
            rate = 16000

            def factory(**kw: Any) -> FileSource:
                return FileSource(args.input_file, **kw)
        else:
            rate, factory = _microphone(args.device)
        printer = CaptionPrinter(show_level=True, one_per_line=getattr(args, "lines", False),
                                 url=url)
        params = wire.ListenParams(sample_rate=rate, language=args.language, session=args.session,
                                   task=getattr(args, "task", "transcribe"),
                                   zh_script=getattr(args, "zh_script", None))

        async def go() -> Any:
            stop, quit_now = asyncio.Event(), asyncio.Event()
            # Ctrl-C: stop capturing, flush, wait for the last finals; again: quit at once
            ctrl_c_sets(stop, then=quit_now)
            chunks = capture(factory, rate, on_level=printer.set_level, stop=stop)
            # a dropped connection comes back to the same session, the audio held meanwhile
            return await speak(url, chunks, params, on_message=printer, token=args.token,
                               say=printer.notice, quit=quit_now, stop=stop)

        res = asyncio.run(go())
        printer.close()
        return finish(res, url, args.output)

    return run_client(body, args.url)
