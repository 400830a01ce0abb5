"""``whisperwire``: the one console script. Builds options from flags and wires the parts."""

from __future__ import annotations

import argparse
import logging
import math
import sys

from .wire import ZH_SCRIPTS

__all__ = ["main"]


def graceful_server(app, **kw):  # type: ignore[no-untyped-def]
    """uvicorn with graceful shutdown, handshake deadline and frame limit (:mod:`.serving`)."""
    from .serving import graceful_server as make

    return make(app, **kw)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each flag's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, [], ()) or action.help == argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def _auth(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Tokens from the flags and the token file. Raises ValueError (or OSError) in a sentence."""
    from .auth import AuthConfig, load_token_file

    if any(not t.strip() for t in args.token + args.view_token):
        raise ValueError("--token/--view-token: a token may not be empty")
    auth = load_token_file(args.token_file, empty_ok=bool(args.token or args.view_token)) \
        if args.token_file else AuthConfig()
    return AuthConfig(auth.speak_tokens + tuple(args.token),
                      auth.view_tokens + tuple(args.view_token))


def _load_engine(args: argparse.Namespace, config):  # type: ignore[no-untyped-def]
    """The loaded engine (or worker pool), or a sentence saying why not."""
    from .devices import DeviceError
    from .engine import Engine
    from .models import ModelError, load_failure, resolve_model
    from .pool import WorkerPool, parse_devices

    try:
        resolve_model(args.model)  # a path that is not a model directory: say so, do not download
        if getattr(args, "draft_model", None):
            resolve_model(args.draft_model, "--draft-model")
        if args.devices:
            engine: Engine | WorkerPool = WorkerPool(config.engine, parse_devices(args.devices),
                                                     cpu_threads_each=args.cpu_threads)
        else:
            engine = Engine(config.engine)
        engine.load()  # before serving: errors are startup errors, and /readyz is true at once
    except (ModelError, DeviceError) as exc:
        return f"whisperwire: {exc}"
    except Exception as exc:  # noqa: BLE001 - a download or a model file: a sentence, no traceback
        logging.getLogger("whisperwire.cli").debug("model load failed", exc_info=True)
        return f"whisperwire: {load_failure(args.model, exc)}"
    return engine


def _serve(args: argparse.Namespace) -> int:
    from .app import create_app
    from .logs import install_redaction

    install_redaction()
    try:
        auth = _auth(args)
    except (ValueError, OSError) as exc:
        print(f"whisperwire: {exc}", file=sys.stderr)
        return 2
    config = _config(args, auth)
    try:
        tls = _tls(args.tls_cert, args.tls_key)
        _can_listen(args.host, args.port)
    except ValueError as exc:
        print(f"whisperwire: {exc}", file=sys.stderr)
        return 2
    engine = _load_engine(args, config)
    if isinstance(engine, str):
        print(engine, file=sys.stderr)
        return 2
    server = graceful_server(
        create_app(config, engine),
        host=args.host,
        port=args.port,
        ws="websockets-sansio",
        log_level=args.log_level,
        timeout_graceful_shutdown=30,
        **tls,
    )
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn raises Ctrl-C again once it has shut down gracefully
        pass
    return 0


def _can_listen(host: str, port: int) -> None:
    """A port already taken, said before the model loads (uvicorn found it after, and exited 3
    with a drain logged for a server that never served)."""
    import socket

    if port == 0:
        return
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.create_server((host, port), family=family):
            pass
    except OSError as exc:
        raise ValueError(f"cannot listen on {host}:{port}: "
                         f"{(exc.strerror or str(exc)).lower()}") from None


