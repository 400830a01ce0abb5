"""Overload: a decoder slower than the audio makes captions coarser, never later and later, and
loses nothing. The real model, slowed by a wrapper that adds delay to every batch."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import LiveServer, load16k, references, run, s16
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.engine import Engine
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e


class SlowEngine(Engine):
    """The real engine, with ``delay`` seconds added to every decode batch (a starved CPU)."""

    delay = 1.2

    def decode_batch(self, reqs):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return super().decode_batch(reqs)


class StalledEngine(Engine):
    """The real engine, whose next decode batch first waits ``stall`` seconds (once)."""

    stall = 0.0

    def decode_batch(self, reqs):  # type: ignore[no-untyped-def]
        wait, self.stall = self.stall, 0.0
        time.sleep(wait)
        return super().decode_batch(reqs)


@pytest.mark.timeout(180)
def test_a_speaker_held_back_longer_than_a_keepalive_timeout_keeps_the_connection():
    """While more than ``max_backlog_s`` waits for the decoder the server stops reading the
    socket, so the client's answers to the server's keepalive pings wait behind its own audio.
    A decoder that stalls longer than uvicorn's ping timeout (20 s; on a slow CPU, flat-out
    input into a loaded server) had the connection failed with 1011 "keepalive ping timeout",
    and everything held back was lost. Liveness is the app's idle timeout instead."""
    files = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav"]
    audio = np.concatenate([load16k(f) for f in files])
    ref = " ".join(references()[f] for f in files)
    cfg = ServerConfig(max_backlog_s=2.0)
    engine = StalledEngine(cfg.engine)
    with LiveServer(cfg, engine, ws_ping_interval=0.2) as srv:
        engine.stall = 21.0
        params = wire.ListenParams()
        res = run(stream_chunks(srv.url, paced(s16(audio), params, 0.0), params,
                                close_timeout=120))
    assert (res.close_code, res.close_reason) == (1000, "")
    assert isinstance(res.messages[-1][2], wire.Closed)
    assert wer(ref, res.text) <= 0.12


def test_lag_stays_bounded_and_text_complete():
    files = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav",
             "LJ001-0005.wav", "LJ001-0006.wav", "LJ001-0007.wav"]
    audio = np.concatenate([load16k(f) for f in files])  # ~55 s, long utterances
    ref = " ".join(references()[f] for f in files)
    cfg = ServerConfig(status_interval_s=0.5, max_backlog_s=10.0)
    with LiveServer(cfg, SlowEngine(cfg.engine)) as srv:
        params = wire.ListenParams()
        # 3x real time: the decoder (>= 1.2 s a batch) cannot keep up with 0.5 s steps
        res = run(stream_chunks(srv.url, paced(s16(audio), params, 3.0), params))
    lags = [m.lag for m in res.of_type(wire.Status)]
    assert lags, "status events report the lag"
    # what the slowed decoder cannot take yet (the backlog) plus one window being decoded
    bound = cfg.max_backlog_s + cfg.stream.max_window_ms / 1000
    assert max(lags) < bound, f"lag {max(lags):.1f}s"
    # captions got coarser: fewer, longer finals than audio steps would give
    finals = res.finals
    assert len(finals) < len(audio) / 16000 / (cfg.stream.step_ms / 1000) / 2
    assert wer(ref, res.text) <= 0.12
    assert isinstance(res.messages[-1][2], wire.Closed)


@pytest.mark.timeout(300)
def test_flat_out_short_utterances_keep_memory_and_lag_bounded():
    """Short utterances pushed as fast as the socket takes them, into a slowed decoder: the
    server stops reading once ``max_backlog_s`` of speech waits (the client is held back by
    TCP), status reports the backlog, and every clip still arrives once."""
    import csv

    from conftest import SPEECH
    from whisperwire.server.wer import longest_missing, normalize

    names = ["en-06.wav", "en-05.wav"]
    with open(SPEECH / "real" / "references.tsv", newline="") as f:
        refs = {r["file"]: r["reference"] for r in csv.DictReader(f, delimiter="\t")}
    audio = np.concatenate([load16k(f"real/{n}") for n in names])  # 97 s, ~30 utterances
    ref = " ".join(refs[n] for n in names)
    cfg = ServerConfig(status_interval_s=0.25, max_backlog_s=6.0)
    engine = SlowEngine(cfg.engine)
    engine.delay = 0.4
    with LiveServer(cfg, engine) as srv:
        params = wire.ListenParams()
        res = run(stream_chunks(srv.url, paced(s16(audio), params, 0.0), params,
                                close_timeout=240))
    status = res.of_type(wire.Status)
    assert max(m.backlog for m in status) <= cfg.max_backlog_s + 1.0
    assert max(m.lag for m in status) <= cfg.max_backlog_s + cfg.stream.max_window_ms / 1000
    longest = longest_missing(normalize(ref), normalize(res.text))
    assert longest <= 3, "a stretch of speech was lost"
    assert wer(ref, res.text) <= 0.35
    assert isinstance(res.messages[-1][2], wire.Closed)
