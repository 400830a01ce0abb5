"""Other vendors' speech APIs on the same app: Deepgram v1 and OpenAI's audio and realtime
transcription. Each is a thin translator onto the same sessions (:mod:`..listen`), so one engine,
one set of limits, tokens, metrics and logs serve them all, and any session can be followed by
its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute, Route, WebSocketRoute

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

    async def realtime(ws):  # type: ignore[no-untyped-def]
        await openai_realtime.realtime(server, ws)

    return [
        WebSocketRoute("/deepgram/v1/listen", dg_live),
        Route("/deepgram/v1/listen", dg_file, methods=["POST"]),
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/translations", translations, methods=["POST"]),
        Route("/v1/models", models),
        WebSocketRoute("/v1/realtime", realtime),
    ]
