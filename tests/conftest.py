"""Shared fixtures: the real speech in ../shared/speech, and a real server on a free port."""

from __future__ import annotations

import asyncio
import csv
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT.parent / "shared" / "speech"


def references() -> dict[str, str]:
    with open(SPEECH / "references.tsv", newline="") as f:
        return {r["file"]: r["reference"] for r in csv.DictReader(f, delimiter="\t")}


def load16k(name: str) -> np.ndarray:
    from whisperwire.client.audio_file import read_audio

    return read_audio(str(SPEECH / name), 16000).astype(np.float32) / 32768.0


def s16(x: np.ndarray) -> bytes:
    """float32 audio as the pcm_s16le a client sends."""
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def wav_bytes(x: np.ndarray, rate: int = 16000) -> bytes:
    """float32 audio as a 16-bit mono WAV file, as an upload sends it."""
    import io
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(s16(x))
    return buf.getvalue()


def espeak(text: str, rate: int = 16000) -> np.ndarray:
    """Synthetic speech from espeak-ng, as float32 at ``rate``."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is not installed (apt-get install espeak-ng)")
    from bench.phrases import espeak as synthesise

    return synthesise(text, rate)


def sox_noise(folder, kind: str = "brownnoise", seconds: float = 10.0) -> np.ndarray:
    """sox's ``kind`` noise (``brownnoise``: a rumble webrtcvad takes for speech), the same
    every run (-R), as float32 at 16 kHz, written under ``folder``."""
    import subprocess

    if shutil.which("sox") is None:
        pytest.fail("sox is not installed (apt-get install sox)")
    from whisperwire.client.audio_file import read_audio

    path = folder / f"{kind}.wav"
    subprocess.run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16", str(path), "synth",
                    str(seconds), kind], check=True)
    return (read_audio(str(path), 16000) / 32768).astype(np.float32)


class LiveServer:
    """The real app under uvicorn (websockets implementation) on 127.0.0.1, port 0."""

    def __init__(self, config=None, engine=None, sndbuf: int | None = None,  # type: ignore[no-untyped-def]
                 hub=None, **uvicorn_kw) -> None:
        import socket

        from whisperwire.server.app import create_app
        from whisperwire.server.cli import graceful_server

        self.app = create_app(config, engine, hub)  # (hub: channels shared, as on Ray Serve)
        self.server = graceful_server(self.app, host="127.0.0.1", port=0, ws="websockets-sansio",
                                      log_level="warning", lifespan="on", **uvicorn_kw)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if sndbuf:  # accepted connections inherit it: lets a test fill a client's pipe quickly
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        sock.bind(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]},
                                       daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}"
        self.http = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="session")
def live_server():
    with LiveServer() as s:
        yield s


@pytest.fixture(scope="module")
def engine(live_server):
    """The shared server's loaded engine (for tests that decode directly)."""
    return live_server.app.state.engine


@pytest.fixture(scope="session")
def offline_model():
    """The same embedded model, loaded for offline reference decodes."""
    from faster_whisper import WhisperModel

    from whisperwire.server.models import resolve_model

    return WhisperModel(resolve_model("embedded"), device="cpu", compute_type="int8")


async def read_all(ws) -> list:  # type: ignore[no-untyped-def]
    """Every message a websocket receives until it closes, decoded."""
    import websockets

    from whisperwire.server import wire

    out = []
    try:
        async for m in ws:
            out.append(wire.decode(m))
    except websockets.ConnectionClosed:
        pass
    return out


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)
