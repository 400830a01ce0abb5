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


@pytest.mark.parametrize("flag", ["--main-step-ms", "--overlap-ms", "--busy-overlap-ms",
                                  "--slow-hold-ms", "--busy-alone-ms",
                                  "--slow-careful-context-ms", "--busy-careful-context-ms",
                                  "--holdback-ms", "--encoder-granularity"])
def test_every_policy_time_refuses_a_negative_at_start(flag, capsys):
    """An ops engineer's finding: these took any number; ``--step-ms -100`` served jfk as 18
    finals of a word each, where the README says negative times are refused at start."""
    p = build_parser()
    assert getattr(p.parse_args(["serve", flag, "0"]), flag[2:].replace("-", "_")) == 0
    with pytest.raises(SystemExit):
        p.parse_args(["serve", flag, "-1"])
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--step-ms", "--beam-size", "--max-sessions", "--max-batch"])
def test_a_flag_that_needs_1_or_more_says_so_for_0_and_negatives(flag, capsys):
    """``--beam-size -1`` was caught after the model loaded, as 1.7 KB of CTranslate2's
    argument dump; ``--max-sessions -1`` said "0 or more" and then 0 said "1 or more"."""
    p = build_parser()
    for bad in ("0", "-1"):
        with pytest.raises(SystemExit):
            p.parse_args(["serve", flag, bad])
        err = capsys.readouterr().err
        assert f"must be 1 or more, not {bad}" in err and flag in err, err


@pytest.mark.parametrize("flag", ["--idle-timeout", "--max-session-hours"])
def test_a_limit_that_must_be_more_than_0_says_so_for_every_bad_value(flag, capsys):
    p = build_parser()
    for bad in ("0", "-1", "nan"):
        with pytest.raises(SystemExit):
            p.parse_args(["serve", flag, bad])
        assert f"must be more than 0, not {bad}" in capsys.readouterr().err


def test_a_missing_draft_model_is_named_as_the_draft_model():
    from whisperwire.server.models import ModelError, resolve_model

    with pytest.raises(ModelError, match="^--draft-model /nonexistent: no such directory"):
        resolve_model("/nonexistent", "--draft-model")
