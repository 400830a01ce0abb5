"""Short conversational phrases, each between silences, streamed in real time on the modelled
clock (:mod:`bench.replay`) against offline decoding of the same audio: where the finals lose or
change words that offline kept.

real/ says no phrase twice in a row and few words again, and its replays did not move when the
guards against Whisper's repeats took a speaker's "Can you hear me? Can you hear me?" or "Bye
bye." for a loop or an echo: every case here was lost at every start offset before stop 53. The
phrases are espeak-ng's (no recordings of them), each streamed after 1.00, 1.11 and 1.23 s of
silence and followed by 2 s of it; offline is tiny.en with beam 5 on the audio after 1 s.
A phrase counts where the finals at some offset differ from offline after normalising (lower
case, no punctuation): "lost" where they are shorter. Sampled temperature fallbacks make a few
short answers ("Uh-huh.") draw differently run to run.

``python -m bench.phrases [--name NAME] [--only TEXT]`` (about 7 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import numpy as np

from .harness import RESULTS, machine, save_results

SHORT = ["Yeah.", "Okay.", "Uh-huh.", "Mm-hmm.", "No.", "Yes, exactly.", "Right, right.", "I see.",
         "Sure, why not?", "Bye bye.", "Go, go, go!", "Hi there.", "Thanks.", "Got it.",
         "Sounds good.", "Oh no.", "Wait, what?", "Hmm, maybe.", "One, two, three.", "Really?",
         "Nice.", "Of course.", "Not really.", "Good morning everyone.", "See you.", "Let's go.",
         "Exactly right.", "Okay okay.", "Yes yes yes.", "Well, I don't know.", "It's fine.",
         "Hello, hello?", "Cool.", "Perfect.", "Me too.", "Absolutely.", "Twenty five.",
         "Next slide please.", "Can you hear me?", "You're muted."]
DISFLUENT = ["I I think that that we should go.", "So, so what do you think?",
             "We we need to, to finish this today.", "The the report is is ready.",
             "It was it was really good.", "Yeah, no, I mean, yeah.",
             "I said no, no, not that one.", "Wait, wait, wait, hold on.",
             "Very, very good point.", "Okay so so the plan is this.",
             "Thank you so much, thank you.", "Really, really?", "Oh, oh, I see.",
             "Hello? Hello? Can you hear me?", "Is it on? Is it on?"]
SAID_AGAIN = ["Can you hear me? Can you hear me?", "Is it on? Is it on?",
              "Thank you so much. Thank you so much.", "Let me see. Let me see.",
              "I don't know, I don't know.", "Are you there? Are you there?",
              "One more time. One more time.", "What did you say? What did you say?",
              "Next slide please. Next slide please.", "I think so. I think so.",
              "We need to go. We need to go now.", "No no no no.", "Yes, yes, I agree.",
              "Right right right.", "Okay, so, so, so the plan is simple.",
              "Good morning, good morning everyone.", "Sorry, sorry, go ahead."]
# a question said three times, as at a meeting's start
SAID_THRICE = ["Can you hear me? Can you hear me? Can you hear me?",
               "Hello, can you hear me? Hello, can you hear me? Hello, can you hear me?",
               "Are you there? Are you there? Are you there?", "Testing, testing, testing."]
PHRASES = SHORT + DISFLUENT + SAID_AGAIN + SAID_THRICE
LEADS = (1.0, 1.11, 1.23)


def espeak(text: str, rate: int = 16000) -> np.ndarray:
    """espeak-ng's reading of ``text``, as float32 at ``rate`` (the tests' synthetic speech
    too)."""
    import io
    import wave

    from whisperwire.server.audio import Resampler

    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("espeak-ng is not installed (apt-get install espeak-ng)")
    wav = subprocess.run([exe, "--stdout", text], check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as w:
        sr = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0
    r = Resampler(sr, rate)
    return np.concatenate([r.process(x), r.flush()])


def measure(phrases: list[str]) -> dict:
    from whisperwire.server.engine import Engine, EngineOptions
    from whisperwire.server.wer import normalize

    from .accuracy import offline_model
    from .replay import modelled_cost, replay

    engine = Engine(EngineOptions(cpu_threads=1))
    engine.load()
    model = offline_model(1)
    out = []
    for p in phrases:
        x = espeak(p)

        def padded(lead: float) -> np.ndarray:
            return np.concatenate([np.zeros(int(lead * 16000), np.float32), x,
                                   np.zeros(32000, np.float32)])

        segments, _ = model.transcribe(padded(1.0), beam_size=5, language="en")
        offline = " ".join(s.text.strip() for s in segments)
        streamed = [replay(engine, padded(lead), cost=modelled_cost).text for lead in LEADS]
        want = normalize(offline)
        lost = any(len(normalize(t)) < len(want) for t in streamed)
        diff = any(normalize(t) != want for t in streamed)
        out.append({"phrase": p, "offline": offline, "streamed": streamed,
                    "verdict": "lost" if lost else "differs" if diff else ""})
        print(f"{out[-1]['verdict']:8s} {p!r}: offline {offline!r}, streamed {streamed}",
              flush=True)
    return {"machine": machine(), "leads_s": list(LEADS), "phrases": out}


def markdown(name: str, res: dict) -> str:
    rows = res["phrases"]
    bad = [r for r in rows if r["verdict"]]
    lines = [f"# {name}", "",
             "espeak phrases between silences, streamed in real time on the modelled clock at "
             f"{', '.join(f'+{x - 1:.2f} s' for x in LEADS)} against offline tiny.en (beam 5).",
             "", f"**{len(bad)} of {len(rows)} phrases** lose or change words offline kept "
             f"({sum(r['verdict'] == 'lost' for r in rows)} lose some).", "",
             "| phrase | offline | streamed (three offsets) | |", "|---|---|---|---|"]
    lines += [f"| {r['phrase']} | {r['offline']} | {' / '.join(r['streamed'])} | {r['verdict']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.phrases", description=__doc__.split("\n")[0])
    p.add_argument("--name", default="phrases")
    p.add_argument("--only", help="phrases containing this text")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    phrases = [x for x in PHRASES if not a.only or a.only.lower() in x.lower()]
    res = measure(phrases)
    save_results(a.out, a.name, res, markdown(a.name, res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
