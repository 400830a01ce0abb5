"""Tokens never reach a log line.

Browsers cannot set headers on a WebSocket, so the page, the overlay and downloads carry
``?token=`` in the URL, and uvicorn logs URLs (the ``[accepted]`` line of a WebSocket, the access
line of every request). A filter on those loggers rewrites every token in the message and in
its arguments to ``***``. The app installs it when it is created, so it works under any ASGI
server that logs through these loggers; ``whisperwire serve`` installs it too. At debug level
websockets logs every frame: the filter shows a text frame with its secrets (``view_token``)
redacted, and an audio frame by its length only (audio is never logged).
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote_plus

__all__ = ["LOG_FORMAT", "RedactTokens", "event_lines_to_stderr", "frame_line", "install_redaction",
           "redact"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# A query value: everything up to the next "&" or whitespace. The token file takes any
# character but whitespace (Q'uote, dq"quote, semi;colon, hash#), and the server splits a query
# at "&" only; a value that stopped at a quote or ";" left the rest of the token in the line. A
# quote that ends the value, before whitespace or the end, is given back: it closes the quoted
# request line the value sits in ("WebSocket /v1/listen?token=X" [accepted]).
_VALUE = r"""[^&\s]*?(?=["']?(?:[&\s]|$))"""
_QUERY_TOKEN = re.compile(r"((?:^|[?&;_\s\"'])token=)" + _VALUE, re.IGNORECASE)
# a query parameter whose name is percent-encoded ("%74oken=" is "token=" to the server)
_QUERY_PARAM = re.compile(r"([?&;])([^=&;\s\"'#]*%[^=&;\s\"'#]*)=(" + _VALUE + ")")
# a URL's query, taken apart parameter by parameter: a mistyped one ("token%3DX", "token+=X",
# "token[]=X") is refused by the server but is still the user's secret
_QUERY = re.compile(r"\?(" + _VALUE.replace("&", "") + ")")
_QUERY_SEP = re.compile(r"([&;?])")  # (a second "?" inside a query starts a parameter too)
_SECRET_NAME = re.compile(r"token|secret|password|auth|bearer|(?:^|[_-])key$|^apikey$")
_BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)
# request headers, as websockets logs them at debug level: the whole Authorization value
# (Deepgram's "Token X" too), and the token a browser puts among its WebSocket subprotocols
_AUTH_HEADER = re.compile(r"(authorization:\s*)[^\r\n]*", re.IGNORECASE)
# (in a header line "token, X"; in an ASGI scope's list at trace level "'token', 'X'")
_PROTOCOL_TOKEN = re.compile(r"((?:token|bearer)['\"]?\s*,\s*['\"]?)[^,\s\"']+", re.IGNORECASE)
_OPENAI_KEY = re.compile(r"(openai-insecure-api-key\.)[^,\s\"']+", re.IGNORECASE)
# a JSON member whose value is a string: "name": "value" (escapes included)
_JSON_MEMBER = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_HINTS = ("oken", "OKEN", "earer", "EARER", "%", "uthorization", "UTHORIZATION", "api-key", "?")

# The loggers that see request lines; filters on a logger do not apply to records propagated
# from its children, so each is named.
LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets",
           "websockets.server", "whisperwire")


def redact(text: str) -> str:
    """``text`` with every token the server would accept replaced by ``***``: ``token=``
    query values (however the name is percent-encoded), bearer tokens, Authorization headers
    and the token among WebSocket subprotocols; and every query parameter whose name says a
    secret, spelled as the server would not accept it."""
    if not any(h in text for h in _HINTS):
        return text  # the common case, cheaply
    text = _QUERY_TOKEN.sub(r"\1***", text)
    if "%" in text:
        text = _QUERY_PARAM.sub(_encoded_token, text)
    if "?" in text:
        text = _QUERY.sub(_query, text)
    text = _AUTH_HEADER.sub(r"\1***", _BEARER.sub(r"\1***", text))
    return _OPENAI_KEY.sub(r"\1***", _PROTOCOL_TOKEN.sub(r"\1***", text))


def _encoded_token(m: re.Match[str]) -> str:
    name = unquote_plus(m.group(2)).strip().lower()
    return f"{m.group(1)}{m.group(2)}=***" if name == "token" else m.group(0)


def _query(m: re.Match[str]) -> str:
    return "?" + "".join(_param(p) for p in _QUERY_SEP.split(m.group(1)))


def _param(raw: str) -> str:
    """One query parameter as logged: its value ``***`` if its decoded name says a secret (the
    whole parameter, where an encoded "=" hides which part is the name), or if its decoded
    value holds such a parameter ("x=1%3Ftoken=X" is "x=1?token=X" decoded)."""
    if raw in ("&", ";", "?"):
        return raw
    name, eq, value = raw.partition("=")
    if _says_secret(name if eq else raw):
        return f"{name}=***" if eq else "***"
    return f"{name}=***" if eq and _hides_secret(value) else raw


def _says_secret(name: str) -> bool:
    return bool(_SECRET_NAME.search(_decoded(name).strip().lower()))


