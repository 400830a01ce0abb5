"""The multi-device worker pool, on this machine's CPU (--devices cpu,cpu: the same code path
as cuda:0,cuda:1), including a worker killed mid-stream."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from conftest import LiveServer, load16k, references, run
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.engine import EngineOptions
from whisperwire.server.pool import WorkerPool, parse_devices
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e


def s16(x):
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def test_parse_devices():
    assert parse_devices("cuda:0,cuda:1") == ["cuda:0", "cuda:1"]
    assert parse_devices("cpu, cpu") == ["cpu", "cpu"]
    assert parse_devices("all", gpu_count=3) == ["cuda:0", "cuda:1", "cuda:2"]
    for bad in ("", "gpu0", "cuda:a"):
        with pytest.raises(ValueError):
            parse_devices(bad)
    with pytest.raises(ValueError, match="no GPU"):
        parse_devices("all", gpu_count=0)


def test_pool_spreads_sessions_and_survives_a_killed_worker():
    files = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav"]
    audio = np.concatenate([load16k(f) for f in files])
    ref = " ".join(references()[f] for f in files)
    pool = WorkerPool(EngineOptions(), ["cpu", "cpu"], cpu_threads_each=1)
    pool.load()
    with LiveServer(ServerConfig(), pool) as srv:
        assert srv.app.state.engine is pool and len(pool.worker_pids) == 2
        victim = pool.worker_pids[0]
        killed = threading.Event()

        def kill_later():
            time.sleep(6.0)  # mid-stream
            os.kill(victim, signal.SIGKILL)
            killed.set()

        async def go():
            import asyncio

            streams = []
            for i in range(2):
                p = wire.ListenParams(session=f"pool-{i}")
                streams.append(stream_chunks(srv.url, paced(s16(audio), p, 2.0), p))
            return await asyncio.gather(*streams)

        t = threading.Thread(target=kill_later)
        t.start()
        results = run(go())
        t.join()
        assert killed.is_set()
        # both sessions complete, nothing lost, nothing doubled
        for res in results:
            assert wer(ref, res.text) <= 0.1, res.text
            segs = [f.segment for f in res.finals]
            assert segs == list(range(len(segs)))
            assert isinstance(res.messages[-1][2], wire.Closed)
        # the dead worker was replaced
        deadline = time.time() + 60
        while time.time() < deadline and victim in pool.worker_pids:
            time.sleep(0.2)
        assert victim not in pool.worker_pids and all(w.alive for w in pool._workers)
        assert pool._workers[0].restarts == 1
        assert pool.stats.batches > 0
