"""Tokens never reach a log line.

Browsers cannot set headers on a WebSocket, so the page, the overlay and downloads carry
``?token=`` in the URL, and uvicorn logs URLs (the ``[accepted]`` line of a WebSocket, the access
line of every request). A filter on those loggers rewrites every token in the message and in
its arguments to ``***``. The app installs it when it is created, so it works under any ASGI
server that logs through these loggers; ``whisperwire serve`` installs it too.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

__all__ = ["LOG_FORMAT", "RedactTokens", "event_lines_to_stderr", "install_redaction", "redact"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_QUERY_TOKEN = re.compile(r"((?:^|[?&;_\s\"'])token=)[^&;\s\"']*", re.IGNORECASE)
# a query parameter whose name is percent-encoded ("%74oken=" is "token=" to the server)
_QUERY_PARAM = re.compile(r"([?&;])([^=&;\s\"'#]*%[^=&;\s\"'#]*)=([^&;\s\"'#]*)")
# a URL's query, taken apart parameter by parameter: a mistyped one ("token%3DX", "token+=X",
# "token[]=X") is refused by the server but is still the user's secret
_QUERY = re.compile(r"\?([^\s\"'#]+)")
_QUERY_SEP = re.compile(r"([&;?])")  # (a second "?" inside a query starts a parameter too)
_SECRET_NAME = re.compile(r"token|secret|password|auth|bearer|(?:^|[_-])key$|^apikey$")
_BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)
# request headers, as websockets logs them at debug level: the whole Authorization value
# (Deepgram's "Token X" too), and the token a browser puts among its WebSocket subprotocols
_AUTH_HEADER = re.compile(r"(authorization:\s*)[^\r\n]*", re.IGNORECASE)
_PROTOCOL_TOKEN = re.compile(r"((?:token|bearer)\s*,\s*)[^,\s\"']+", re.IGNORECASE)
_OPENAI_KEY = re.compile(r"(openai-insecure-api-key\.)[^,\s\"']+", re.IGNORECASE)
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
    whole parameter, where an encoded "=" hides which part is the name)."""
    if raw in ("&", ";", "?"):
        return raw
    name, eq, _ = raw.partition("=")
    if not _SECRET_NAME.search(unquote_plus(name if eq else raw).strip().lower()):
        return raw
    return f"{name}=***" if eq else "***"


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
        return True


def _redact_args(args: tuple) -> tuple:
    """Each string argument redacted, and the whole value after an ``authorization`` name:
    websockets logs a request header as ``"< %s: %s", name, value``, so "Token X" comes
    without the name that says it is a credential."""
    out = []
    for i, a in enumerate(args):
        secret = i > 0 and isinstance(args[i - 1], str) and args[i - 1].lower() == "authorization"
        out.append("***" if secret and isinstance(a, str) else
                   redact(a) if isinstance(a, str) else a)
    return tuple(out)


_FILTER = RedactTokens()


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
