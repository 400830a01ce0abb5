"""The benchmark harness end to end, small: N=1 on ~12 s of real speech at real-time pace, plus
the silence/noise check. Asserts the figures are computed and sane, not the targets."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def test_bench_smoke(tmp_path):
    from bench import cli

    out = cli.run(cli.smoke_args("smoke", tmp_path))
    md = cli.write(out, tmp_path)
    saved = json.loads((tmp_path / "smoke.json").read_text())
    assert saved["name"] == "smoke" and "| streams |" in md
    r = saved["runs"][0]
    assert r["streams"] == 1
    assert 0.0 <= saved["offline"]["wer"] < 0.2 and 0.0 <= r["wer_median"] < 0.25
    for kind in ("final", "partial"):
        p = r[kind]
        assert p["n"] > 10, "most words were aligned and timed"
        assert p["p50"] <= p["p90"] <= p["p95"] <= p["max"]
        assert -1.0 < p["p50"] < 10.0
    assert r["partial"]["p50"] <= r["final"]["p50"] + 1e-9
    assert r["per_stream"][0]["tail_delivered"]
    assert 0.0 < r["server_cpu_s_per_audio_s"] < 5.0
    assert saved["offline"]["cpu_s_per_audio_s"] > 0 and r["compute_ratio_to_offline"] > 1.0
    assert 50 < r["rss_peak_mib"] < 4000
    assert r["server_metrics"]["whisperwire_decode_batch_size_count"] >= 1
    assert saved["silence_noise_words"] == 0
    # the table names where the server decoded (a GPU run once read "int8" on its header)
    from whisperwire.server import devices

    facts, want = r["server"], devices.choose("auto", "auto", devices.gather_facts())
    assert (facts["device"], facts["compute_type"]) == (want.device, want.compute_type)
    assert facts["decode_workers"] >= 1
    assert f"tiny.en {facts['compute_type']} on {facts['device']}," in md


def test_soak_short(tmp_path):
    """The soak script for one minute: RSS, fds and lag are recorded and stay flat.

    One decode worker: each CTranslate2 replica fills a working set of its own for minutes
    (the default two on 2 cores grew 9 % and 12 % from the second quarter to the last in two
    one-minute runs, and level at 352-354 MiB from minute 13 to 30 of
    bench/results/soak-30m-2workers.md), which a one-minute run cannot tell from a leak."""
    from bench import soak

    o = soak.soak(minutes=1.0, every=2.0, server_args=("--decode-workers", "1"))
    assert len(o["samples"]) >= 20 and o["finals"] >= 5
    assert o["fds_last_quarter"] <= o["fds_first_quarter"] + 2
    # growth after the warm-up (the first quarter holds the decoder's warm-up: judged against
    # it, the same code measured +12 %, +15 % and +17 %, one of them a CI failure). The working
    # set still fills for minutes with one worker too (soak-21m.md: 250 -> 264 MiB, level from
    # minute 7), and a one-minute run on the AVX2-only EPYC measured 236.7 -> 262.3 MiB
    # (+10.8 %, a CI failure at 1.10): a leak that matters still shows beyond 1.2
    assert o["rss_mib_last_quarter"] <= o["rss_mib_second_quarter"] * 1.20
    assert o["lag_s_max"] < 10
    assert "| RSS MiB |" in soak.markdown(o)


@pytest.mark.timeout(300)
def test_replay_sweep_scores_each_offset(tmp_path):
    """``python -m bench.replay``: jfk replayed on the modelled clock at two start offsets."""
    from bench import replay
    from bench.accuracy import Item
    from conftest import load16k, references
    from whisperwire.server.engine import Engine, EngineOptions

    engine = Engine(EngineOptions())
    engine.load()
    item = Item("jfk", load16k("jfk.wav"), references()["jfk.wav"])
    o = replay.sweep(engine, [item], [0.0, 0.2])
    runs = o["files"]["jfk"]["runs"]
    assert [r["offset"] for r in runs] == [0.0, 0.2]
    assert all(r["tail"] and r["repeats"] == 0 for r in runs)
    # One window of jfk at +0.2 s loops at every temperature; the likeliest sampled loop won
    # and the run scored 0.0 to 31.8 % by CTranslate2's random draws (CI failed at < 0.2 and
    # at < 0.3). The beam's loop stays now: 9.1 % in every run here
    assert runs[0]["wer"] < 0.2 and runs[1]["wer"] < 0.2
    assert all(0 < r["final_p50"] <= r["final_p95"] < 10 for r in runs)
    assert o["real_weighted_wer"] is None  # no real/ file in this sweep
    assert "| jfk |" in replay.markdown("t", o) and "| 2/2 |" in replay.markdown("t", o)
    opts, eng = replay.options(["commit_probability=0.3", "step_ms=750", "draft_partials=true",
                                "prompt_tokens=32", "temperatures=0,0.2",
                                "draft_model=tiny.en"], EngineOptions(cpu_threads=1))
    assert (opts.commit_probability, opts.step_ms, opts.draft_partials) == (0.3, 750, True)
    assert (eng.prompt_tokens, eng.cpu_threads, eng.temperatures, eng.draft_model) == (
        32, 1, (0.0, 0.2), "tiny.en")
    with pytest.raises(SystemExit):
        replay.options(["no_such_option=1"], EngineOptions())
    assert replay.vad_options(["hangover_ms=300", "step_ms=750"]).hangover_ms == 300


def test_seams_bench_loses_a_server_and_comes_back_with_the_lead_as_context():
    """``python -m bench.seams``: jfk's server lost 7 s in, the rest replayed from the last
    final's end, with and without the second before it (``said``): no word twice either way,
    and the words of that second are not said again."""
    from bench import seams
    from bench.accuracy import Item
    from bench.replay import modelled_cost, replay
    from conftest import load16k, references
    from whisperwire.server.engine import Engine, EngineOptions

    engine = Engine(EngineOptions(cpu_threads=1))
    engine.load()
    item = Item("jfk", load16k("jfk.wav"), references()["jfk.wav"])
    before = replay(engine, item.audio, cost=modelled_cost, lost_at=7.0).finals
    assert before and before[-1].end < 7.0  # (what went out before the loss)
    runs = seams.seams(engine, item, [7.0], [0.0, 1.0])
    for lead, (r,) in runs.items():
        assert r["repeats"] == 0 and r["wer"] < 25, (lead, r)
        assert r["last_final_end"] == round(before[-1].end, 2)
    o = {"files": {"jfk": {f"{k:g}": v for k, v in runs.items()}}, "whole": {"jfk": 0.0}}
    assert "| 1 |" in seams.markdown("t", o)


def test_mixed_capacity_corpus_is_four_different_recordings():
    """``--mix``: the capacity target speaks of four 1-minute files; streams of copies of one
    recording batch better than strangers (one prompt length, windows due together)."""
    from bench import corpus

    c = corpus.mixed(60.0)
    assert len(c) == 4
    assert len({tuple(x.files) for x in c}) == 4 and len({x.reference for x in c}) == 4
    # about a minute each, so that every stream of a run is live for most of it
    assert all(45 < x.seconds < 62 and len(x.reference.split()) > 60 for x in c)
    assert c[0].files[0].startswith("LJ") and all(x.files[0].startswith("real/") for x in c[1:])


def test_a_mixed_run_scores_each_stream_against_its_own_recording():
    """Stream i is scored against recording i mod k, and CPU per audio-second divides by the
    audio those streams actually played."""
    from bench import analysis, cli, harness
    from whisperwire.client.stream import StreamResult
    from whisperwire.server import wire

    texts = ["one two three four", "five six seven eight", "nine ten"]
    seconds = [2.0, 4.0, 8.0]
    refs = [([analysis.RefWord(w, 0.4 * (j + 1)) for j, w in enumerate(t.split())], t)
            for t in texts]

    def stream(text: str) -> StreamResult:
        ws = tuple(wire.Word(" " + w, 0.4 * j, 0.4 * (j + 1), 0.9)
                   for j, w in enumerate(text.split()))
        return StreamResult(messages=[(0.0, 0.0, wire.Ready("s", "m", "cpu", "int8", 16000)),
                                      (5.0, 5.0, wire.Final(0, text, 0.0, ws[-1].end, ws)),
                                      (5.5, 5.5, wire.Closed("client_close", 10.0))],
                            sends=[(0.1 * k, 0.1 * k) for k in range(100)])

    # five streams: recordings 0, 1, 2, 0, 1; the fifth misses a word of recording 1
    played = [texts[0], texts[1], texts[2], texts[0], "five six seven"]
    rec = harness.RunRecord([stream(t) for t in played], wall_s=10.0, cpu_s=5.6,
                            rss_baseline_mib=100.0, rss_peak_mib=150.0)
    r = cli.evaluate(rec, refs, seconds, offline_wers=[0.0, 0.25, 0.5])
    assert [p["recording"] for p in r["per_stream"]] == [0, 1, 2, 0, 1]
    assert [round(p["wer"], 2) for p in r["per_stream"]] == [0.0, 0.0, 0.0, 0.0, 0.25]
    assert [round(p["wer_delta"], 2) for p in r["per_stream"]] == [0.0, -0.25, -0.5, 0.0, 0.0]
    assert r["server_cpu_s_per_audio_s"] == pytest.approx(5.6 / (2 + 4 + 8 + 2 + 4))
    assert r["wer_delta_median"] == pytest.approx(0.0)
    out = {"name": "m", "machine": harness.machine(), "audio_seconds": 2.0, "files": ["a"],
           "max_batch": 8, "server_args": [], "capacity": 5, "runs": [r],
           "offline": {"wer": 0.2, "text": "", "cpu_s_per_audio_s": 0.05},
           "mix": [{"files": [f"r{k}"], "seconds": x, "offline_wer": w}
                   for k, (x, w) in enumerate(zip(seconds, [0.0, 0.25, 0.5]))]}
    md = cli.markdown(out)
    assert "stream i plays recording i mod 3" in md and "| 5 |" in md
    assert r["broke_protocol"] == 0 and "kept the protocol's rules" in md
    assert json.loads(json.dumps(out))["runs"][0]["per_stream"][4]["recording"] == 1


def test_a_refused_stream_fails_the_latency_rule_and_is_named():
    """A stream the server refused (all sessions in use: close 1013) heard nothing: the run
    does not hold, and the table says why (128 streams on a GPU met --max-sessions 64)."""
    from bench import analysis, cli, harness
    from whisperwire.client.stream import StreamResult
    from whisperwire.server import wire

    refs = [([analysis.RefWord("one", 0.4), analysis.RefWord("two", 0.8)], "one two")]
    ws = (wire.Word(" one", 0.0, 0.4, 0.9), wire.Word(" two", 0.4, 0.8, 0.9))
    ready = (0.0, 0.0, wire.Ready("s", "m", "cpu", "int8", 16000))
    closed = (2.0, 2.0, wire.Closed("client_close", 2.0))  # (a stream that ran to its end)
    ok = StreamResult(messages=[ready, (1.0, 1.0, wire.Final(0, "one two", 0.0, 0.8, ws)), closed],
                      sends=[(0.1 * k, 0.1 * k) for k in range(20)], close_code=1000)
    refused = StreamResult(messages=[(0.0, 0.0, wire.Error("server_full", "all in use"))],
                           close_code=1013, close_reason="all 64 sessions are in use")
    # (a third stream whose second final skipped a number: a broken rule, named)
    skipped = StreamResult(messages=[ready, (1.0, 1.0, wire.Final(0, "one", 0.0, 0.4, ws[:1])),
                                     (1.5, 1.5, wire.Final(2, "two", 0.4, 0.8, ws[1:])), closed],
                           sends=[(0.1 * k, 0.1 * k) for k in range(20)], close_code=1000)
    rec = harness.RunRecord([ok, refused, skipped], wall_s=3.0, cpu_s=1.0,
                            rss_baseline_mib=100.0, rss_peak_mib=110.0)
    r = cli.evaluate(rec, refs, [2.0], offline_wers=[0.0])
    assert r["refused"] == 1 and not r["meets_latency_rule"]
    out = {"name": "m", "machine": harness.machine(), "audio_seconds": 2.0, "files": ["a"],
           "max_batch": 8, "server_args": [], "capacity": 0, "runs": [r],
           "offline": {"wer": 0.0, "text": "", "cpu_s_per_audio_s": 0.05}}
    assert "3 streams: 1 refused" in cli.markdown(out)
    assert r["broke_protocol"] == 1  # the skipped number; a refusal breaks no rule
    assert "3 streams: 1 broke a rule of the protocol (server/wire_rules.py), e.g. final " \
           "numbered 2, expected 1" in cli.markdown(out)


@pytest.mark.timeout(120)
def test_compute_types_bench_times_every_type_this_cpu_offers(tmp_path):
    """The rule, not this CPU's list: every compute type CTranslate2 offers on CPU here is
    loaded, timed and compared with int8's text (int8 itself agrees with itself)."""
    import ctranslate2

    from bench import compute_types

    assert compute_types.main(["--windows", "1", "--name", "ct", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ct.json").read_text())
    offered = set(ctranslate2.get_supported_compute_types("cpu"))
    assert {r["compute_type"] for r in res["rows"]} == offered | {"int8"}
    for r in res["rows"]:
        assert r["cpu_ms"] > 0 and r["wall_ms"] > 0
        if r["compute_type"] == "int8":
            assert r["same_text_as_int8"] == 1
    assert "| int8 | 2 |" in (tmp_path / "ct.md").read_text()


@pytest.mark.timeout(120)
def test_finalize_spam_bench_counts_repeats_against_jfk(tmp_path):
    """One run of the finalize-after-every-frame client: its finals hold jfk's words and the
    table says how many runs repeated a phrase (a rate, so no bar on one draw)."""
    from bench import finalize_spam

    assert finalize_spam.main(["--runs", "1", "--name", "fs", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "fs.json").read_text())
    (row,) = res["rows"]
    assert res["reference_words"] == 22 and row["words"] >= 15 and row["repeated_trigrams"] >= 0
    assert "Runs with a repeated phrase:" in (tmp_path / "fs.md").read_text()


@pytest.mark.timeout(240)
def test_nonspeech_bench_hears_no_words_in_a_tone_after_speech(tmp_path):
    """``python -m bench.nonspeech`` on two sounds at one offset: a 1 kHz tone 1 s after jfk
    drew "F***." at every offset before the VAD's tone check; now the VAD opens no utterance
    in it, and nothing is invented alone or after speech."""
    from bench import nonspeech

    assert nonspeech.main(["--offsets", "0", "--only", "tone 1000,beeps", "--name", "ns",
                           "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ns.json").read_text())
    assert sorted(res["sounds"]) == ["beeps", "tone 1000 Hz"]
    for v in res["sounds"].values():
        assert v["utterances"] == 0 and v["alone"] == [""] and v["after_speech"] == [[]]
        assert "country" in v["after_text"][0].lower()
    assert "Runs with invented words: **0 of 2** alone, **0 of 2** after speech." in (
        tmp_path / "ns.md").read_text()


@pytest.mark.timeout(240)
def test_nonspeech_bench_hears_no_words_in_a_tone_inside_the_hangover(tmp_path):
    """A 1 kHz tone 0.15 s after jfk's file ends, inside the VAD's hangover: its first 240 ms,
    which webrtcvad calls speech before the tone check can tell, resumed the utterance and the
    end decode asked at the pause heard them: "F***." at this offset (and at +0 s) before the
    VAD reported them as no speech and the session muted them."""
    from bench import nonspeech

    assert nonspeech.main(["--offsets", "0.11", "--only", "tone 1000", "--gap", "0.15",
                           "--name", "ns", "--out", str(tmp_path)]) == 0
    v = json.loads((tmp_path / "ns.json").read_text())["sounds"]["tone 1000 Hz"]
    assert v["after_speech"] == [[]], v["after_text"]
    assert "country" in v["after_text"][0].lower()
