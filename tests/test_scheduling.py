"""Which decodes the engine runs first, driven with numbers (no model)."""

from __future__ import annotations

import numpy as np

from whisperwire.server.decoding import DecodeRequest
from whisperwire.server.engine import next_batch


def req(i: int, careful: bool) -> tuple[DecodeRequest, int]:
    return DecodeRequest(id=i, audio=np.zeros(16000, np.float32), offset=0.0,
                         careful=careful), i


def test_careful_decodes_go_first_in_a_batch_of_their_own():
    waiting = [req(1, False), req(2, True), req(3, False), req(4, True)]
    batch, rest = next_batch(waiting, 8)
    assert [r.id for r, _ in batch] == [2, 4]
    assert [r.id for r, _ in rest] == [1, 3]  # still in arrival order
    batch, rest = next_batch(rest, 8)
    assert [r.id for r, _ in batch] == [1, 3] and rest == []


def test_a_step_that_waited_its_limit_goes_before_careful_decodes():
    """Careful decodes first, but not for ever: clients sending flat out keep careful decodes
    waiting all the time, and a real-time speaker's step (its one decode out) never ran."""
    waiting = [req(1, True), req(2, False), req(3, True), req(4, False)]
    batch, rest = next_batch(waiting, 8, overdue=lambda r: r.id == 4)
    assert [r.id for r, _ in batch] == [4]
    assert [r.id for r, _ in rest] == [1, 2, 3]
    batch, _ = next_batch(waiting, 8, overdue=lambda r: r.id in (2, 4))
    assert [r.id for r, _ in batch] == [2, 4]
    batch, _ = next_batch(waiting, 8, overdue=lambda r: r.id == 1)  # (a careful one: no matter)
    assert [r.id for r, _ in batch] == [1, 3]


def test_a_batch_holds_at_most_max_batch_in_arrival_order():
    waiting = [req(i, True) for i in range(5)] + [req(9, False)]
    batch, rest = next_batch(waiting, 2)
    assert [r.id for r, _ in batch] == [0, 1]
    assert [r.id for r, _ in rest] == [2, 3, 4, 9]


def test_decode_threads_rule():
    from whisperwire.server.engine import EngineOptions, decode_threads

    # on CPU one single-threaded decode per core, up to four sharing the cores out
    assert decode_threads(EngineOptions(), 1) == (1, 1)
    assert decode_threads(EngineOptions(), 2) == (2, 1)
    assert decode_threads(EngineOptions(), 6) == (4, 1)
    assert decode_threads(EngineOptions(), 8) == (4, 2)
    # a GPU decodes four batches at once (on an H200: 16 real-time streams held with one, 64
    # with four), whatever the cores
    assert decode_threads(EngineOptions(), 8, "cuda") == (4, 2)
    assert decode_threads(EngineOptions(), 1, "cuda") == (4, 1)
    # several workers share the cores out
    assert decode_threads(EngineOptions(workers=2), 2) == (2, 1)
    assert decode_threads(EngineOptions(workers=2), 16) == (2, 8)
    assert decode_threads(EngineOptions(workers=3, cpu_threads=2), 2) == (3, 2)


def test_an_engine_given_one_core_runs_one_decode():
    """A Ray Serve replica gives the engine its num_cpus; the machine's cores do not count."""
    from whisperwire.server.engine import Engine, EngineOptions

    eng = Engine(EngineOptions(cores=1))
    eng.load()
    assert eng.workers == 1


def meeting_engine(**options):  # type: ignore[no-untyped-def]
    """A real engine (two decode workers) whose decodes wait for each other at a barrier that
    only two decodes running at once can pass: it proves two ran side by side."""
    import threading

    from whisperwire.server.engine import Engine, EngineOptions

    barrier = threading.Barrier(2, timeout=20)

    class Meeting(Engine):
        def decode_batch(self, reqs):  # type: ignore[no-untyped-def]
            if any(r.id for r in reqs):  # not the warm-up
                barrier.wait()
            return super().decode_batch(reqs)

    eng = Meeting(EngineOptions(workers=2, cpu_threads=1, **options))
    eng.load()
    return eng


async def test_two_batches_decode_at_once_on_the_one_model():
    """With two decode workers, a second session's window does not wait for the first one's:
    each decode waits for the other at a barrier, which only two at once can pass."""
    import asyncio

    eng = meeting_engine(max_batch=1)
    assert eng.workers == 2
    await eng.start()
    try:
        audio = np.zeros(32000, np.float32)
        res = await asyncio.wait_for(asyncio.gather(
            eng.decode(DecodeRequest(1, audio, 0.0, session="a")),
            eng.decode(DecodeRequest(2, audio, 0.0, session="b"))), 60)
        assert len(res) == 2 and eng.stats.batches == 3  # the warm-up, then one each
    finally:
        await eng.stop()


