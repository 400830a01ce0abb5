"""Could a timestamp say where a step starts reading, instead of its forced prefix?

A step window holds 8 s of committed speech before the new speech, and the committed words are
forced as the decoder's prefix so that it writes only what follows them. CTranslate2 forces
those ~25 tokens one decoder step each (``prefix_cost.py``): about a third of a step's
generate time. Whisper's timestamp mode offers another way to say "start here": a forced
``<|t|>`` token at the committed point, the committed words given as previous text (read in one
pass), and optionally the last K committed words forced after the timestamp.

This replays a recording through the real session in real time, keeps the step windows that
have a forced prefix, and decodes each again anchored that way, against the engine's own
decode of it: same text or not, word differences, and wall ms per decode (one thread, greedy).
A variant that writes the same words for less time would be worth building; one that reads the
window again from its start (or loops) would not.

``python -m bench.anchor [--name NAME] [--every 8]``
"""

from __future__ import annotations

import time

import numpy as np

from .accuracy import items
from .harness import machine, table_main

RECORDINGS = ("en-01", "en-05")  # a fluent podcast and a non-native reader
LAST_WORDS = (0, 3, 6)  # committed words forced after the timestamp


def _steps(engine, every: int) -> list:  # type: ignore[no-untyped-def]
    """Every ``every``-th greedy step with a forced prefix, as the session asked for them."""
    from .replay import replay

    asked: list = []
    decode = engine.decode_batch

    def keep(reqs):  # type: ignore[no-untyped-def]
        asked.extend(reqs)
        return decode(reqs)

    engine.decode_batch = keep
    try:
        for it in items():
            if any(x in it.name for x in RECORDINGS):
                replay(engine, np.concatenate([np.zeros(1760, np.float32), it.audio]),
                       "realtime", language=it.language)
    finally:
        engine.decode_batch = decode
    return [r for r in asked if r.prefix and not r.careful][::every]


def _anchored(engine, r, k: int) -> str:  # type: ignore[no-untyped-def]
    """The text after the committed point, read with a timestamp anchor and ``k`` forced
    words instead of the whole forced prefix."""
    import ctranslate2

    model, tok = engine._wm.model, engine._tokenizer(r.task, "en")
    plan = engine._plan(r, 0)
    feats = engine._features(r.audio, plan.frames)[None]
    enc = model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(feats)),
                       to_cpu=False)
    pre = tok.encode(" " + r.prefix.strip())
    words = [a for a in engine._wm.find_alignment(
        tok, [pre], enc, [max(1, int(r.duration * 100))])[0] if a["word"]]
    kept = words[len(words) - k:] if k else []
    n = sum(len(a["tokens"]) for a in kept)
    head, tail = pre[: len(pre) - n], pre[len(pre) - n:]
    at = kept[0]["start"] if kept else words[-1]["end"]
    prompt = ([tok.sot_prev] + (engine._previous(r) + head)[-96:] + list(tok.sot_sequence)
              + [tok.timestamp_begin + int(round(at / 0.02))] + tail)
    out = model.generate(enc, [prompt], max_length=len(prompt) + plan.max_new, beam_size=1,
                         suppress_blank=True, suppress_tokens=[-1])[0].sequences_ids[0]
    return tok.decode([t for t in out[len(tail):] if t < tok.eot])


def measure(every: int) -> dict[str, object]:
    from whisperwire.server.engine import Engine, EngineOptions
    from whisperwire.server.wer import normalize, word_errors

    engine = Engine(EngineOptions(cpu_threads=1))
    engine.load()
    steps = _steps(engine, every)
    rows, examples = [], []
    own = []
    for r in steps:
        t = time.perf_counter()
        own.append((engine.decode_batch([r])[0].text, time.perf_counter() - t))
    words = sum(max(1, len(normalize(text))) for text, _ in own)
    rows.append({"variant": "forced prefix (the engine)", "same": len(steps), "diffs": 0,
                 "words": words, "ms": 1000 * float(np.median([s for _, s in own]))})
    for k in LAST_WORDS:
        same = diffs = 0
        secs = []
        for r, (text, _) in zip(steps, own):
            t = time.perf_counter()
            got = _anchored(engine, r, k)
            secs.append(time.perf_counter() - t)
            a, b = normalize(text), normalize(got)
            same += a == b
            diffs += word_errors(a, b)
            if a != b and len(examples) < 6:
                examples.append({"k": k, "engine": text, "anchored": got.strip()})
        rows.append({"variant": f"timestamp anchor, last {k} words forced", "same": same,
                     "diffs": diffs, "words": words, "ms": 1000 * float(np.median(secs))})
    return {"machine": machine(), "steps": len(steps), "recordings": RECORDINGS, "rows": rows,
            "examples": examples}


def markdown(name: str, res: dict) -> str:
    lines = [f"# {name}", "",
             f"{res['steps']} greedy step windows with a forced prefix, from "
             f"{' and '.join(res['recordings'])} replayed in real time, decoded again with a "
             "timestamp at the committed point (or at the start of the last K committed words, "
             "forced after it) and the committed words as previous text. Text compared with the "
             "engine's own decode of the window; ms: median wall time per decode, one thread "
             "(the anchored decode includes the alignment that finds the point).", "",
             "| variant | same text | word differences | ms |", "|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['variant']} | {r['same']} of {res['steps']} | {r['diffs']} in "
                     f"{r['words']} words | {r['ms']:.0f} |")
    lines += ["", "Examples (the engine's text, then the anchored decode's):", ""]
    lines += [f"- K={e['k']}: \"{e['engine']}\" → \"{e['anchored'][:200]}\"" for e in res["examples"]]
    lines += ["", f"Machine: {res['machine']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "python -m bench.anchor", __doc__, "anchor", ("--every", 8),
                      measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
