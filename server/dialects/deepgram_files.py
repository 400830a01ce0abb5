"""Deepgram's pre-recorded API: ``POST /deepgram/v1/listen`` with a whole file, answered with
Deepgram's JSON (``utterances`` and ``paragraphs`` when asked). The file is decoded by the same
machinery as a live stream played flat out (:func:`.common.decode_file`); the words, timings
and shapes a live stream's ``Results`` carry come from :mod:`.deepgram`.
"""

from __future__ import annotations

import datetime
import hashlib
import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import wire
from ..audio import Resampler
from ..errors import ClientError, retry_after
from ..text import glue_piece, is_piece, join_texts, join_units
from .common import (ClientGone, FileResult, check_speaker, decode_file, g711_to_float,
                     load_media, off_loop, speaker_token, while_awaited)
from .deepgram import (MAX_FILE_BYTES, alternative, containerized, error_body, iso_time,
                       model_info, model_uuid)
from .deepgram_params import DeepgramOptions, parse_options

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["listen_file", "prerecorded"]


async def _body(request: Request, limit: int) -> bytes:
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise ClientError("file_too_large", f"files are limited to {limit >> 20} MiB")
    return bytes(data)


async def listen_file(server: WhisperWire, request: Request) -> Response:
    """``POST /deepgram/v1/listen``: a whole file in, Deepgram's pre-recorded JSON out."""
    rid = str(uuid.uuid4())
    try:
        server.check_origin(request)
        q = request.query_params
        token = speaker_token(request.headers, q)
        check_speaker(server, token)
        opts = parse_options(q, {k: q.getlist(k) for k in q.keys()}, live=False)
        if request.headers.get("content-type", "").startswith("application/json"):
            raise ClientError("unsupported_parameter", "fetching audio from a URL is not "
                              "supported; POST the audio bytes instead")
        data = await _body(request, MAX_FILE_BYTES)
        audio = await _audio(data, opts, "encoding" in q, server.config.max_session_s)
        created = datetime.datetime.now(datetime.timezone.utc)
        res = await while_awaited(request.receive, decode_file(
            server, token, audio, language=opts.params.language, prompt=opts.params.prompt,
            zh_script=opts.params.zh_script, api="deepgram-file"))
    except ClientGone:
        return Response(status_code=499)  # (nobody reads it)
    except ClientError as exc:
        server.metrics.errors.labels(exc.code).inc()
        status, body = error_body(exc, rid)
        return JSONResponse(body, status_code=status, headers=retry_after(exc.code))
    body = prerecorded(server.engine, res, opts, created, hashlib.sha256(data).hexdigest())
    return JSONResponse(body, headers={"dg-request-id": res.session})


async def _audio(data: bytes, opts: DeepgramOptions, raw: bool, max_seconds: float) -> Any:
    """The file's samples. With ``encoding`` the bytes are raw audio, unless they are a
    container (Deepgram's own example posts an MP3 with ``encoding=linear16``, and Deepgram
    reads the MP3: taken for PCM, it was 2 s of noise and an empty transcript); raw audio
    whose first bytes only look like a container's is still read raw."""
    kind = containerized(data)
    if raw and kind is None:
        return await off_loop(_raw_audio, data, opts, max_seconds)
    try:
        return await load_media(data, max_seconds)
    except ClientError as exc:
        if not raw or kind != "mpeg" or exc.code != "bad_file":
            raise  # (a file that says what it is and holds no audio is refused)
        return await off_loop(_raw_audio, data, opts, max_seconds)


