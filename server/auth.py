"""Optional token auth: one set of tokens may speak (and view), another may only view.

Tokens come in an ``Authorization: Bearer`` header, or ``?token=`` for browsers that cannot set
headers on a WebSocket. Every configured token is compared in constant time, and tokens never
reach a log line.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

__all__ = ["AuthConfig", "load_token_file", "token_from"]


@dataclass(frozen=True)
class AuthConfig:
    speak_tokens: tuple[str, ...] = ()
    view_tokens: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.speak_tokens or self.view_tokens)

    def can_speak(self, token: str | None) -> bool:
        return not self.enabled or _matches(token, self.speak_tokens)

    def can_view(self, token: str | None) -> bool:
        return not self.enabled or _matches(token, self.speak_tokens + self.view_tokens)


def _matches(token: str | None, tokens: tuple[str, ...]) -> bool:
    if not token:
        return False
    given = token.encode()
    ok = False
    for t in tokens:  # no early exit: the time taken says nothing about which token matched
        ok |= hmac.compare_digest(given, t.encode())
    return ok


def token_from(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return query.get("token") or None


def load_token_file(path: str | Path) -> AuthConfig:
    """Lines ``speak TOKEN``, ``view TOKEN`` or a bare ``TOKEN`` (speak); ``#`` comments."""
    speak, view = [], []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("speak", "view"):
            (speak if parts[0] == "speak" else view).append(parts[1])
        elif len(parts) == 1:
            speak.append(parts[0])
        else:
            raise ValueError(f"token file {path}: cannot read line {line[:20]!r}...")
    return AuthConfig(tuple(speak), tuple(view))
