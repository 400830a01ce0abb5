"""OpenAI's audio API through the official openai SDK, unchanged but for its base URL: every
response format of transcriptions, translations refused by an English-only model, errors in
OpenAI's shape, and /v1/models. Real server, model and speech."""

from __future__ import annotations


import httpx
import numpy as np
import openai
import pytest
from conftest import load16k, references, wav_bytes
from subtitle_check import check_cues
from whisperwire.server.wer import normalize, wer

pytestmark = pytest.mark.e2e

NAMES = ["LJ001-0006.wav", "LJ001-0007.wav"]


@pytest.fixture(scope="module")
def sample():
    gap = np.zeros(16000, np.float32)
    x = np.concatenate([load16k(NAMES[0]), gap, load16k(NAMES[1])])
    return wav_bytes(x), " ".join(references()[n] for n in NAMES), len(x) / 16000


def client(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{srv.http}/v1", api_key="any", max_retries=0)


@pytest.mark.timeout(180)
def test_every_response_format(live_server, sample):
    data, ref, seconds = sample
    oa = client(live_server)
    create = lambda fmt, **kw: oa.audio.transcriptions.create(  # noqa: E731
        file=("speech.wav", data), model="whisper-1", response_format=fmt, **kw)
    j = create("json", language="en", prompt="Gutenberg.", temperature=0.0)
    assert wer(ref, j.text) <= 0.25, j.text
    assert j.usage.seconds == pytest.approx(seconds, abs=0.05)
    text = create("text")
    assert isinstance(text, str) and text.endswith("\n") and wer(ref, text) <= 0.25
    srt = create("srt")
    cues = check_cues(srt, vtt=False)
    assert wer(ref, " ".join(" ".join(c[2]) for c in cues)) <= 0.25
    assert cues[-1][1] <= seconds + 0.05
    vtt = create("vtt")
    assert wer(ref, " ".join(" ".join(c[2]) for c in check_cues(vtt, vtt=True))) <= 0.25
    v = create("verbose_json", timestamp_granularities=["word", "segment"])
    assert v.language == "english" and v.duration == pytest.approx(seconds, abs=0.05)
    assert wer(ref, v.text) <= 0.25
    assert v.segments and all(s.start <= s.end for s in v.segments)
    assert normalize(" ".join(s.text for s in v.segments)) == normalize(v.text)
    # as Whisper's (OpenAI's) segments: each English one starts with its space, so an app that
    # joins them as faster-whisper's ("".join) gets the text, not words run together
    assert "".join(s.text for s in v.segments).strip() == v.text
    assert all(s.text.startswith(" ") for s in v.segments), [s.text for s in v.segments]
    assert v.words and normalize(" ".join(w.word for w in v.words)) == normalize(v.text)
    assert all(a.start <= b.start for a, b in zip(v.words, v.words[1:]))
    # each file was a session: its transcript is downloadable under the returned id
    raw = oa.audio.transcriptions.with_raw_response.create(file=("speech.wav", data),
                                                          model="whisper-1")
    sid = raw.headers["x-whisperwire-session"]
    tr = httpx.get(f"{live_server.http}/v1/sessions/{sid}/transcript.txt").text
    assert normalize(tr) == normalize(raw.parse().text)


@pytest.mark.timeout(60)
def test_models_and_errors(live_server):
    oa = client(live_server)
    models = httpx.get(f"{live_server.http}/v1/models").json()
    assert models["object"] == "list"
    (m,) = models["data"]
    assert m["object"] == "model" and m["owned_by"] == "whisperwire"
    assert "en" in m["languages"] and m["tasks"] == ["transcribe"]
    assert [x.id for x in oa.models.list()] == [m["id"]]
    with pytest.raises(openai.BadRequestError) as err:
        oa.audio.translations.create(file=("a.wav", wav_bytes(load16k("LJ001-0002.wav"))),
                                     model="whisper-1")
    assert err.value.body["code"] == "unsupported_task"
    with pytest.raises(openai.BadRequestError) as err:
        oa.audio.transcriptions.create(file=("a.wav", b"this is not audio"), model="whisper-1")
    assert err.value.body["param"] == "file" and err.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as err:
        oa.audio.transcriptions.create(file=("a.wav", wav_bytes(load16k("LJ001-0002.wav"))),
                                       model="whisper-1", response_format="diarized_json")
    assert err.value.body["code"] == "unsupported_response_format"
    assert err.value.body["param"] == "response_format"  # (it was null, as for the next two)
    with pytest.raises(openai.BadRequestError) as err:
        oa.audio.transcriptions.create(file=("a.wav", wav_bytes(load16k("LJ001-0002.wav"))),
                                       model="whisper-1", language="xx")
    assert err.value.body["code"] == "bad_language" and err.value.body["param"] == "language"
    with pytest.raises(openai.BadRequestError) as err:  # OpenAI's range is 0 to 1
        oa.audio.transcriptions.create(file=("a.wav", wav_bytes(load16k("LJ001-0002.wav"))),
                                       model="whisper-1", temperature=5)
    assert err.value.body["code"] == "bad_temperature"
    assert err.value.body["param"] == "temperature"
    # OpenAI requires ``model`` (any name does here); a request without one was answered
    r = httpx.post(f"{live_server.http}/v1/audio/transcriptions",
                   files={"file": ("a.wav", wav_bytes(load16k("LJ001-0002.wav")))})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model", r.text
    with pytest.raises(openai.APIStatusError) as err:
        oa.audio.transcriptions.create(file=("big.wav", b"\0" * (26 << 20)), model="whisper-1")
    assert err.value.status_code == 413 and "Maximum content size" in err.value.message


@pytest.mark.timeout(120)
def test_stream_true_sends_the_transcript_as_it_is_made(live_server, sample):
    """stream=True (the SDK's Stream of transcript.text.delta / .done events) was refused with
    400 for every model. Now the file's finals come as deltas while it decodes, then done;
    whisper-1 ignores it, as OpenAI's does (the SDK says so)."""
    data, ref, seconds = sample
    oa = client(live_server)
    events = list(oa.audio.transcriptions.create(file=("speech.wav", data),
                                                 model="gpt-4o-transcribe", stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.delta") >= 2
    done = events[-1]
    assert "".join(e.delta for e in events[:-1]) == done.text
    assert wer(ref, done.text) <= 0.25, done.text
    assert done.usage.seconds == pytest.approx(seconds, abs=0.05)
    r = httpx.post(f"{live_server.http}/v1/audio/transcriptions", files={
        "file": ("speech.wav", data)}, data={"model": "whisper-1", "stream": "true"})
    assert r.status_code == 200 and wer(ref, r.json()["text"]) <= 0.25


@pytest.mark.timeout(60)
def test_stream_true_with_a_format_that_cannot_stream_is_refused_with_a_request_id(
        live_server, sample):
    """stream=True with verbose_json, srt or vtt (on a model that streams) answered 200 with
    the plain body, which the SDK's Stream read as no events at all: the transcript was
    silently lost. OpenAI's streaming models take json and text only, and say so with a 400;
    and every error carries a request id, as OpenAI's do (the SDK's ``e.request_id``)."""
    data, _, _ = sample
    oa = client(live_server)
    for fmt in ("verbose_json", "srt", "vtt"):
        with pytest.raises(openai.BadRequestError) as e:
            list(oa.audio.transcriptions.create(file=("speech.wav", data), stream=True,
                                                model="gpt-4o-transcribe", response_format=fmt))
        assert e.value.param == "response_format" and "json" in e.value.message, fmt
        assert e.value.request_id and e.value.request_id.startswith("req_"), fmt


@pytest.mark.timeout(60)
def test_another_method_on_a_file_endpoint_is_a_405_in_the_dialects_shape(live_server):
    """A GET (a browser, a health probe, a client that builds the wrong request) on a file
    endpoint was answered by the web page's static files: a plain-text 404 "Not Found", which
    reads as a wrong URL, not a wrong method."""
    for path in ("/v1/audio/transcriptions", "/v1/audio/translations"):
        r = httpx.get(f"{live_server.http}{path}")
        assert r.status_code == 405 and r.headers["allow"] == "POST", (path, r.text)
        assert r.json()["error"]["code"] == "method_not_allowed"
    r = httpx.put(f"{live_server.http}/deepgram/v1/listen", content=b"x")
    assert r.status_code == 405 and r.headers["allow"] == "POST", r.text
    assert r.json()["err_code"] == "METHOD_NOT_ALLOWED"
    assert httpx.head(f"{live_server.http}/v1/audio/transcriptions").status_code == 405


@pytest.mark.timeout(60)
def test_a_model_is_retrieved_by_id_and_an_unknown_endpoint_answers_in_openais_shape(
        live_server):
    """``client.models.retrieve`` (an app checking its model before it starts) got the web
    page's plain-text 404 "Not Found", as did any other OpenAI path (``/v1/chat/completions``):
    the SDK then says nothing about why."""
    oa = client(live_server)
    (loaded,) = [x.id for x in oa.models.list()]
    for name in (loaded, "whisper-1", "gpt-4o-transcribe"):
        m = oa.models.retrieve(name)
        assert m.id == name and m.object == "model" and m.owned_by == "whisperwire", m
    with pytest.raises(openai.NotFoundError) as err:
        oa.models.retrieve("gpt-4o")
    assert err.value.body["code"] == "model_not_found" and err.value.body["param"] == "model"
    r = httpx.post(f"{live_server.http}/v1/chat/completions", json={"model": "x"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_url", r.text
    # a path served to another method stays a 405 (the catch-all took those as 404s)
    for r in (httpx.post(f"{live_server.http}/v1/models"),
              httpx.delete(f"{live_server.http}/v1/sessions/x/transcript.json")):
        assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed", r
    assert httpx.get(f"{live_server.http}/").status_code == 200  # (the page is still there)


@pytest.mark.timeout(60)
def test_models_want_a_speak_token_where_the_server_has_tokens(live_server):
    """OpenAI answers a wrong key on /v1/models with 401; here any key listed the models, so
    an app checking its key at start-up was told it was good."""
    from conftest import LiveServer
    from whisperwire.server.app import ServerConfig
    from whisperwire.server.auth import AuthConfig

    cfg = ServerConfig(auth=AuthConfig(("sekret",), ("viewer",)))
    with LiveServer(cfg, live_server.app.state.engine) as srv:
        for key in ("wrong", "viewer"):
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=f"{srv.http}/v1", api_key=key, max_retries=0
                              ).models.list()
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{srv.http}/v1", api_key="wrong", max_retries=0
                          ).models.retrieve("whisper-1")
        good = openai.OpenAI(base_url=f"{srv.http}/v1", api_key="sekret", max_retries=0)
        assert [m.id for m in good.models.list()] and good.models.retrieve("whisper-1").id
