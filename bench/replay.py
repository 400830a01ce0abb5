"""Replay a recording through the streaming core in-process: the real session policy and the
real engine, no sockets, no waiting.

The sans-I/O core makes this possible: time is counted in samples, so a virtual clock decides
what the session has heard when each decode starts. ``realtime`` charges each decode its
measured wall time (audio keeps arriving meanwhile, as it would from a live speaker);
``flat`` hands the whole recording over before the first decode (a file pushed flat out, a
reconnect's backlog). It is how policy changes are tried on the whole corpus in minutes; the
WebSocket benchmark (``python -m bench accuracy``) is what the published figures come from.
"""

from __future__ import annotations

import time
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from whisperwire.server import wire
from whisperwire.server.decoding import DecodeRequest
from whisperwire.server.engine import Engine, EngineOptions
from whisperwire.server.session import StreamOptions, StreamSession
from whisperwire.server.vad import VadOptions, VadSegmenter, webrtc_classifier

CHUNK = 1600  # 100 ms, as a client sends


@dataclass
class Replay:
    finals: list[wire.Final] = field(default_factory=list)
    decodes: int = 0
    decoded_audio_s: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.finals)


def modelled_cost(req: DecodeRequest) -> float:
    """Roughly the seconds one decode of tiny.en int8 takes on 2 cores (fitted to the process
    CPU time of windows of 2 to 20 s on this project's AMD EPYC machine, 2026-11, divided by the
    1.5 cores a decode keeps busy). Not a benchmark: a fixed clock that makes a policy compare
    with itself while other work shares the machine."""
    if req.careful:
        return 0.25 + 0.016 * req.duration
    return 0.05 + 0.018 * req.duration


def slow_cpu_cost(req: DecodeRequest) -> float:
    """The same for the slower CPU a lone stream meets on the AVX2-only AMD EPYC (family 23,
    no AVX-512): the wall time of one decode on one thread, as a lone stream's decode runs
    (one decode worker per core), fitted to windows of 2 to 16 s of real/en-02 (2026-12):
    greedy 0.28 s for 2 s, 0.79 s for 8 s, 1.83 s for 16 s; beam 5 0.36, 1.11, 2.56 s."""
    if req.careful:
        return 0.06 + 0.155 * req.duration
    return 0.08 + 0.108 * req.duration


COSTS = {"fast": modelled_cost, "slow": slow_cpu_cost}


def replay(engine: Engine, audio: np.ndarray, mode: str = "realtime",
           stream: StreamOptions | None = None, vad: VadOptions | None = None,
           language: str | None = None, speed: float = 1.0,
           cost: Callable[[DecodeRequest], float] | None = None, busy: bool = False,
           lost_at: float | None = None, said: float = 0.0,
           said_last: wire.Word | None = None) -> Replay:
    """Stream ``audio`` (16 kHz float32) through a session; ``speed`` scales the virtual clock
    in realtime mode (2.0: the speaker talks twice as fast as real time). ``cost`` charges each
    decode a modelled time instead of its measured one (see :func:`modelled_cost`), so that a
    policy compares with itself on a busy machine. ``busy``: every decode asked for as if the
    engine were saturated (the finals a stream gets under load). ``lost_at``: the server is
    lost at that virtual second (realtime): the finals that went out before it, no flush.
    ``said``: the stream's first seconds were made final before (``StreamSession.said``), and
    ``said_last`` the channel's last word before them, on this stream's clock."""
    vo = vad or VadOptions()
    s = StreamSession(stream or StreamOptions(), VadSegmenter(vo, webrtc_classifier(vo.aggressiveness)),
                      language=language)
    s.said(said, said_last)
    return _Run(engine, s, audio, mode, speed, cost, busy, lost_at).run()


