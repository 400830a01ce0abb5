"""The serve command's policy flags: 0 turns a rule off, and a negative count (which would
fire the rule on every decode) is refused at start, not run."""

from __future__ import annotations

import pytest

from whisperwire.server.cli import build_parser


@pytest.mark.parametrize("flag", ["--skip-retry-words", "--tail-check-ms", "--stuck-wait-ms",
                                  "--pause-ms"])
def test_policy_counts_take_zero_and_refuse_negatives(flag, capsys):
    p = build_parser()
    args = p.parse_args(["serve", flag, "0"])
    assert getattr(args, flag[2:].replace("-", "_")) == 0
    for bad in ("-1", "three"):
        with pytest.raises(SystemExit):
            p.parse_args(["serve", flag, bad])
        assert flag in capsys.readouterr().err
