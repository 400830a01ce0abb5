"""What one decode costs in CPU and wall time under each thread setting of the process.

Two thread pools take part in a decode: CTranslate2's intra-op threads (``--cpu-threads``) and
numpy's BLAS, which computes each window's mel filterbank. OpenBLAS starts one thread per core
and its idle threads spin after each call, so a process can burn a second core while its
decode runs on one. This decodes real windows of 2 s and 8 s (greedy, no prefix: a window's
own cost) with numpy's BLAS at one thread per core (as numpy starts) and at one (as the engine
sets it), for 1 and 2 intra-op threads, and records process CPU time and wall time per decode.

``python -m bench.threads [--name NAME] [--windows 6]``
"""

from __future__ import annotations

import statistics
import time

from .accuracy import items
from .harness import machine, table_main

SECONDS = (2, 8)


def per_decode(e, audio, sec: int, windows: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Median process CPU and wall ms of one greedy decode of ``sec`` seconds, over
    ``windows`` windows after a warm-up."""
    from whisperwire.server.decoding import DecodeRequest

    cpu, wall = [], []
    for w in range(windows + 1):  # the first is a warm-up
        a = audio[(20 + 5 * w) * 16000:][: sec * 16000].copy()
        c, t = time.process_time(), time.perf_counter()
        e.decode_batch([DecodeRequest(id=w + 1, audio=a, offset=0.0)])
        if w:
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
    return round(1000 * statistics.median(cpu), 1), round(1000 * statistics.median(wall), 1)


def measure(windows: int) -> dict[str, object]:
    from threadpoolctl import threadpool_limits

    from whisperwire.server.cores import usable_cores
    from whisperwire.server.engine import Engine, EngineOptions

    audio = [i for i in items() if "en-01" in i.name][0].audio
    rows = []
    for intra in (1, 2):
        e = Engine(EngineOptions(cpu_threads=intra))
        e.load()  # leaves numpy's BLAS one thread
        for blas, sec in [(b, s) for b in (usable_cores(), 1) for s in SECONDS]:
            with threadpool_limits(blas, user_api="blas"):
                cpu, wall = per_decode(e, audio, sec, windows)
            rows.append({"intra_threads": intra, "blas_threads": blas, "window_s": sec,
                         "cpu_ms": cpu, "wall_ms": wall})
    return {"machine": machine(), "windows": windows, "rows": rows}


def markdown(name: str, res: dict) -> str:
    lines = [f"# {name}", "",
             f"One greedy decode (no prefix, no prompt) of {res['windows']} windows of real/en-01 "
             "per length (tiny.en int8, one process, one decode at a time): median process CPU "
             "time and wall time per decode.", "",
             "| intra-op threads | numpy BLAS threads | window s | CPU ms | wall ms | CPU / wall |",
             "|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['intra_threads']} | {r['blas_threads']} | {r['window_s']} | "
                     f"{r['cpu_ms']} | {r['wall_ms']} | {r['cpu_ms'] / r['wall_ms']:.2f} |")
    lines += ["", f"Machine: {res['machine']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "python -m bench.threads", __doc__, "threads", ("--windows", 6), measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