def _tls(cert: str | None, key: str | None) -> dict[str, str]:
    """uvicorn's TLS options, the files tried first: half a pair served plain HTTP without a
    word, and files that make no pair ended in a traceback once the model had loaded."""
    import ssl

    if not cert:
        if key:
            raise ValueError("--tls-key needs --tls-cert (the certificate to serve with it)")
        return {}
    try:
        # (password "": an encrypted key is refused here, not asked for on the terminal)
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password="")
    except FileNotFoundError as exc:
        raise ValueError(f"--tls-cert/--tls-key: no such file {exc.filename or cert}") from None
    except (ssl.SSLError, OSError) as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            why = "the certificate and the key do not match"
        elif key:
            why = f"--tls-cert {cert} and --tls-key {key} are no PEM certificate and its " \
                  "unencrypted private key"
        else:
            why = f"--tls-cert {cert} is no PEM certificate with its private key, and no " \
                  "--tls-key names one"
        raise ValueError(f"--tls-cert/--tls-key: {why} ({exc})") from None
    return {"ssl_certfile": cert, **({"ssl_keyfile": key} if key else {})}


def _config(args: argparse.Namespace, auth):  # type: ignore[no-untyped-def]
    """The server's settings from ``serve``'s flags (every option a flag does not name keeps
    its default)."""
    from .app import ServerConfig
    from .engine import EngineOptions
    from .session import StreamOptions
    from .vad import VadOptions

    return ServerConfig(
        auth=auth,
        handshake_timeout_s=args.handshake_timeout,
        max_sessions=args.max_sessions,
        max_viewers=args.max_viewers,
        idle_timeout_s=args.idle_timeout,
        rejoin_grace_s=args.rejoin_grace,
        max_session_s=args.max_session_hours * 3600,
        max_stream_speed=args.max_stream_speed,
        ws_deflate=args.ws_deflate,
        drain_timeout_s=args.drain_timeout,
        transcript_retention_s=args.retention_minutes * 60,
        allowed_origins=tuple(args.allow_origin),
        engine=EngineOptions(
            model=args.model,
            device=args.device,
            compute_type=args.compute_type,
            cpu_threads=args.cpu_threads,
            workers=args.decode_workers,
            max_batch=args.max_batch,
            encoder_granularity_s=args.encoder_granularity,
            beam_size=args.beam_size,
            draft_model=args.draft_model,
        ),
        stream=StreamOptions(step_ms=args.step_ms, overlap_ms=args.overlap_ms,
                             busy_overlap_ms=args.busy_overlap_ms,
                             slow_hold_ms=args.slow_hold_ms,
                             busy_alone_ms=args.busy_alone_ms,
                             slow_careful_context_ms=args.slow_careful_context_ms,
                             busy_careful_context_ms=args.busy_careful_context_ms,
                             holdback_ms=args.holdback_ms,
                             tail_check_ms=args.tail_check_ms,
                             doubted_end_ms=args.doubted_end_ms,
                             stuck_wait_ms=args.stuck_wait_ms,
                             skip_retry_words=args.skip_retry_words,
                             needs_voice=args.needs_voice,
                             draft_partials=bool(args.draft_model),
                             main_step_ms=args.main_step_ms),
        vad=VadOptions(aggressiveness=args.vad_aggressiveness, pause_ms=args.pause_ms),
    )


def _lazy(module: str):  # type: ignore[no-untyped-def]
    """A subcommand whose module (and its heavy imports) loads only when it runs."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(importlib.import_module(module).main(args) or 0)

    return run


def _client_parser(sub, name: str, help: str, speaker: bool):  # type: ignore[no-untyped-def]
    """The flags every client subcommand shares."""
    from whisperwire.client.connect import DEFAULT_URL

    p = sub.add_parser(name, help=help, description=help, formatter_class=_Help)
    p.add_argument("--url", default=DEFAULT_URL, help="the server")
    p.add_argument("--token", default=None, help="auth token, if the server wants one")
    p.add_argument("--output", help="save the finals as FILE.srt, .vtt, .json or .txt")
    p.add_argument("--lines", action="store_true",
                   help="one final per line instead of flowing text")
    if speaker:
        p.add_argument("--language", default=None,
                       help="language code, or auto (default: the model's)")
        p.add_argument("--task", default="transcribe", choices=("transcribe", "translate"),
                       help="translate: any language to English (a multilingual model)")
        p.add_argument("--zh-script", default=None, choices=ZH_SCRIPTS,
                       help="Chinese captions in this script (default: simplified for zh)")
        p.add_argument("--session", default=None, help="publish under this id (for viewers)")
    return p


def _at_least_0(text: str, zero: str = "") -> float:
    """A finite number, 0 or more (``zero``: what 0 means, said in the refusal)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(x) or x < 0:
        raise argparse.ArgumentTypeError(f"must be 0{zero} or more, not {text}")
    return x


