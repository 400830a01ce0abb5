"""``python -m bench accuracy``: streaming finals against offline decoding on every kind of
speech we have (../shared/speech/real/, the LJ stream, and zh/ for a multilingual model).

Each file is streamed over the WebSocket protocol to a fresh server, in real time and flat out
(and optionally several flat-out streams at once), and its joined finals are scored against
the reference next to offline decoding of the same file with the same model (faster-whisper,
beam 5, the way the corpus READMEs measured it). Per file it reports what users notice: the
WER, its distance from offline, whether the last words arrived, adjacent repeated words the
reference does not have (seams decoded twice) and the longest run of reference words missing
from the finals (a stretch dropped). In real time it also times each word, as ``python -m bench
run`` does on LJ (partial and final latency against the word's end in an offline decode with word
timestamps): the latency bars hold on hard speech only if they are measured there.
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from whisperwire.client.stream import StreamResult
from whisperwire.server.wire_rules import violations

from . import analysis, harness
from .corpus import SPEECH, read16k, references

RESULTS = harness.RESULTS
LJ_STREAM = [f"LJ001-{i:04d}.wav" for i in range(1, 9)]


@dataclass
class Item:
    name: str
    audio: np.ndarray  # 16 kHz float32
    reference: str
    language: str = "en"


def items(speech: Path = SPEECH, multilingual: bool = False) -> list[Item]:
    out = []
    real = references(speech / "real")
    out += [Item(f"real/{n}", read16k(speech / "real" / n), r) for n, r in sorted(real.items())]
    lj = references(speech)
    out.append(Item("LJ001-0001..0008", np.concatenate([read16k(speech / n) for n in LJ_STREAM]),
                    " ".join(lj[n] for n in LJ_STREAM)))
    if multilingual:
        zh = references(speech / "zh")
        out += [Item(f"zh/{n}", read16k(speech / "zh" / n), r, "zh") for n, r in sorted(zh.items())]
    return out


def score_units(text: str, language: str) -> list[str]:
    """Words, or characters for Chinese (CER)."""
    from whisperwire.server.wer import normalize

    words = normalize(text)
    if language == "zh":
        return [c for w in words for c in w]
    return words


def errors(ref: list[str], hyp: list[str]) -> dict:
    from whisperwire.server.wer import extra_repeats, longest_missing, word_errors

    return {
        "wer": word_errors(ref, hyp) / max(1, len(ref)),
        "tail": hyp[-2:] == ref[-2:],
        "repeats": len(extra_repeats(ref, hyp)),
        "longest_missing": longest_missing(ref, hyp),
    }


@functools.lru_cache(maxsize=1)
def offline_model(threads: int):  # type: ignore[no-untyped-def]
    from faster_whisper import WhisperModel

    from whisperwire.server.models import resolve_model

    return WhisperModel(resolve_model("embedded"), device="cpu", compute_type="int8",
                        cpu_threads=threads)


def offline(item: Item, threads: int) -> str:
    segs, _ = offline_model(threads).transcribe(item.audio, beam_size=5, language=item.language)
    return " ".join(s.text.strip() for s in segs)


def word_ends(item: Item, threads: int) -> list[analysis.RefWord]:
    """Where each word of an offline decode ends: the moments latency is counted from (a second
    pass, since word timestamps move faster-whisper's segment seeks and so its text)."""
    segs, _ = offline_model(threads).transcribe(item.audio, beam_size=5, language=item.language,
                                                word_timestamps=True)
    return analysis.reference_words([(w.word, w.end) for s in segs for w in (s.words or [])])


def latency(res: StreamResult, ref: list[analysis.RefWord]) -> dict:
    lat = analysis.word_latencies(res, ref)
    return {"final": analysis.percentiles(lat.final), "partial": analysis.percentiles(lat.partial),
            "final_s": lat.final, "partial_s": lat.partial}


def stream_all(srv: harness.ServerProcess, its: list[Item], speed: float, parallel: int
               ) -> list[StreamResult]:
    """Each item's stream (its messages, and ``text``: the joined finals), ``parallel`` streams
    at a time."""
    from whisperwire.client.stream import paced, stream_chunks
    from whisperwire.server import wire

    async def one(it: Item) -> StreamResult:
        pcm = (np.clip(it.audio, -1, 1) * 32767).astype("<i2").tobytes()
        params = wire.ListenParams(language=None if it.language == "en" else it.language)
        return await stream_chunks(srv.url, paced(pcm, params, speed), params, close_timeout=600)

    async def all_() -> list[StreamResult]:
        sem = asyncio.Semaphore(parallel)

        async def gated(it: Item) -> StreamResult:
            async with sem:
                return await one(it)

        return await asyncio.gather(*(gated(it) for it in its))

    return asyncio.run(all_())


def run(name: str, modes: list[str], parallel: int, threads: int, only: str | None,
        server_args: tuple[str, ...] = ()) -> dict:
    parts = [x for x in (only or "").split(",") if x]
    its = [it for it in items() if not parts or any(x in it.name for x in parts)]
    out: dict = {"name": name, "machine": harness.machine(), "server_args": list(server_args),
                 "parallel": parallel, "files": {}}
    for it in its:
        ref = score_units(it.reference, it.language)
        off = errors(ref, score_units(offline(it, threads), it.language))
        out["files"][it.name] = {"seconds": len(it.audio) / 16000, "offline": off}
        print(f"offline {it.name}: {off['wer'] * 100:.1f} %", flush=True)
    for mode in modes:
        speed, n = {"realtime": (1.0, parallel), "flat": (0.0, 1), "flat4": (0.0, 4)}[mode]
        with harness.server(8, server_args) as srv:
            streams = stream_all(srv, its, speed, n)
        for it, res in zip(its, streams):
            text = res.text
            e = errors(score_units(it.reference, it.language), score_units(text, it.language))
            e["text"] = text
            e["protocol"] = violations([m for _, _, m in res.messages],
                                       res.sends[-1][1] if res.sends else None)
            if mode == "realtime" and it.language == "en":
                e["latency"] = latency(res, word_ends(it, threads))
            out["files"][it.name][mode] = e
            print(f"{mode} {it.name}: {e['wer'] * 100:.1f} %", flush=True)
    return out


def markdown(out: dict, modes: list[str]) -> str:
    m = out["machine"]
    lines = [
        f"# {out['name']}",
        "",
        f"Machine: {m['cpus']} CPUs ({harness.cpu_name(m)}), CTranslate2 {m['ctranslate2']}. "
        f"Model: embedded tiny.en int8. Offline: faster-whisper beam 5 on the whole file. "
        f"realtime: {out['parallel']} stream(s) at a time at real-time pace; flat: one stream "
        f"as fast as the socket takes it; flat4: four flat-out streams at once."
        + (f" Server args: {' '.join(out['server_args'])}." if out["server_args"] else ""),
        "",
        "WER % of finals (Δ to offline in points) · tail delivered · adjacent repeats not in "
        "the reference · longest run of reference words missing.",
        "",
        "| file | s | offline | " + " | ".join(modes) + " |",
        "|---|---|---|" + "---|" * len(modes),
    ]
    tot: dict[str, list[float]] = {k: [] for k in ["offline", *modes]}
    for name, f in out["files"].items():
        off = f["offline"]["wer"] * 100
        cells = []
        for mode in modes:
            e = f.get(mode)
            if e is None:
                cells.append("–")
                continue
            w = e["wer"] * 100
            tot[mode].append(w)
            cells.append(f"{w:.1f} ({w - off:+.1f}) · {'✓' if e['tail'] else '✗'} · "
                         f"{e['repeats']} · {e['longest_missing']}")
        tot["offline"].append(off)
        lines.append(f"| {name} | {f['seconds']:.0f} | {off:.1f} | " + " | ".join(cells) + " |")
    means = " | ".join(f"{np.mean(tot[m]):.1f}" if tot[m] else "–" for m in modes)
    lines.append(f"| **mean** | | {np.mean(tot['offline']):.1f} | {means} |")
    return "\n".join(lines + protocol_lines(out, modes) + latency_table(out)) + "\n"


def protocol_lines(out: dict, modes: list[str]) -> list[str]:
    """Which streams broke a rule of the protocol (server/wire_rules.py), and the first one."""
    broke = [(name, mode, f[mode]["protocol"]) for name, f in out["files"].items()
             for mode in modes if f.get(mode, {}).get("protocol")]
    checked = sum(1 for f in out["files"].values() for mode in modes
                  if "protocol" in f.get(mode, {}))
    if not checked:  # (results written before the rules were checked)
        return []
    if not broke:
        return ["", f"Protocol (server/wire_rules.py): all {checked} streams kept every rule."]
    return ["", f"Protocol (server/wire_rules.py): {len(broke)} of {checked} streams broke a "
            "rule:", ""] + [f"- {name} {mode}: {v[0]} ({len(v)} in all)" for name, mode, v in broke]


def latency_table(out: dict) -> list[str]:
    """Real time: each file's partial p50, final p50 and p95 (s), and all real/ words pooled."""
    rows = [(n, f["realtime"]["latency"]) for n, f in out["files"].items()
            if "latency" in f.get("realtime", {})]
    if not rows:
        return []

    def f2(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    lines = ["", "Real time, seconds from a word's end (offline word timestamps) to its first "
             "partial and its final:", "", "| file | words timed | partial p50 | final p50 | "
             "final p95 |", "|---|---|---|---|---|"]
    for name, lat in rows:
        lines.append(f"| {name} | {lat['final']['n']} | {f2(lat['partial']['p50'])} | "
                     f"{f2(lat['final']['p50'])} | {f2(lat['final']['p95'])} |")
    real = [lat for name, lat in rows if name.startswith("real/")]
    if real:
        fin = analysis.percentiles([x for lat in real for x in lat["final_s"]])
        par = analysis.percentiles([x for lat in real for x in lat["partial_s"]])
        lines.append(f"| **real/, all words** | {fin['n']} | {f2(par['p50'])} | {f2(fin['p50'])} | "
                     f"{f2(fin['p95'])} |")
    return lines


def write(out: dict, modes: list[str], where: Path = RESULTS) -> str:
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{out['name']}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    md = markdown(out, modes)
    (where / f"{out['name']}.md").write_text(md)
    return md
