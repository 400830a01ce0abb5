"""``python -m bench.nonspeech``: what the streaming policy writes for sounds that are not speech,
alone and right after speech, against offline decoding of the same audio.

Users judge a captioner on never inventing words. Steady noise and silence were covered by the
VAD's energy floor; this measures the sounds a meeting's microphone also hears: beeps, rings,
DTMF, a siren, a chord, a melody, a hum, keyboard clicks, noise bursts. Each is replayed in
process on the modelled clock (as ``python -m bench.replay``) in real time at several start
offsets, once alone (1 s of silence, the sound, 2 s of silence) and once after jfk (``--gap``
seconds after it, 1 by default; 0.15 puts it inside the VAD's hangover). Alone, every final
word is invented; after jfk, the invented words are those that differ from jfk replayed alone
at the same offset. Offline decoding of the same clips (faster-whisper, beam 5)
is measured next to it, and how many utterances the VAD opens in each sound.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np

SR = 16000


def _t(seconds: float) -> np.ndarray:
    return np.arange(int(SR * seconds)) / SR


def _fade(x: np.ndarray) -> np.ndarray:
    n = min(len(x) // 4, 160)
    w = np.ones(len(x))
    w[:n] = np.linspace(0, 1, n)
    w[len(x) - n:] = np.linspace(1, 0, n)
    return (x * w).astype(np.float32)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(SR * seconds), np.float32)


def _tone(hz: float, seconds: float, level: float = 0.3) -> np.ndarray:
    return _fade(level * np.sin(2 * np.pi * hz * _t(seconds)))


# the sounds whose spectrum is no few pure lines, as a voice's is not: the VAD's tone check
# passes them (``VadOptions.tone_peaks``)
NOT_TONAL = ("hum 50 Hz", "clicks", "noise bursts", "square wave", "sawtooth 120 Hz", "piano")


def sounds() -> dict[str, np.ndarray]:
    """The sounds, each a few seconds long, generated the same way every run."""
    rng = np.random.default_rng(1)
    out = {f"tone {hz} Hz": _tone(hz, 4) for hz in (300, 440, 1000, 3000)}
    out["beeps"] = np.concatenate([np.concatenate([_tone(880, 0.3), _silence(0.7)])
                                   for _ in range(8)])
    out["chord"] = _fade(0.1 * sum(np.sin(2 * np.pi * f * _t(6)) for f in
                                   (261.6, 329.6, 392.0, 523.3)))
    out["sweep"] = _fade(0.3 * np.sin(2 * np.pi * (200 * _t(5) + 300 * _t(5) ** 2)))
    pairs = [(697, 1209), (770, 1336), (852, 1477), (941, 1336), (697, 1336), (770, 1477),
             (852, 1209), (941, 1209)] * 2
    out["dtmf"] = np.concatenate([np.concatenate([
        _fade(0.15 * (np.sin(2 * np.pi * lo * _t(0.2)) + np.sin(2 * np.pi * hi * _t(0.2)))),
        _silence(0.15)]) for lo, hi in pairs])
    out["siren"] = _fade(0.3 * np.sin(2 * np.pi * np.cumsum(
        700 + 300 * np.sin(2 * np.pi * 0.8 * _t(6))) / SR))
    out["melody"] = np.concatenate([_tone(f, 0.35, 0.2) for f in
                                    (523, 587, 659, 698, 784, 698, 659, 587, 523, 659, 784,
                                     1046, 784, 659, 523, 392)])
    ring = _fade(0.2 * (np.sin(2 * np.pi * 440 * _t(2)) + np.sin(2 * np.pi * 480 * _t(2))))
    out["ring"] = np.concatenate([ring, _silence(2), ring, _silence(2)])
    n = len(_t(6))
    out["hum 50 Hz"] = _fade(0.1 * np.sign(np.sin(2 * np.pi * 50 * _t(6)))
                             + 0.05 * rng.standard_normal(n))
    clicks = _silence(6)
    for i in rng.choice(n - 200, 30, replace=False):
        clicks[i:i + 80] += 0.5 * rng.standard_normal(80) * np.exp(-np.arange(80) / 10)
    out["clicks"] = clicks
    out["noise bursts"] = np.concatenate([
        _fade(0.3 * rng.standard_normal(int(SR * 0.25))), _silence(1.0),
        _fade(0.3 * rng.standard_normal(int(SR * 0.15)))])
    # harmonic sounds, as periodic as a voice and no more tonal (many spectral peaks): a
    # buzzer's square-wave beeps, a sawtooth buzz, an instrument's notes with their overtones
    square = 0.2 * np.sign(np.sin(2 * np.pi * 880 * _t(0.3)))
    out["square wave"] = np.concatenate([np.concatenate([_fade(square), _silence(0.7)])
                                          for _ in range(8)])
    out["sawtooth 120 Hz"] = _fade(0.2 * (2 * ((120 * _t(4)) % 1) - 1))
    out["piano"] = np.concatenate([_fade(sum(
        0.25 / k * np.sin(2 * np.pi * f * k * _t(0.4)) * np.exp(-4 * _t(0.4))
        for k in range(1, 9))) for f in (262, 330, 392, 523, 392, 330, 262, 196)])
    return out


def invented(before: str, after: str) -> list[str]:
    """Words of ``after`` that ``before`` does not have where they stand (normalised)."""
    from whisperwire.server.wer import normalize

    a, b = normalize(before), normalize(after)
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return [w for tag, _, _, j1, j2 in ops if tag in ("insert", "replace") for w in b[j1:j2]]


def utterances(x: np.ndarray, vad) -> int:  # type: ignore[no-untyped-def]
    """How many utterances the VAD opens in ``x``: what reaches the decoder at all."""
    from whisperwire.server.vad import SpeechStart, VadSegmenter, webrtc_classifier

    seg = VadSegmenter(vad, webrtc_classifier(vad.aggressiveness))
    events = [e for i in range(0, len(x), 1600) for e in seg.feed(x[i:i + 1600])]
    return sum(isinstance(e, SpeechStart) for e in events + seg.flush())


def measure(engine, offsets: list[float], stream, vad, speech: np.ndarray,  # type: ignore[no-untyped-def]
            only: list[str] | None = None, gap: float = 1.0) -> dict:
    from .accuracy import Item
    from .accuracy import offline as offline_text
    from .replay import modelled_cost, replay

    def offline(x: np.ndarray) -> str:  # (beam 5 on the whole clip, as the corpus READMEs)
        return offline_text(Item("clip", x, ""), 1)

    def run(x: np.ndarray, off: float) -> str:
        x = np.concatenate([_silence(off), x]).astype(np.float32)
        return replay(engine, x, stream=stream, vad=vad, cost=modelled_cost).text

    base = {off: run(speech, off) for off in offsets}
    base_offline = offline(speech)
    out = {}
    for name, snd in sounds().items():
        if only and not any(x in name for x in only):
            continue
        lone = np.concatenate([_silence(1), snd, _silence(2)])
        late = np.concatenate([speech, _silence(gap), snd, _silence(2)])
        alone = [run(lone, off) for off in offsets]
        after = [run(late, off) for off in offsets]
        out[name] = {"utterances": utterances(lone, vad),
                     "offline_alone": offline(lone),
                     "offline_after_speech": invented(base_offline, offline(late)),
                     "alone": alone, "after_speech": [invented(base[o], t) for o, t in
                                                      zip(offsets, after)],
                     "after_text": after}
        print(name, alone, out[name]["after_speech"], flush=True)
    return out


def markdown(name: str, o: dict) -> str:
    offs = ", ".join(f"+{x:.2f} s" for x in o["offsets"])
    settings = ", ".join(o["settings"]) or "the defaults"
    lines = [f"# {name}", "", f"Replayed in real time on the modelled clock, start offsets {offs}, "
             f"with {settings}. Utterances: how many the VAD opens in the sound (what reaches "
             "the decoder at all). Alone: the finals (every word invented). After speech "
             f"({o.get('gap', 1.0):g} s after jfk): the final words that differ from jfk "
             "replayed alone (sampled fallback decodes of jfk itself also differ between "
             "runs).", "",
             "| sound | offline: alone / after speech | utterances | alone | after speech |",
             "|---|---|---|---|---|"]
    n_alone = n_after = 0
    for k, v in o["sounds"].items():
        alone = " / ".join(repr(t) if t else "–" for t in v["alone"])
        after = " / ".join(repr(" ".join(w)) if w else "–" for w in v["after_speech"])
        n_alone += sum(bool(t.strip()) for t in v["alone"])
        n_after += sum(bool(w) for w in v["after_speech"])
        off = f"{v['offline_alone']!r} / {' '.join(v['offline_after_speech'])!r}"
        lines.append(f"| {k} | {off} | {v['utterances']} | {alone} | {after} |")
    runs = len(o["sounds"]) * len(o["offsets"])
    lines += ["", f"Runs with invented words: **{n_alone} of {runs}** alone, "
              f"**{n_after} of {runs}** after speech."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from whisperwire.server.engine import Engine, EngineOptions

    from .accuracy import RESULTS
    from .corpus import SPEECH, read16k
    from .harness import save_results
    from .replay import options, vad_options

    p = argparse.ArgumentParser(prog="python -m bench.nonspeech", description=__doc__)
    p.add_argument("--name", default="nonspeech")
    p.add_argument("--offsets", default="0,0.11,0.23", help="seconds of silence first")
    p.add_argument("--only", default="", help="comma-separated parts of sound names")
    p.add_argument("--gap", type=float, default=1.0,
                   help="seconds of silence between jfk and the sound (0.15: inside the VAD's "
                        "hangover, where the sound's first frames resume the utterance)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                   help="a StreamOptions, EngineOptions or VadOptions field, as for bench.replay "
                        "(tone_peaks=0 sure_no_speech=0: the policy before these sounds "
                        "were measured)")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    stream, engine_opt = options(a.set, EngineOptions(cpu_threads=a.threads))
    engine = Engine(engine_opt)
    engine.load()
    offsets = [float(x) for x in a.offsets.split(",")]
    o = {"offsets": offsets, "settings": a.set, "gap": a.gap,
         "sounds": measure(engine, offsets, stream, vad_options(a.set), read16k(SPEECH / "jfk.wav"),
                           [x for x in a.only.split(",") if x], a.gap)}
    save_results(a.out, a.name, o, markdown(a.name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