def test_a_loaded_engine_leaves_numpy_one_blas_thread(engine):
    """OpenBLAS threads spin after each call; with one per core they burned about as much CPU
    as the decode itself (bench/results/threads.md)."""
    from threadpoolctl import threadpool_info

    blas = [x for x in threadpool_info() if x["user_api"] == "blas"]
    assert blas, "numpy's BLAS not found"
    assert all(x["num_threads"] == 1 for x in blas), blas


def test_a_batch_holds_one_shape_and_idle_workers_share_the_windows():
    """Windows of other shapes (encoder length, prompt length, ...) do not share a CTranslate2
    call: in one batch they ran one after another on one worker while another was idle."""
    waiting = [req(1, False), req(2, False), req(3, False), req(4, False), req(5, False)]
    shape = {1: "a", 2: "b", 3: "a", 4: "a", 5: "b"}.get

    def key(r):  # type: ignore[no-untyped-def]
        return shape(r.id)

    batch, rest = next_batch(waiting, 8, key)
    assert [r.id for r, _ in batch] == [1, 3, 4]
    assert [r.id for r, _ in rest] == [2, 5]
    # two workers free and two shapes waiting: one shape each
    batch, rest = next_batch(waiting, 8, key, idle=2)
    assert [r.id for r, _ in batch] == [1, 3, 4]
    batch, rest = next_batch(rest, 8, key, idle=1)
    assert [r.id for r, _ in batch] == [2, 5] and rest == []
    # more workers free than shapes waiting: the spare ones share the first shape's windows
    alike = [req(1, False), req(3, False), req(4, False)]
    batch, rest = next_batch(alike, 8, key, idle=2)
    assert [r.id for r, _ in batch] == [1, 3]
    assert [r.id for r, _ in rest] == [4]
    batch, _ = next_batch(waiting, 8, key, idle=3)  # shapes a and b, and one worker spare
    assert [r.id for r, _ in batch] == [1, 3]
    # careful decodes still go first, in a batch of their own
    batch, _ = next_batch([req(1, False), req(2, True)], 8, key, idle=2)
    assert [r.id for r, _ in batch] == [2]


async def test_two_windows_at_once_go_to_two_workers():
    """Two windows that arrive together, with two workers free, decode side by side (each
    waits for the other at a barrier, which only two decodes at once can pass), not one after
    the other in one batch."""
    import asyncio

    eng = meeting_engine(max_batch=8)
    await eng.start()
    try:
        res = await asyncio.wait_for(asyncio.gather(
            eng.decode(DecodeRequest(1, np.zeros(32000, np.float32), 0.0, session="a")),
            eng.decode(DecodeRequest(2, np.zeros(48000, np.float32), 0.0, session="b",
                                     prompt="And so"))), 60)
        assert len(res) == 2 and eng.stats.batches == 3  # the warm-up, then one each
    finally:
        await eng.stop()


async def test_the_engine_is_busy_while_windows_wait_for_a_worker(monkeypatch):
    """Sessions shorten their partial steps while the engine is busy: a window waits for a
    decode worker, or did a moment ago. A window that finds a worker free is no load."""
    import asyncio
    import threading

    from whisperwire.server import engine as engine_module
    from whisperwire.server.engine import Engine, EngineOptions

    gate = threading.Event()

    class Gated(Engine):
        def decode_batch(self, reqs):  # type: ignore[no-untyped-def]
            if any(r.id for r in reqs):  # not the warm-up
                gate.wait(20)
            return super().decode_batch(reqs)

    audio = np.zeros(16000, np.float32)
    for cores in (2, 1):
        gate.clear()
        eng = Gated(EngineOptions(cores=cores))
        eng.load()
        assert eng.workers == cores and not eng.busy
        await eng.start()
        try:
            first = [asyncio.ensure_future(eng.decode(DecodeRequest(i, audio, 0.0, session=str(i))))
                     for i in range(1, cores + 1)]
            await asyncio.sleep(0.3)
            assert not eng.busy  # a window on each worker, none waiting
            last = asyncio.ensure_future(eng.decode(DecodeRequest(9, audio, 0.0, session="9")))
            await asyncio.sleep(0.3)
            assert eng.busy  # it waits for a worker
            gate.set()
            await asyncio.wait_for(asyncio.gather(*first, last), 60)
            assert eng.busy  # for a moment after
            monkeypatch.setattr(engine_module, "BUSY_HOLD_S", 0.0)
            assert not eng.busy
            monkeypatch.undo()
        finally:
            gate.set()
            await eng.stop()


def test_a_step_s_wait_counts_from_when_it_was_queued():
    """Stamped as it is queued (it waited in the queue while every worker was busy), and for
    the multi-device pool as for one process."""
    import time

    from whisperwire.server.engine import Arrivals

    a = Arrivals(0.05)
    (r, _), (q, _) = req(1, False), req(2, False)
    a.came(r)
    assert not a.overdue(r) and not a.overdue(q)  # (one never queued is not overdue)
    time.sleep(0.06)
    assert a.overdue(r)
    a.gone([(r, None)])
    assert not a.overdue(r)
    assert not Arrivals(0.0).overdue(r)  # 0: no limit
