"""The multi-device worker pool, on this machine's CPU (--devices cpu,cpu: the same code path
as cuda:0,cuda:1), including a worker killed mid-stream."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from conftest import LiveServer, load16k, references, run, s16
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.engine import EngineOptions
from whisperwire.server.pool import (
    NoWorkerError,
    PoolOptions,
    WorkerPool,
    WorkerState,
    parse_devices,
)
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e



def test_parse_devices():
    assert parse_devices("cuda:0,cuda:1") == ["cuda:0", "cuda:1"]
    assert parse_devices("cpu, cpu") == ["cpu", "cpu"]
    assert parse_devices("all", gpu_count=3) == ["cuda:0", "cuda:1", "cuda:2"]
    for bad in ("", "gpu0", "cuda:a"):
        with pytest.raises(ValueError):
            parse_devices(bad)
    with pytest.raises(ValueError, match="no GPU"):
        parse_devices("all", gpu_count=0)


def _two_sessions_with_a_fault(srv, pool, audio, fault: signal.Signals):
    """Two sessions stream ``audio``; once the first final is out (mid-stream, whatever the
    machine's speed), worker 0 gets ``fault``. Returns both results and the victim's pid."""
    import asyncio

    victim = pool.worker_pids[0]
    first_final = threading.Event()

    def on_message(m):
        if isinstance(m, wire.Final):
            first_final.set()

    def fault_later():
        if first_final.wait(120):
            os.kill(victim, fault)

    async def go():
        streams = []
        for i in range(2):
            p = wire.ListenParams(session=f"pool-{fault.name}-{i}")
            streams.append(stream_chunks(srv.url, paced(s16(audio), p, 2.0), p,
                                         on_message=on_message))
        return await asyncio.gather(*streams)

    t = threading.Thread(target=fault_later)
    t.start()
    results = run(go())
    t.join()
    assert first_final.is_set()
    return results, victim


def _complete_and_in_order(results, ref):
    for res in results:
        assert wer(ref, res.text) <= 0.1, res.text
        segs = [f.segment for f in res.finals]
        assert segs == list(range(len(segs)))  # nothing lost, nothing doubled
        assert isinstance(res.messages[-1][2], wire.Closed)
        assert not res.of_type(wire.Error)


def _replaced(pool, victim):
    deadline = time.time() + 60
    while time.time() < deadline and not (victim not in pool.worker_pids
                                          and all(w.alive for w in pool._workers)):
        time.sleep(0.2)
    return victim not in pool.worker_pids and all(w.alive for w in pool._workers)


LJ = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav"]


@pytest.mark.timeout(300)
def test_pool_spreads_sessions_and_survives_a_killed_worker():
    audio = np.concatenate([load16k(f) for f in LJ])
    ref = " ".join(references()[f] for f in LJ)
    pool = WorkerPool(EngineOptions(), ["cpu", "cpu"], cpu_threads_each=1)
    pool.load()
    with LiveServer(ServerConfig(), pool) as srv:
        assert srv.app.state.engine is pool and len(pool.worker_pids) == 2
        results, victim = _two_sessions_with_a_fault(srv, pool, audio, signal.SIGKILL)
        _complete_and_in_order(results, ref)
        assert _replaced(pool, victim)
        assert pool._workers[0].restarts == 1
        assert pool.stats.batches > 0


@pytest.mark.timeout(300)
def test_a_hung_worker_is_replaced_and_its_sessions_go_on():
    """SIGSTOP: the process is there but never answers. Its batch times out, it is killed, and
    its windows are decoded by the other worker."""
    audio = np.concatenate([load16k(f) for f in LJ])
    ref = " ".join(references()[f] for f in LJ)
    opts = PoolOptions(decode_timeout_s=4.0, decode_timeout_per_audio_s=0.5)
    pool = WorkerPool(EngineOptions(), ["cpu", "cpu"], cpu_threads_each=1, pool_options=opts)
    pool.load()
    with LiveServer(ServerConfig(), pool) as srv:
        t0 = time.monotonic()
        results, victim = _two_sessions_with_a_fault(srv, pool, audio, signal.SIGSTOP)
        try:
            _complete_and_in_order(results, ref)
            # a stalled session would wait for SIGCONT forever; here it ends at stream pace
            assert time.monotonic() - t0 < len(audio) / 16000 / 2.0 + 40
            assert _replaced(pool, victim)
            assert pool._workers[0].restarts == 1 and pool.health() is None
        finally:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.timeout(300)
def test_with_no_worker_left_decodes_fail_health_says_why_and_a_restart_brings_it_back(tmp_path):
    """The model directory disappears, then the only worker dies: its restart fails, decodes
    raise instead of waiting forever, health() says why, and the pool's loop survives to
    restart the worker once the model is back."""
    import asyncio
    import shutil

    from whisperwire.server.decoding import DecodeRequest
    from whisperwire.server.models import resolve_model

    model = tmp_path / "model"
    shutil.copytree(resolve_model("embedded"), model)
    pool = WorkerPool(EngineOptions(model=str(model)), ["cpu"], cpu_threads_each=1,
                      pool_options=PoolOptions(respawn_backoff_s=(0.5,)))
    pool.load()
    speech = load16k("jfk.wav")

    async def go():
        await pool.start()
        try:
            ok = await pool.decode(DecodeRequest(1, speech, 0.0, session="a"))
            assert "country" in ok.text and pool.health() is None
            shutil.move(str(model), str(tmp_path / "moved"))
            os.kill(pool.worker_pids[0], signal.SIGKILL)
            with pytest.raises(NoWorkerError):
                await asyncio.wait_for(pool.decode(DecodeRequest(2, speech, 0.0, session="a")),
                                       120)
            for _ in range(600):
                if pool._workers[0].state is WorkerState.FAILED:
                    break
                await asyncio.sleep(0.1)
            reason = pool.health()
            assert reason is not None and "failed to start" in reason, reason
            with pytest.raises(NoWorkerError):
                await pool.decode(DecodeRequest(3, speech, 0.0, session="b"))
            assert not any(t.done() for t in pool._tasks)
            shutil.move(str(tmp_path / "moved"), str(model))
            for _ in range(1200):
                if pool.health() is None:
                    break
                await asyncio.sleep(0.1)
            assert pool.health() is None
            again = await asyncio.wait_for(
                pool.decode(DecodeRequest(4, speech, 0.0, session="b")), 120)
            assert "country" in again.text
        finally:
            await pool.stop()

    run(go())


@pytest.mark.timeout(300)
def test_windows_that_waited_go_careful_first_each_with_its_own_result(monkeypatch):
    """A worker's queue is ordered as the one-process scheduler orders its own (engine's
    next_batch): windows that make finals go first, in a batch of their own, so under load
    the partials wait, not the finals. A mixed batch would hand every final back only after
    the steps' shapes were decoded too (one ``generate`` per shape, in turn)."""
    import asyncio

    from whisperwire.server.decoding import DecodeRequest

    pool = WorkerPool(EngineOptions(), ["cpu"], cpu_threads_each=1)
    pool.load()
    sent: list[list[tuple[int, bool]]] = []
    roundtrip = WorkerPool._roundtrip

    def recording(w, reqs):  # what goes to the worker process, in order; decoded for real
        sent.append([(r.id, r.careful) for r in reqs])
        return roundtrip(w, reqs)

    monkeypatch.setattr(WorkerPool, "_roundtrip", staticmethod(recording))
    long = np.concatenate([load16k(f) for f in LJ])[: 16000 * 20]
    jfk, lj = load16k("jfk.wav"), load16k("LJ001-0002.wav")

    async def go():
        await pool.start()
        try:
            first = asyncio.create_task(pool.decode(DecodeRequest(0, long, 0.0, careful=True)))
            while not sent:  # the worker decodes 20 s with beam search: the rest queue up
                await asyncio.sleep(0.01)
            later = [DecodeRequest(i, jfk if i % 2 else lj, 0.0, careful=i >= 4)
                     for i in range(1, 7)]
            res = await asyncio.gather(first, *(pool.decode(r) for r in later))
            return later, res
        finally:
            await pool.stop()

    later, res = run(go())
    assert sent[0] == [(0, True)]
    assert sent[1:] == [[(4, True), (5, True), (6, True)], [(1, False), (2, False), (3, False)]]
    for r, out in zip(later, res[1:]):  # each window got its own words back
        assert ("country" in out.text) == (r.audio is jfk), (r.id, out.text)
