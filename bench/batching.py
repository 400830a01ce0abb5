"""What batching buys each stage of a step decode on CPU: encoder, generate and alignment.

Eight step windows of real/en-01 as a session asks for them (9.5 s: 8 s of committed context
forced as the prefix, its words from a decode of those 8 s, and 1.5 s of new speech; 40
tokens of previous text), all with one plan, so the engine may put them in one CTranslate2
call. For B = 1, 2, 4, 8 of them, each stage is timed run as one batch of B and run item by
item: process CPU ms per window, median of ``--repeats``, one intra-op thread (the engine's
CPU default).

``python -m bench.batching [--name NAME] [--repeats 5]``
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .accuracy import items
from .harness import machine, table_main

SIZES = (1, 2, 4, 8)
PROMPT_TOKENS = 40


def _windows(e):  # type: ignore[no-untyped-def]
    from whisperwire.server.decoding import DecodeRequest

    audio = [i for i in items() if "en-01" in i.name][0].audio
    tok = e._tokenizer("transcribe", None)
    before = e.decode_batch([DecodeRequest(0, audio[: 16000 * 28].copy(), 0.0)])[0].text
    prompt = tok.decode(tok.encode(" " + before)[:PROMPT_TOKENS]).strip()
    reqs = []
    for k in range(max(SIZES)):
        s = 16000 * (30 + 4 * k)
        ctx = e.decode_batch([DecodeRequest(0, audio[s : s + 16000 * 8].copy(), 0.0)])[0]
        prefix = " ".join(w.word.strip() for w in ctx.words if w.end < 7.8)
        reqs.append(DecodeRequest(k + 1, audio[s : s + int(16000 * 9.5)].copy(), 0.0,
                                  prompt=prompt, prefix=prefix))
    return reqs


def _cpu_ms(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        c = time.process_time()
        fn()
        out.append(time.process_time() - c)
    return 1000 * statistics.median(out)


def measure(repeats: int) -> dict[str, object]:
    import ctranslate2

    from whisperwire.server.engine import Engine, EngineOptions

    e = Engine(EngineOptions(cpu_threads=1, workers=1))
    e.load()
    reqs = _windows(e)
    tok = e._tokenizer("transcribe", None)
    prev = tok.encode(" " + reqs[0].prompt)
    plan = e._plan(reqs[0], len(prev))
    assert len({e._plan(r, len(prev)) for r in reqs}) == 1, "the windows must share a plan"
    feats = [e._features(r.audio, plan.frames) for r in reqs]
    pre = [tok.encode(" " + r.prefix) for r in reqs]
    prompts = [[tok.sot_prev, *prev, *tok.sot_sequence, tok.no_timestamps, *x] for x in pre]

    def encode(fs):  # type: ignore[no-untyped-def]
        return e._wm.model.encode(ctranslate2.StorageView.from_array(np.stack(fs)), to_cpu=False)

    encs = [encode([f]) for f in feats]
    texts = [[t for t in g[0] if t < tok.eot]
             for g in e._generate(encode(feats), prompts, 0.0, plan, [len(x) for x in pre])]
    frames = [int(r.duration * 100) for r in reqs]
    rows = []
    for b in SIZES:
        batched = encode(feats[:b])
        stages = {
            "encode": (lambda: encode(feats[:b]),
                       lambda: [encode([f]) for f in feats[:b]]),
            "generate": (lambda: e._generate(batched, prompts[:b], 0.0, plan),
                         lambda: [e._generate(x, [p], 0.0, plan)
                                 for x, p in zip(encs[:b], prompts[:b])]),
            "align": (lambda: e._wm.find_alignment(tok, texts[:b], batched, frames[:b]),
                      lambda: [e._wm.find_alignment(tok, [t], x, [n])
                               for t, x, n in zip(texts[:b], encs[:b], frames[:b])]),
        }
        for stage, (together, apart) in stages.items():
            rows.append({"batch": b, "stage": stage,
                         "batched_ms": round(_cpu_ms(together, repeats) / b, 1),
                         "one_by_one_ms": round(_cpu_ms(apart, repeats) / b, 1)})
    return {"machine": machine(), "repeats": repeats, "window_s": 9.5,
            "prefix_tokens": [len(x) for x in pre], "prompt_tokens": len(prev), "rows": rows}


def markdown(name: str, res: dict) -> str:
    lines = [f"# {name}", "",
             f"Step windows of {res['window_s']} s of real/en-01 (tiny.en int8, one intra-op "
             f"thread): {res['prompt_tokens']} tokens of previous text, forced prefixes of "
             f"{min(res['prefix_tokens'])}-{max(res['prefix_tokens'])} tokens. Process CPU ms "
             f"per window for each stage, median of {res['repeats']}, the B windows decoded as "
             "one CTranslate2 batch or one by one.", "",
             "| B | stage | batched ms / window | one by one ms / window | batched / one by one |",
             "|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['batch']} | {r['stage']} | {r['batched_ms']} | {r['one_by_one_ms']} "
                     f"| {r['batched_ms'] / r['one_by_one_ms']:.2f} |")
    lines += ["", f"Machine: {res['machine']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "python -m bench.batching", __doc__, "batching", ("--repeats", 5), measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
