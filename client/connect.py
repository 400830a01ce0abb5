"""What every client command does before and around its WebSocket: check the flags, open the
socket, read the server's messages, and turn each way of failing into one sentence.

A command-line client is used by people, not programs: a failure must say what went wrong and
what to do, never print a traceback. :class:`ClientFault` carries such a sentence; :func:`explain`
turns the exceptions of connecting (refused, bad URL, HTTP refusal) into one; :func:`run_client`
wraps a command's body with both and returns its exit status.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit, urlunsplit

from whisperwire.server import wire
from whisperwire.server.errors import ProtocolError

__all__ = ["OUTPUT_FORMATS", "ClientFault", "check_output", "explain", "parse_event",
           "run_client", "server_error_sentence", "ws_url"]

log = logging.getLogger("whisperwire.client")

OUTPUT_FORMATS = ("srt", "vtt", "json", "txt")

# Exit statuses: 0 done, 1 the server reported a failure or went away, 2 nothing was done
# (bad flags, missing file, no server), 130 interrupted before anything was done.
EXIT_SERVER, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130


DEFAULT_URL = "ws://127.0.0.1:8765"  # every client's --url when none is given


class ClientFault(Exception):
    """Something the user can fix; ``str()`` is the sentence to print."""


def bearer(token: str | None) -> dict[str, str]:
    """The headers that carry ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def check_token(token: str | None) -> str | None:
    """``--token`` as it is sent: without the spaces and line break around it (a token copied
    from a file with its newline), as the server reads the header. One with a line break or
    another control character inside cannot be an HTTP header: the HTTP library refused it,
    and the client blamed the server ("did not answer as a WhisperWire server")."""
    if token is None:
        return None
    token = token.strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ClientFault("--token has a line break or another control character inside; "
                          "give the token alone, on one line")
    return token or None


def listen_url(url: str, params: wire.ListenParams) -> str:
    """A speaker's WebSocket address on the server at ``url`` (a :func:`ws_url`)."""
    return f"{url.rstrip('/')}/v1/listen?{urlencode(params.to_query())}"


def ws_url(url: str) -> str:
    """``ws://`` and ``wss://`` as given; ``HOST:PORT`` without a scheme gets ``ws://``.
    Raises ClientFault for anything else, with the address to use instead: an ``http://`` URL
    is the browser page's address, and a client that quietly rewrote it would hide which of
    the two the user meant."""
    url = url.strip()
    if "://" not in url:
        url = "ws://" + url
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https") and parts.hostname:
        ws = urlunsplit(({"http": "ws", "https": "wss"}[scheme], parts.netloc, parts.path, "", ""))
        raise ClientFault(f"--url {url!r} is the browser page's address; the streaming client "
                          f"connects to the WebSocket: --url {ws}")
    if scheme not in ("ws", "wss") or not parts.hostname:
        raise ClientFault(f"--url {url!r} is not a server address; expected ws://HOST:PORT "
                          "(or wss://), e.g. ws://127.0.0.1:8765")
    try:
        port = parts.port  # (out of range or not a number: a traceback, when connecting)
    except ValueError:
        port = 0
    if port == 0:
        raise ClientFault(f"--url {url!r} has no valid port (1-65535); expected ws://HOST:PORT, "
                          "e.g. ws://127.0.0.1:8765")
    # the server's address, not one of its endpoints: "/v1/listen" pasted from the README was
    # asked for as ".../v1/listen/v1/listen", and the 403 blamed the token (a path before
    # them, a proxy's prefix, stays)
    path = re.sub(r"/v1/(listen|sessions/[^/]*/events)/*$", "", parts.path)
    path = "" if re.fullmatch(r"/v1/*", path) else path
    if path.rstrip("/").endswith("/deepgram"):
        server = path.rstrip("/").removesuffix("/deepgram")
        raise ClientFault(f"--url {url!r} is the Deepgram-compatible endpoint; whisperwire's "
                          "clients speak its own protocol: --url "
                          + urlunsplit((scheme, parts.netloc, server, "", "")))
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def check_output(path: str | None) -> None:
    """Refuse an ``--output`` that could not be written, before any audio is sent: an unknown
    extension or a directory that does not exist or cannot be written."""
    if not path:
        return
    if os.path.isdir(path):  # (before the extension: "unsupported format (none)" said nothing)
        raise ClientFault(f"--output {path} is a directory; name a file in it, e.g. "
                          f"{os.path.join(path, 'captions.srt')}")
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in OUTPUT_FORMATS:
        given = f".{ext}" if ext else "(none)"
        raise ClientFault(f"--output {path}: unsupported format {given}; "
                          f"use .{', .'.join(OUTPUT_FORMATS)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ClientFault(f"--output {path}: no such directory {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ClientFault(f"--output {path}: permission denied")


def parse_event(raw: str | bytes) -> wire.Message | None:
    """A server message, or None for one this client does not know: protocol v1 lets servers
    add message types, and clients skip what they do not understand."""
    try:
        return wire.decode(raw)
    except ProtocolError as exc:
        log.debug("skipped a server message: %s", exc.message)
        return None


_HINTS = {
    "session_taken": "choose another --session, or wait until that speaker stops",
    "unauthorized": "check --token",
    "server_full": "the server has no free session; try again later",
    "bad_language": "choose a language the server's model knows with --language",
    "bad_task": "--task translate needs a multilingual model (serve --model base)",
}


def server_error_sentence(err: wire.Error) -> str:
    """The server's own message, plus what to do where that is known."""
    hint = _HINTS.get(err.code)
    msg = err.message.rstrip(".") or err.code
    return f"server error: {msg} ({err.code})" + (f"; {hint}" if hint else "")


def explain(exc: BaseException, url: str) -> str | None:
    """A sentence for a failure to connect or talk to the server; None if ``exc`` is not one
    (a bug: let it raise)."""
    import websockets

    if isinstance(exc, websockets.InvalidURI):
        return f"--url {url!r} is not a WebSocket address (expected ws://HOST:PORT)"
    if isinstance(exc, websockets.InvalidStatus):
        status = exc.response.status_code
        what = {401: "a valid token is required (--token)", 403: "forbidden (check --token)",
                404: "no WhisperWire endpoint there (check --url)"}.get(status, "")
        return f"the server at {url} refused the connection: HTTP {status}" + \
            (f", {what}" if what else "")
    if isinstance(exc, websockets.InvalidHandshake):
        return f"{url} did not answer as a WhisperWire server ({exc})"
    if isinstance(exc, websockets.ConnectionClosed):
        return f"the server at {url} closed the connection ({_close_words(exc)})"
    if isinstance(exc, TimeoutError):
        return f"the server at {url} did not answer in time"
    if isinstance(exc, OSError):
        return f"cannot reach the server at {url}: {exc.strerror or exc}"
    return None


def _close_words(exc: BaseException) -> str:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is None:
        return "no close frame"
    return f"code {rcvd.code}" + (f": {rcvd.reason}" if rcvd.reason else "")


def run_client(body: Callable[[], int], url: str) -> int:
    """Run a command's body; print a sentence instead of a traceback for every failure the
    user can act on, and return the exit status."""
    try:
        return body()
    except ClientFault as exc:
        print(f"whisperwire: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - anything explain() does not know is a bug
        sentence = explain(exc, url)
        if sentence is None:
            raise
        print(f"whisperwire: {sentence}", file=sys.stderr)
        return EXIT_USAGE