def _pace(text: str) -> float:
    """Times real time, 0 or more (0: as fast as possible); a negative or endless pace is none."""
    return _at_least_0(text, " (as fast as possible)")


def _stream_speed(text: str) -> float:
    """0 (no limit) or at least real time: under 1 would hold back every live speaker."""
    try:
        x = _pace(text)
    except argparse.ArgumentTypeError:
        x = -1.0
    if x < 0 or 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be 0 (no limit) or 1 or more, not {text}")
    return x


def _duration(text: str) -> float:
    """A length of time in the flag's unit, 0 or more (what 0 means, its help says)."""
    return _at_least_0(text)


def _longer_than_0(text: str) -> float:
    """A length of time that is more than 0: a limit of 0 closed every session at once."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(x) and x > 0):  # (this flag's rule: "0 or more" read as if 0 went)
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return x


def _at_least_1(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def _port(text: str) -> int:
    """0 (any free port) to 65535: 70000 was bound as port 4464 and logged as 70000."""
    n = _count(text)
    if n > 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, not {n}")
    return n


def _origin(text: str) -> str:
    """An origin as a browser sends it (``https://host[:port]``, lower case, no default port,
    no path): a copied URL's trailing slash matched no browser, and every page was locked out."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(text.strip())
        port = u.port
    except ValueError:
        port, u = None, None
    if u is None or u.scheme.lower() not in ("http", "https") or not u.hostname:
        raise argparse.ArgumentTypeError(f"expected an origin such as "
                                         f"https://captions.example.com, not {text!r}")
    scheme = u.scheme.lower()
    default = {"http": 80, "https": 443}[scheme]
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def _count(text: str) -> int:
    """A whole number, 0 or more (0 turns a rule off; a negative one would fire it always)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


def _serve_parser(sub) -> None:  # type: ignore[no-untyped-def]
    s = sub.add_parser("serve", help="run the captioning server",
                       description="Run the captioning server.", formatter_class=_Help)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=_port, default=8765, help="port to listen on")
    s.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug", "trace"))
    _model_flags(s.add_argument_group("model and device"))
    _policy_flags(s.add_argument_group("streaming policy"))
    _access_flags(s.add_argument_group("access and limits"))
    s.set_defaults(func=_serve)


def _model_flags(g) -> None:  # type: ignore[no-untyped-def]
    g.add_argument("--model", default="embedded",
                   help="'embedded' (tiny.en, bundled), a faster-whisper model name, or a directory")
    g.add_argument("--draft-model", default=None,
                   help="a cheaper model for partials (e.g. tiny.en, or embedded); finals stay "
                        "the --model's")
    g.add_argument("--main-step-ms", type=_count, default=0,
                   help="with --draft-model: the main model reads a window once this much audio "
                        "is new (0: every step; 1000 costs less and waits longer for finals)")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    g.add_argument("--devices", default=None,
                   help="several decode worker processes: cuda:0,cuda:1 | all | cpu,cpu")
    g.add_argument("--compute-type", default="auto",
                   help="auto (int8 on CPU, float16 on GPU) | int8 | int8_float16 | float16 | "
                        "bfloat16 | float32")
    g.add_argument("--cpu-threads", type=_count, default=0,
                   help="decoder threads per decode worker (0: the cores shared out)")
    g.add_argument("--decode-workers", type=_count, default=0,
                   help="batches decoded at once on the one model (0: on CPU one per core, "
                        "up to 4, the cores divided among them; four on a GPU; one per device "
                        "process under --devices)")
    g.add_argument("--max-batch", type=_at_least_1, default=8, help="windows decoded together")


def _policy_flags(g) -> None:  # type: ignore[no-untyped-def]
    """How a stream is cut into windows and when its words become final."""
    from .engine import EngineOptions
    from .session import StreamOptions
    from .vad import VadOptions

    g.add_argument("--step-ms", type=_at_least_1, default=StreamOptions.step_ms,
                   help="re-decode after this much new speech")
    g.add_argument("--overlap-ms", type=_count, default=StreamOptions.overlap_ms,
                   help="committed audio kept in the window as context")
    g.add_argument("--busy-overlap-ms", type=_count, default=StreamOptions.busy_overlap_ms,
                   help="... in partial steps while the decoder is saturated (set it to "
                        "--overlap-ms to keep the full context under load)")
    g.add_argument("--slow-hold-ms", type=_count, default=StreamOptions.slow_hold_ms,
                   help="... and for this much audio after a stream's own step lagged (more "
                        "than --step-ms of audio arrived while it decoded; 0: never)")
    g.add_argument("--busy-alone-ms", type=_count, default=StreamOptions.busy_alone_ms,
                   help="... and such a step makes final, without a second step agreeing, "
                        "the words that end this long before its window's end (0: never)")
    g.add_argument("--slow-careful-context-ms", type=_count,
                   default=StreamOptions.slow_careful_context_ms,
                   help="... and the committed speech careful decodes (utterance ends, checks) "
                        "keep meanwhile, when no other stream loads the decoder (0, the "
                        "default: their usual 8-10 s; 3000 cut a slow CPU's final p95 by a "
                        "third, 5.4 -> 3.5 s, for 3 points of WER)")
    g.add_argument("--busy-careful-context-ms", type=_count,
                   default=StreamOptions.busy_careful_context_ms,
                   help="the committed speech careful decodes (utterance ends, checks) keep "
                        "while the decoder is saturated (0: their usual 10 s)")
    g.add_argument("--holdback-ms", type=_count, default=StreamOptions.holdback_ms,
                   help="words ending this close to the window's end wait for the next decode")
    g.add_argument("--skip-retry-words", type=_count, default=StreamOptions.skip_retry_words,
                   help="a careful decode whose first word comes after this many words the "
                        "last hypothesis heard is asked again differently (0: never)")
    g.add_argument("--tail-check-ms", type=_count, default=StreamOptions.tail_check_ms,
                   help="an utterance's end decode whose last word ends this long before the "
                        "speech does reads the window again past that word (0: never)")
    g.add_argument("--doubted-end-ms", type=_count, default=StreamOptions.doubted_end_ms,
                   help="the end decode of an utterance shorter than this that doubts every "
                        "word it hears says nothing (Whisper invents words for a breath or a "
                        "click; 0: never)")
    g.add_argument("--stuck-wait-ms", type=_count, default=StreamOptions.stuck_wait_ms,
                   help="a word greedy decodes still disagree on this long after its end is "
                        "decided by a careful decode (0: it waits for its utterance's end)")
    g.add_argument("--needs-voice", action="store_true",
                   help="no word over audio without a voice: for a room with steady rumble "
                        "(fans, HVAC, wind), which the VAD takes for speech and Whisper reads "
                        "as words; speech in heavy noise, or whispered, may then say nothing")
    g.add_argument("--beam-size", type=_at_least_1, default=EngineOptions.beam_size,
                   help="beam of partial decodes (careful decodes for finals use 5)")
    g.add_argument("--encoder-granularity", type=_duration, default=2.0,
                   help="encoder input = window rounded up to N s, plus N s (0: always 30 s)")
    g.add_argument("--vad-aggressiveness", type=int, default=2, choices=range(4),
                   help="webrtcvad's 0..3")
    g.add_argument("--pause-ms", type=_count, default=VadOptions.pause_ms,
                   help="an utterance's end decode starts after this much silence, before "
                        "the VAD's 500 ms hangover ends it, and is dropped if speech comes "
                        "first (0: at the hangover's end)")


def _access_flags(g) -> None:  # type: ignore[no-untyped-def]
    from .app import ServerConfig

    g.add_argument("--token", action="append", default=[],
                   help="token that may speak and view (repeatable)")
    g.add_argument("--view-token", action="append", default=[],
                   help="token that may only view (repeatable)")
    g.add_argument("--token-file", help="lines 'speak TOKEN', 'view TOKEN' or 'TOKEN'; # comments")
    g.add_argument("--allow-origin", action="append", default=[], type=_origin,
                   help="browser origin allowed to connect (repeatable; default: any; list "
                        "the server's own address too for its page; the Host header is no "
                        "proof of it: DNS rebinding)")
    g.add_argument("--max-sessions", type=_at_least_1, default=64, help="live speaking sessions")
    g.add_argument("--max-viewers", type=_count, default=100,
                   help="viewers per session (0: none)")
    g.add_argument("--idle-timeout", type=_longer_than_0, default=60.0,
                   help="seconds without a message before a speaker is closed")
    g.add_argument("--rejoin-grace", type=_duration, default=10.0,
                   help="seconds a dropped speaker's stream waits, undecided, for the client to "
                        "come back to its session (0: its last words are final at once)")
    g.add_argument("--handshake-timeout", type=_duration, default=10.0,
                   help="seconds a connection has to send its request headers (0: no limit)")
    g.add_argument("--max-session-hours", type=_longer_than_0, default=4.0,
                   help="longest session")
    g.add_argument("--max-stream-speed", type=_stream_speed,
                   default=ServerConfig.max_stream_speed,
                   help="a live stream is read at most this many times faster than real time, "
                        "after a burst of a minute of audio (0: no limit)")
    g.add_argument("--ws-deflate", action="store_true",
                   help="accept WebSocket permessage-deflate (off: a client's deflated audio "
                        "is inflated many messages per socket read, on the event loop)")
    g.add_argument("--retention-minutes", type=_duration, default=60.0,
                   help="how long a transcript stays after its last speaker ends")
    g.add_argument("--drain-timeout", type=_pace, default=ServerConfig.drain_timeout_s,
                   help="on SIGTERM, seconds open sessions get to decode their last words; "
                        "the rest is cut short (error shutdown_incomplete, close 1012)")
    g.add_argument("--tls-cert", help="serve TLS (wss/https) with this certificate (PEM)")
    g.add_argument("--tls-key", help="... and this key")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="whisperwire", description="Real-time captions server.")
    sub = p.add_subparsers(dest="command", required=True)
    _serve_parser(sub)

    f = _client_parser(sub, "stream", "stream an audio file to a server and print captions",
                       speaker=True)
    f.add_argument("file", help="any audio or video file PyAV can open")
    f.add_argument("--speed", type=_pace, default=1.0,
                   help="times real time; 0 = as fast as possible")
    f.set_defaults(func=_lazy("whisperwire.client.stream"))

    m = _client_parser(sub, "mic", "live captions from a microphone", speaker=True)
    m.add_argument("--device", default=None,
                   help="input device index or name (see --list-devices)")
    m.add_argument("--list-devices", action="store_true", help="list input devices and exit")
    m.add_argument("--input-file",
                   help="an audio file played through the capture path instead of a microphone "
                        "(to try mic without a sound card)")
    m.set_defaults(func=_lazy("whisperwire.client.mic"))

    d = sub.add_parser("doctor", help="check this machine: CTranslate2 build, devices, a decode",
                       description="Check this machine: CTranslate2 build, devices, a sample "
                                   "decode.", formatter_class=_Help)
    d.add_argument("--model", default="embedded", help="the model to try")
    d.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.set_defaults(func=_lazy("whisperwire.server.doctor"))

    c = _client_parser(sub, "captions", "print a session's captions as a viewer", speaker=False)
    c.add_argument("session", help="the session id to watch")
    c.add_argument("--once", action="store_true",
                   help="stop when the current speaker ends (default: follow the channel)")
    c.set_defaults(func=_lazy("whisperwire.client.captions"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = getattr(logging, str(args.__dict__.get("log_level", "info")).upper(), logging.INFO)
    from .logs import LOG_FORMAT

    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    return int(args.func(args) or 0)
