"""Bad input, table-driven, against the real server: each case gets an `error` with a stable
code; the session then goes on and still transcribes, or closes with a proper code. A clean
session running alongside sees no change."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from conftest import load16k, references, run, s16
from whisperwire.client.stream import paced, stream_chunks
from whisperwire.server import wire
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e

JFK = None


def jfk() -> np.ndarray:
    global JFK
    if JFK is None:
        JFK = load16k("jfk.wav")
    return JFK



# (query, frames sent before the speech, expected error codes, session survives)
CASES = [
    ("", ["{not json"], ["bad_json"], True),
    ("", ['{"type":"dance"}'], ["unknown_type"], True),
    ("", ["[1,2,3]"], ["bad_message"], True),
    ("", ['"close"'], ["bad_message"], True),
    ("", ['{"type":"ready","session":"x","model":"m","device":"d","compute_type":"c",'
          '"sample_rate":16000}'], ["unknown_type"], True),
    ("", [b"\x00\x01\x02"], ["bad_audio"], True),
    ("?encoding=pcm_f32le", [np.array([0.1, np.nan], "<f4").tobytes()], ["bad_audio"], True),
    ("?encoding=pcm_f32le", [np.array([np.inf] * 4, "<f4").tobytes()], ["bad_audio"], True),
    ("?encoding=pcm_f32le", [b"\x00" * 6], ["bad_audio"], True),
    ("", ["[" * 1000 + "]" * 1000], ["bad_json"], True),  # nesting, never a RecursionError
    ("", ["[" * 2040 + "]" * 2040], ["bad_json"], True),  # deeper than Python's limit
    ("", ["x" * 5000], ["message_too_large"], True),
    ("", [b"\x00" * (1 << 20) + b"\x00\x00"], ["message_too_large"], True),
    ("", [b""], [], True),  # an empty frame is nothing, not an error
    ("", ['{"type":"finalize"}'] * 3, [], True),
]


async def talk(url: str, query: str, before: list, speech: bytes):
    import websockets

    async with websockets.connect(f"{url}/v1/listen{query}", max_size=None) as ws:
        first = wire.decode(await ws.recv())
        assert isinstance(first, wire.Ready)
        for f in before:
            await ws.send(f)
        for i in range(0, len(speech), 32000):
            await ws.send(speech[i : i + 32000])
        await ws.send(json.dumps({"type": "close"}))
        msgs = [wire.decode(m) async for m in ws]
        return msgs, ws.close_code


@pytest.mark.parametrize("query, before, codes, survives", CASES,
                         ids=[f"{i}-{c[2][0] if c[2] else 'none'}" for i, c in enumerate(CASES)])
def test_bad_input(live_server, query, before, codes, survives):
    x = jfk()
    speech = x.astype("<f4").tobytes() if "f32" in query else s16(x)
    msgs, code = run(talk(live_server.url, query, before, speech))
    assert [m.code for m in msgs if isinstance(m, wire.Error)] == codes
    text = " ".join(m.text for m in msgs if isinstance(m, wire.Final))
    assert isinstance(msgs[-1], wire.Closed) and code == 1000
    if survives:
        assert wer(references()["jfk.wav"], text) <= 0.15


def test_error_flood_closes_the_session_cleanly(live_server):
    import websockets

    async def go():
        async with websockets.connect(f"{live_server.url}/v1/listen") as ws:
            await ws.recv()
            for _ in range(40):
                await ws.send("nope")
            msgs = [wire.decode(m) async for m in ws]
            return msgs, ws.close_code

    msgs, code = run(go())
    errors = [m.code for m in msgs if isinstance(m, wire.Error)]
    assert errors[-1] == "too_many_errors" and set(errors[:-1]) == {"bad_json"}
    assert isinstance(msgs[-1], wire.Closed) and msgs[-1].reason == "too_many_errors"
    assert code == 1000


def test_audio_after_close_is_ignored(live_server):
    import websockets

    async def go():
        async with websockets.connect(f"{live_server.url}/v1/listen") as ws:
            await ws.recv()
            await ws.send(s16(jfk()))
            await ws.send(json.dumps({"type": "close"}))
            try:
                for _ in range(5):
                    await ws.send(s16(jfk()[:16000]))
            except websockets.ConnectionClosed:
                pass
            return [wire.decode(m) async for m in ws]

    msgs = run(go())
    assert isinstance(msgs[-1], wire.Closed)
    assert msgs[-1].audio_seconds == pytest.approx(11.0, abs=0.05)


def test_a_clean_session_does_not_notice_bad_neighbours(live_server):
    """One good session streams while others send garbage, flood and hang up."""
    x = np.concatenate([jfk(), load16k("LJ001-0001.wav")])
    ref = references()["jfk.wav"] + " " + references()["LJ001-0001.wav"]

    async def vandal(i: int):
        import websockets

        try:
            async with websockets.connect(f"{live_server.url}/v1/listen") as ws:
                await ws.recv()
                for _ in range(10):
                    await ws.send(b"\x01\x02\x03")
                    await ws.send("{")
                    await ws.send(s16(np.random.default_rng(i).standard_normal(8000) * 0.3))
                if i % 2:
                    ws.transport.abort()  # abrupt reset
        except (websockets.ConnectionClosed, OSError):
            pass  # vandals get cut off; that is the point

    async def go():
        params = wire.ListenParams()
        good = asyncio.create_task(
            stream_chunks(live_server.url, paced(s16(x), params, 4.0), params))
        await asyncio.gather(*(vandal(i) for i in range(6)))
        return await good

    res = run(go())
    assert not res.of_type(wire.Error)
    assert wer(ref, res.text) <= 0.1