class _Run:
    """One replay's virtual clock: audio fed as it would have arrived, decodes charged their
    (measured or modelled) time, and the speaker talking on meanwhile."""

    def __init__(self, engine: Engine, s: StreamSession, audio: np.ndarray, mode: str,
                 speed: float, cost: Callable[[DecodeRequest], float] | None, busy: bool,
                 lost_at: float | None):
        self.engine, self.s, self.audio, self.mode, self.speed = engine, s, audio, mode, speed
        self.cost, self.busy, self.lost_at = cost, busy, lost_at
        self.out = Replay()
        self.fed = 0
        self.clock = 0.0  # virtual seconds since the first sample

    def run(self) -> Replay:
        while self.fed < len(self.audio):
            if self.mode != "flat":
                self.clock = max(self.clock, (self.fed + CHUNK) / 16000 / self.speed)
            if self.lost_at is not None and self.clock >= self.lost_at:
                return self.out
            self.feed_until(self.clock)
            if not self.drain():
                return self.out
        self.s.finish()
        self.collect()
        self.drain()
        assert self.s.flushed, "the session did not flush"
        return self.out

    def collect(self) -> None:
        new = [e for e in self.s.events() if isinstance(e, wire.Final)]
        self.out.finals += new
        # realtime: how long after its audio arrived each final word came (virtual clock)
        self.out.latencies += [self.clock - w.end / self.speed for f in new for w in f.words]

    def feed_until(self, t: float) -> None:
        n_all = len(self.audio)
        upto = n_all if self.mode == "flat" else min(n_all, int(t * self.speed * 16000))
        while self.fed < upto:
            n = min(CHUNK, upto - self.fed)
            self.s.feed_audio(self.audio[self.fed : self.fed + n])
            self.fed += n
        self.collect()  # (an early end decode's words become final when the VAD confirms it)

    def drain(self) -> bool:
        while (req := self.s.next_decode(busy=self.busy)) is not None:
            t0 = time.perf_counter()
            res = self.engine.decode_batch([req])[0]
            self.clock += self.cost(req) if self.cost is not None else time.perf_counter() - t0
            if self.lost_at is not None and self.clock >= self.lost_at:
                return False  # (the server was lost before this decode's answer went out)
            self.out.decodes += 1
            self.out.decoded_audio_s += req.duration
            # the speaker talked on while it decoded: that audio is in before the result, as
            # over a socket (a stream whose steps lag sees it: ``slow_hold_ms``)
            self.feed_until(self.clock)
            self.s.decoded(req.id, res)
            self.collect()
        return True


def sweep(engine: Engine, items: list, offsets: list[float], mode: str = "realtime",
          stream: StreamOptions | None = None, busy: bool = False,
          vad: VadOptions | None = None, cost: str = "fast") -> dict:
    """Replay each item once per start offset (that much silence first) on the modelled clock
    and score the finals. One replay is one draw of a chaotic process (a window that ends a
    little later changes every window after it, and Whisper follows its prompt's style), so
    a policy is judged by the mean over a few offsets, not by one run."""
    from .accuracy import errors, score_units

    files = {}
    for it in items:
        ref = score_units(it.reference, it.language)
        runs = []
        for off in offsets:
            audio = np.concatenate([np.zeros(int(off * 16000), np.float32), it.audio])
            r = replay(engine, audio, mode, stream=stream, vad=vad, language=it.language,
                       cost=COSTS[cost], busy=busy)
            e = errors(ref, score_units(r.text, it.language))
            lat = np.array(r.latencies) if r.latencies else np.zeros(1)
            runs.append({"offset": off, **e, "final_p50": float(np.median(lat)),
                         "final_p95": float(np.percentile(lat, 95)),
                         "latencies": [round(x, 3) for x in r.latencies],
                         "decodes": r.decodes, "text": r.text})
            print(f"{it.name} +{off:.2f} s: WER {100 * e['wer']:.1f} %, repeats "
                  f"{e['repeats']}, tail {'yes' if e['tail'] else 'no'}", flush=True)
        files[it.name] = {"words": len(ref), "runs": runs,
                          "wer_mean": float(np.mean([x["wer"] for x in runs]))}
    real = {k: v for k, v in files.items() if k.startswith("real/")}
    n = sum(v["words"] for v in real.values())
    weighted = sum(v["wer_mean"] * v["words"] for v in real.values()) / n if n else None
    return {"mode": mode, "busy": busy, "cost": cost, "offsets": offsets, "files": files,
            "real_weighted_wer": weighted}


