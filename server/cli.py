"""``whisperwire``: the one console script. Builds options from flags and wires the parts."""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import ServerConfig, create_app
    from .engine import EngineOptions
    from .session import StreamOptions
    from .vad import VadOptions

    config = ServerConfig(
        engine=EngineOptions(
            model=args.model,
            device=args.device,
            compute_type=args.compute_type,
            cpu_threads=args.cpu_threads,
            max_batch=args.max_batch,
        ),
        stream=StreamOptions(step_ms=args.step_ms),
        vad=VadOptions(aggressiveness=args.vad_aggressiveness),
    )
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        ws="websockets-sansio",
        log_level=args.log_level,
        ws_max_size=config.max_message_bytes + 1024,
    )
    return 0


def _stream(args: argparse.Namespace) -> int:
    from whisperwire.client.stream import main as stream_main

    return stream_main(args)


def _mic(args: argparse.Namespace) -> int:
    from whisperwire.client.mic import main as mic_main

    return mic_main(args)


def _captions(args: argparse.Namespace) -> int:
    from whisperwire.client.captions import main as captions_main

    return captions_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="whisperwire", description="Real-time captions server.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the captioning server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--model", default="embedded",
                   help="'embedded' (tiny.en, bundled), a faster-whisper model name, or a directory")
    s.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    s.add_argument("--compute-type", default="auto", help="auto (int8 on CPU, float16 on GPU) | ...")
    s.add_argument("--cpu-threads", type=int, default=0, help="0: all cores")
    s.add_argument("--max-batch", type=int, default=8, help="windows decoded together")
    s.add_argument("--step-ms", type=int, default=500, help="re-decode after this much new speech")
    s.add_argument("--vad-aggressiveness", type=int, default=2, choices=range(4))
    s.add_argument("--log-level", default="info")
    s.set_defaults(func=_serve)

    f = sub.add_parser("stream", help="stream an audio file to a server and print captions")
    f.add_argument("file")
    f.add_argument("--url", default="ws://127.0.0.1:8765")
    f.add_argument("--speed", type=float, default=1.0, help="times real time; 0 = as fast as possible")
    f.add_argument("--language", default=None)
    f.add_argument("--output", help="save the finals as FILE.srt, .vtt, .json or .txt")
    f.add_argument("--session", default=None, help="publish under this id (for viewers)")
    f.set_defaults(func=_stream)

    m = sub.add_parser("mic", help="live captions from a microphone")
    m.add_argument("--url", default="ws://127.0.0.1:8765")
    m.add_argument("--device", default=None, help="input device index or name (see --list-devices)")
    m.add_argument("--list-devices", action="store_true")
    m.add_argument("--language", default=None)
    m.add_argument("--output", help="save the finals as FILE.srt, .vtt, .json or .txt")
    m.add_argument("--session", default=None, help="publish under this id (for viewers)")
    m.add_argument("--input-file", help=argparse.SUPPRESS)  # a file instead of the microphone
    m.set_defaults(func=_mic)

    c = sub.add_parser("captions", help="print a session's captions as a viewer")
    c.add_argument("session")
    c.add_argument("--url", default="ws://127.0.0.1:8765")
    c.add_argument("--output", help="save the finals as FILE.srt, .vtt, .json or .txt")
    c.set_defaults(func=_captions)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.__dict__.get("log_level", "info")).upper(), 20),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return int(args.func(args) or 0)
