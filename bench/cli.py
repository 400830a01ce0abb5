"""``python -m bench run|smoke``: the benchmark, written to bench/results/<name>.json and .md."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from . import analysis, corpus, harness

RESULTS = harness.RESULTS
FINAL_P95_LIMIT = 2.5
LAG_GROWTH_LIMIT = 0.5
MIX_HELP = ("stream four different recordings of about a minute (LJ, real/en-05, en-07, en-08; "
            "stream i plays recording i mod 4) instead of copies of the LJ stream; --seconds "
            "cuts the LJ stream only")


def offline_reference(audio: np.ndarray, threads: int) -> tuple[list[tuple[str, float]], str, float]:
    """Offline decode of the same audio with the same model: word end times, text, and the CPU
    seconds a greedy decode (no word timestamps) costs."""
    from faster_whisper import WhisperModel

    from whisperwire.server.models import resolve_model

    m = WhisperModel(resolve_model("embedded"), device="cpu", compute_type="int8",
                     cpu_threads=threads)
    segs, _ = m.transcribe(audio, language="en", beam_size=1, word_timestamps=True,
                           condition_on_previous_text=True)
    words = [(w.word, w.end) for s in segs for w in (s.words or [])]
    text = " ".join(w for w, _ in words)
    c0 = time.process_time()
    list(m.transcribe(audio, language="en", beam_size=1)[0])
    cpu = time.process_time() - c0
    return words, text, cpu


def evaluate(rec: harness.RunRecord, refs: list[tuple[list, str]], seconds: list[float],
             offline_wers: list[float]) -> dict:
    """Figures of one run; client i streamed recording ``i % len(refs)`` (its offline words
    and reference text in ``refs``, its length in ``seconds``, its offline WER)."""
    from whisperwire.server.wer import wer
    from whisperwire.server.wire_rules import violations

    per = []
    fin_all, par_all = [], []
    for i, res in enumerate(rec.streams):
        k = i % len(refs)
        ref_words, reference = refs[k]
        lat = analysis.word_latencies(res, ref_words)
        fin_all += lat.final
        par_all += lat.partial
        w = wer(reference, res.text)
        per.append({
            "recording": k,
            "wer": w,
            "wer_delta": w - offline_wers[k],
            "text": res.text,
            "final": analysis.percentiles(lat.final),
            "partial": analysis.percentiles(lat.partial),
            "lag_growth_s": analysis.lag_growth(lat.final_by_time),
            "matched_words": lat.matched,
            "reference_words": lat.reference,
            "tail_delivered": analysis.normalize(res.text)[-2:] == analysis.normalize(reference)[-2:],
            "protocol": violations([m for _, _, m in res.messages],
                                   res.sends[-1][1] if res.sends else None)[:5],
        })
    n = len(rec.streams)
    audio_s = sum(seconds[i % len(seconds)] for i in range(n))
    refused = sum(res.close_code == 1013 for res in rec.streams)  # all sessions in use
    ok = not refused and all(
        p["final"]["p95"] is not None and p["final"]["p95"] <= FINAL_P95_LIMIT
        and (p["lag_growth_s"] is None or p["lag_growth_s"] <= LAG_GROWTH_LIMIT)
        for p in per
    )
    return {
        "streams": n,
        "meets_latency_rule": ok,
        "refused": refused,
        "broke_protocol": sum(bool(p["protocol"]) for p in per),
        "final": analysis.percentiles(fin_all),
        "partial": analysis.percentiles(par_all),
        "wer_median": float(np.median([p["wer"] for p in per])),
        "wer_delta_median": float(np.median([p["wer_delta"] for p in per])),
        "server_cpu_s_per_audio_s": (rec.cpu_s / audio_s) if rec.cpu_s is not None else None,
        "rss_baseline_mib": rec.rss_baseline_mib,
        "rss_peak_mib": rec.rss_peak_mib,
        "rss_per_stream_mib": ((rec.rss_peak_mib - rec.rss_baseline_mib) / n)
        if rec.rss_peak_mib is not None and rec.rss_baseline_mib is not None else None,
        "wall_s": rec.wall_s,
        "per_stream": per,
    }


def silence_noise(srv: harness.ServerProcess) -> int:
    from whisperwire.server import wire

    rec = harness.stream_many(srv, corpus.noise_stream(120.0), 1, speed=0)
    return sum(len(m.text.split()) for _, _, m in rec.streams[0].messages
               if isinstance(m, (wire.Partial, wire.Final)))


def metrics_snapshot(srv: harness.ServerProcess) -> dict[str, float]:
    import httpx

    if srv.pid <= 0:
        return {}
    out = {}
    for line in httpx.get(srv.http + "/metrics").text.splitlines():
        if line.startswith("whisperwire_") and " " in line and "_bucket" not in line:
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def server_facts(srv: harness.ServerProcess) -> dict:
    """Where the server decodes (``/readyz``): a GPU run's table must not say int8 on CPU."""
    import httpx

    try:
        r = httpx.get(srv.http + "/readyz", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {k: r[k] for k in ("device", "compute_type", "decode_workers") if k in r}


def _model_line(out: dict) -> str:
    facts = next((r["server"] for r in out["runs"] if r.get("server")), None)
    if not facts:
        return "Model: embedded tiny.en."
    return (f"Model: embedded tiny.en {facts['compute_type']} on {facts['device']}, "
            f"{facts['decode_workers']} decode worker(s).")


def run(args: argparse.Namespace) -> dict:
    mix = getattr(args, "mix", False)
    corpora = corpus.mixed(args.seconds) if mix else [corpus.load(args.seconds)]
    for c in corpora:
        print(f"corpus: {len(c.files)} files, {c.seconds:.1f}s", flush=True)
    from whisperwire.server.wer import wer

    offline = [offline_reference(c.audio, args.threads) for c in corpora]
    refs = [(analysis.reference_words(words), c.reference) for (words, _, _), c in zip(offline, corpora)]
    seconds = [c.seconds for c in corpora]
    offline_wers = [wer(c.reference, text) for (_, text, _), c in zip(offline, corpora)]
    n_words = [len(c.reference.split()) for c in corpora]
    extra = (("--cpu-threads", str(args.threads)) if args.threads else ()) + tuple(
        getattr(args, "server_arg", None) or ())
    out: dict = {
        "name": args.name, "machine": harness.machine(), "audio_seconds": corpora[0].seconds,
        "files": corpora[0].files, "max_batch": args.max_batch,
        "server_args": list(extra),
        "offline": {"wer": float(np.average(offline_wers, weights=n_words)),
                    "text": offline[0][1],
                    "cpu_s_per_audio_s": sum(cpu for _, _, cpu in offline) / sum(seconds)},
        "runs": [],
    }
    if mix:
        out["mix"] = [{"files": c.files, "seconds": c.seconds, "offline_wer": w,
                       "offline_cpu_s_per_audio_s": o[2] / c.seconds}
                      for c, w, o in zip(corpora, offline_wers, offline)]
    for n in args.streams:
        with harness.server(args.max_batch, extra, args.url) as srv:
            rec = harness.stream_many(srv, [c.audio for c in corpora], n, speed=args.speed)
            r = evaluate(rec, refs, seconds, offline_wers)
            r["server_metrics"] = metrics_snapshot(srv)
            r["server"] = server_facts(srv)
            if args.noise and n == args.streams[0]:
                out["silence_noise_words"] = silence_noise(srv)
        if r["server_cpu_s_per_audio_s"] is not None:
            # offline greedy on the recordings this run played, as many times as it played them
            played = [i % len(corpora) for i in range(n)]
            off = sum(offline[k][2] for k in played) / sum(seconds[k] for k in played)
            r["offline_cpu_s_per_audio_s"] = off
            r["compute_ratio_to_offline"] = r["server_cpu_s_per_audio_s"] / off
        out["runs"].append(r)
        print(_row(r), flush=True)
    ok = [r["streams"] for r in out["runs"] if r["meets_latency_rule"]]
    out["capacity"] = max(ok) if ok else 0
    return out


def capacity(args: argparse.Namespace) -> dict:
    """The most real-time streams that hold the latency rule, by bisection on N: double N
    while it holds, then halve the gap between the last N that held and the first that did
    not. Every N tried is a row of the table (a fresh server each time)."""
    tried: dict[int, dict] = {}

    def holds(n: int) -> bool:
        one = argparse.Namespace(**{**vars(args), "streams": [n], "noise": False})
        out = run(one)
        tried[n] = out
        return out["runs"][0]["meets_latency_rule"]

    lo, hi, n = 0, None, 1
    while n <= args.max_streams and holds(n):
        lo, n = n, n * 2
    hi = n if n <= args.max_streams else None
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    first = tried[min(tried)]
    first["runs"] = [tried[k]["runs"][0] for k in sorted(tried)]
    first["streams_tried"] = sorted(tried)
    first["capacity"] = lo
    first["name"] = args.name
    return first


def _f(x, fmt="{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _points(x: float | None) -> float | None:
    return None if x is None else 100 * x


def _row(r: dict) -> str:
    return (f"| {r['streams']} | {_f(r['partial']['p50'])} | {_f(r['final']['p50'])} | "
            f"{_f(r['final']['p90'])} | {_f(r['final']['p95'])} | {_f(r['final']['max'])} | "
            f"{r['wer_median'] * 100:.1f} | {_f(_points(r.get('wer_delta_median')), '{:+.1f}')} | "
            f"{_f(r.get('server_cpu_s_per_audio_s'), '{:.3f}')} | "
            f"{_f(r.get('compute_ratio_to_offline'), '{:.1f}')} | {_f(r['rss_peak_mib'], '{:.0f}')} | "
            f"{_f(r['rss_per_stream_mib'], '{:.1f}')} | "
            f"{'yes' if r['meets_latency_rule'] else 'no'} |")


def _audio_line(out: dict) -> str:
    if "mix" not in out:
        return (f"Audio: {len(out['files'])} files, {out['audio_seconds']:.1f} s per stream, "
                "real-time pace.")
    def what(files: list[str]) -> str:
        return files[0] if len(files) == 1 else f"{len(files)} LJ files"

    each = "; ".join(
        f"{i}: {what(m['files'])} ({m['seconds']:.1f} s, offline WER {m['offline_wer'] * 100:.1f} %)"
        for i, m in enumerate(out["mix"]))
    return (f"Audio: stream i plays recording i mod {len(out['mix'])}, real-time pace: {each}. "
            "WER % is the median over streams, WER Δ the median of each stream's difference "
            "to its recording's offline WER.")


def markdown(out: dict) -> str:
    m = out["machine"]
    lines = [
        f"# {out['name']}",
        "",
        f"Machine: {m['cpus']} CPUs ({harness.cpu_name(m)}), {m['mem_gib']} GiB, Python {m['python']}, "
        f"CTranslate2 {m['ctranslate2']}. {_model_line(out)} max_batch={out['max_batch']}"
        f"{', server args: ' + ' '.join(out['server_args']) if out.get('server_args') else ''}.",
        _audio_line(out),
        f"Offline (same model, greedy): WER {out['offline']['wer'] * 100:.1f} %, "
        f"{out['offline']['cpu_s_per_audio_s']:.3f} CPU-s per audio-s"
        + (" (word- and time-weighted over the four; × offline compares each run with the "
           "recordings it played)." if "mix" in out else "."),
        "",
        "| streams | partial p50 s | final p50 s | final p90 s | final p95 s | final max s | WER % | "
        "WER Δ offline, points | server CPU-s / audio-s | × offline | peak RSS MiB | "
        "RSS / stream MiB | latency rule |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in out["runs"]]
    lines += [f"{r['streams']} streams: {r['refused']} refused (the server's --max-sessions)"
              for r in out["runs"] if r.get("refused")]
    lines += [f"{r['streams']} streams: {r['broke_protocol']} broke a rule of the protocol "
              "(server/wire_rules.py), e.g. " + next(p["protocol"][0] for p in r["per_stream"]
                                                      if p["protocol"])
              for r in out["runs"] if r.get("broke_protocol")]
    if out["runs"] and not any(r.get("broke_protocol") for r in out["runs"]) \
            and all("broke_protocol" in r for r in out["runs"]):
        lines.append("Every stream of every run kept the protocol's rules (server/wire_rules.py).")
    lines += ["", f"Capacity (every stream final p95 ≤ {FINAL_P95_LIMIT} s, lag not growing): "
              f"**{out['capacity']}** streams."]
    if "silence_noise_words" in out:
        lines.append(f"Words emitted on 2 min of silence and noise: {out['silence_noise_words']}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the full benchmark")
    r.add_argument("--name", default="bench")
    r.add_argument("--streams", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    r.add_argument("--seconds", type=float, default=None, help="cut the corpus (whole files)")
    r.add_argument("--max-batch", type=int, default=8)
    r.add_argument("--threads", type=int, default=0, help="server CPU threads (0: all)")
    r.add_argument("--speed", type=float, default=1.0)
    r.add_argument("--url", default=None, help="bench a running server instead of starting one")
    r.add_argument("--no-noise", dest="noise", action="store_false")
    r.add_argument("--server-arg", action="append", default=[],
                   help="passed to `whisperwire serve` (repeatable), e.g. --server-arg=--step-ms=700")
    r.add_argument("--out", type=Path, default=RESULTS, help="where results are written")
    r.add_argument("--mix", action="store_true", help=MIX_HELP)
    s = sub.add_parser("smoke", help="N=1 on short audio (CI)")
    s.add_argument("--name", default="smoke")
    s.add_argument("--out", type=Path, default=RESULTS)
    c = sub.add_parser("capacity", help="the most real-time streams that hold the latency "
                       "rule (bisection on N); a table of every N tried")
    c.add_argument("--name", default="capacity")
    c.add_argument("--seconds", type=float, default=60.0,
                   help="audio per stream (whole files; with --mix, of the LJ stream)")
    c.add_argument("--max-streams", type=int, default=32)
    c.add_argument("--max-batch", type=int, default=8)
    c.add_argument("--threads", type=int, default=0)
    c.add_argument("--server-arg", action="append", default=[])
    c.add_argument("--out", type=Path, default=RESULTS)
    c.add_argument("--mix", action="store_true", help=MIX_HELP)
    a = sub.add_parser("accuracy", help="streaming vs offline WER on every speech folder")
    a.add_argument("--name", default="accuracy")
    a.add_argument("--modes", default="realtime,flat,flat4", type=lambda s: s.split(","))
    a.add_argument("--parallel", type=int, default=1,
                   help="real-time streams at a time (1: one stream at a time)")
    a.add_argument("--threads", type=int, default=0, help="offline decoder CPU threads")
    a.add_argument("--only", default=None, help="comma-separated parts of file names")
    a.add_argument("--server-arg", action="append", default=[])
    a.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.cmd == "accuracy":
        from . import accuracy

        out = accuracy.run(args.name, args.modes, args.parallel, args.threads, args.only,
                           tuple(args.server_arg))
        print(accuracy.write(out, args.modes, args.out))
        return 0
    if args.cmd == "capacity":
        args.speed, args.url = 1.0, None
        out = capacity(args)
        print(write(out, args.out))
        return 0
    if args.cmd == "smoke":
        args = smoke_args(args.name, args.out)
    out = run(args)
    print(write(out, args.out))
    return 0


def smoke_args(name: str, out: Path) -> argparse.Namespace:
    return argparse.Namespace(name=name, streams=[1], seconds=12.0, max_batch=8, threads=0,
                              speed=1.0, url=None, noise=True, out=out)


def write(out: dict, where: Path) -> str:
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{out['name']}.json").write_text(json.dumps(out, indent=1))
    md = markdown(out)
    (where / f"{out['name']}.md").write_text(md)
    return md