def _hides_secret(value: str) -> bool:
    """Whether a value, decoded, goes on with a parameter whose name says a secret."""
    parts = _QUERY_SEP.split(_decoded(value))  # [value, sep, param, sep, param ...]
    return any(_says_secret(p.partition("=")[0]) for p in parts[2::2])


def _decoded(text: str) -> str:
    """``text`` percent-decoded until it no longer changes (a few rounds at most): an encoding
    twice over still hides a name from a reader that decodes once."""
    for _ in range(3):
        plain = unquote_plus(text)
        if plain == text:
            break
        text = plain
    return text


class RedactTokens(logging.Filter):
    """Rewrites the message and its string arguments in place; never drops a record. The
    arguments keep their number and order (uvicorn's access formatter unpacks them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = _redact_args(record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v
                           for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            # a traceback's message may quote the request (websockets' "invalid HTTP header
            # line: ..."); a formatter prints exc_text when it is set
            record.exc_text = redact(_TRACEBACK.formatException(record.exc_info))
        return True


def _redact_args(args: tuple) -> tuple:
    """Each argument redacted (:func:`_redact_arg`), and the whole value after an
    ``authorization`` name: websockets logs a request header as ``"< %s: %s", name, value``,
    so "Token X" comes without the name that says it is a credential."""
    out = []
    for i, a in enumerate(args):
        secret = i > 0 and isinstance(args[i - 1], str) and args[i - 1].lower() == "authorization"
        out.append("***" if secret and isinstance(a, str) else _redact_arg(a))
    return tuple(out)


def _redact_arg(arg: object) -> object:
    """A string redacted; a websockets frame as :func:`frame_line` shows it; an ASGI scope or
    message (uvicorn's trace lines: the scope's ``query_string`` is bytes) as its text,
    redacted, where that text held a secret. Anything else as it is."""
    if isinstance(arg, str):
        return redact(arg)
    if _is_frame(arg):
        return frame_line(arg)
    if isinstance(arg, dict) and isinstance(arg.get("query_string"), (bytes, bytearray)):
        # (uvicorn's trace of a scope: its query is bytes, "b'tok%65n=X'", without the "?"
        # that tells the query rules where a parameter's name begins)
        query = bytes(arg["query_string"]).decode("latin-1")
        clean = redact("?" + query)[1:]
        if clean != query:
            arg = {**arg, "query_string": clean.encode("latin-1")}
            return redact(str(arg))
    if isinstance(arg, (dict, list, tuple, bytes, bytearray)):
        text = str(arg)
        clean = redact(text)
        return arg if clean == text else clean
    return arg


def _is_frame(arg: object) -> bool:
    # (duck-typed: websockets' Frame, without importing websockets where it is not used)
    return all(hasattr(arg, a) for a in ("opcode", "data", "fin"))


def frame_line(frame: Any) -> str:
    """A websockets frame as its debug line should show it. websockets shows the payload,
    cut to 75 characters by taking out the middle: a ``ready`` frame kept 21 of the 24
    characters of its ``view_token``, and audio was written out as hex, when audio is never
    logged. Binary and continuation frames say their length only; a whole text frame shows
    its text with every secret and audio member redacted before it is cut; control frames
    (ping, pong, close) as websockets shows them, redacted."""
    kind = getattr(frame.opcode, "name", str(frame.opcode))
    size = f"[{len(frame.data)} bytes]"
    if kind == "TEXT" and frame.fin:
        text = _redact_json(bytes(frame.data).decode(errors="replace"))
        return f"{kind} {_shortened(redact(text))!r} {size}"
    if kind in ("TEXT", "BINARY", "CONT"):  # (a fragment may end inside a token)
        return f"{kind} {size[:-1]}{'' if frame.fin else ', continued'}]"
    return redact(str(frame))


def _redact_json(text: str) -> str:
    """Every JSON string member whose name says a secret as ``"***"``, and base64 audio (the
    OpenAI realtime ``audio`` member) as its length."""
    return _JSON_MEMBER.sub(_json_member, text)


def _json_member(m: re.Match[str]) -> str:
    key, value = m.group(1).lower(), m.group(2)
    if key == "audio":
        shown = f"[{len(value)} chars]"
    elif _SECRET_NAME.search(key):
        shown = "***"
    else:
        return m.group(0)
    return f'{m.string[m.start(0):m.start(2)]}{shown}"'


def _shortened(text: str, limit: int = 75) -> str:
    """``text`` cut to ``limit`` characters as websockets cuts it: its start and end."""
    if len(text) <= limit:
        return text
    return f"{text[:limit * 2 // 3]}...{text[-(limit // 3):]}"


_FILTER = RedactTokens()
_TRACEBACK = logging.Formatter()


def install_redaction() -> None:
    """Put the filter on every logger that may print a request line (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def event_lines_to_stderr(level: int = logging.INFO) -> None:
    """Our one-line events (``event=open``, ``event=closed``, ``event=drained`` ...) on stderr
    where nothing else would print them: in a Ray Serve replica, Serve configures only its own
    logger, and Python's last-resort handler prints warnings and worse only, so a replica's
    log had none of them. (``whisperwire serve`` configures logging itself.)"""
    ours = logging.getLogger("whisperwire")
    if ours.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(_FILTER)
    ours.addHandler(handler)
    ours.setLevel(level)
