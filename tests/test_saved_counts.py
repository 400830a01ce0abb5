"""``-- saved N ... to FILE`` says what the file holds: finals are regrouped into cues (.srt,
.vtt) or utterance lines (.txt), so "10 captions" for a file of 4 cues was wrong. And counts
of one are singular."""

from __future__ import annotations

import json
import re

import pytest
from subtitle_check import check_cues
from whisperwire.client.stream import StreamResult, finish, summary
from whisperwire.server import wire

TEXT = ("Printing, in the only sense with which we are at present concerned, differs from most "
        "if not from all the arts and crafts represented in the Exhibition in being "
        "comparatively modern.")


def ten_finals() -> list[wire.Final]:
    """TEXT as 10 finals of 2-3 words, one utterance (``eou`` on the last)."""
    words, out, t = TEXT.split(), [], 0.0
    cuts = [round(i * len(words) / 10) for i in range(11)]
    for seg in range(10):
        ws = []
        for w in words[cuts[seg]:cuts[seg + 1]]:
            ws.append(wire.Word(" " + w, t, t + 0.3, 0.9))
            t += 0.35
        out.append(wire.Final(seg, " ".join(w.word.strip() for w in ws), ws[0].start,
                              ws[-1].end, tuple(ws), eou=seg == 9))
    return out


def session(finals: list[wire.Final]) -> StreamResult:
    res = StreamResult()
    msgs = [wire.Ready("s", "tiny.en", "cpu", "int8", 16000), *finals,
            wire.Closed("client_close", 10.0)]
    res.messages = [(0.1 * i, 0.0, m) for i, m in enumerate(msgs)]
    return res


def saved(stderr: str) -> tuple[int, str]:
    m = re.search(r"-- saved (\d+) (\w+) to ", stderr)
    assert m, stderr
    return int(m.group(1)), m.group(2)


@pytest.mark.parametrize("ext", ["srt", "vtt", "txt", "json"])
def test_saved_counts_what_the_file_holds(ext, tmp_path, capsys):
    out = tmp_path / f"talk.{ext}"
    assert finish(session(ten_finals()), "ws://h:1", str(out)) == 0
    n, what = saved(capsys.readouterr().err)
    text = out.read_text()
    if ext in ("srt", "vtt"):
        held = len(check_cues(text, vtt=ext == "vtt"))
        assert 1 < held < 10 and (n, what) == (held, "cues")
    elif ext == "txt":
        assert (n, what) == (len(text.splitlines()), "line")
    else:
        assert (n, what) == (len(json.loads(text)["finals"]), "finals")


def test_one_final_is_said_in_the_singular(tmp_path, capsys):
    res = session(ten_finals()[-1:])
    assert "; 1 final," in summary(res, 1.0)
    finish(res, "ws://h:1", str(tmp_path / "one.srt"))
    assert "-- saved 1 cue to " in capsys.readouterr().err


def test_a_saved_files_last_cue_stays_inside_the_audio(tmp_path):
    """A short last cue is held on screen a readable while, but never past the end of the
    audio (the ``closed`` that ended it), as the server's downloads are: "Thank you." at
    0.0-0.6 s of a 0.7 s recording went to 0.83 s in the CLI's file."""
    words = (wire.Word(" Thank", 0.0, 0.3, 0.9), wire.Word(" you.", 0.3, 0.6, 0.9))
    res = StreamResult()
    msgs = [wire.Ready("s", "tiny.en", "cpu", "int8", 16000),
            wire.Final(0, "Thank you.", 0.0, 0.6, words, True), wire.Closed("client_close", 0.7)]
    res.messages = [(0.1 * i, 0.0, m) for i, m in enumerate(msgs)]
    for ext in ("srt", "vtt"):
        out = tmp_path / f"one.{ext}"
        finish(res, "ws://h:1", str(out))
        cues = check_cues(out.read_text(), vtt=ext == "vtt")
        assert cues[-1][1] <= 0.7 + 1e-6, cues
