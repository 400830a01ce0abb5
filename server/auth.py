"""Optional token auth: one set of tokens may speak (and view), another may only view, and each
channel has its own view token.

Tokens come in an ``Authorization: Bearer`` header, or ``?token=`` for browsers that cannot set
headers on a WebSocket. Every configured token is compared in constant time, and tokens never
reach a log line (:mod:`.logs`).

A channel's view token is minted, not stored: an HMAC of the session id under a key derived from
the speak tokens. It lets a viewer, an overlay or a download link see that one channel, never
speak and never see another; it is checked without any state, it stays valid across restarts
while the speak tokens stay the same, and changing the speak tokens revokes every one of them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AuthConfig", "load_token_file", "token_from"]

_VIEW_PREFIX = "v1."


@dataclass(frozen=True)
class AuthConfig:
    speak_tokens: tuple[str, ...] = field(default=(), repr=False)
    view_tokens: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for t in self.speak_tokens + self.view_tokens:
            if not t or not t.strip():
                raise ValueError("a token may not be empty")
            if any(c.isspace() for c in t):
                raise ValueError("a token may not contain spaces")

    @property
    def enabled(self) -> bool:
        return bool(self.speak_tokens or self.view_tokens)

    def can_speak(self, token: str | None) -> bool:
        return not self.enabled or _matches(token, self.speak_tokens)

    def can_view(self, token: str | None, session: str | None = None) -> bool:
        """A speak or view token sees every channel; a minted view token only ``session``."""
        if not self.enabled:
            return True
        ok = _matches(token, self.speak_tokens + self.view_tokens)
        if session is not None and token and token.startswith(_VIEW_PREFIX):
            ok |= hmac.compare_digest(token.encode(), (self.view_token(session) or "").encode())
        return ok

    def view_token(self, session: str) -> str | None:
        """The view-only token of channel ``session``; None when auth is off (or nobody may
        speak, so no key exists)."""
        if not self.speak_tokens:
            return None
        key = hashlib.sha256(b"whisperwire view tokens\0" +
                             b"\0".join(t.encode() for t in sorted(self.speak_tokens))).digest()
        mac = hmac.new(key, session.encode(), hashlib.sha256).digest()[:18]
        return _VIEW_PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


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


def load_token_file(path: str | Path, empty_ok: bool = False) -> AuthConfig:
    """Lines ``speak TOKEN``, ``view TOKEN`` or a bare ``TOKEN`` (speak). A line whose first
    non-blank character is ``#`` is a comment; elsewhere ``#`` is part of a token. Raises
    ValueError naming the line for anything else (a bare ``view``, say, is a mistake, never a
    token spelled "view"), and for a file that cannot be read or holds no token (unless
    ``empty_ok``: tokens come from elsewhere too): an operator who names a token file means
    auth to be on."""
    speak: list[str] = []
    view: list[str] = []
    try:  # (utf-8-sig: an editor's byte-order mark is no part of the first token)
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"--token-file {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"--token-file {path}: {(exc.strerror or str(exc)).lower()}") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        where = f"token file {path}, line {n}"
        if parts[0] in ("speak", "view"):
            if len(parts) != 2:
                raise ValueError(f"{where}: expected '{parts[0]} TOKEN'"
                                 + (" (the token is missing)" if len(parts) == 1 else ""))
            (speak if parts[0] == "speak" else view).append(parts[1])
        elif len(parts) == 1:
            speak.append(parts[0])
        else:
            raise ValueError(f"{where}: expected 'speak TOKEN', 'view TOKEN' or 'TOKEN'")
    if not speak and not view and not empty_ok:  # (auth would be off: every token let in)
        raise ValueError(f"token file {path} holds no token (only blank lines and comments)")
    return AuthConfig(tuple(speak), tuple(view))
