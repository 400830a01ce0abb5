"""Several devices: one decode worker process per device, behind the Engine's interface.

``--devices cuda:0,cuda:1`` (or ``all``, or ``cpu,cpu`` on a machine without GPUs — the same code
path) starts one process per device, each owning an :class:`~.engine.Engine`. A session is pinned
to the least-loaded worker when it first asks for a decode. A process per device means one GPU's
crash or hang cannot take the server down: a worker that dies is restarted, and the windows it
was decoding are decoded again by another worker (a request carries its audio, prompt and prefix,
so nothing is lost and no final is emitted twice).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from .decoding import DecodeRequest, DecodeResult
from .engine import EngineOptions, EngineStats

__all__ = ["WorkerPool", "parse_devices"]

log = logging.getLogger("whisperwire.pool")


def parse_devices(spec: str, gpu_count: int | None = None) -> list[str]:
    """``cuda:0,cuda:1`` / ``cpu,cpu`` / ``all`` (every GPU CTranslate2 sees)."""
    if spec == "all":
        if gpu_count is None:
            from .devices import gather_facts

            gpu_count = gather_facts().cuda_device_count
        if gpu_count == 0:
            raise ValueError("--devices all: no GPU is visible to CTranslate2")
        return [f"cuda:{i}" for i in range(gpu_count)]
    out = [d.strip() for d in spec.split(",") if d.strip()]
    for d in out:
        if not (d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())):
            raise ValueError(f"bad device {d!r} in --devices")
    if not out:
        raise ValueError("--devices is empty")
    return out


def _worker_main(conn: Any, options: dict[str, Any]) -> None:
    """Runs in the worker process: load an engine, then decode whatever batches arrive."""
    from .engine import Engine

    opts = EngineOptions(**options)
    try:
        eng = Engine(opts)
        eng.load()
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("failed", repr(exc)))
        return
    conn.send(("ready", {"model": eng.model_name, "device": eng.device,
                         "compute_type": eng.compute_type, "languages": eng.languages}))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        try:
            res = eng.decode_batch(msg)
            conn.send(("ok", res, asdict(eng.stats)))
        except Exception as exc:  # noqa: BLE001
            conn.send(("err", repr(exc)))


@dataclass
class _Worker:
    index: int
    device: str
    proc: Any = None
    conn: Any = None
    alive: bool = False
    queue: asyncio.Queue | None = None
    sessions: set[str] = field(default_factory=set)
    stats: dict[str, float] = field(default_factory=dict)
    restarts: int = 0


class WorkerPool:
    """Drop-in for :class:`~.engine.Engine` across several devices."""

    def __init__(self, options: EngineOptions, devices: list[str], cpu_threads_each: int = 0) -> None:
        self.opt = options
        self.devices = devices
        self.cpu_threads_each = cpu_threads_each
        self._ctx = mp.get_context("spawn")
        self._workers = [_Worker(i, d) for i, d in enumerate(devices)]
        self._pins: dict[str, _Worker] = {}
        self._tasks: list[asyncio.Task] = []
        self.observers: list[Callable[[int, float], None]] = []
        self.model_name, self.device, self.compute_type = options.model, "", ""
        self.languages: tuple[str, ...] = ()
        self._base_stats = EngineStats()
        self.loaded = False

    # -- lifecycle -------------------------------------------------------------------------
    def _spawn(self, w: _Worker) -> dict[str, Any]:
        opts = replace(self.opt, device=w.device, cpu_threads=self.cpu_threads_each)
        parent, child = self._ctx.Pipe()
        w.proc = self._ctx.Process(target=_worker_main, args=(child, asdict(opts)), daemon=True,
                                   name=f"whisperwire-worker-{w.index}")
        w.proc.start()
        child.close()
        w.conn = parent
        kind, info = parent.recv()
        if kind != "ready":
            raise RuntimeError(f"worker {w.index} on {w.device} failed to start: {info}")
        w.alive = True
        log.info("event=worker_ready worker=%d device=%s pid=%d", w.index, w.device, w.proc.pid)
        return info

    def load(self) -> None:
        infos = [self._spawn(w) for w in self._workers]
        self.model_name = infos[0]["model"]
        self.device = ",".join(f"{i['device']}" for i in infos)
        self.compute_type = infos[0]["compute_type"]
        self.languages = tuple(infos[0]["languages"])
        self.loaded = True

    async def start(self) -> None:
        for w in self._workers:
            w.queue = asyncio.Queue()
            self._tasks.append(asyncio.create_task(self._serve(w)))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for w in self._workers:
            try:
                w.conn.send(None)
            except Exception:  # noqa: BLE001
                pass
            if w.proc is not None:
                w.proc.join(5)
                if w.proc.is_alive():
                    w.proc.kill()

    @property
    def worker_pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None]

    @property
    def stats(self) -> EngineStats:
        total = EngineStats()
        for w in self._workers:
            for k, v in w.stats.items():
                setattr(total, k, getattr(total, k) + v)
        for k, v in asdict(self._base_stats).items():
            setattr(total, k, getattr(total, k) + v)
        return total

    # -- decoding --------------------------------------------------------------------------
    def _pick(self, session: str) -> _Worker:
        w = self._pins.get(session)
        if w is not None and w.alive:
            return w
        alive = [w for w in self._workers if w.alive] or self._workers
        w = min(alive, key=lambda x: (len(x.sessions), x.queue.qsize() if x.queue else 0))
        if session:
            old = self._pins.get(session)
            if old is not None:
                old.sessions.discard(session)
            self._pins[session] = w
            w.sessions.add(session)
        return w

    def release(self, session: str) -> None:
        w = self._pins.pop(session, None)
        if w is not None:
            w.sessions.discard(session)

    async def decode(self, request: DecodeRequest) -> DecodeResult:
        fut: asyncio.Future[DecodeResult] = asyncio.get_running_loop().create_future()
        w = self._pick(request.session)
        assert w.queue is not None, "WorkerPool.start() was not called"
        await w.queue.put((request, fut))
        return await fut

    async def _serve(self, w: _Worker) -> None:
        loop = asyncio.get_running_loop()
        assert w.queue is not None
        while True:
            batch = [await w.queue.get()]
            while len(batch) < self.opt.max_batch and not w.queue.empty():
                batch.append(w.queue.get_nowait())
            batch = [(r, f) for r, f in batch if not f.cancelled()]
            if not batch:
                continue
            t0 = time.perf_counter()
            try:
                reply = await loop.run_in_executor(None, self._roundtrip, w, [r for r, _ in batch])
            except (EOFError, OSError, BrokenPipeError):
                await self._lost(w, batch)
                continue
            if reply[0] == "ok":
                w.stats = {k: v for k, v in reply[2].items()}
                for obs in self.observers:
                    obs(len(batch), time.perf_counter() - t0)
                for (_, f), res in zip(batch, reply[1]):
                    if not f.done():
                        f.set_result(res)
            else:
                err = RuntimeError(f"worker {w.index}: {reply[1]}")
                for _, f in batch:
                    if not f.done():
                        f.set_exception(err)

    @staticmethod
    def _roundtrip(w: _Worker, reqs: list[DecodeRequest]) -> tuple:
        w.conn.send(reqs)
        return w.conn.recv()

    async def _lost(self, w: _Worker, batch: list) -> None:
        """A worker died mid-batch: hand its windows to the others, then bring it back."""
        w.alive = False
        log.error("event=worker_died worker=%d device=%s exitcode=%s", w.index, w.device,
                  w.proc.exitcode if w.proc else None)
        for s in list(w.sessions):
            self._pins.pop(s, None)
        w.sessions.clear()
        # keep what it had decoded so far in the totals
        for k, v in w.stats.items():
            setattr(self._base_stats, k, getattr(self._base_stats, k) + v)
        w.stats = {}
        pending = batch + [w.queue.get_nowait() for _ in range(w.queue.qsize())]
        others = [x for x in self._workers if x.alive]
        for req, fut in pending:
            target = self._pick(req.session) if others else w
            await target.queue.put((req, fut))
        w.restarts += 1
        await asyncio.get_running_loop().run_in_executor(None, self._spawn, w)
