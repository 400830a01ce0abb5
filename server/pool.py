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
from enum import Enum
from typing import Any, Callable

from .decoding import DecodeRequest, DecodeResult
from .engine import Arrivals, EngineOptions, EngineStats, Saturation, next_batch

__all__ = ["NoWorkerError", "PoolOptions", "WorkerPool", "WorkerState", "parse_devices"]

log = logging.getLogger("whisperwire.pool")

WATCH_S = 1.0  # an idle worker's process is checked this often


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
    """Runs in the worker process: load an engine, then decode whatever batches arrive.
    Ctrl-C reaches a terminal's whole process group: the worker leaves it to the server,
    which drains its sessions through the workers and then stops them."""
    import signal

    from .engine import Engine

    signal.signal(signal.SIGINT, signal.SIG_IGN)

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


@dataclass(frozen=True)
class PoolOptions:
    """How long to wait on a worker before calling it hung, and how to bring one back.

    A batch that takes longer than ``decode_timeout_s`` plus ``decode_timeout_per_audio_s`` for
    each second of audio in it means the worker hangs (a stuck driver, a stopped process): it is
    killed and its windows are decoded elsewhere. Generous on purpose: CPU decoding runs at a
    tenth of real time, so a real batch never comes near.
    """

    decode_timeout_s: float = 30.0
    decode_timeout_per_audio_s: float = 2.0
    start_timeout_s: float = 300.0  # loading and warming the model in a new worker
    respawn_backoff_s: tuple[float, ...] = (1.0, 5.0, 30.0)  # after failed starts, then the last

    def batch_timeout(self, reqs: list[DecodeRequest]) -> float:
        return self.decode_timeout_s + self.decode_timeout_per_audio_s * sum(
            r.duration for r in reqs)


class WorkerState(Enum):
    STARTING = "starting"
    SERVING = "serving"
    RESTARTING = "restarting"  # died or hung; a new process is on its way
    FAILED = "failed"  # the last start failed; retried after a pause
    STOPPED = "stopped"


class NoWorkerError(RuntimeError):
    """No decode worker is running; the message says why (for the session's ``error``)."""


@dataclass
class _Worker:
    index: int
    device: str
    proc: Any = None
    conn: Any = None
    state: WorkerState = WorkerState.STARTING
    error: str = ""  # why the last start failed
    queue: asyncio.Queue | None = None  # arrivals
    waiting: list = field(default_factory=list)  # taken from the queue, not yet sent
    sessions: set[str] = field(default_factory=set)
    stats: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    failed_starts: int = 0
    decoding: bool = False  # a batch is out on it (windows put in its queue now wait)

    @property
    def pending(self) -> int:
        return len(self.waiting) + (self.queue.qsize() if self.queue is not None else 0)

    @property
    def alive(self) -> bool:
        return self.state is WorkerState.SERVING and self.proc is not None and \
            self.proc.is_alive()