def markdown(name: str, o: dict) -> str:
    offs = ", ".join(f"{x:.2f}" for x in o["offsets"])
    mode = o["mode"] + (", as under load" if o.get("busy") else "") + (
        ", the slow CPU's clock" if o.get("cost") == "slow" else "")
    settings = ", ".join(o.get("settings", [])) or "the defaults"
    lines = [f"# {name}", "", f"Replay on the modelled clock ({mode}), start offsets {offs} s, "
             f"with {settings}; WER % of the finals per offset, and their mean.", "",
             "| file | " + " | ".join(f"+{x:.2f} s" for x in o["offsets"])
             + " | mean | repeats | tails delivered | final p50 / worst p95 (s) |",
             "|---|" + "---|" * (len(o["offsets"]) + 4)]
    for k, v in o["files"].items():
        cells = " | ".join(f"{100 * r['wer']:.1f}" for r in v["runs"])
        reps = sum(r["repeats"] for r in v["runs"])
        p50 = np.median([r["final_p50"] for r in v["runs"]])
        p95 = max(r.get("final_p95", float("nan")) for r in v["runs"])
        tails = f"{sum(bool(r['tail']) for r in v['runs'])}/{len(v['runs'])}"
        # flat out, the whole file arrived before the first decode: no latency to speak of
        lat = f"{p50:.2f} / {p95:.2f}" if o["mode"] != "flat" else "–"
        lines.append(f"| {k} | {cells} | {100 * v['wer_mean']:.1f} | {reps} | {tails} | {lat} |")
    if o["real_weighted_wer"] is not None:
        lines += ["", f"real/, word-weighted mean: **{100 * o['real_weighted_wer']:.2f} %**"]
        pooled = [x for k, v in o["files"].items() if k.startswith("real/")
                  for r in v["runs"] for x in r.get("latencies", [])]
        if pooled and o["mode"] != "flat":
            lines.append(f"real/, every final word of every run: latency p50 "
                         f"{np.percentile(pooled, 50):.2f} s, p95 {np.percentile(pooled, 95):.2f} s "
                         f"({len(pooled)} words)")
    return "\n".join(lines) + "\n"


def _value(default: object, text: str) -> object:
    """``text`` in the type of a field whose default is ``default``."""
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(default, tuple):  # temperatures=0,0.2
        return tuple(float(x) for x in text.split(","))
    if default is None:  # an optional name (draft_model)
        return text
    return type(default)(text)


def _settings(cls: type, settings: list[str], base: object) -> object:
    """The ``OPTION=VALUE`` items that name a field of dataclass ``cls``, applied to ``base``."""
    from dataclasses import fields, replace

    names = {f.name for f in fields(cls)}
    kw = {key: _value(getattr(base, key), value)
          for key, _, value in (item.partition("=") for item in settings) if key in names}
    return replace(base, **kw)


def options(settings: list[str], engine: EngineOptions) -> tuple[StreamOptions, EngineOptions]:
    """``["commit_probability=0.3", "prompt_tokens=32", ...]``: fields of StreamOptions or of
    EngineOptions, applied to the defaults and to ``engine``. A name both have (the
    no-speech, log-probability and compression thresholds) is set in both. VadOptions'
    names are allowed too, and taken by :func:`vad_options`."""
    from dataclasses import fields

    known = {f.name for cls in (StreamOptions, EngineOptions, VadOptions) for f in fields(cls)}
    for item in settings:
        if item.partition("=")[0] not in known:
            raise SystemExit(f"--set {item}: no StreamOptions, EngineOptions or VadOptions has it")
    return (_settings(StreamOptions, settings, StreamOptions()),  # type: ignore[return-value]
            _settings(EngineOptions, settings, engine))


def vad_options(settings: list[str]) -> VadOptions:
    """The VadOptions fields among ``settings`` (``hangover_ms=300``), applied to the defaults."""
    return _settings(VadOptions, settings, VadOptions())  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .accuracy import RESULTS, items
    from .harness import save_results

    p = argparse.ArgumentParser(prog="python -m bench.replay",
                                description="the session policy on the corpus, in process")
    p.add_argument("--name", default="replay")
    p.add_argument("--mode", choices=("realtime", "flat"), default="realtime")
    p.add_argument("--offsets", default="0.11,0.23,0.37", help="seconds of silence first")
    p.add_argument("--only", default="", help="comma-separated parts of file names")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--model", default="embedded",
                   help="as for whisperwire serve; a multilingual one (base) adds zh/")
    p.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                   help="a StreamOptions, EngineOptions or VadOptions field for this sweep (a policy "
                        "to try; a name both have is set in both), repeatable")
    p.add_argument("--busy", action="store_true",
                   help="decode as if the engine were saturated: the finals a stream gets "
                        "under load (partial steps with busy_overlap_ms of context)")
    p.add_argument("--cost", choices=sorted(COSTS), default="fast",
                   help="the modelled clock: a decode's time on the AVX-512 EPYC (fast) or on "
                        "the AVX2-only one (slow)")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    only = [x for x in a.only.split(",") if x]
    stream, engine_opt = options(a.set, EngineOptions(model=a.model, cpu_threads=a.threads))
    engine = Engine(engine_opt)
    engine.load()
    chosen = [it for it in items(multilingual="zh" in engine.languages)
              if not only or any(x in it.name for x in only)]
    o = sweep(engine, chosen, [float(x) for x in a.offsets.split(",")], a.mode,
              stream=stream, busy=a.busy, vad=vad_options(a.set), cost=a.cost)
    o["settings"] = a.set
    save_results(a.out, a.name, o, markdown(a.name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
