"""A client that sends ``finalize`` after every 20 ms frame, at twice real time: how often the
finals say a phrase twice.

A review's client (jfk.wav in 20 ms frames, ``{"type":"finalize"}`` after each, 10 ms apart)
found finals that repeated a phrase ("and so my fellow American", then "Asp. And so my fellow
Americans. Asp."): every forced final is a short window, and Whisper, forced past its final
text, reads it again. Which windows are asked depends on the machine's pace, so it is a rate,
measured here over ``--runs`` streams against a fresh server (not in a test, which could only
pass or fail one draw). A repeat is a word trigram the finals say more often than jfk does.

``python -m bench.finalize_spam [--name NAME] [--runs 8]``
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from .corpus import SPEECH, read16k, references
from .harness import machine, server, table_main

FRAME = 320  # samples: 20 ms at 16 kHz


def _trigrams(words: list[str]) -> Counter:
    return Counter(tuple(words[i : i + 3]) for i in range(len(words) - 2))


async def _stream(url: str, pcm: bytes) -> str:
    import websockets

    from whisperwire.server import wire

    async with websockets.connect(url + "/v1/listen") as ws:
        async def send() -> None:
            for i in range(0, len(pcm), 2 * FRAME):
                await ws.send(pcm[i : i + 2 * FRAME])
                await ws.send(json.dumps({"type": "finalize"}))
                await asyncio.sleep(0.01)
            await ws.send(json.dumps({"type": "close"}))

        sender = asyncio.create_task(send())
        finals = [m.text async for raw in ws if isinstance(m := wire.decode(raw), wire.Final)]
        await sender
    return " ".join(finals)


def measure(runs: int) -> dict[str, object]:
    from whisperwire.server.wer import normalize

    audio = read16k(SPEECH / "jfk.wav")
    pcm = (audio.clip(-1, 1) * 32767).astype("<i2").tobytes()
    ref = normalize(references(SPEECH)["jfk.wav"])
    allowed = _trigrams(ref)
    rows = []
    with server() as srv:
        for _ in range(runs):
            text = asyncio.run(_stream(srv.url, pcm))
            said = normalize(text)
            extra = sum(n - max(1, allowed[g]) for g, n in _trigrams(said).items()
                        if n > max(1, allowed[g]))
            rows.append({"words": len(said), "repeated_trigrams": extra, "text": text})
    return {"machine": machine(), "reference_words": len(ref), "rows": rows}


def markdown(name: str, res: dict) -> str:
    rows = res["rows"]
    bad = sum(r["repeated_trigrams"] > 0 for r in rows)
    lines = [f"# {name}", "",
             "jfk.wav in 20 ms frames at twice real time, `finalize` after each frame, one "
             f"stream at a time against a fresh server ({len(rows)} runs). jfk has "
             f"{res['reference_words']} words. **Runs with a repeated phrase: {bad} of "
             f"{len(rows)}.**", "",
             "| run | words in finals | repeated trigrams | finals |", "|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {r['words']} | {r['repeated_trigrams']} | {r['text']} |")
    lines += ["", f"Machine: {res['machine']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "python -m bench.finalize_spam", __doc__, "finalize-spam",
                      ("--runs", 8), measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
