"""What a window's forced prefix costs the decoder, against the same tokens as previous text.

Every streaming decode forces the window's committed words as its prefix (8 s of context, some
30 tokens). CTranslate2 runs the prompt before ``<|notimestamps|>`` through the decoder in one
pass, but forces the prefix after it one step per token, as if generating it (issue 10: this
is where much of a stream's decoder time goes). This measures it on real windows, so a
policy that shortens or drops the prefix can be priced before it is built.

It also times the encoder alone on inputs of several lengths: the engine pads a window's
input (``encoder_granularity_s``), and the padding is paid on every step.

``python -m bench.prefix_cost [--name NAME] [--windows 6] [--reps 5]``
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from .accuracy import RESULTS, items
from .harness import machine, save_results

WINDOW_S = 9.0  # a step window: 8 s of committed context and the new speech
NEW_TOKENS = 8  # what a step decode writes after the prefix, about
ENCODER_INPUTS_S = (4, 6, 8, 10, 12, 14, 30)


def _time(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def measure(windows: int, reps: int, lengths: list[int]) -> dict[str, object]:
    import ctranslate2

    from whisperwire.server.engine import Engine, EngineOptions

    e = Engine(EngineOptions())
    e.load()
    model, tok = e._wm.model, e._tokenizer("transcribe", "en")
    base = list(tok.sot_sequence) + [tok.no_timestamps]
    audio = [i for i in items() if "en-01" in i.name][0].audio
    step = int(WINDOW_S * 16000)
    rows: dict[int, dict[str, list[float]]] = {k: {"prefix": [], "previous": []} for k in lengths}
    for w in range(windows):
        a = audio[(w + 1) * step : (w + 2) * step]
        feats = e._features(a, e._frames_for(WINDOW_S))[None]
        enc = model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(feats)),
                           to_cpu=False)
        heard = model.generate(enc, [base], beam_size=1, max_length=200)[0].sequences_ids[0]
        for k in lengths:
            if k > len(heard):
                continue
            forced = base + heard[:k]
            prev = ([tok.sot_prev] + heard[:k] if k else []) + base
            rows[k]["prefix"].append(_time(lambda p=forced: model.generate(
                enc, [p], beam_size=1, max_length=len(p) + NEW_TOKENS), reps))
            rows[k]["previous"].append(_time(lambda p=prev: model.generate(
                enc, [p], beam_size=1, max_length=len(p) + NEW_TOKENS), reps))
    table = {k: {m: round(1000 * statistics.median(v), 1) for m, v in r.items() if v}
             for k, r in rows.items()}
    encoder = {}
    for secs in ENCODER_INPUTS_S:
        feats = e._features(audio[: secs * 16000], secs * 100)[None]
        sv = ctranslate2.StorageView.from_array(np.ascontiguousarray(feats))
        encoder[secs] = round(1000 * _time(lambda s=sv: model.encode(s, to_cpu=False), reps), 1)
    return {"machine": machine(), "windows": windows, "reps": reps, "window_s": WINDOW_S,
            "new_tokens": NEW_TOKENS, "ms": table, "encoder_ms": encoder}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.prefix_cost", description=__doc__)
    p.add_argument("--name", default="prefix-cost")
    p.add_argument("--windows", type=int, default=6)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    res = measure(a.windows, a.reps, [0, 10, 20, 30, 40])
    lines = [f"# {a.name}", "",
             f"One greedy generate of {NEW_TOKENS} new tokens on {res['windows']} windows of "
             f"{WINDOW_S:.0f} s of real/en-01 (tiny.en int8, median of {a.reps} runs per "
             "window, then the median over windows), with k of the window's own tokens "
             "forced as the prefix, or given as previous text instead.", "",
             "| k tokens | forced prefix ms | as previous text ms |", "|---|---|---|"]
    for k, r in res["ms"].items():
        lines.append(f"| {k} | {r.get('prefix', '')} | {r.get('previous', '')} |")
    lines += ["", "The encoder alone (wall ms, median of the runs) on an input of:", "",
              "| input s | encoder ms |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in res["encoder_ms"].items()]
    m = res["machine"]
    lines += ["", f"Machine: {m}"]
    save_results(a.out, a.name, res, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