def _raw_audio(data: bytes, opts: DeepgramOptions, max_seconds: float) -> Any:
    """Headerless audio in a file request (``encoding`` and ``sample_rate`` given), refused
    before it is converted if it holds more than ``max_seconds``."""
    import numpy as np

    width = 1 if opts.encoding in ("mulaw", "alaw") else 2
    if len(data) / width / opts.params.sample_rate > max_seconds:
        raise ClientError("file_too_long", f"files are limited to {max_seconds:.0f} s of audio")
    if opts.encoding in ("mulaw", "alaw"):
        x = g711_to_float(data, opts.encoding)
    else:
        x = np.frombuffer(data[: len(data) // 2 * 2], "<i2").astype(np.float32) / 32768.0
    r = Resampler(opts.params.sample_rate)
    return np.concatenate([r.process(x), r.flush()])


def prerecorded(engine: Any, res: FileResult, opts: DeepgramOptions,
                created: datetime.datetime, sha: str) -> dict[str, Any]:
    """Deepgram's pre-recorded response; ``utterances`` and ``paragraphs`` when asked."""
    words = [w for f in res.finals for w in f.words]
    alt = alternative(words, res.text, opts.punctuate)
    turns = _turns(res.finals, opts.utt_split)
    if opts.paragraphs:
        alt["paragraphs"] = _paragraphs(turns, opts.punctuate)
    muid = model_uuid(engine.model_name)
    results: dict[str, Any] = {"channels": [{"alternatives": [alt],
                                             "detected_language": res.language}]}
    if opts.utterances:
        results["utterances"] = [
            {**alternative(t, join_units(w.word for w in t), opts.punctuate),
             "start": round(t[0].start, 3), "end": round(t[-1].end, 3), "channel": 0,
             "speaker": 0, "id": str(uuid.uuid4())} for t in turns]
    return {"metadata": {"transaction_key": "deprecated", "request_id": res.session,
                         "sha256": sha, "created": iso_time(created),
                         "duration": round(res.seconds, 3),
                         "channels": 1, "models": [muid],
                         "model_info": {muid: model_info(engine)}},
            "results": results}


def _turns(finals: list[wire.Final], split_s: float) -> list[list[wire.Word]]:
    """Words grouped into utterances: a pause of ``split_s`` (Deepgram's ``utt_split``) or the
    end of one of our utterances ends one. Words are whole (:func:`.text.whole_words`): a
    piece goes on its word, even across finals."""
    turns: list[list[wire.Word]] = [[]]
    for f in finals:
        for w in f.words:
            last = turns[-1] or (turns[-2] if len(turns) > 1 else [])
            if last and is_piece(last[-1], w):
                last[-1] = glue_piece(last[-1], w)
                continue
            if turns[-1] and w.start - turns[-1][-1].end >= split_s:
                turns.append([])
            turns[-1].append(w)
        if f.eou and turns[-1]:
            turns.append([])
    return [t for t in turns if t]


_CLOSERS = "\"'”’»›)]}」』】"


def _paragraphs(turns: list[list[wire.Word]], punctuate: bool) -> dict[str, Any]:
    """Deepgram's paragraphs: sentences, found by their punctuation, and a new paragraph
    where a sentence ends at a pause that ends an utterance (``turns``); never inside a
    sentence (jfk's one sentence, said in three utterances, was three paragraphs). Text with
    no sentence end at all (Whisper's Chinese may have none) has a paragraph per utterance."""
    ends = (".", "?", "!", "…", "。", "？", "！")

    def ends_sentence(w: wire.Word) -> bool:  # (inside a closing quote too: "Stop." 走。”)
        return w.word.rstrip().rstrip(_CLOSERS).endswith(ends)

    punctuated = any(ends_sentence(w) for t in turns for w in t)
    groups: list[list[list[wire.Word]]] = [[]]  # paragraphs of sentences of words
    cur: list[wire.Word] = []
    for t in turns:
        for w in t:
            cur.append(w)
            if ends_sentence(w):
                groups[-1].append(cur)
                cur = []
        if cur and not punctuated:
            groups[-1].append(cur)
            cur = []
        if not cur and groups[-1]:
            groups.append([])
    if cur:
        groups[-1].append(cur)
    paras = [{
        "sentences": [{"text": alternative(s, "".join(w.word for w in s), punctuate)["transcript"],
                       "start": round(s[0].start, 3), "end": round(s[-1].end, 3)}
                      for s in sentences],
        "speaker": 0, "num_words": sum(len(s) for s in sentences),
        "start": round(sentences[0][0].start, 3), "end": round(sentences[-1][-1].end, 3)}
        for sentences in groups if sentences]
    text = "\n\n".join(join_texts(s["text"] for s in p["sentences"]) for p in paras)
    return {"transcript": "\n" + text if text else "", "paragraphs": paras}
