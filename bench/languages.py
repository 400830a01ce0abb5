"""Issue 11's bars: Mandarin with the multilingual base, and English in two-model mode.

    python -m bench.languages zh [--speed 1]   # zh clips alone and joined, language zh and auto
    python -m bench.languages en [--seconds N] # LJ+jfk stream: base+tiny.en draft, base, tiny.en

The summary also goes to bench/results/languages-zh.json or languages-en.json (``--name``).

Each configuration runs a fresh ``whisperwire serve`` (bench.harness) and streams in real time;
offline references are the same model with beam 5. Prints one JSON line per measurement and a
summary table. Timing figures need a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np

from . import harness
from .analysis import percentiles, reference_words, word_latencies
from .corpus import SPEECH, load, read16k, references

RESULTS = harness.RESULTS


def _stream(url: str, audio: np.ndarray, speed: float, **params):  # type: ignore[no-untyped-def]
    from whisperwire.client.stream import paced, stream_chunks
    from whisperwire.server import wire

    p = wire.ListenParams(**params)
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    return asyncio.run(stream_chunks(url, paced(pcm, p, speed), p, close_timeout=600))


def _model(name: str, threads: int = 2):  # type: ignore[no-untyped-def]
    from faster_whisper import WhisperModel

    from whisperwire.server.models import resolve_model

    return WhisperModel(resolve_model(name), device="cpu", compute_type="int8",
                        cpu_threads=threads)


def zh(speed: float) -> list[dict]:
    from whisperwire.server.text import cer

    refs = references(SPEECH / "zh")
    clips = {n: read16k(SPEECH / "zh" / n) for n in sorted(refs)}
    m = _model("base")
    offline = {n: "".join(s.text for s in m.transcribe(a, beam_size=5, language="zh")[0])
               for n, a in clips.items()}
    del m
    joined_ref = "".join(refs[n] for n in clips)
    joined = np.concatenate([x for a in clips.values() for x in (a, np.zeros(16000, np.float32))])
    off_text = "".join(offline[n] for n in clips)
    rows = [{"what": "offline beam 5", "raw": cer(joined_ref, off_text),
             "simplified": cer(joined_ref, off_text, "simplified")}]
    with harness.server(8, ("--model", "base")) as srv:
        for lang in ("zh", "auto"):
            texts = {n: _stream(srv.url, a, speed, language=lang).text for n, a in clips.items()}
            alone = "".join(texts[n] for n in clips)
            res = _stream(srv.url, joined, speed, language=lang, session=f"joined-{lang}")
            import httpx

            srt = httpx.get(f"{srv.http}/v1/sessions/joined-{lang}/transcript.srt",
                            timeout=30).text
            import re

            rows.append({"what": f"stream language={lang}",
                         "alone": cer(joined_ref, alone), "joined": cer(joined_ref, res.text),
                         "alone_simplified": cer(joined_ref, alone, "simplified"),
                         "srt_han_space_han": len(re.findall(r"[\u3400-\u9fff] +[\u3400-\u9fff]", srt)),
                         "languages": [x.language for x in res.of_type(_language())]})
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
            print(json.dumps({n: t for n, t in texts.items()}, ensure_ascii=False), flush=True)
    return rows


def _language():  # type: ignore[no-untyped-def]
    from whisperwire.server import wire

    return wire.Language


def en(seconds: float | None, speed: float) -> list[dict]:
    from whisperwire.server.wer import wer

    corpus = load(seconds)
    m = _model("base")
    segs, _ = m.transcribe(corpus.audio, language="en", beam_size=5, word_timestamps=True)
    segs = list(segs)
    off_text = " ".join(s.text.strip() for s in segs)
    ref_words = reference_words([(w.word, w.end) for s in segs for w in s.words])
    del m
    rows = [{"what": "base offline beam 5", "wer": wer(corpus.reference, off_text)}]
    for name, extra in (("base + tiny.en draft", ("--model", "base", "--draft-model", "tiny.en")),
                        ("base", ("--model", "base")), ("tiny.en", ("--model", "tiny.en"))):
        with harness.server(8, extra) as srv:
            cpu0, t0 = harness.cpu_seconds(srv.pid), time.monotonic()
            res = _stream(srv.url, corpus.audio, speed, language="en")
            cpu = harness.cpu_seconds(srv.pid) - cpu0
        lat = word_latencies(res, ref_words)
        rows.append({"what": name, "wer": wer(corpus.reference, res.text),
                     "partial": percentiles(lat.partial), "final": percentiles(lat.final),
                     "cpu_s_per_audio_s": cpu / corpus.seconds,
                     "wall_s": time.monotonic() - t0, "audio_s": corpus.seconds})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("zh", "en"))
    ap.add_argument("--speed", type=float, default=1.0, help="1 = real time")
    ap.add_argument("--seconds", type=float, default=None, help="en: stream length cap")
    ap.add_argument("--name", default=None, help="results file bench/results/NAME.json "
                    "(default languages-zh or languages-en)")
    a = ap.parse_args()
    rows = zh(a.speed) if a.what == "zh" else en(a.seconds, a.speed)
    out = json.dumps({"machine": harness.machine(), "rows": rows}, ensure_ascii=False)
    print(out)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{a.name or 'languages-' + a.what}.json").write_text(out + "\n")


if __name__ == "__main__":
    main()
