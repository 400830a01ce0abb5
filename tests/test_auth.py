"""Tokens: the token file's grammar, per-channel view tokens, and redaction from log lines."""

from __future__ import annotations

import io
import logging

import pytest
from whisperwire.server.auth import AuthConfig, load_token_file
from whisperwire.server.logs import install_redaction, redact


@pytest.mark.parametrize("content, speak, view", [
    ("# tokens\nspeak s3cret\nview look\n", ("s3cret",), ("look",)),
    ("bare-token\n\n   # indented comment\n", ("bare-token",), ()),
    ("speak ab#cd\nview x#y\n", ("ab#cd",), ("x#y",)),  # '#' inside a token is the token's
    ("#speak hidden\nview look\n", (), ("look",)),
])
def test_token_file_lines(tmp_path, content, speak, view):
    tf = tmp_path / "tokens"
    tf.write_text(content)
    auth = load_token_file(tf)
    assert (auth.speak_tokens, auth.view_tokens) == (speak, view)


@pytest.mark.parametrize("content, line", [
    ("view\n", 1), ("ok\nspeak\n", 2), ("speak a b\n", 1), ("listen tok\n", 1),
])
def test_token_file_mistakes_name_their_line(tmp_path, content, line):
    tf = tmp_path / "tokens"
    tf.write_text(content)
    with pytest.raises(ValueError) as e:
        load_token_file(tf)
    assert f"line {line}" in str(e.value)


@pytest.mark.parametrize("speak, view", [(("",), ()), ((), (" ",)), (("a b",), ())])
def test_empty_or_spaced_tokens_are_refused(speak, view):
    with pytest.raises(ValueError):
        AuthConfig(speak, view)


def test_view_tokens_are_per_channel_stable_and_view_only():
    a = AuthConfig(("sp",), ("look",))
    tok = a.view_token("room")
    assert tok and tok != a.view_token("other")
    assert a.can_view(tok, "room") and not a.can_view(tok, "other")
    assert not a.can_speak(tok)
    assert AuthConfig(("sp",)).view_token("room") == tok, "stable across restarts"
    assert AuthConfig(("sp2",)).view_token("room") != tok, "new speak tokens revoke them"
    assert a.can_view("look", "anything") and a.can_view("sp", "anything")
    assert AuthConfig().view_token("room") is None
    assert "sp" not in repr(a) and "look" not in repr(a)


@pytest.mark.parametrize("line", [
    'GET /v1/sessions/x/transcript.srt?token=SECRET HTTP/1.1',
    '"WebSocket /v1/listen?session=a&token=SECRET&language=en" [accepted]',
    "/v1/listen?TOKEN=SECRET",
    "/overlay?session=a&token=SECRET",
    "Authorization: Bearer SECRET",
    "/v1/listen?token=SECRET%2Bx",
    # spellings the server accepts as a token, so they must not reach a log either
    '"WebSocket /v1/listen?%74oken=SECRET" [accepted]',
    "GET /v1/sessions/a/transcript.txt?tok%65n=SECRET HTTP/1.1",
    "GET /x?session=a&%54%4F%4B%45%4E=SECRET",
    "< authorization: Token SECRET",
    "< Authorization: token SECRET",
    "< sec-websocket-protocol: token, SECRET",
    "< Sec-WebSocket-Protocol: bearer,SECRET",
    "< sec-websocket-protocol: realtime, openai-insecure-api-key.SECRET, openai-beta.realtime-v1",
    # mistyped spellings the server refuses: still the user's secret, never logged
    "GET /v1/listen?token%3DSECRET HTTP/1.1",
    "GET /v1/listen?session=a&TOKEN%3dSECRET&b=2 HTTP/1.1",
    "GET /x?tok%65n%3DSECRET",
    "GET /x?token+=SECRET",
    "GET /x?+token=SECRET",
    "GET /x?token[]=SECRET",
    "GET /x?token%00=SECRET",
    "GET /x?api_key=SECRET",
    '"WebSocket /v1/listen?a=1;token%3DSECRET" [accepted]',
    "GET /x?session=a?token%3DSECRET",
    "GET /x?auth=SECRET",
    "GET /x?Authorization=Bearer%20SECRET",
    "GET /x?bearer=SECRET",
])
def test_redact(line):
    out = redact(line)
    assert "SECRET" not in out and "***" in out


@pytest.mark.parametrize("line", [
    "GET /v1/listen?session=room&language=en&keyterm=tokenizer HTTP/1.1",
    "GET /v1/sessions/a/transcript.txt?format=srt HTTP/1.1",
    "event=open session=a model=tiny.en",
])
def test_redact_leaves_other_parameters(line):
    assert redact(line) == line


def test_uvicorn_access_lines_are_redacted_and_still_formatted():
    from uvicorn.logging import AccessFormatter

    install_redaction()
    buf = io.StringIO()
    h = logging.StreamHandler(buf)
    h.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s',
                                   use_colors=False))
    access = logging.getLogger("uvicorn.access")
    old = access.level
    access.addHandler(h)
    access.setLevel(logging.INFO)
    try:
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET",
                    "/v1/sessions/a/transcript.txt?token=SECRET", "1.1", 200)
        logging.getLogger("uvicorn.error").addHandler(h)
        logging.getLogger("uvicorn.error").warning('%s - "WebSocket %s" [accepted]',
                                                   "127.0.0.1:5", "/v1/listen?token=SECRET")
    finally:
        access.removeHandler(h)
        logging.getLogger("uvicorn.error").removeHandler(h)
        access.setLevel(old)
    text = buf.getvalue()
    assert "SECRET" not in text
    assert "GET /v1/sessions/a/transcript.txt?token=" in text and " 200" in text


@pytest.mark.parametrize("key, value", [
    ("authorization", "Token SECRET"), ("Authorization", "Bearer SECRET"),
    ("sec-websocket-protocol", "token, SECRET"),
    ("Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.SECRET"),
])
def test_request_headers_logged_as_arguments_are_redacted(key, value):
    """websockets logs each request header at debug level as ``"< %s: %s", key, value``: the
    name and the value are separate arguments, so a rule that needs both in one string (the
    Authorization header's) never saw "Token SECRET"."""
    from whisperwire.server.logs import RedactTokens

    record = logging.LogRecord("websockets.server", logging.DEBUG, __file__, 1, "< %s: %s",
                               (key, value), None)
    RedactTokens().filter(record)
    out = record.getMessage()
    assert "SECRET" not in out and out.startswith(f"< {key}: ")
