"""``whisperwire serve`` refuses what an operator got wrong at start, in one sentence, before the
model loads: a token file without tokens (auth would be off), half a TLS pair or files that do
not make one, and limits that would close or refuse every session (an operator's try found each
of them taken silently, or a traceback after the model had loaded)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from whisperwire.server.auth import load_token_file


def serve(*args: str) -> subprocess.CompletedProcess:
    """``serve`` with a model that is not there: what the flags let through stops at the
    model (another sentence) instead of serving."""
    return subprocess.run([sys.executable, "-m", "whisperwire.server", "serve",
                           "--model", "/no/such/model", *args],
                          capture_output=True, text=True, timeout=60)


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.fixture(scope="module")
def tls(tmp_path_factory):  # type: ignore[no-untyped-def]
    """Two self-signed certificates with their keys (openssl, as an operator makes them)."""
    d = tmp_path_factory.mktemp("tls")
    for n in ("a", "b"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost", "-keyout", str(d / f"{n}.key"),
                        "-out", str(d / f"{n}.crt")], check=True, capture_output=True)
    return d


def test_a_token_file_without_a_token_stops_the_server(tmp_path):
    """Every line a comment: auth was off, and every token (or none) was taken."""
    tf = tmp_path / "tokens"
    tf.write_text("# all commented out\n# speak old\n\n")
    refused(serve("--token-file", str(tf)), "holds no token", str(tf))
    with pytest.raises(ValueError, match="holds no token"):
        load_token_file(tf)
    # ... with a --token beside it auth is on: the file may be empty for now
    assert "holds no token" not in serve("--token-file", str(tf), "--token", "t").stderr


def test_token_file_encoding_and_absence_are_said_with_its_name(tmp_path):
    bom = tmp_path / "bom"
    bom.write_bytes("\ufeffspeak bomtok\n".encode())  # (an editor's UTF-8 with BOM)
    assert load_token_file(bom).speak_tokens == ("bomtok",)
    latin = tmp_path / "latin"
    latin.write_bytes("speak caf\xe9\n".encode("latin-1"))
    refused(serve("--token-file", str(latin)), "--token-file", str(latin), "UTF-8")
    refused(serve("--token-file", str(tmp_path / "nope")), "--token-file",
            str(tmp_path / "nope"), "no such file")


def test_half_a_tls_pair_or_files_that_make_none_stop_the_server(tls, tmp_path):
    # a key without a certificate served plain HTTP without a word
    refused(serve("--tls-key", str(tls / "a.key")), "--tls-key", "--tls-cert")
    # each used to end in a traceback once the model had loaded
    refused(serve("--tls-cert", str(tls / "a.crt"), "--tls-key", str(tls / "b.key")),
            "--tls-cert", "--tls-key", "do not match")
    refused(serve("--tls-cert", str(tmp_path / "none.crt"), "--tls-key", str(tls / "a.key")),
            str(tmp_path / "none.crt"))
    refused(serve("--tls-cert", str(tls / "a.crt")), "--tls-key")  # (no key in the file)
    refused(serve("--tls-cert", str(tls / "a.key"), "--tls-key", str(tls / "a.key")),
            "--tls-cert")


@pytest.mark.parametrize("flag, value", [
    ("--idle-timeout", "0"), ("--idle-timeout", "-5"), ("--idle-timeout", "nan"),
    ("--max-session-hours", "0"), ("--max-sessions", "-1"), ("--max-sessions", "0"),
    ("--max-viewers", "-1"), ("--retention-minutes", "-1"), ("--rejoin-grace", "-1"),
    ("--handshake-timeout", "-1"), ("--port", "70000"), ("--port", "-1"),
    ("--log-level", "bogus"), ("--cpu-threads", "-1"), ("--decode-workers", "-1"),
])
def test_limits_that_would_close_or_refuse_every_session_are_refused(flag, value):
    """Each was taken: --idle-timeout 0 closed every speaker at once, --max-sessions -1
    refused all ("all -1 sessions are in use"), --port 70000 bound port 4464 and logged
    70000, --log-level bogus raised a KeyError."""
    r = serve(flag, value)
    refused(r, flag)


def test_a_port_in_use_is_said_before_the_model_loads():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        refused(serve("--port", str(port)), f"127.0.0.1:{port}", "in use")


def test_max_stream_speed_below_0_is_said_in_its_own_terms():
    refused(serve("--max-stream-speed", "-1"), "--max-stream-speed", "0 (no limit) or 1 or more")

