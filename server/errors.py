"""The exception tree, and its one mapping to ``error`` events and WebSocket close codes.

Client faults (:class:`ClientError`) are reported with their message and the session goes on
where it can; anything else is a server fault whose details stay in the log.
"""

from __future__ import annotations

__all__ = ["ClientError", "ProtocolError", "AudioError", "WhisperWireError", "close_code_for",
           "retry_after"]


class WhisperWireError(Exception):
    """Base of every error WhisperWire raises on purpose."""

    code = "internal_error"

    def __init__(self, code: str | None = None, message: str = "") -> None:
        super().__init__(message)
        if code:
            self.code = code
        self.message = message


class ClientError(WhisperWireError):
    """Something the client sent was wrong; reported back, the session survives if ``fatal`` is
    false."""

    fatal = False


class ProtocolError(ClientError):
    """A message or query that does not follow protocol v1."""


class AudioError(ClientError):
    """Audio bytes that cannot be taken as the declared encoding."""


# Close codes (RFC 6455 §7.4.1): 1000 normal, 1003 unsupported data, 1008 policy violation,
# 1011 internal error, 1013 try again later.
_CLOSE_CODES = {
    "bad_sample_rate": 1003,
    "bad_encoding": 1003,
    "bad_task": 1003,
    "bad_language": 1003,
    "bad_zh_script": 1003,
    "bad_session": 1008,
    "bad_prompt": 1008,
    "session_taken": 1008,
    "unknown_session": 1008,
    "too_many_viewers": 1013,
    "internal_error": 1011,
    "unauthorized": 1008,
    "forbidden_origin": 1008,
    "not_ready": 1013,
    "server_full": 1013,
    "shutting_down": 1012,
}


def close_code_for(code: str) -> int:
    return _CLOSE_CODES.get(code, 1008)


# Refusals a moment changes, as HTTP ``Retry-After`` seconds (429 and 503): the OpenAI SDK
# waits that long before its own retries instead of its 0.5-8 s backoff guesses; other
# clients read the header. A restart takes longer than a free slot.
_RETRY_AFTER = {"server_full": 5, "not_ready": 5, "shutting_down": 10}


def retry_after(code: str) -> dict[str, str]:
    """The ``Retry-After`` header for a refusal with ``code`` (empty when retrying is no use)."""
    return {"Retry-After": str(_RETRY_AFTER[code])} if code in _RETRY_AFTER else {}
