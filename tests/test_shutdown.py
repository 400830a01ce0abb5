"""SIGTERM or Ctrl-C: the server stops taking sessions, finalises the open ones (their speakers
get the last finals and `closed`) and exits, without a traceback."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import httpx
import pytest
from conftest import load16k, run
from whisperwire.server import wire
from whisperwire.server.wer import normalize

pytestmark = pytest.mark.e2e


def serve(*flags: str, **popen) -> tuple[subprocess.Popen, int]:  # type: ignore[type-arg]
    """``whisperwire serve`` on a free port with ``flags``, once it says it is ready."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "whisperwire.server", "serve", "--port",
                             str(port), *flags], stderr=subprocess.PIPE, text=True, **popen)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return proc, port


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_stop_signal_finalises_open_sessions(tmp_path, sig):
    proc, port = serve("--log-level", "info", "--token", "s3cret")
    try:
        audio = load16k("LJ001-0001.wav")
        pcm = (audio * 32767).astype("<i2").tobytes()

        async def go():
            import websockets

            # the token in the query, as browsers send it: the line uvicorn logs holds it
            async with websockets.connect(f"ws://127.0.0.1:{port}/v1/listen?token=s3cret") as ws:
                await ws.recv()
                await ws.send(pcm)  # the whole sentence, then no close from us
                await asyncio.sleep(0.5)
                proc.send_signal(sig)
                return [wire.decode(m) async for m in ws], ws.close_code

        msgs, code = run(go())
        # uvicorn re-raises the signal after its graceful shutdown: the exit status says
        # SIGTERM; Ctrl-C (a KeyboardInterrupt) ends the server as it asked, with status 0
        assert proc.wait(60) in ((0, -signal.SIGTERM) if sig == signal.SIGTERM else (0,))
    finally:
        if proc.poll() is None:
            proc.kill()
    text = " ".join(m.text for m in msgs if isinstance(m, wire.Final))
    assert normalize(text)[-2:] == ["the", "exhibition"], text
    assert isinstance(msgs[-1], wire.Closed) and msgs[-1].reason == "server_shutdown"
    assert code == 1000
    log = proc.stderr.read()
    assert "event=drained sessions=1 left=0" in log
    assert "/v1/listen" in log, "the accept line is logged, with the token redacted"
    assert "s3cret" not in log
    assert "Traceback" not in log, log[-2000:]


def test_ctrl_c_in_the_terminal_reaches_the_worker_processes_too():
    """A terminal's Ctrl-C goes to its whole process group, decode worker processes
    (``--devices``) included: they leave the shutdown to the server, which drains through
    them, and nothing prints a traceback."""
    import os

    proc, _ = serve("--devices", "cpu,cpu", "--cpu-threads", "1", start_new_session=True)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # as the terminal does
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = proc.stderr.read()
    assert "event=drained" in log and "Traceback" not in log, log[-3000:]
