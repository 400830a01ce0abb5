"""``python -m bench.flood``: does one client sending silence flat out hold up the others?

An OpenAI realtime client sends 14 MiB ``input_audio_buffer.append`` events of digital silence
(230 s of 24 kHz audio each; where the server accepts permessage-deflate, ``--ws-deflate``, the
websockets client here shrinks each to 14 KB; the OpenAI SDK itself offers no compression) back to back for ``SECONDS``, while a prober asks
``/healthz`` every 100 ms and a speaker streams jfk in real time. The server's RSS is sampled
every 100 ms, and the slowest probes are kept with when they were asked. Silence costs no decode, so only the stream pace
(``--max-stream-speed``, server/pace.py) bounds what the flood costs the event loop. Each
setting runs on a fresh server, in one sitting. Writes bench/results/flood-<name>.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from . import harness
from .corpus import SPEECH, read16k

SECONDS = 20.0


def _flood(url: str, stop: threading.Event) -> None:
    from websockets.sync.client import connect

    pcm = bytes(24000 * 2 * 230)
    event = json.dumps({"type": "input_audio_buffer.append",
                        "audio": base64.b64encode(pcm).decode()})
    with connect(f"{url}/v1/realtime?intent=transcription", max_size=None,
                 additional_headers={"Authorization": "Bearer x"}, close_timeout=1) as ws:
        def drain() -> None:
            try:
                while True:
                    ws.recv()
            except Exception:  # noqa: BLE001 - closed
                return
        threading.Thread(target=drain, daemon=True).start()
        while not stop.is_set():
            ws.send(event)


def _probe(http: str, stop: threading.Event, out: list[float],
           at: list[float] | None = None) -> None:
    """``/healthz`` every 100 ms: each answer's seconds in ``out``, and when each was asked
    (``time.monotonic()``) in ``at``."""
    with httpx.Client() as c:
        while not stop.is_set():
            if at is not None:
                at.append(time.monotonic())
            t = time.perf_counter()
            c.get(f"{http}/healthz")
            out.append(time.perf_counter() - t)
            time.sleep(0.1)


def _speaker(url: str) -> list[float]:
    """Seconds from each final's audio end being sent to the final's arrival."""
    from whisperwire.client.stream import paced, stream_chunks
    from whisperwire.server import wire

    audio = read16k(SPEECH / "jfk.wav")
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    params = wire.ListenParams()
    res = asyncio.run(stream_chunks(url, paced(pcm, params, 1.0), params))
    return [t - res.sent_at(m.end) for t, _, m in res.messages if isinstance(m, wire.Final)]


def _audio_in(http: str) -> float:
    text = httpx.get(f"{http}/metrics").text
    return next(float(ln.split()[-1]) for ln in text.splitlines()
                if ln.startswith("whisperwire_audio_in_seconds_total"))


def _rss(pid: int, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        out.append(harness.rss_mib(pid))
        time.sleep(0.1)


def measure(speed: float, extra: tuple[str, ...] = ()) -> dict:
    with harness.server(extra=("--max-stream-speed", str(speed), *extra)) as srv:
        stop = threading.Event()
        rss: list[float] = [harness.rss_mib(srv.pid)]
        health: list[float] = []
        asked: list[float] = []
        quiet: list[float] = []
        _probe_for(srv.http, 3.0, quiet)
        flood = threading.Thread(target=_flood, args=(srv.url, stop), daemon=True)
        probe = threading.Thread(target=_probe, args=(srv.http, stop, health, asked),
                                 daemon=True)
        t0 = time.monotonic()
        threading.Thread(target=_rss, args=(srv.pid, stop, rss), daemon=True).start()
        flood.start()
        probe.start()
        time.sleep(2.0)
        finals = _speaker(srv.url)
        time.sleep(max(0.0, SECONDS - (time.monotonic() - t0)))
        taken, wall = _audio_in(srv.http), time.monotonic() - t0
        stop.set()
        probe.join(10)
    return {"max_stream_speed": speed, "server_args": list(extra), "seconds": wall,
            "audio_taken_s": taken, "rss_mib": {"before": round(rss[0]), "peak": round(max(rss))},
            "healthz_quiet_ms": _ms(quiet), "healthz_ms": _ms(health),
            # the slowest answers, and when they were asked (s from the flood's start; the
            # speaker starts at 2 s): what holds the loop, and whether it comes once or again
            "healthz_slowest": [{"at_s": round(a - t0, 2), "ms": round(1e3 * x, 1)} for x, a in
                                sorted(zip(health, asked), reverse=True)[:5]],
            "speaker_final_s": {"p50": round(statistics.median(finals), 2),
                                "max": round(max(finals), 2), "n": len(finals)}}


def _probe_for(http: str, seconds: float, out: list[float]) -> None:
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    _probe(http, stop, out)


def _ms(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"p50": round(xs[len(xs) // 2] * 1e3, 1), "p95": round(xs[int(len(xs) * 0.95)] * 1e3, 1),
            "max": round(xs[-1] * 1e3, 1), "n": len(xs)}


def markdown(name: str, o: dict) -> str:
    lines = [f"# {name}", "",
             f"An OpenAI realtime client sends 230 s `append` events of digital silence flat out "
             f"for {SECONDS:.0f} s; `/healthz` every 100 ms; jfk streamed in real time from 2 s "
             f"in. {harness.cpu_name(o['machine'])}.", "",
             "| --max-stream-speed | server flags | audio read (s) | × real time | "
             "/healthz quiet p50 ms | /healthz p50 ms | p95 ms | max ms | jfk final p50 s | "
             "max s | server RSS before / peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in o["runs"]:
        h = r["healthz_ms"]
        lines.append(f"| {r['max_stream_speed']:g} | {' '.join(r['server_args']) or '–'} | "
                     f"{r['audio_taken_s']:.0f} | "
                     f"{r['audio_taken_s'] / r['seconds']:.0f} | {r['healthz_quiet_ms']['p50']} | "
                     f"{h['p50']} | {h['p95']} | {h['max']} | {r['speaker_final_s']['p50']} | "
                     f"{r['speaker_final_s']['max']} | {r['rss_mib']['before']} / "
                     f"{r['rss_mib']['peak']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.flood", description=__doc__)
    p.add_argument("--speeds", default="0,100", help="--max-stream-speed values (0: none)")
    p.add_argument("--server-arg", action="append", default=[],
                   help="one more flag for every server (repeatable); with --alternate, the "
                        "runs alternate between with and without them")
    p.add_argument("--alternate", type=int, default=0,
                   help="this many pairs of runs, without and with --server-arg, per speed")
    p.add_argument("--name", default="flood")
    p.add_argument("--out", type=Path, default=harness.RESULTS)
    a = p.parse_args(argv)
    extra = tuple(a.server_arg)
    runs = []
    for s in a.speeds.split(","):
        if a.alternate:
            for _ in range(a.alternate):
                runs += [measure(float(s)), measure(float(s), extra)]
        else:
            runs.append(measure(float(s), extra))
    o = {"machine": harness.machine(), "runs": runs}
    harness.save_results(a.out, a.name, o, markdown(a.name, o))
    print(markdown(a.name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