class WorkerPool:
    """Drop-in for :class:`~.engine.Engine` across several devices.

    Failures end, never hang: a worker that dies or hangs (see :class:`PoolOptions`) is killed
    and restarted, and its windows go to another worker; a restart that fails is retried after a
    pause, and while no worker is serving, :meth:`decode` raises :class:`NoWorkerError` and
    :meth:`health` says why.
    """

    def __init__(self, options: EngineOptions, devices: list[str], cpu_threads_each: int = 0,
                 pool_options: PoolOptions | None = None) -> None:
        self.opt = options
        self.pool_opt = pool_options or PoolOptions()
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
        self.saturation = Saturation()  # each device: windows wait behind its batch
        self._arrivals = Arrivals(options.step_wait_limit_s)  # (steps wait, not for ever)

    # -- lifecycle -------------------------------------------------------------------------
    def _spawn(self, w: _Worker) -> dict[str, Any]:
        """Start ``w``'s process and wait until its model is loaded (blocking). Raises
        RuntimeError if it fails or takes longer than ``start_timeout_s``."""
        opts = replace(self.opt, device=w.device, cpu_threads=self.cpu_threads_each, workers=1)
        parent, child = self._ctx.Pipe()
        w.proc = self._ctx.Process(target=_worker_main, args=(child, asdict(opts)), daemon=True,
                                   name=f"whisperwire-worker-{w.index}")
        w.proc.start()
        child.close()
        w.conn = parent
        try:
            if not parent.poll(self.pool_opt.start_timeout_s):
                raise RuntimeError(f"no answer in {self.pool_opt.start_timeout_s:.0f}s")
            kind, info = parent.recv()
        except (EOFError, OSError, RuntimeError) as exc:
            w.proc.kill()
            raise RuntimeError(f"worker {w.index} on {w.device} failed to start: "
                               f"{exc or 'it exited'}") from None
        if kind != "ready":
            raise RuntimeError(f"worker {w.index} on {w.device} failed to start: {info}")
        w.state, w.error, w.failed_starts = WorkerState.SERVING, "", 0
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
            w.state = WorkerState.STOPPED
            try:
                w.conn.send(None)
            except Exception:  # noqa: BLE001
                pass
            if w.proc is not None:
                w.proc.join(5)
                if w.proc.is_alive():
                    w.proc.kill()

    def health(self) -> str | None:
        """None while at least one worker serves decodes; otherwise why not (for ``/readyz``
        and for refusing new sessions)."""
        if not self.loaded:
            return "the model is still loading"
        if any(t.done() for t in self._tasks):
            return "a decode worker's scheduler stopped"
        if any(w.alive for w in self._workers):
            return None
        return "no decode worker is running: " + "; ".join(
            f"worker {w.index} on {w.device} {w.state.value}" + (f" ({w.error})" if w.error else "")
            for w in self._workers)

    @property
    def workers(self) -> int:
        """Batches decoded at once: one per device."""
        return len(self._workers)

    @property
    def busy(self) -> bool:
        """A window waits in the queue of a device that is decoding, or did lately (as
        :attr:`.engine.Engine.busy`)."""
        return self.saturation.busy or any(w.decoding and w.pending for w in self._workers)

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
    def _pick(self, session: str) -> _Worker | None:
        """The session's worker (pinned on first use to the least loaded); None if none
        serves."""
        w = self._pins.get(session)
        if w is not None and w.alive:
            return w
        alive = [w for w in self._workers if w.alive]
        if not alive:
            return None
        w = min(alive, key=lambda x: (len(x.sessions), x.pending))
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
        """Decode on the session's worker. Raises NoWorkerError when no worker serves, or
        when the request's worker failed and no other could take it."""
        fut: asyncio.Future[DecodeResult] = asyncio.get_running_loop().create_future()
        w = self._pick(request.session)
        if w is None:
            raise NoWorkerError(self.health() or "no decode worker is running")
        if w.queue is None:
            raise RuntimeError("WorkerPool.start() was not called")
        self._arrivals.came(request)
        await w.queue.put((request, fut))
        return await fut

    async def _serve(self, w: _Worker) -> None:
        """One worker's loop: bring it back when it is down, else send it batches, in the
        one-process scheduler's order (:func:`~.engine.next_batch`: careful windows first,
        so the finals do not wait for the partials' decodes). Never raises (a failure of one
        worker is handled here, and the loop goes on)."""
        assert w.queue is not None
        while True:
            if w.state is not WorkerState.SERVING:
                await self._revive(w)
                continue
            if not w.waiting:
                try:
                    w.waiting.append(await asyncio.wait_for(w.queue.get(), WATCH_S))
                except asyncio.TimeoutError:
                    if not w.alive and w.state is WorkerState.SERVING:  # died while idle
                        await self._lost(w, [])
                    continue
            while not w.queue.empty():
                w.waiting.append(w.queue.get_nowait())
            self._arrivals.gone([x for x in w.waiting if x[1].done()])
            w.waiting = [(r, f) for r, f in w.waiting if not f.done()]
            if not w.waiting:
                continue
            batch, w.waiting = next_batch(w.waiting, self.opt.max_batch,
                                          overdue=self._arrivals.overdue)
            self._arrivals.gone(batch)
            w.decoding = True
            try:
                await self._decode_batch(w, batch)
            finally:
                w.decoding = False
                if w.pending:  # windows waited for this batch
                    self.saturation.waits(w.index, False)

    async def _decode_batch(self, w: _Worker, batch: list) -> None:
        loop = asyncio.get_running_loop()
        reqs = [r for r, _ in batch]
        timeout = self.pool_opt.batch_timeout(reqs)
        t0 = time.perf_counter()
        try:
            reply = await asyncio.wait_for(
                loop.run_in_executor(None, self._roundtrip, w, reqs), timeout)
        except asyncio.TimeoutError:
            log.error("event=worker_hung worker=%d device=%s pid=%s timeout_s=%.0f", w.index,
                      w.device, w.proc.pid if w.proc else None, timeout)
            w.proc.kill()  # SIGKILL ends even a stopped process; the blocked read then ends too
            await self._lost(w, batch)
            return
        except (EOFError, OSError):
            await self._lost(w, batch)
            return
        if reply[0] != "ok":
            err = RuntimeError(f"worker {w.index}: {reply[1]}")
            for _, f in batch:
                if not f.done():
                    f.set_exception(err)
            return
        w.stats = dict(reply[2])
        for obs in self.observers:
            try:
                obs(len(batch), time.perf_counter() - t0)
            except Exception:  # noqa: BLE001 - metrics must never stop decoding
                log.exception("a batch observer failed")
        for (_, f), res in zip(batch, reply[1]):
            if not f.done():
                f.set_result(res)

    @staticmethod
    def _roundtrip(w: _Worker, reqs: list[DecodeRequest]) -> tuple:
        w.conn.send(reqs)
        return w.conn.recv()

    async def _lost(self, w: _Worker, batch: list) -> None:
        """A worker died or hung mid-batch: hand its windows to the others (or keep them for
        its restart, when no other serves); :meth:`_serve` then brings it back."""
        w.state = WorkerState.RESTARTING
        w.restarts += 1
        log.error("event=worker_lost worker=%d device=%s exitcode=%s", w.index, w.device,
                  w.proc.exitcode if w.proc else None)
        for s in list(w.sessions):
            self._pins.pop(s, None)
        w.sessions.clear()
        # keep what it had decoded so far in the totals
        for k, v in w.stats.items():
            setattr(self._base_stats, k, getattr(self._base_stats, k) + v)
        w.stats = {}
        self._rehome(batch + self._drain(w), keep=w)

    @staticmethod
    def _drain(w: _Worker) -> list:
        """Everything ``w`` holds but has not sent, oldest first."""
        assert w.queue is not None
        held, w.waiting = w.waiting, []
        return held + [w.queue.get_nowait() for _ in range(w.queue.qsize())]

    def _rehome(self, pending: list, keep: _Worker | None) -> None:
        """Move requests to serving workers; with none, queue them on ``keep`` (restarting)
        or fail them."""
        for req, fut in pending:
            if fut.done():
                continue
            target = self._pick(req.session) or keep
            if target is None or target.queue is None:
                fut.set_exception(NoWorkerError(self.health() or "no decode worker is running"))
            else:
                target.queue.put_nowait((req, fut))

    async def _revive(self, w: _Worker) -> None:
        """Start ``w`` again; if that fails, its waiting requests go elsewhere or fail, and the
        next try comes after a pause (this never raises)."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._spawn, w)
        except Exception as exc:  # noqa: BLE001 - reported through health() and the log
            w.state, w.error = WorkerState.FAILED, str(exc)
            log.error("event=worker_start_failed worker=%d device=%s error=%s", w.index,
                      w.device, exc)
            self._rehome(self._drain(w), keep=None)
            backoff = self.pool_opt.respawn_backoff_s
            await asyncio.sleep(backoff[min(w.failed_starts, len(backoff) - 1)])
            w.failed_starts += 1
