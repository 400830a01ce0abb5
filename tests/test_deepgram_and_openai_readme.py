"""The README's Deepgram SDK and OpenAI SDK snippets, run as they are written (only the host
and port changed) against a real server, on real speech."""

from __future__ import annotations

import re
import wave

import numpy as np
import pytest
from conftest import ROOT, load16k, references, s16
from whisperwire.server.audio import Resampler
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e

CLIP = "LJ001-0002.wav"


def snippet(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Use it from Deepgram and OpenAI clients", 1)[1].split("\n## ", 1)[0]
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if marker in b]
    return code


def write_wav(path, x: np.ndarray, rate: int) -> None:
    if rate != 16000:
        r = Resampler(16000, rate)
        x = np.concatenate([r.process(x), r.flush()])
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(s16(x))


def run_snippet(code: str, server, tmp_path, monkeypatch, capsys) -> list[str]:
    code = code.replace("127.0.0.1:8765", f"127.0.0.1:{server.port}")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README snippet", "exec"), {"__name__": "__readme__"})
    return [line for line in capsys.readouterr().out.splitlines() if line.strip()]


@pytest.mark.timeout(60)
def test_deepgram_snippet(live_server, tmp_path, monkeypatch, capsys):
    write_wav(tmp_path / "speech.wav", load16k(CLIP), 16000)
    out = run_snippet(snippet("DeepgramClient("), live_server, tmp_path, monkeypatch, capsys)
    ref = references()[CLIP]
    assert wer(ref, " ".join(out[:-1])) <= 0.25, out  # the live finals
    assert wer(ref, out[-1]) <= 0.25, out  # the file


@pytest.mark.timeout(60)
def test_openai_snippet(live_server, tmp_path, monkeypatch, capsys):
    write_wav(tmp_path / "speech.wav", load16k(CLIP), 16000)  # the file parts: any rate
    write_wav(tmp_path / "speech-24k.wav", load16k(CLIP), 24000)  # the realtime part
    out = run_snippet(snippet("OpenAI("), live_server, tmp_path, monkeypatch, capsys)
    ref = references()[CLIP]
    text, srt, realtime = out[0], [x for x in out[1:-1] if re.search(r"[a-z]", x)], out[-1]
    assert wer(ref, text) <= 0.25 and wer(ref, " ".join(srt)) <= 0.25, out
    assert "-->" in " ".join(out[1:-1]), "the srt format"
    assert wer(ref, realtime) <= 0.25, out
