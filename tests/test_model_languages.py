"""The languages a model is offered and accepts in are those its vocabulary has a token for.
faster-whisper lists the same 100 codes for every multilingual model, but only large-v3 has
<|yue|>: base took ``language=yue`` and streamed garbage ("Ta Ta制了一个WW"), its prompt
without a language token, and /v1/models and the page's menu offered 粵語. The real base
model, the real server, a real handshake (no audio)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets

from conftest import LiveServer, run
from whisperwire.server import wire
from whisperwire.server.app import ServerConfig
from whisperwire.server.engine import EngineOptions

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def base():
    with LiveServer(ServerConfig(engine=EngineOptions(model="base"))) as s:
        yield s


async def _handshake(url: str, language: str) -> tuple[dict, int | None]:
    """The server's first message to a speaker asking for ``language``, and the close code
    when that message was a refusal (the server closes after it)."""
    async with websockets.connect(f"{url}/v1/listen?language={language}") as ws:
        first = wire.decode(await asyncio.wait_for(ws.recv(), 60)).to_json()
        if first["type"] != "error":
            return first, None
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed:
            pass
        return first, ws.close_code


@pytest.mark.timeout(120)
def test_base_lists_only_the_languages_it_has_tokens_for(base):
    """/v1/models (which the page's menu is built from) lists base's 99 languages, as many as
    the model itself says it has (CTranslate2's ``num_languages``), and no yue."""
    wm = base.app.state.engine._wm  # noqa: SLF001 - the very model the server decodes with
    (model,) = httpx.get(f"{base.http}/v1/models", timeout=30).json()["data"]
    langs = model["languages"]
    assert "yue" not in langs
    assert len(langs) == wm.model.num_languages == 99
    assert {"en", "zh", "ja", "haw", "jw"} <= set(langs)


@pytest.mark.timeout(120)
def test_yue_on_base_is_refused_as_an_unknown_language_is(base):
    """A yue stream gets ``bad_language`` (close 1003) before any audio, as "xx" does; zh,
    which base has a token for, is taken."""
    got, code = run(_handshake(base.url, "yue"))
    assert (got["type"], got.get("code"), code) == ("error", "bad_language", 1003), got
    assert "'yue'" in got["message"]
    unknown, _ = run(_handshake(base.url, "xx"))
    assert unknown.get("code") == "bad_language"
    ready, _ = run(_handshake(base.url, "zh"))
    assert ready["type"] == "ready", ready
