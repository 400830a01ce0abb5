"""What one decode costs under each CPU compute type this machine's CTranslate2 offers.

Issue 10 asks for int8 against int8_float32 (and the rest): the int8 kernels differ between
CPUs (AVX2, AVX-512 VNNI, AMX), so the answer is per machine, which is why this is a bench and
not a rule in the server (``--compute-type auto`` stays int8 on CPU). Each type decodes the
same windows of real/en-01 (greedy, no prefix, one intra-op thread, numpy's BLAS at one
thread, as the server runs them) and records the median process CPU and wall time, and on how
many windows its text equals int8's.

``python -m bench.compute_types [--name NAME] [--windows 6]``
"""

from __future__ import annotations

import time

from .accuracy import items
from .harness import machine, table_main
from .threads import SECONDS, per_decode


def _texts(e, audio, sec: int, windows: int) -> list[str]:  # type: ignore[no-untyped-def]
    from whisperwire.server.decoding import DecodeRequest

    return [e.decode_batch([DecodeRequest(id=w + 1, audio=audio[(20 + 5 * w) * 16000:]
                                          [: sec * 16000].copy(), offset=0.0)])[0].text
            for w in range(1, windows + 1)]


def measure(windows: int) -> dict[str, object]:
    import ctranslate2

    from whisperwire.server.engine import Engine, EngineOptions

    audio = [i for i in items() if "en-01" in i.name][0].audio
    offered = sorted(ctranslate2.get_supported_compute_types("cpu"))
    order = ["int8"] + [c for c in offered if c != "int8"]
    rows, reference = [], {}
    for ct in order:
        e = Engine(EngineOptions(cpu_threads=1, compute_type=ct))
        t = time.perf_counter()
        e.load()
        load_s = time.perf_counter() - t
        for sec in SECONDS:
            cpu, wall = per_decode(e, audio, sec, windows)
            texts = _texts(e, audio, sec, windows)
            reference.setdefault(sec, texts)
            same = sum(a == b for a, b in zip(texts, reference[sec]))
            rows.append({"compute_type": ct, "window_s": sec, "cpu_ms": cpu, "wall_ms": wall,
                         "same_text_as_int8": same, "load_s": round(load_s, 2)})
    return {"machine": machine(), "windows": windows, "offered": offered, "rows": rows}


def markdown(name: str, res: dict) -> str:
    base = {r["window_s"]: r["cpu_ms"] for r in res["rows"] if r["compute_type"] == "int8"}
    lines = [f"# {name}", "",
             f"One greedy decode (no prefix, no prompt) of {res['windows']} windows of real/en-01 "
             "per length, tiny.en, one intra-op thread, one decode at a time, for each compute "
             f"type this CTranslate2 offers on CPU here ({', '.join(res['offered'])}): median "
             "process CPU and wall time per decode, and how many windows decode to int8's text.",
             "",
             "| compute type | window s | CPU ms | × int8 | wall ms | same text as int8 |",
             "|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['compute_type']} | {r['window_s']} | {r['cpu_ms']} | "
                     f"{r['cpu_ms'] / base[r['window_s']]:.2f} | {r['wall_ms']} | "
                     f"{r['same_text_as_int8']} of {res['windows']} |")
    lines += ["", f"Machine: {res['machine']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "python -m bench.compute_types", __doc__, "compute-types",
                      ("--windows", 6), measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
