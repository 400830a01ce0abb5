"""The streaming policy's settings, each with the measurement that chose its default.

Times are in milliseconds here and become samples (``samples``) where the session counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .audio import MODEL_RATE
from .voicing import VOICED

__all__ = ["StreamOptions"]


@dataclass(frozen=True)
class StreamOptions:
    step_ms: int = 500  # decode again after this much new speech
    min_window_ms: int = 300  # too little audio to say anything about
    commit_after_ms: int = 1500  # hypotheses of shorter windows are shown, never committed
    # committed audio kept in the window (as decoder prefix): Whisper-tiny gets hard speech
    # (accents, children, short clips) right far more often with several seconds before it
    overlap_ms: int = 8000
    # ... and in partial steps while the decoder is saturated (``next_decode(busy=True)``): a
    # shorter window costs less, so more streams keep their finals in time, at the price of
    # coarser finals under load (4 s on 2 cores: 5 streams with room and 6 at the edge,
    # instead of 4 and 5; real/ replayed as if always loaded: 21.1 -> 21.6 % and 23.6 -> 25.3 %
    # WER in its two halves). Careful decodes (utterance ends, doubted words) keep their
    # context, and one stream never makes the engine busy.
    busy_overlap_ms: int = 4000
    # A stream alone is busy too while its own steps cannot keep up: more than ``step_ms`` of
    # audio arrived while a step decoded (a slow CPU: on an AVX2-only EPYC 8 s steps took ~0.8 s,
    # and one stream's partials came 1.2 s late, its finals 2.2 s). Its steps then keep
    # ``busy_overlap_ms`` for the next ``slow_hold_ms`` of audio (there: partials 0.57 s, finals
    # 1.24 s; bench/results/cpu-tiny-zen1-1stream-slow-hold.md). Counted in samples: a decoder
    # faster than real-time input never sets it; input faster than real time (a file flat out,
    # a reconnect's backlog) can, as a busy engine would. Not in two-model mode, where the main
    # model is slower than the steps by design and the draft gives the partials.
    slow_hold_ms: int = 2000
    # A busy step (above) makes final from its one hypothesis the words that end this long
    # before its window's end, without waiting for the next step to agree (AlignAtt's idea:
    # what Whisper heard with that much audio after it rarely changes). Under load the next
    # step comes late, so agreement costs a whole round of every stream's steps. 0: never.
    busy_alone_ms: int = 0
    careful_context_ms: int = 10000  # the same for careful decodes (finals without agreement)
    # ... and while a lone stream's own steps lag (``slow_hold_ms``, the engine not busy): a
    # slow CPU read its utterance ends with 8-10 s of context at 1.8 s each, one after the
    # other (en-03 ends an utterance every 4 s), and every word after waited. Replayed on the
    # AVX2-only EPYC's clock (bench.replay --cost slow --offsets 0.11): real/ final p50 3.04 ->
    # 1.71 s, p95 5.61 -> 3.16 s, WER 22.96 -> 23.74 % with 3 s (2.5 s: 2.95 s, 24.10 %; 2 s:
    # 2.77 s, 24.52 % and Whisper repeating itself in 2 s windows; replay-slow-*.md). Over
    # the WebSocket on that CPU with 3 s: p50 2.41 -> 1.71 s, p95 5.38 -> 3.47 s, but WER
    # 21.58 -> 24.83 % against 21.76 % offline (en-06 +15, en-08 +6 in both; en-04 chaotic;
    # accuracy-zen1-slow-careful.md): speed bought with words, so off unless asked for. Under
    # other streams' load careful decodes keep their context. 0: the same as ever.
    slow_careful_context_ms: int = 0
    # ... and while the engine is saturated (``next_decode(busy=True)``), but not for a full
    # window, nor for a stream with more than a full window not yet decoded (flat-out input):
    # careful decodes (utterance ends, checks) were 42 % of the decode time at 16 streams.
    # 16 streams of the four recordings on 2 cores (bench run --mix, two runs each): final p95
    # over all 3.90, 4.31 -> 2.68, 3.03 s, median lag growth 0.84, 0.83 -> 0.11, 0.32 s, the
    # median stream's WER against offline -1.0, -1.3 -> +0.0, -0.3 points (en-08 streams ~5
    # points worse); bench capacity 10 -> 14 streams. 0: the same as ever.
    busy_careful_context_ms: int = 4000
    # A window this long commits all but its last ``stall_keep_ms`` even without agreement: this
    # bounds both the cost of a decode and a session's lag when the decoder falls behind.
    max_window_ms: int = 15000
    stall_keep_ms: int = 3000
    # words ending this close to the window's end are never committed by agreement: Whisper's
    # last words are the ones it most often changes once it hears what follows
    holdback_ms: int = 300
    # agreement never commits a word the newest greedy decode gives less than this: two greedy
    # passes agree on hard speech's unsure words too (a child's "tomato" as "to Madro's")
    commit_probability: float = 0.3
    # ... and once such a word has waited this long after its end (in continuous speech the
    # utterance's own careful decode may be a full window away), a careful decode of the
    # window decides it and what comes before it
    unsure_wait_ms: int = 1000
    # ... and so is a word two greedy decodes still disagree on this long after its end: it
    # and every word after it waited for the utterance's end or a full window (seconds, in
    # hard continuous speech). Replayed on real/ (bench.replay --threads 1 --offsets 0.11,0.37,
    # real time, modelled clock): final p95 2.17 -> 2.01 s, WER 21.78 -> 21.66 %, 1 % more
    # decodes; at 600 ms p95 1.86 s but WER 22.03 %. 0: never.
    stuck_wait_ms: int = 1000
    # a careful check decides every word that has waited ``unsure_wait_ms`` in its window (and
    # at least ``holdback_ms``), not only the words up to the doubted one. real/ and LJ replayed
    # at 0.11/0.37 s (tiny.en, 2 threads' speed, modelled clock): WER 21.75 -> 21.30 %, final
    # p95 2.03 -> 1.78 s, decodes 2772 -> 2760 (bench/results/replay-check-decides-waited-*)
    check_decides_waited: bool = True
    # a step due once such a word has waited that long is a careful decode in its place. Tried
    # with the rule above: p95 1.78 -> 1.73 s and 2 % fewer decodes, but WER 21.30 -> 21.51 %
    # (the check hears a step's decode time less right context: en-06 "Tomato" -> "To Madro");
    # off while accuracy comes first (bench/results/replay-try-check-instead-of-step-*)
    check_instead_of_step: bool = False
    # a looping greedy step under load (short context, steps far apart) asks a careful decode
    # for the words that waited before its loop. en-05, four streams at once over the
    # WebSocket: its final p95 over 2.5 s in 3 of 5 draws without, 0 of 2 with; replayed as
    # under load (bench.replay --busy) en-05 and en-07: WER 18.59 -> 17.34 %, p95 1.98 ->
    # 1.88 s. Not without load: replayed so on real/, WER 21.30 -> 21.63 % and no faster.
    # "Load" is the step's busy mark: the engine's, or a lone stream whose own steps lag
    # (``slow_hold_ms``), whose steps are as short and as far apart. Never while the language
    # is unsure (agreement commits nothing then either).
    loop_asks_check: bool = True
    # a careful decode that hears no word in this much new speech is asked again differently
    mute_retry_ms: int = 2000
    # ... and so is one whose first word comes after this many words the window's previous
    # hypothesis heard past the committed point: forced past a prefix, Whisper may jump ahead
    # over speech (en-02 flat out: "... to be an astro." final, then "I was really
    # fascinated", 17 words lost). 0: never.
    skip_retry_words: int = 3
    # An utterance's end decode whose last word ends this long before the speech the VAD heard
    # reads the window once more, its words as forced prefix, before they become final:
    # Whisper may close a question after "for?" and stop, leaving out the last 0.7 s ("at Old
    # Dominion", en-01's tail); forced past "for?", it writes "Old Dominion." Flat out on the
    # AVX-512 EPYC it stopped at "for old" 0.46 s before the speech did, and "Dominion" was
    # lost (read on, it came as "minion?"): a short last word is enough. 0: never.
    tail_check_ms: int = 300
    # ... and a read-on that places every word it hears past them under this chance (a word
    # squeezed to no time is not placed) asks the window again without forced words
    # (``ATTEMPTS``' last: its audio not yet final, no prompt):
    # forced past its own words, Whisper goes on from them, and the last of them may be where it
    # went wrong. en-01's last window flat out over the WebSocket: "... What did you go to school
    # for old" forced past "... what I call home. Um.", read on "minion?" (p 0.15), final, and
    # the tail ("Old Dominion") lost in every draw since stop 51; asked without forced words,
    # "What did you go to school for, Old Dominion?" (bench accuracy --modes flat: en-01 7.0 %
    # tail lost -> 5.7 % tail delivered). Should that asking hear no word, the read-on's words
    # stand. Replayed on real/ and zh/ (real time, flat out, as under load) it never fires.
    # 0: never.
    doubted_read_on_probability: float = 0.3
    # a ``finalize`` waits until the utterance holds this much audio past the committed point:
    # Whisper invents words ("Thank you.") for slivers of audio decoded on their own
    min_final_ms: int = 1000
    # the end decode of an utterance shorter than this, none of it final yet, that doubts every
    # word it places in the audio (p < ``commit_probability``) says nothing: alone on a breath
    # or a click before speech, beam search still writes a word ("Yeah." p 0.18 for en-07's
    # first 0.8 s, where greedy steps had heard "you" and "Okay.", and the invented word then
    # led the next decodes as their prefix: "Yeah. Then it may make me"). Replayed in real
    # time (bench.replay --threads 1 --offsets 0.11): en-07 starts "They may make me" (29.5 %
    # either way: later clips moved both ways), every other file word for word (real/ 22.24 %
    # both); zh/ (base) the same characters. 0: never.
    doubted_end_ms: int = 1500
    # ... and only when Whisper also says the window may hold no speech (its no-speech
    # probability at least this): en-07's invented "Yeah." came with 0.55, while a word it
    # doubts but hears as speech is said (espeak's lone "Hello.", "Hello?" at p 0.17 with
    # 0.20, was lost before; offline tiny.en writes it). 0: on doubt alone, as before.
    doubted_end_no_speech: float = 0.3
    # ... and only when the utterance holds no voice (server/voicing.py): a vowel is periodic,
    # a breath is not. espeak's lone "Sure." (p 0.18, no-speech 0.56) and "I agree." were lost;
    # offline tiny.en writes both. 0: whatever the audio.
    doubted_end_voicing: float = VOICED
    # an end decode that adds only words Whisper all but rules out (p under this) says nothing
    # (``Judge.lone_doubt``): one word after the final words of its utterance, or every word
    # it places in an utterance of its own after final text. Forced past final words and asked
    # to go on over a sound that is no speech, it writes "And" (jfk, then a sawtooth buzz, a
    # 50 Hz hum, noise bursts, clicks or piano notes 0.15 s or 1 s after it: p 0.002-0.008).
    # Such words on real/ replayed in real time and under load, misheard speech: p 0.04-0.09.
    # 0: never.
    lone_doubt_probability: float = 0.02
    # ... and so does one whose every new word Whisper doubts (p under this), in utterances of
    # their own after final text, over audio with no voice (``doubted_end_voicing``): 1 s
    # after jfk, a 50 Hz hum or noise bursts (voicing 0.14-0.19) came out "Ah." at p 0.006,
    # asked again "Aah!" at 0.14-0.16, read on 0.50 and final. Such end decodes on real/
    # (replayed in real time, flat out and as under load) and zh/: voicing 0.78 and more,
    # every one; the all-doubted among them ("Boy.", "Mm.", "Still.", "Women.") 0.89-1.0.
    # 0: never.
    unvoiced_doubt_probability: float = 0.3
    # no decode's words stand (not as a partial, not as a final) while the utterances not all
    # final hold no voice (two periodic 30 ms frames in a row, server/voicing.py): Whisper reads
    # steady noise as words, however sure. 10 s of brown noise (-11 dBFS RMS, which webrtcvad
    # takes for speech; voicing 0.32-0.41) came out "驾驶车" with base and language=zh,
    # "1-2-3-4-4-4-4" (p up to 0.88) with language=auto, "Oh." with English; offline decoding
    # with faster-whisper's VAD writes nothing. Off by default (``serve --needs-voice``): clean
    # speech always has a voice (../shared/speech: 0.83 and more), but speech in heavy noise
    # may not: with white noise at 5 dB SNR, 11 utterances holding 0.57-2.16 s of real/, LJ and
    # zh/ speech measured 0.33-0.59 (12 at 0 dB), and their words would be lost; the energy
    # spread that would tell steady noise from them overlaps too (brown noise 1.5-2.7 dB, such
    # speech from 1.9; bench.voice_in_noise). Whispered speech has no voice either.
    needs_voice: bool = False
    # an utterance that starts this soon after the previous one ended continues its window
    join_gap_ms: int = 2000
    # ... and a final word's start or end that Whisper's alignment put deep in the silence
    # between two utterances moves to the speech beside it (:mod:`.speech_spans`): jfk flat out
    # gave "ask" 2.26-3.88 s for 3.62-3.86 s, and Deepgram's ``utterances`` one utterance
    word_times_in_speech: bool = True
    prompt_chars: int = 200
    # an utterance the VAD ended ends its sentence in later decodes' context (see _end_sentence)
    end_sentences: bool = True
    # language=auto: the language is detected once, from the first window of at least
    # ``detect_min_ms`` where Whisper is sure (``detect_sure``), else from the first window of
    # ``detect_ms``; and again when speech resumes after ``redetect_pause_ms`` of silence.
    # (Whisper base on the Mandarin clips: 1 s often reads as en/ko/nn, 3 s is zh at 0.96+.)
    detect_min_ms: int = 1000
    detect_sure: float = 0.8
    detect_ms: int = 3000
    redetect_pause_ms: int = 10000
    # two-model mode: each step's window is read first by the draft model (the partial, early)
    # and then by the main model (agreement and finals, and the partial again)
    draft_partials: bool = False
    # ... and the main model reads a step's window only once this much audio is new since its
    # last reading (0: every step); the draft still reads every step
    main_step_ms: int = 0
    no_speech_threshold: float = 0.6
    # a careful decode whose no-speech verdict (below) Whisper gave on a shorter encoder input
    # than its own 30 s, over a voice, is asked again on the 30 s (``Judge.hushed``): espeak's
    # "Is it on? Is it on?" after 1 s of silence gave no final at all. bench.phrases: 29 -> 28
    # of 76 phrases off offline (19 -> 16 losing words); real/ and zh/ replayed in real time and
    # flat out: it fired once, on en-03's "Mm." (still silence on 30 s). False: never.
    hushed_retry: bool = True
    # ... and so is one that loops (after faster-whisper's sampled fallback) and leaves no new
    # word, on a shorter input than 30 s (``Judge.looped_short``): espeak's "Can you hear me?"
    # said three times came out once at two start offsets of three, every short window looping
    # on it; now three times at all three. False: never.
    loop_retry: bool = True
    logprob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    # a decode is silence, whatever its words, when Whisper's no-speech probability is above
    # this: on beeps it writes "beep beep" (p 0.9) or "No, no, no" at 0.85-0.97, which its
    # likelihood rule (``logprob_threshold``) lets through in windows shorter than its 30 s.
    # Speech seen: real/ and LJ with tiny.en at most 0.57 where Whisper trusts its words
    # (0.82 where it does not), zh/ with base at most 0.64 (replayed, every decode; other
    # models are unmeasured). 0: never.
    sure_no_speech: float = 0.8

    def samples(self, ms: int) -> int:
        return MODEL_RATE * ms // 1000
