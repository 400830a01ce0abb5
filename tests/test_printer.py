"""Terminal captions as flowing text: the pure layout (text in, lines out), a terminal's view of
the in-place redraw, and one run against the real server."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import wave

import numpy as np
import pytest
from conftest import SPEECH, references
from whisperwire.client.audio_file import read_audio
from whisperwire.client.printer import Flow, cells, flow_lines
from whisperwire.server.wire import Final


def finals(*texts: str, gap: float = 0.1, dur: float = 1.0) -> list[Final]:
    out, t = [], 0.0
    for i, text in enumerate(texts):
        out.append(Final(i, text, t, t + dur, (), False))
        t += dur + gap
    return out


def screen(output: str) -> list[str]:
    """What a terminal shows for ``output``: ``\\r`` returns, ``ESC[K`` erases to the end of
    the line, colours are dropped."""
    rows, col = [""], 0
    for token in re.findall(r"\x1b\[[0-9;]*[A-Za-z]|\r|\n|[^\x1b\r\n]", output):
        if token == "\r":
            col = 0
        elif token == "\n":
            rows.append("")
            col = 0
        elif token == "\x1b[K":
            rows[-1] = rows[-1][:col]
        elif token.startswith("\x1b"):
            continue
        else:
            row = rows[-1]
            rows[-1] = row[:col] + token + row[col + 1:]
            col += 1
    return rows


JFK = ["And so my fellow Americans,", "ask not", "what your country", "can do for you,",
       "ask what you can do", "for your country."]


def test_finals_flow_on_one_line_until_a_sentence_ends():
    lines = flow_lines(finals(*JFK, "And so it goes."), width=80)
    assert lines == [
        "And so my fellow Americans, ask not what your country can do for you, ask what",
        "you can do for your country.", "And so it goes."]


@pytest.mark.parametrize("width", [20, 33, 80, 120])
def test_lines_fit_the_width_and_keep_every_word(width):
    text = references()["LJ001-0001.wav"] + " " + references()["LJ001-0002.wav"]
    words = text.split()
    fs = finals(*(" ".join(words[i:i + 3]) for i in range(0, len(words), 3)))
    lines = flow_lines(fs, width=width)
    assert all(cells(line) <= width for line in lines)
    assert " ".join(lines).split() == words
    full = [line for line in lines[:-1] if not line.endswith((".", "?", "!"))]
    assert all(cells(line) > width - 15 for line in full), "wrapped lines are filled"


def test_a_pause_starts_a_new_line():
    fs = finals("we waited", "and then", gap=0.2) + [Final(2, "it rained", 5.0, 6.0, (), True)]
    assert flow_lines(fs) == ["we waited and then", "it rained"]


def test_lines_mode_keeps_one_final_per_line():
    assert flow_lines(finals(*JFK[:3]), one_per_line=True) == JFK[:3]


def test_lines_mode_never_wraps_a_long_final():
    """``--lines`` is one line per final (README), also when a final is wider than the pipe's 80
    columns: it used to wrap, and a script counting lines counted finals wrong."""
    long = " ".join(["comparatively modern printing"] * 5)  # 149 columns
    url = "https://example.com/" + "x" * 90
    fs = finals("And so.", long, url, "我们今天讨论一下这个问题" * 4)
    assert flow_lines(fs, width=80, one_per_line=True) == [f.text for f in fs]
    printed = Flow(width=40, tty=True, one_per_line=True).final(long, 0, 1)
    assert screen(printed) == [long, ""]


def test_an_overlong_word_and_wide_characters_are_cut_to_the_width():
    zh = "我们今天讨论一下这个问题然后再决定怎么做比较好。"
    lines = flow_lines(finals("x" * 50, zh), width=20)
    assert all(cells(line) <= 20 for line in lines), lines
    assert "".join(lines).replace(" ", "") == "x" * 50 + zh


def test_on_a_terminal_the_partial_is_redrawn_in_place_after_the_running_line():
    f = Flow(width=40, tty=True)
    out = f.final("And so my fellow Americans,", 0, 1)
    out += f.partial("ask not what")
    assert screen(out) == ["And so my fellow Americans, ask not what"]
    out += f.partial("ask not what your country")  # too long for the row: its tail, cut
    rows = screen(out)
    assert len(rows) == 1 and rows[0].startswith("And so my fellow Americans, …")
    assert len(rows[0]) <= 40 and rows[0].endswith("country")
    out += f.final("ask not what your country", 1, 2)  # the final replaces the partial
    out += f.partial("can do")
    assert screen(out) == ["And so my fellow Americans, ask not what", "your country can do"]
    out += f.final("can do for you.", 2, 3) + f.end()
    assert screen(out) == ["And so my fellow Americans, ask not what",
                           "your country can do for you.", ""]


@pytest.mark.timeout(120)
def test_real_speech_prints_as_a_few_full_lines(live_server):
    """50 s of LJ speech at real-time pace used to come out as ~70 lines of 1-3 words."""
    names = ["LJ001-0001.wav", "LJ001-0002.wav", "LJ001-0003.wav", "LJ001-0004.wav"]
    audio = np.concatenate([read_audio(str(SPEECH / n)) for n in names])
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        with wave.open(tmp.name, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(audio.astype("<i2").tobytes())
        r = subprocess.run([sys.executable, "-m", "whisperwire.server", "stream", tmp.name,
                            "--url", live_server.url, "--speed", "2"],
                           capture_output=True, text=True, timeout=100)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    n_words = sum(len(references()[n].split()) for n in names)
    assert all(len(line) <= 80 for line in lines)
    assert len(lines) <= n_words / 8, lines  # ~13 words a full line; sentence ends break early


def test_a_viewer_starts_a_new_line_when_the_speaker_ends():
    """A channel's next speaker may start right where the last one's audio ended (its first
    final within the pause that breaks a line), and the last one's final may have had no
    ``eou``: the ``closed`` between them ends the line."""
    import io

    from whisperwire.client.printer import CaptionPrinter
    from whisperwire.server.wire import Closed

    out = io.StringIO()
    p = CaptionPrinter(out=out)
    p(Final(0, "and the others", 9.0, 10.0, (), False))
    p(Closed("client_close", 10.2))
    p(Final(1, "in being comparatively modern.", 10.3, 11.5, (), False))
    p.close()
    assert out.getvalue().splitlines() == ["and the others", "in being comparatively modern."]


def test_a_closing_mark_never_starts_a_terminal_line():
    """At 30 columns "...旧圆环境，然后..." broke before "，": the character goes down with it."""
    from whisperwire.server.text import closes

    flow = Flow(30)
    text = "爆猫的普适方式是先融入旧圆环境，然后我们不像猎物。"
    lines = (flow.final(text) + flow.end()).splitlines()
    assert "".join(lines) == text
    assert lines[1].startswith("境，") and not any(closes(x[:1]) for x in lines), lines
    # marks after marks go down together with the character before them (a review found "。”"
    # split: the line began with it)
    flow = Flow(20)
    text = "一一一一一一一一一一一一一一一一他说好。”然后我们走吧。"
    lines = (flow.final(text) + flow.end()).splitlines()
    assert "".join(lines) == text and not any(closes(x[:1]) for x in lines), lines


def test_a_viewer_is_not_told_a_language_was_detected(capsys):
    """A viewer (``whisperwire captions``) is told each speaker's captions' language, also
    one the speaker asked for: it does not call it detected. A speaker is told only a
    detected one, which says so (p rounds to 1.0 for a sure one: a review's finding)."""
    from whisperwire.client.printer import CaptionPrinter
    from whisperwire.server.wire import Language

    viewer = CaptionPrinter(viewer=True)
    viewer(Language("en", 1.0, 0.0))
    speaker = CaptionPrinter()
    speaker(Language("zh", 0.93, 4.0, "simplified"))
    speaker(Language("en", 1.0, 0.0))
    assert capsys.readouterr().err.splitlines() == [
        "whisperwire: language en", "whisperwire: language zh (detected, p=0.93)",
        "whisperwire: language en (detected, p=1.00)"]
