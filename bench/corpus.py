"""The benchmark stream: the LJ Speech files back to back (their natural pauses), then jfk."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPEECH = Path(__file__).resolve().parent.parent.parent / "shared" / "speech"


@dataclass
class Corpus:
    audio: np.ndarray  # 16 kHz float32
    reference: str
    files: list[str]

    @property
    def seconds(self) -> float:
        return len(self.audio) / 16000


def load(max_seconds: float | None = None, speech_dir: Path = SPEECH) -> Corpus:
    """Whole files in order until ``max_seconds`` would be passed (at least one file)."""
    from whisperwire.client.audio_file import read_audio

    with open(speech_dir / "references.tsv", newline="") as f:
        refs = {r["file"]: r["reference"] for r in csv.DictReader(f, delimiter="\t")}
    names = sorted(n for n in refs if n.startswith("LJ")) + ["jfk.wav"]
    parts, used, total = [], [], 0.0
    for n in names:
        x = read_audio(str(speech_dir / n), 16000).astype(np.float32) / 32768.0
        if max_seconds is not None and used and total + len(x) / 16000 > max_seconds:
            break
        parts.append(x)
        used.append(n)
        total += len(x) / 16000
    return Corpus(np.concatenate(parts), " ".join(refs[n] for n in used), used)


def noise_stream(seconds: float = 120.0, seed: int = 3) -> np.ndarray:
    """Half digital silence, then white and brown noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    half = n // 2
    white = 0.05 * rng.standard_normal(half // 2)
    brown = np.cumsum(rng.standard_normal(half - half // 2))
    brown = 0.2 * (brown - np.convolve(brown, np.ones(400) / 400, "same")) / 50
    return np.concatenate([np.zeros(n - half), white, brown]).astype(np.float32)
