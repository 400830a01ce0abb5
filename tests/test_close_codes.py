"""Each connect-time error closes with the code the README gives it."""

from __future__ import annotations

import re
from pathlib import Path

from whisperwire.server.errors import close_code_for

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_connect_error_closes_with_the_code_the_readme_lists():
    """A client that reads the close code to decide whether to retry: ``bad_zh_script`` closed
    with 1008 (policy) where the README lists it with 1003 (unsupported data)."""
    text = README.read_text()
    at = text.index("At connect (sent, then the socket closes):")
    listed = text[at : text.index("Clients should ignore", at)]
    groups = re.findall(r"((?:`[a-z_]+`(?:,| or)?\s*)+)\((\d{4})\)", listed)
    assert len(groups) >= 4, groups
    for names, code in groups:
        for name in re.findall(r"`([a-z_]+)`", names):
            assert close_code_for(name) == int(code), (name, code)
