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

__all__ = ["RedactTokens", "install_redaction", "redact"]

_QUERY_TOKEN = re.compile(r"((?:^|[?&;_\s\"'])token=)[^&;\s\"']*", re.IGNORECASE)
_BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)

# The loggers that see request lines; filters on a logger do not apply to records propagated
# from its children, so each is named.
LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets",
           "websockets.server", "whisperwire")


def redact(text: str) -> str:
    """``text`` with every ``token=...`` query value and bearer token replaced by ``***``."""
    if "oken" not in text and "earer" not in text and "OKEN" not in text:
        return text  # the common case, cheaply
    return _BEARER.sub(r"\1***", _QUERY_TOKEN.sub(r"\1***", text))


class RedactTokens(logging.Filter):
    """Rewrites the message and its string arguments in place; never drops a record. The
    arguments keep their number and order (uvicorn's access formatter unpacks them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v
                           for k, v in record.args.items()}
        return True


_FILTER = RedactTokens()


def install_redaction() -> None:
    """Put the filter on every logger that may print a request line (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
