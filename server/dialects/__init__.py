"""Other vendors' speech APIs on the same app: Deepgram v1 and OpenAI's audio and realtime
transcription. Each is a thin translator onto the same sessions (:mod:`..listen`), so one engine,
one set of limits, tokens, metrics and logs serve them all, and any session can be followed by
its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute

from ..errors import ClientError
from . import deepgram, deepgram_files, openai_audio, openai_realtime

if TYPE_CHECKING:
    from ..app import WhisperWire

__all__ = ["routes"]


def routes(server: WhisperWire) -> list[BaseRoute]:
    """The endpoints of every dialect, bound to ``server``."""

    async def dg_live(ws):  # type: ignore[no-untyped-def]
        await deepgram.listen_live(server, ws)

    async def dg_file(request):  # type: ignore[no-untyped-def]
        return await deepgram_files.listen_file(server, request)

    async def transcriptions(request):  # type: ignore[no-untyped-def]
        return await openai_audio.transcribe(server, request, "transcribe")

    async def translations(request):  # type: ignore[no-untyped-def]
        return await openai_audio.transcribe(server, request, "translate")

    async def models(request):  # type: ignore[no-untyped-def]
        return await openai_audio.list_models(server, request)

    async def model(request):  # type: ignore[no-untyped-def]
        return await openai_audio.retrieve_model(server, request)

    async def realtime(ws):  # type: ignore[no-untyped-def]
        await openai_realtime.realtime(server, ws)

    async def dg_not_post(request):  # type: ignore[no-untyped-def]
        status, body = deepgram.error_body(_not_post(request), "")
        return JSONResponse(body, status_code=status, headers={"Allow": "POST"})

    async def openai_not_post(request):  # type: ignore[no-untyped-def]
        response = openai_audio.error(_not_post(request))
        response.headers["Allow"] = "POST"
        return response

    return [
        WebSocketRoute("/deepgram/v1/listen", dg_live),
        Route("/deepgram/v1/listen", dg_file, methods=["POST"]),
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/translations", translations, methods=["POST"]),
        Route("/v1/models", models),
        WebSocketRoute("/v1/realtime", realtime),
        # (another method on a POST endpoint: a 405 in the dialect's own error shape; without
        # these routes the web page's static files answered a plain-text 404)
        Route("/deepgram/v1/listen", dg_not_post, methods=_NOT_POST),
        Route("/v1/audio/transcriptions", openai_not_post, methods=_NOT_POST),
        Route("/v1/audio/translations", openai_not_post, methods=_NOT_POST),
        Route("/v1/models/{model:path}", model),  # (a model named by its directory has '/')
        # (last: the app's own /v1 routes come before these)
        Route("/v1/{path:path}", openai_audio.unknown_url, methods=_NOT_POST + ["POST"]),
    ]


_NOT_POST = ["GET", "PUT", "PATCH", "DELETE"]  # (HEAD comes with GET)


def _not_post(request: Request) -> ClientError:
    return ClientError("method_not_allowed",
                       f"{request.method} is not allowed here; POST the audio")
