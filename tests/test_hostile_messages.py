"""Control messages that are valid JSON but not what the dialects expect: wrongly typed
``session.update`` fields, and a lone UTF-16 surrogate (``"\\ud800"``, valid JSON that no UTF-8
can carry) in a prompt, a keyterm or a model name. Each gets an error event, and the speech
sent after it is still transcribed. Real server, model and speech."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
import websockets
from conftest import load16k, references, run, s16
from whisperwire.server import wire
from whisperwire.server.audio import Resampler
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e

SURROGATE_PROMPT = (r'{"type":"session.update","session":{"type":"transcription","audio":'
                    r'{"input":{"transcription":{"prompt":"\ud800"}}}}}')
SURROGATE_MODEL = (r'{"type":"session.update","session":{"type":"transcription","audio":'
                   r'{"input":{"transcription":{"model":"\ud800"}}}}}')


def test_a_lone_surrogate_is_refused_as_json_text():
    assert wire.loads(r'{"a": "\ud83d\ude00"}') == {"a": "\U0001F600"}  # a pair is fine
    for bad in (r'{"a": "\ud800"}', r'{"a": ["x", "\udfff"]}', r'{"\ud800": 1}'):
        with pytest.raises(ValueError):
            wire.loads(bad)


def pcm24k() -> bytes:
    r = Resampler(16000, 24000)
    x = load16k("jfk.wav")
    return s16(np.concatenate([r.process(x), r.flush()]))


async def realtime(url: str, bad: list[str]) -> list[dict]:
    """Send each bad event, then jfk.wav flat out and a commit; every event until the turn
    completes (or the socket closes)."""
    out: list[dict] = []
    async with websockets.connect(url + "/v1/realtime?intent=transcription") as ws:
        for b in bad:
            await ws.send(b)
        await ws.send(json.dumps({"type": "session.update", "session": {
            "type": "transcription", "audio": {"input": {"turn_detection": None}}}}))
        pcm = pcm24k()
        for i in range(0, len(pcm), 48000):
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": base64.b64encode(pcm[i : i + 48000]).decode()}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        try:
            while True:
                out.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
                if out[-1]["type"].endswith("transcription.completed"):
                    break
        except websockets.ConnectionClosed:
            pass
    return out


@pytest.mark.timeout(120)
def test_realtime_session_updates_of_the_wrong_type_or_text_are_refused_and_speech_goes_on(
        live_server):
    def update(inp):
        return json.dumps({"type": "session.update",
                           "session": {"type": "transcription", **inp}})

    bad = [update({"audio": {"input": {"format": {"type": ["audio/pcm"]}}}}),
           update({"audio": {"input": {"format": ["audio/pcm"]}}}),
           update({"audio": "pcm"}),
           update({"audio": {"input": {"transcription": {"prompt": ["a"]}}}}),
           SURROGATE_PROMPT, SURROGATE_MODEL]
    events = run(realtime(live_server.url, bad))
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == len(bad), [e.get("error") for e in errors]
    done = [e for e in events if e["type"].endswith("transcription.completed")]
    assert done and wer(references()["jfk.wav"], done[-1]["transcript"]) <= 0.3, events[-3:]


@pytest.mark.timeout(120)
def test_a_deepgram_keyterm_with_a_lone_surrogate_is_refused_and_speech_goes_on(live_server):
    async def go() -> list[dict]:
        url = live_server.url + "/deepgram/v1/listen?encoding=linear16&sample_rate=16000"
        out = []
        async with websockets.connect(url) as ws:
            await ws.send(r'{"type":"Configure","keyterms":["\ud800"]}')
            pcm = s16(load16k("jfk.wav"))
            for i in range(0, len(pcm), 32000):
                await ws.send(pcm[i : i + 32000])
            await ws.send('{"type":"CloseStream"}')
            try:
                async for m in ws:
                    out.append(json.loads(m))
            except websockets.ConnectionClosed:
                pass
        return out

    events = run(go())
    assert not any(e.get("type") == "ConfigureSuccess" for e in events)
    assert any(e.get("type") == "Error" or "err_code" in e for e in events), events[:3]
    text = " ".join(e["channel"]["alternatives"][0]["transcript"] for e in events
                    if e.get("type") == "Results" and e.get("is_final"))
    assert wer(references()["jfk.wav"], text) <= 0.3, text
