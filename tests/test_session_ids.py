"""Random session ids can be typed after a command: none starts with ``-`` (argparse would
take ``whisperwire captions -abc`` for an option) or ``_``."""

from __future__ import annotations

from whisperwire.server.cli import build_parser
from whisperwire.server.hub import Hub
from whisperwire.server.wire import valid_session_id


def test_random_session_ids_never_start_with_a_dash_and_the_captions_command_takes_them():
    hub = Hub()
    # one old id in 32 started with '-' or '_': 2000 of them held about 62, and none at all
    # had odds of about e^-63
    ids = [hub.open(None).session for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(len(s) == 16 and valid_session_id(s) for s in ids)
    bad = [s for s in ids if s[0] in "-_"]
    assert not bad, bad[:5]
    parser = build_parser()
    assert all(parser.parse_args(["captions", s]).session == s for s in ids)
