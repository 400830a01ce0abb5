"""SIGTERM or Ctrl-C: the server stops taking sessions, finalises the open ones (their speakers
get the last finals and `closed`) and exits, without a traceback."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from conftest import load16k, read_all, run
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
    assert "event=drained sessions=1 cut_short=0 left=0" in log
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


def backlog_then(flags: tuple[str, ...], *signals: tuple[signal.Signals, float]) -> tuple:
    """Three minutes of real/ speech sent flat out to ``serve`` with ``flags``, then each
    signal after its delay: the speaker's messages, its close code, the seconds from the
    first signal to the end, and the server's log."""
    import csv

    from conftest import SPEECH

    with open(SPEECH / "real" / "references.tsv", newline="") as f:
        names = [r["file"] for r in csv.DictReader(f, delimiter="\t")]
    audio = np.concatenate([load16k(f"real/{n}") for n in names])[: 180 * 16000]
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    proc, port = serve("--log-level", "info", *flags)
    try:
        async def go():
            import websockets

            async with websockets.connect(f"ws://127.0.0.1:{port}/v1/listen", max_size=None,
                                          ping_timeout=None) as ws:
                await ws.recv()
                for i in range(0, len(pcm), 64000):
                    await ws.send(pcm[i : i + 64000])
                await asyncio.sleep(1.0)
                t0 = time.monotonic()
                for sig, after in signals:
                    await asyncio.sleep(after)
                    proc.send_signal(sig)
                msgs = await read_all(ws)
                return msgs, ws.close_code, time.monotonic() - t0

        msgs, code, took = run(go())
        status = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return msgs, code, took, status, proc.stderr.read()


@pytest.mark.timeout(180)
def test_a_backlog_the_drain_cannot_decode_is_cut_short_and_said(tmp_path):
    """Three minutes of speech sent flat out, then SIGTERM: more than the drain's deadline
    can decode. The stream is cut short at the deadline: its speaker gets what was final, an
    ``error`` ``shutdown_incomplete`` and a 1012 close without ``closed`` (the page and the CLI
    take that for a drop, and send the rest again to the restarted server), and the server
    exits soon after, without a traceback. Before, the drain waited 60 s, then uvicorn 30 s
    more, then cancelled the handlers with CancelledError tracebacks."""
    msgs, code, took, status, log = backlog_then(("--drain-timeout", "2"),
                                                 (signal.SIGTERM, 0.0))
    assert status in (0, -signal.SIGTERM)
    errors = [m for m in msgs if isinstance(m, wire.Error)]
    assert [e.code for e in errors] == ["shutdown_incomplete"], errors
    assert not any(isinstance(m, wire.Closed) for m in msgs)
    assert code == 1012
    assert took < 2 + 5, took
    assert "event=drained sessions=1 cut_short=1 left=0" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_cuts_the_drain_short_without_a_traceback():
    """Ctrl-C twice while a backlog decodes: the second one let the drain run on (26 s here)
    and then ended in uvicorn's CancelledError traceback from the lifespan; 'drained' was
    logged twice, the second time for no sessions."""
    msgs, _, took, _, log = backlog_then((), (signal.SIGINT, 0.0), (signal.SIGINT, 1.5))
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    assert log.count("event=drained") == 1, log[-3000:]
    assert any(isinstance(m, wire.Error) and m.code == "shutdown_incomplete" for m in msgs), msgs[-3:]
    assert took < 1.5 + 8, took
