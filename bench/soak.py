"""``python -m bench.soak --minutes 120``: one long session of real speech with pauses, watching
the server for growth. Every ``--every`` seconds it records the server's RSS, open file
descriptors, the session's lag (from ``status`` events) and the latency of the finals that
arrived; at the end it compares the first and last quarters. Writes
bench/results/soak-<minutes>m.json and .md."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import numpy as np

from whisperwire.client.stream import StreamResult, stream_chunks
from whisperwire.server import wire

from . import corpus, harness

RESULTS = harness.RESULTS


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def speech_with_pauses(minutes: float, rng: np.random.Generator):
    """Real speech (the LJ files and jfk, cycled) with 1-6 s pauses, paced in real time."""
    c = corpus.load()
    from whisperwire.client.audio_file import read_audio

    files = [read_audio(str(corpus.SPEECH / f), 16000) for f in c.files]
    t0 = time.monotonic()
    sent = 0
    i = 0
    while time.monotonic() - t0 < minutes * 60:
        x = files[i % len(files)]
        pause = np.zeros(int(rng.uniform(1, 6) * 16000), np.int16)
        buf = np.concatenate([x, pause]).astype("<i2").tobytes()
        for k in range(0, len(buf), 3200):
            sent += 1600
            delay = t0 + sent / 16000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield buf[k : k + 3200]
        i += 1


def soak(minutes: float, every: float, url: str | None = None,
         server_args: tuple[str, ...] = ()) -> dict:
    samples: list[dict] = []
    rng = np.random.default_rng(11)
    with harness.server(8, server_args, url) as srv:
        params = wire.ListenParams(session="soak")
        res = StreamResult()
        last_lag = [0.0]

        def on_message(m: wire.Message) -> None:
            if isinstance(m, wire.Status):
                last_lag[0] = m.lag

        async def run() -> StreamResult:
            task = asyncio.create_task(stream_chunks(
                srv.url, speech_with_pauses(minutes, rng), params, on_message=on_message,
                close_timeout=120))
            t0 = time.monotonic()
            while not task.done():
                await asyncio.sleep(every)
                samples.append({"t": time.monotonic() - t0, "rss_mib": harness.rss_mib(srv.pid),
                                "fds": fds(srv.pid), "lag_s": last_lag[0]})
            return await task

        res = asyncio.run(run())
    lat = [(t, t - res.sent_at(m.end)) for t, _, m in res.messages if isinstance(m, wire.Final)]

    def quarter(xs: list[tuple[float, float]], q: int) -> float | None:
        """Median of the values in quarter ``q`` (1..4) of the run."""
        if not xs:
            return None
        end = xs[-1][0]
        lo, hi = (q - 1) * end / 4, q * end / 4
        sel = [v for t, v in xs if (lo < t <= hi) or (q == 1 and t <= hi)]
        return float(np.median(sel)) if sel else None

    series = {k: [(s["t"], s[k]) for s in samples] for k in ("rss_mib", "fds", "lag_s")}
    out = {
        "minutes": minutes, "machine": harness.machine(), "server_args": list(server_args),
        "samples": samples,
        "finals": len(lat), "audio_seconds": res.sends[-1][1] if res.sends else 0,
        "final_latency_first_quarter_p50": quarter(lat, 1),
        "final_latency_last_quarter_p50": quarter(lat, 4),
        # after the warm-up, in which the decoder's memory grows as window shapes it has not
        # seen yet arrive (in one minute that alone was +12 to +17 % RSS)
        "rss_mib_second_quarter": quarter(series["rss_mib"], 2),
    }
    for k, xs in series.items():
        out[f"{k}_first_quarter"] = quarter(xs, 1)
        out[f"{k}_last_quarter"] = quarter(xs, 4)
        out[f"{k}_max"] = max((v for _, v in xs), default=None)
    return out


def markdown(o: dict) -> str:
    def f(x):  # type: ignore[no-untyped-def]
        return "–" if x is None else f"{x:.2f}"

    rows = [("RSS MiB", "rss_mib"), ("open fds", "fds"), ("lag s", "lag_s")]
    args = " ".join(o.get("server_args", []))
    lines = [f"# Soak, {o['minutes']:.0f} min", "",
             f"{o['audio_seconds'] / 60:.1f} min of audio, {o['finals']} finals, one session."
             + (f" Server args: `{args}`." if args else ""),
             "", "| figure | first quarter (median) | last quarter (median) | max |", "|---|---|---|---|"]
    for name, k in rows:
        lines.append(f"| {name} | {f(o[k + '_first_quarter'])} | {f(o[k + '_last_quarter'])} | {f(o[k + '_max'])} |")
    lines.append(f"| final latency s | {f(o['final_latency_first_quarter_p50'])} | "
                 f"{f(o['final_latency_last_quarter_p50'])} | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak")
    p.add_argument("--minutes", type=float, default=120)
    p.add_argument("--every", type=float, default=10.0)
    p.add_argument("--url", default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default=None, help="results file name (default soak-<minutes>m)")
    p.add_argument("--server-arg", action="append", default=[],
                   help="passed on to whisperwire serve (repeat: --server-arg=--decode-workers "
                        "--server-arg=2)")
    a = p.parse_args(argv)
    o = soak(a.minutes, a.every, a.url, tuple(a.server_arg))
    a.out.mkdir(parents=True, exist_ok=True)
    name = a.name or f"soak-{a.minutes:g}m"
    (a.out / f"{name}.json").write_text(json.dumps(o, indent=1))
    md = markdown(o)
    (a.out / f"{name}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
