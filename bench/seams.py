"""A server lost mid-stream, and its speaker back on a restarted one: what the seam costs.

For each recording and each place, in process (:func:`bench.replay.replay` on the modelled
clock): the lost server heard the audio up to that moment, and the client kept the finals that
went out before it; the restarted server hears the rest from the last final's end, with
``--leads`` seconds before it sent again as context (``said``) or none. Per place it writes the
joined finals' WER, adjacent repeats the reference does not have, and the words on each side of
the seam; per lead, the mean WER over places. The uninterrupted replay is the yardstick.

``--drained``: the server is not lost but drained (a Ray replica scaled down; a speaker
back after the grace): it decodes all it heard up to that moment, a word cut there included,
and the speaker goes on in the same channel from there, in a new stream on another server.

    python -m bench.seams --only en-01 --places 6 --name seams-en01     # ~8 min per file
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .replay import modelled_cost, replay

RATE = 16000


def seams(engine, item, places: list[float], leads: list[float],  # type: ignore[no-untyped-def]
          drained: bool = False) -> dict[float, list[dict]]:
    """Per lead, per place: the seam's figures (the lost server's replay is one per place)."""
    from whisperwire.server import wire

    from .accuracy import errors, score_units

    ref = score_units(item.reference, item.language)
    out: dict[float, list[dict]] = {lead: [] for lead in leads}
    for at in places:
        if drained:  # (all it heard decoded: the channel ends where the audio did)
            before = replay(engine, item.audio[: int(at * RATE)], language=item.language,
                            cost=modelled_cost).finals
            last = at
        else:
            before = replay(engine, item.audio, language=item.language, cost=modelled_cost,
                            lost_at=at).finals
            last = before[-1].end if before else 0.0
        a = " ".join(f.text for f in before)
        word = before[-1].words[-1] if before and before[-1].words else None
        for lead in leads:
            start = max(0.0, last - lead)
            # (the channel's last word, on the new stream's clock, where it goes on)
            said_last = wire.Word(word.word, word.start - start, word.end - start, 0.0) \
                if drained and word is not None and lead else None
            after = replay(engine, item.audio[int(start * RATE):], language=item.language,
                           cost=modelled_cost, said=last - start, said_last=said_last).finals
            b = " ".join(f.text for f in after)
            e = errors(ref, score_units(f"{a} {b}", item.language))
            out[lead].append({"lost_at": at, "last_final_end": round(last, 2),
                              "wer": round(100 * e["wer"], 2), "repeats": e["repeats"],
                              "seam": f"…{a[-40:]} | {b[:40]}…"})
            print(f"{item.name} lead {lead} s, lost at {at} s: WER {out[lead][-1]['wer']} %, "
                  f"seam {out[lead][-1]['seam']}", flush=True)
    return out


def markdown(name: str, o: dict) -> str:
    how = ("drained at each place (all it heard made final), its speaker going on in the same "
           "channel from there" if o.get("drained") else
           "lost at each place, its speaker back on a restarted one from its last final's end")
    lines = [f"# {name}", "", f"A server {how} (replay on the modelled clock), with the lead "
             "before it sent again as context (`said`); WER % of all finals joined.", ""]
    for f, by_lead in o["files"].items():
        lines += [f"## {f}", "", f"Uninterrupted: {o['whole'][f]:.2f} %.", "",
                  "| lead s | mean WER % | repeats | seams |", "|---|---|---|---|"]
        for lead, runs in by_lead.items():
            seam_list = "<br>".join(f"{r['lost_at']} s: {r['seam']}" for r in runs)
            lines.append(f"| {lead} | {np.mean([r['wer'] for r in runs]):.2f} | "
                         f"{sum(r['repeats'] for r in runs)} | {seam_list} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from whisperwire.server.engine import Engine, EngineOptions

    from .accuracy import RESULTS, errors, items, score_units
    from .harness import save_results

    p = argparse.ArgumentParser(prog="python -m bench.seams", description=__doc__.split("\n")[0])
    p.add_argument("--name", default="seams")
    p.add_argument("--only", default="en-01", help="comma-separated parts of file names")
    p.add_argument("--places", type=int, default=6, help="evenly spread over each file")
    p.add_argument("--leads", default="0,1", help="seconds sent again before the last final")
    p.add_argument("--drained", action="store_true",
                   help="the server drains at each place (all it heard made final), not lost")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    engine = Engine(EngineOptions(cpu_threads=1))
    engine.load()
    only = [x for x in a.only.split(",") if x]
    chosen = [it for it in items(multilingual=False) if any(x in it.name for x in only)]
    o: dict = {"files": {}, "whole": {}, "drained": a.drained}
    for it in chosen:
        seconds = len(it.audio) / RATE
        places = [round(seconds * (k + 1) / (a.places + 1), 1) for k in range(a.places)]
        whole = replay(engine, it.audio, language=it.language, cost=modelled_cost)
        ref = score_units(it.reference, it.language)
        o["whole"][it.name] = 100 * errors(ref, score_units(whole.text, it.language))["wer"]
        by_lead = seams(engine, it, places, [float(x) for x in a.leads.split(",")], a.drained)
        o["files"][it.name] = {f"{lead:g}": runs for lead, runs in by_lead.items()}
    save_results(a.out, a.name, o, markdown(a.name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
