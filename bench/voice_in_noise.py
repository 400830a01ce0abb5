"""``python -m bench.voice_in_noise``: whether speech in noise still has a voice, against
steady noise alone (``StreamOptions.needs_voice``, ``serve --needs-voice``).

The rule drops every word while the utterances not yet final hold no two voiced 30 ms frames
in a row (server/voicing.py). Steady low-frequency noise (sox's brown noise) has none, and
webrtcvad takes it for speech; the question is what the rule would cost speech in noise. The
first 60 s of each file of real/, six LJ files and four zh/ files, with white noise and the
brown noise added at several SNRs: the VAD's utterances there that hold at least 0.1 s of the
clean file's speech and have no voice (their words would be lost), with how much speech they
hold, and how steady their energy is (p90 - p10 of the 30 ms frames' dB after the voicing's
high-pass) against the brown noise's own, second by second.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from whisperwire.server.vad import utterance_spans
from whisperwire.server.voicing import _FRAME, _HIGH_PASS, VOICED, voicing

from .corpus import SPEECH, read16k
from .harness import RESULTS, save_results

SR = 16000
CASES = [("white", 5), ("white", 0), ("brown", 5), ("brown", 0), ("brown", -5)]


def spans(x: np.ndarray) -> list[tuple[int, int]]:
    return [(a, b) for a, b, _ in utterance_spans(x)]


def spread_db(x: np.ndarray) -> float:
    y = np.convolve(np.asarray(x, np.float64), _HIGH_PASS, "same")
    n = len(y) // _FRAME
    db = 10 * np.log10(np.array([y[k * _FRAME:(k + 1) * _FRAME] @ y[k * _FRAME:(k + 1) * _FRAME]
                                 for k in range(n)]) + 1e-12)
    return float(np.percentile(db, 90) - np.percentile(db, 10))


def brown_noise(seconds: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "brown.wav"
        subprocess.run(["sox", "-R", "-n", "-r", str(SR), "-c", "1", "-b", "16", str(path),
                        "synth", str(seconds), "brownnoise"], check=True)
        return read16k(path)


def measure() -> dict:
    files = (sorted((SPEECH / "real").glob("en-*.wav")) + sorted(SPEECH.glob("LJ*.wav"))[:6]
             + sorted((SPEECH / "zh").glob("zh-*.wav"))[:4])
    brown = brown_noise(60)
    rng = np.random.default_rng(0)
    out: dict = {"brown_alone": {"voicing": [round(voicing(brown[i:i + SR]), 3)
                                             for i in range(0, 10 * SR, SR)],
                                 "spread_db": [round(spread_db(brown[i:i + SR]), 2)
                                               for i in range(0, 10 * SR, SR)]}, "cases": {}}
    for kind, snr in CASES:
        lost = []
        for f in files:
            clean = read16k(f)[: 60 * SR]
            speech = spans(clean)
            noise = (rng.standard_normal(len(clean)) if kind == "white"
                     else np.resize(brown, len(clean)))
            gain = np.sqrt(np.mean(clean ** 2) / np.mean(noise ** 2) / 10 ** (snr / 10))
            x = np.clip(clean + noise * gain, -1, 1).astype(np.float32)
            for a, b in spans(x):
                held = sum(max(0, min(b, d) - max(a, c)) for c, d in speech) / SR
                v = voicing(x[a:b])
                if v < VOICED and held > 0.1:
                    lost.append({"file": f.name, "start": round(a / SR, 2), "end": round(b / SR, 2),
                                 "speech_s": round(held, 2), "voicing": round(v, 3),
                                 "spread_db": round(spread_db(x[a:b]), 2)})
        out["cases"][f"{kind} {snr} dB"] = lost
    return out


def markdown(name: str, o: dict) -> str:
    b = o["brown_alone"]
    lines = [f"# {name}", "", "sox's brown noise alone, second by second: voicing "
             f"{min(b['voicing'])}-{max(b['voicing'])} (a voice: {VOICED} and more), energy "
             f"spread {min(b['spread_db'])}-{max(b['spread_db'])} dB.", "",
             "Speech in noise: VAD utterances with at least 0.1 s of speech and no voice (their "
             "words lost under `--needs-voice`).", "",
             "| noise | utterances | speech in them (s) | voicing | energy spread (dB) |",
             "|---|---|---|---|---|"]
    for case, lost in o["cases"].items():
        if not lost:
            lines.append(f"| {case} | 0 | | | |")
            continue
        s = [x["speech_s"] for x in lost]
        v = [x["voicing"] for x in lost]
        d = [x["spread_db"] for x in lost]
        lines.append(f"| {case} | {len(lost)} | {min(s)}-{max(s)} | {min(v)}-{max(v)} | "
                     f"{min(d)}-{max(d)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.voice_in_noise", description=__doc__)
    p.add_argument("--name", default="voice-in-noise")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    o = measure()
    save_results(a.out, a.name, o, markdown(a.name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
