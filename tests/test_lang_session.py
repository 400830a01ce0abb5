"""Languages in a session, sans-I/O: a scripted decoder that speaks Chinese (in either script)
and detects languages the way Whisper does, unsure on short windows."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from whisperwire.server import wire
from whisperwire.server.decoding import DecodeRequest, DecodeResult
from whisperwire.server.session import StreamOptions, StreamSession
from whisperwire.server.vad import VadOptions, VadSegmenter
from whisperwire.server.wire import Final, Language, Partial, Word

SR = 16000
HAN_SPACE_HAN = re.compile(r"[\u3400-\u9fff]\s+[\u3400-\u9fff]")
# what is said, one (text, seconds) per Whisper word; traditional characters on purpose
SAID = [(" 他稱", 0.5), ("他", 0.25), ("製作了", 0.6), ("一個", 0.4), (" Wi-Fi", 0.5),
        ("門鈴", 0.5), ("。", 0.1), (" 現場", 0.5), ("活動", 0.5), ("包括", 0.5), ("打獵", 0.5),
        ("，", 0.1), ("日本", 0.5), (" coaster", 0.6), ("小巴車", 0.7), ("。", 0.1)]
SIMPLIFIED = "他称他制作了一个Wi-Fi门铃。现场活动包括打猎，日本coaster小巴车。"
TRADITIONAL = "他稱他製作了一個Wi-Fi門鈴。現場活動包括打獵，日本coaster小巴車。"


def speech(pause_s: float = 0.0) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """Noise bursts where SAID's words are, with an optional long pause in the middle; and
    the words' stream times."""
    parts, truth, t = [np.zeros(SR // 2, np.float32)], [], 0.5
    rng = np.random.default_rng(3)
    for i, (w, d) in enumerate(SAID):
        if pause_s and i == len(SAID) // 2:
            parts.append(np.zeros(int(pause_s * SR), np.float32))
            t += pause_s
        parts.append((0.3 * rng.standard_normal(int(d * SR))).astype(np.float32))
        parts.append(np.zeros(int(0.15 * SR), np.float32))  # the energy gate needs its floor
        truth.append((w, t, t + d))
        t += d + 0.15
    parts.append(np.zeros(SR * 2, np.float32))
    return np.concatenate(parts), truth


class ChineseDecoder:
    """The words inside the window after the prefix; with language auto it detects like
    Whisper: Korean and unsure under 1.5 s of audio, Chinese and sure after."""

    def __init__(self, truth):
        self.truth, self.requests = truth, []

    def __call__(self, req: DecodeRequest) -> DecodeResult:
        self.requests.append(req)
        a, b = req.offset, req.offset + req.duration
        n_prefix = len(req.prefix)  # characters: no spaces in what was committed
        words, seen = [], 0
        for text, s, e in self.truth:
            if e <= a + 0.05 or s >= b:
                continue
            seen += len(text.strip())
            if seen > n_prefix:
                words.append(Word(text, max(s, a) - a, min(e, b) - a, 0.9))
        if req.language in (None, "auto"):
            lang, p = ("ko", 0.4) if req.duration < 1.5 else ("zh", 0.97)
        else:
            lang, p = req.language, 0.0
        return DecodeResult(tuple(words), "".join(w.word for w in words), 0.01, -0.2, 1.2, lang, p)


def run(language, zh_script=None, pause_s=0.0):
    audio, truth = speech(pause_s)
    return drive(audio, truth, language, zh_script)


def drive(audio, truth, language, zh_script=None, dec=None, options=None):
    dec = dec or ChineseDecoder(truth)
    s = StreamSession(options or StreamOptions(), VadSegmenter(VadOptions(), lambda f: True),
                      language=language, zh_script=zh_script)
    events = []
    for i in range(0, len(audio), 1600):
        s.feed_audio(audio[i : i + 1600])
        while (req := s.next_decode()) is not None:
            s.decoded(req.id, dec(req))
        events += s.events()
    s.finish()
    while (req := s.next_decode()) is not None:
        s.decoded(req.id, dec(req))
    events += s.events()
    assert s.flushed
    return events, dec


def text_of(events):
    return "".join(e.text for e in events if isinstance(e, Final))


def test_chinese_finals_are_simplified_without_spaces_by_default():
    events, _ = run("zh")
    assert text_of(events) == SIMPLIFIED
    for e in events:
        if isinstance(e, (Final, Partial)):
            assert not HAN_SPACE_HAN.search(e.text) and " " not in e.text, e
    words = [w for e in events if isinstance(e, Final) for w in e.words]
    assert "".join(w.word for w in words) == text_of(events)
    assert not any(isinstance(e, Language) for e in events)  # the language was given


def test_zh_script_traditional_and_as_is():
    assert text_of(run("zh", "traditional")[0]) == TRADITIONAL
    assert text_of(run("zh", "as_is")[0]) == "".join(w.strip() for w, _ in SAID)


def test_auto_detects_once_tells_the_client_and_commits_nothing_before():
    events, dec = run("auto")
    langs = [e for e in events if isinstance(e, Language)]
    assert [(x.language, x.probability) for x in langs] == [("zh", 0.97)]
    first = events.index(langs[0])
    assert not any(isinstance(e, Final) for e in events[:first])  # unsure: partials only
    asked = [r.language for r in dec.requests]
    n_auto = asked.index("zh")
    assert set(asked[:n_auto]) == {"auto"} and set(asked[n_auto:]) == {"zh"}
    assert text_of(events) == SIMPLIFIED  # simplified: detected zh
    assert wire.decode(wire.encode(langs[0])).language == "zh"


def test_auto_detects_again_after_a_long_pause():
    events, dec = run("auto", pause_s=12.0)
    langs = [e for e in events if isinstance(e, Language)]
    assert len(langs) == 2 and langs[1].start > langs[0].start + 12
    asked = [r.language for r in dec.requests]
    assert "auto" in asked[asked.index("zh"):]  # asked again after the pause


def test_prompt_of_long_chinese_text_keeps_its_last_characters():
    events, dec = run("zh", pause_s=3.0)
    prompts = [r.prompt for r in dec.requests if r.prompt]
    assert prompts and all(not HAN_SPACE_HAN.search(p) for p in prompts)
    assert all(len(p) > 0 for p in prompts)


class DraftingDecoder(ChineseDecoder):
    """Two models: a draft request comes back from the 'draft' in upper case (so its words
    are recognisable), unless its language is one the draft does not speak (then the main
    model answers, unmarked)."""

    def __init__(self, truth, draft_speaks=("zh",)):
        super().__init__(truth)
        self.draft_speaks = draft_speaks

    def __call__(self, req: DecodeRequest) -> DecodeResult:
        r = super().__call__(req)
        if not (req.draft and req.language in self.draft_speaks):
            return r
        words = tuple(Word("X" + w.word.strip(), w.start, w.end, w.probability) for w in r.words)
        return DecodeResult(words, "", 0.01, -0.2, 1.2, r.language, r.language_probability,
                            draft=True)


def run_two(language="zh", draft_speaks=("zh",)):
    audio, truth = speech()
    return drive(audio, truth, language, dec=DraftingDecoder(truth, draft_speaks),
                 options=StreamOptions(draft_partials=True))


def test_two_models_partials_from_the_draft_finals_from_the_main_on_the_same_window():
    events, dec = run_two()
    assert text_of(events) == SIMPLIFIED  # finals: never a draft word
    assert any(isinstance(e, Partial) and "X" in e.text for e in events)  # draft partials shown
    reqs = dec.requests
    drafts = [i for i, r in enumerate(reqs) if r.draft]
    assert drafts
    for i in drafts:  # the main model reads the very window the draft read, right after
        a, b = reqs[i], reqs[i + 1]
        assert not b.draft and b.offset == a.offset and b.duration == a.duration
    assert not any(r.draft for r in reqs if r.careful)


def test_a_language_the_draft_does_not_speak_gets_main_partials_once():
    events, dec = run_two(draft_speaks=("en",))
    assert text_of(events) == SIMPLIFIED
    assert not any(isinstance(e, Partial) and "X" in e.text for e in events)
    ends = [(r.offset + r.duration) for r in dec.requests if not r.careful]
    assert len(ends) == len(set(ends))  # no window read twice by the main model


def test_auto_holds_a_short_first_utterance_for_the_speech_after_it():
    """"他称" (0.5 s) then a pause the VAD ends an utterance on, then the rest: the short one
    is not finalised alone in a language guessed from half a second."""
    audio, truth = speech()
    cut = int((truth[0][2] + 0.1) * SR)  # after the first word
    audio = np.concatenate([audio[:cut], np.zeros(int(0.9 * SR), np.float32), audio[cut:]])
    truth = [truth[0]] + [(w, s + 0.9, e + 0.9) for w, s, e in truth[1:]]
    events, dec = drive(audio, truth, "auto")
    kinds = [type(e).__name__ for e in events if not isinstance(e, Partial)]
    assert kinds[0] == "Language" and events[[type(e).__name__ for e in events].index(
        "Language")].language == "zh"
    assert not any(r.final and r.language == "auto" and r.duration < 1.5 for r in dec.requests)
    assert text_of(events) == SIMPLIFIED


def test_main_step_lets_the_main_model_read_every_other_step():
    audio, truth = speech()
    out = {}
    for ms in (0, 1000):
        events, dec = drive(audio, truth, "zh", dec=DraftingDecoder(truth),
                            options=StreamOptions(draft_partials=True, main_step_ms=ms))
        assert text_of(events) == SIMPLIFIED
        steps = [r for r in dec.requests if not r.careful]
        out[ms] = (sum(r.draft for r in steps), sum(not r.draft for r in steps))
    assert out[0][0] == out[0][1]  # every window read by both
    assert out[1000][1] <= out[1000][0] * 0.6  # the main model reads about every other one


class SwitchingDecoder(ChineseDecoder):
    """Detects the first half of the stream as one language and the half after the long
    pause as another (someone else speaks)."""

    def __init__(self, truth, switch_at: float):
        super().__init__(truth)
        self.switch_at = switch_at

    def __call__(self, req: DecodeRequest) -> DecodeResult:
        r = super().__call__(req)
        if req.language in (None, "auto") and req.duration >= 1.5:
            return replace(r, language="en" if req.offset < self.switch_at else "zh",
                           language_probability=0.97)
        return r


def test_a_new_language_after_a_long_pause_is_not_prompted_with_the_last_ones_text():
    """base after "Printing, in the only sense ..." and 12 s of silence: Mandarin, detected as
    such, still got the English text as its prompt, and the partials came out English."""
    audio, truth = speech(pause_s=12.0)
    half = truth[len(SAID) // 2][1] - 1.0
    dec = SwitchingDecoder(truth, half)
    events, _ = drive(audio, truth, "auto", dec=dec)
    langs = [e.language for e in events if isinstance(e, Language)]
    assert langs == ["en", "zh"]
    later = [r for r in dec.requests if r.offset >= half]
    assert later and not any("門鈴" in r.prompt or "Wi-Fi" in r.prompt for r in later), \
        [r.prompt for r in later]
    assert text_of(events).endswith("日本coaster小巴车。")  # nothing lost


def test_a_latin_word_starting_an_utterance_is_spaced_from_the_last_final_not_glued():
    """A new run's first word was converted as if nothing came before it, lost its space, and
    read as a word Whisper split across two finals: "我们用Python" then "OK了" after a pause
    came out "我们用PythonOK了" in every transcript."""
    from whisperwire.server.text import finals_text, glued

    rng = np.random.default_rng(4)
    said = [("我们", 0.5), ("用", 0.3), (" Python", 0.6), (None, 3.0), (" OK", 0.4), ("了", 0.3)]
    parts, truth, t = [np.zeros(SR // 2, np.float32)], [], 0.5
    for w, d in said:
        if w is None:
            parts.append(np.zeros(int(d * SR), np.float32))
        else:
            parts.append((0.3 * rng.standard_normal(int(d * SR))).astype(np.float32))
            parts.append(np.zeros(int(0.15 * SR), np.float32))
            truth.append((w, t, t + d))
            d += 0.15
        t += d
    parts.append(np.zeros(SR * 2, np.float32))
    events, _ = drive(np.concatenate(parts), truth, "zh")
    fin = [e for e in events if isinstance(e, Final)]
    assert finals_text(fin) == "我们用Python OK了"
    second = next(f for f in fin if "OK" in f.text)
    assert not glued(second.words)
