"""Accuracy on real speech, end to end: whatever the pace, nothing said is lost or repeated.

The real server, the real embedded model and real recordings from ../shared/speech. Figures
for the whole corpus come from ``python -m bench accuracy``; these tests hold the properties
that broke before: flat-out input losing stretches, words repeated at seams, whole clips
missing from joined speech, forced finals on slivers of audio, batch-mates changing a result.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from conftest import SPEECH, load16k, references, run, s16
from whisperwire.client.stream import stream_pcm
from whisperwire.server import wire
from whisperwire.server.decoding import DecodeRequest
from whisperwire.server.wer import extra_repeats, normalize, wer
from whisperwire.server.wer import longest_missing as longest_missing_words
from whisperwire.server.wire_rules import violations

pytestmark = pytest.mark.e2e

LJ = [f"LJ001-{i:04d}.wav" for i in range(1, 9)]



def repeats(text: str, reference: str) -> list[str]:
    return extra_repeats(normalize(reference), normalize(text))


def longest_missing(text: str, reference: str) -> int:
    return longest_missing_words(normalize(reference), normalize(text))


@pytest.fixture(scope="module")
def lj():
    audio = np.concatenate([load16k(f) for f in LJ])
    return audio, " ".join(references()[f] for f in LJ)


@pytest.fixture(scope="module")
def lj_runs(live_server, lj):
    """The LJ stream at 0 (flat out), 1, 2 and 4 times real time."""
    audio, _ = lj
    return {speed: run(stream_pcm(live_server.url, s16(audio), wire.ListenParams(), speed=speed))
            for speed in (0.0, 1.0, 2.0, 4.0)}


@pytest.fixture(scope="module")
def lj_offline(offline_model, lj):
    audio, ref = lj
    segs, _ = offline_model.transcribe(audio, language="en", beam_size=5)
    return wer(ref, " ".join(s.text for s in segs))


@pytest.mark.timeout(400)
def test_flat_out_is_as_good_as_real_time(lj_runs, lj, lj_offline):
    _, ref = lj
    flat, live = wer(ref, lj_runs[0.0].text), wer(ref, lj_runs[1.0].text)
    print(f"WER flat out {flat:.3f}, real time {live:.3f}, offline {lj_offline:.3f}")
    assert flat <= live + 0.02
    assert flat <= lj_offline + 0.02  # the flat-out bar
    # the real-time bar is offline + 3 points over a corpus; on these 131 words one word is
    # 0.76 points, so the bound allows one word more (measured: +3.0, python -m bench accuracy)
    assert live <= lj_offline + 0.04
    for r in lj_runs.values():
        assert normalize(r.text)[-3:] == normalize(ref)[-3:], "the last words arrive"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("speed", [0.0, 1.0, 2.0, 4.0])
def test_no_repeated_words_at_seams(lj_runs, lj, speed):
    _, ref = lj
    assert repeats(lj_runs[speed].text, ref) == []
    res = lj_runs[speed]  # numbered finals that never overlap in time, and the other rules
    assert violations([m for _, _, m in res.messages], res.sends[-1][1]) == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("speed", [0.0, 1.0])
def test_joined_clips_lose_no_stretch(live_server, offline_model, speed):
    """Ten speakers joined with 1 s pauses (real/en-07): every clip arrives."""
    import csv

    with open(SPEECH / "real" / "references.tsv", newline="") as f:
        ref = {r["file"]: r["reference"] for r in csv.DictReader(f, delimiter="\t")}["en-07.wav"]
    audio = load16k("real/en-07.wav")
    res = run(stream_pcm(live_server.url, s16(audio), wire.ListenParams(), speed=speed))
    segs = list(offline_model.transcribe(audio, language="en", beam_size=5)[0])
    offline = wer(ref, " ".join(s.text for s in segs))
    got = wer(ref, res.text)
    print(f"en-07 at speed {speed}: WER {got:.3f}, offline {offline:.3f}")
    # a lost clip is 7 words or more; misheard runs (offline too: "heaven to chemo") are not
    heard_offline = " ".join(s.text for s in segs)
    assert longest_missing(res.text, ref) <= max(3, longest_missing(heard_offline, ref) + 1)
    assert repeats(res.text, ref) == []
    assert got <= offline + 0.12  # children's and accented clips (measured: +4.5)
    # the last clip arrives: final words where offline hears it ("where is the answer now",
    # said "come with us now"), at least half as many (a lost clip has none). Which windows a
    # real-time stream decodes depends on the machine's pace, and tiny.en hears the clip
    # differently in some of them ("answer no", one run in three; "As I know." and "As now."
    # in CI runs), which the WER bound above judges: a word-by-word check, then one that
    # asked for all its words but one, failed a clip that had arrived, misheard
    last = segs[-1]
    said = [w for f in res.finals for w in f.words
            if last.start <= (w.start + w.end) / 2 <= last.end + 0.6]
    assert 2 * len(said) >= len(normalize(last.text)), (
        last.start, last.end, [(f.start, f.end, f.text) for f in res.finals[-4:]])
    assert res.finals[-1].end >= len(audio) / 16000 - 0.6, "its last word is final (47.6 s)"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("every_ms", [50, 100, 300])
def test_finalize_after_every_few_ms_invents_nothing(live_server, every_ms):
    audio = load16k("jfk.wav")
    step = 16 * every_ms

    async def go() -> list[wire.Message]:
        import websockets

        async with websockets.connect(live_server.url + "/v1/listen") as ws:
            msgs = [wire.decode(await ws.recv())]
            for i in range(0, len(audio), step):
                await ws.send(s16(audio[i : i + step]))
                await ws.send(json.dumps({"type": "finalize"}))
            await ws.send(json.dumps({"type": "close"}))
            async for raw in ws:
                msgs.append(wire.decode(raw))
            return msgs

    msgs = run(asyncio.wait_for(go(), 150))
    text = " ".join(m.text for m in msgs if isinstance(m, wire.Final))
    assert wer(references()["jfk.wav"], text) <= 0.2, text
    assert "thank you" not in " ".join(normalize(text))
    # each forced final covered at least a second of speech (11 s of jfk: a dozen at most)
    assert sum(1 for m in msgs if isinstance(m, wire.Final)) <= 14


@pytest.mark.timeout(120)
def test_punctuation_after_the_prefix_does_not_bring_back_its_last_word(live_server):
    """en-07 (joined clips): "...not the best thing to do on a plane" is final, and the next
    windows, with it as their forced prefix, only close the sentence: "." merged onto the
    prefix's last word came back as the new word " plane.", placed past the final audio as the
    window grew, and became final a second time ("on a plane plane.")."""
    engine = live_server.app.state.engine
    audio = np.concatenate([np.zeros(int(0.26 * 16000), np.float32), load16k("real/en-07.wav")])
    start = 9.54
    for end in (19.20, 21.45):
        r = engine.decode_batch([DecodeRequest(
            1, np.ascontiguousarray(audio[int(start * 16000) : int(end * 16000)]), start,
            prompt="Yeah. They may make me more happy than I am. And you know what you are "
                   "going to do.",
            prefix="I'm Abigail Klafflin. You can call me Abi. Probably. Not the best thing to "
                   "do on a plane")])[0]
        assert r.text.strip().startswith("."), r.text  # the case: it only closes the sentence
        assert [w.word for w in r.words if "plane" in w.word] == [], r.words


@pytest.mark.timeout(120)
def test_a_batch_never_changes_one_window_s_result(live_server):
    """The same window decoded alone and in batches with other prompts, lengths and kinds of
    decode gives the same words."""
    engine = live_server.app.state.engine
    jfk = load16k("jfk.wav")
    lj2 = load16k("LJ001-0002.wav")

    def req(i, audio, **kw):
        return DecodeRequest(i, np.ascontiguousarray(audio), 0.0, **kw)

    mine = [req(1, jfk[: 16000 * 5], prompt="and so my fellow", prefix=""),
            req(2, jfk[16000 * 2 : 16000 * 9], prompt="", prefix="my fellow Americans,"),
            req(3, jfk, careful=True, final=True, prompt="Kennedy")]
    others = [req(10, lj2, prompt="a much longer prompt about printing and books " * 3),
              req(11, jfk[: 16000 * 2]),
              req(12, lj2[:8000], careful=True, prompt="x"),
              req(13, np.concatenate([lj2, lj2, lj2]), prefix="in being")]
    # windows that share every shape, so they go through CTranslate2 as one batch
    en01 = load16k("real/en-01.wav")
    alike = [req(20 + k, en01[16000 * (30 + 4 * k) :][: int(16000 * 9.5)],
                 prompt="So I grew up in a small town.", prefix=p)
             for k, p in enumerate(["and you know", "I went to", "", "so", "high school and",
                                    "then I", "yeah", "it was"])]

    def same(got, alone):
        assert got.text == alone.text
        assert got == alone  # words, timings, probabilities and Whisper's confidences

    # in one call (checked), a batch of eight once moved word timings by a few ms on CPU
    # (aligned together; the text held)
    calls = engine.stats.calls
    together = engine.decode_batch(alike)
    assert engine.stats.calls == calls + 1
    for r, got in zip(alike, together):
        same(got, engine.decode_batch([r])[0])
    for r in mine:
        alone = engine.decode_batch([r])[0]
        for mix in ([r, *others], [*others, r], [others[0], r, others[2]]):
            same(engine.decode_batch(mix)[mix.index(r)], alone)


@pytest.mark.timeout(120)
def test_a_window_that_loops_at_every_temperature_keeps_the_beam_s_words(live_server):
    """jfk's first words and a pause loop ("And so my fellow Americans. And so my ...") in the
    beam decode and in every sampled retry. The session's loop guard keeps a loop's first
    turn, so which loop the engine returns decides the words: the likeliest sampled loop was
    "And so am I fellow Americans" in two runs of four (jfk replayed at +0.2 s then scored
    up to 31.8 % WER, and failed CI). The beam's reading, every time every candidate loops.
    A sampled retry that does not loop is taken, as Whisper's fallback means it to be: CI
    drew one once, at stop 59 ("And so am I fell"); the loops must still be one reading."""
    from whisperwire.server.agreement import unit_key
    from whisperwire.server.rereads import loop_start
    from whisperwire.server.text import split_units

    def loops(text: str) -> bool:
        keys = [unit_key(u) for u in split_units(text)]
        return loop_start([], keys) < len(keys)

    engine = live_server.app.state.engine
    audio = np.concatenate([np.zeros(2240, np.float32), load16k("jfk.wav")[:37600]])
    fallbacks = engine.stats.fallbacks
    texts = [engine.decode_batch([DecodeRequest(i, audio, 0.0, careful=True, final=True)])[0].text
             for i in range(4)]
    assert engine.stats.fallbacks == fallbacks + 4  # it did loop, and was retried each time
    looped = [t for t in texts if loops(t)]
    assert len(looped) >= 2, texts  # (an escape is a rare draw: four decodes hold two loops)
    assert len(set(looped)) == 1, texts
    assert normalize(looped[0])[:5] == ["and", "so", "my", "fellow", "americans"]


@pytest.mark.timeout(120)
def test_a_client_s_own_prompt_is_given_whole_however_long_the_session(live_server):
    """A client's prompt (OpenAI's ``prompt``, Deepgram's keyterms: names and terms) went first
    in the previous text, and the engine kept the last 64 tokens of it: once a session had
    200 characters of history, a prompt over ~20 tokens lost its start (the terms listed
    first). Now it is given whole, then the last tokens of the history."""
    from test_session import ScriptedDecoder, drive, energy_vad, make_stream
    from whisperwire.server.session import StreamSession
    from whisperwire.server.stream_options import StreamOptions

    engine = live_server.app.state.engine
    n = engine.opt.prompt_tokens
    user = ("Glossary: Gutenberg, Caxton, Aldus Manutius, Nicolas Jenson, Schoeffer, Fust, "
            "incunabula, colophon.")
    tok = engine._tokenizer("transcribe", None)
    own = tok.encode(" " + user)
    assert 20 < len(own) < n
    text = references()["LJ001-0001.wav"].split() + references()["LJ001-0002.wav"].split()
    audio, truth = make_stream(80, pause_every=7)
    truth = [(text[k % len(text)], s, e) for k, (_, s, e) in enumerate(truth)]
    dec = ScriptedDecoder(truth)
    drive(StreamSession(StreamOptions(), energy_vad(), prompt=user), dec, audio)
    late = [r for r in dec.requests if r.offset > 25 and r.prompt]
    assert late
    for r in late:
        previous = engine._previous(r)
        assert previous[: len(own)] == own and len(previous) == n
        history = tok.encode(" " + r.prompt)
        assert previous[len(own) :] == history[len(own) - n :]


@pytest.mark.timeout(120)
def test_a_sampled_retry_that_says_a_phrase_again_and_again_is_no_way_out_of_a_loop():
    """CI drew it once: for jfk's first words the beam loops, and a sampled retry said "And so
    my fellow Americans." three times, which compresses by only 2.13 (under the 2.4 that
    calls a loop), so it was taken where every other run kept the beam's. A loop is also what
    the session's loop guard calls one. The draw is pinned here: every sampled retry returns
    that three-turn text, sure of it."""
    from whisperwire.server.engine import Engine, EngineOptions

    engine = Engine(EngineOptions(cpu_threads=1))
    engine.load()
    audio = np.concatenate([np.zeros(2240, np.float32), load16k("jfk.wav")[:37600]])
    beam = engine.decode_batch([DecodeRequest(0, audio, 0.0, careful=True, final=True)])[0]
    real = engine._generate
    three = " And so my fellow Americans. And so my fellow Americans. And so my fellow Americans."

    def sampled_loop(enc, prompts, temperature, plan, n_prefix=None):  # type: ignore[no-untyped-def]
        if temperature == 0:
            return real(enc, prompts, temperature, plan, n_prefix)
        tok = engine._tokenizer("transcribe", "en")
        return [(tok.encode(three) + [tok.eot], -0.2, 0.01) for _ in prompts]

    engine._generate = sampled_loop  # type: ignore[method-assign]
    fallbacks = engine.stats.fallbacks
    got = engine.decode_batch([DecodeRequest(1, audio, 0.0, careful=True, final=True)])[0]
    assert engine.stats.fallbacks == fallbacks + 1  # the beam looped, and was retried
    assert got.text == beam.text != three.strip()
