"""The rules a speaker's message stream is held to (server/wire_rules.py): a good stream
passes, and each broken rule is named. The end-to-end tests and ``bench accuracy`` apply them
to real streams."""

from __future__ import annotations

from whisperwire.server import wire
from whisperwire.server.wire_rules import violations

READY = wire.Ready("s", "tiny.en", "cpu", "int8", 16000)


def final(seg: int, start: float, end: float, words: tuple = (), eou: bool = False) -> wire.Final:
    ws = words or (wire.Word(" a", start, (start + end) / 2, 0.9),
                   wire.Word(" b", (start + end) / 2, end, 0.9))
    return wire.Final(seg, "a b", start, end, ws, eou)


GOOD = [READY, wire.Partial(0, "a", 0.1, 0.4), wire.Status(1.0, 0.5, 0.0),
        final(0, 0.1, 0.9), wire.Partial(1, "", 0.9, 0.9), wire.Partial(1, "c", 1.2, 1.5),
        final(1, 1.2, 1.8, eou=True), wire.UtteranceEnd(1.8), wire.Closed("client_close", 2.0)]


def test_a_good_stream_breaks_no_rule():
    assert violations(GOOD, sent_s=2.0) == []


def test_each_broken_rule_is_named():
    def broken(i: int, m: wire.Message, sent_s: float = 2.0) -> list[str]:
        return violations(GOOD[:i] + [m] + GOOD[i + 1 :], sent_s)

    assert "not ready" in broken(0, wire.Status(0.0, 0.0))[0]
    assert "numbered 2, expected 1" in broken(6, final(2, 1.2, 1.8))[0]
    assert "partial for segment 0 where the next final is 1" in broken(
        5, wire.Partial(0, "c", 1.2, 1.5))[0]
    assert "before the last one's end" in broken(6, final(1, 0.5, 1.8))[0]
    assert "has no text" in broken(3, wire.Final(0, " ", 0.1, 0.9))[0]
    w = (wire.Word(" b", 0.5, 0.9, 0.9), wire.Word(" a", 0.1, 0.4, 0.9))
    assert "out of order" in broken(3, final(0, 0.1, 0.9, w))[0]
    w = (wire.Word(" a", 0.1, 0.5, 0.9), wire.Word(" b", 0.5, 1.1, 0.9))
    assert "outside the final's span" in broken(3, final(0, 0.1, 0.9, w))[0]
    assert "past the 1.500 s of audio sent" in broken(6, final(1, 1.2, 1.8), sent_s=1.5)[0]
    assert "negative lag" in broken(2, wire.Status(1.0, -0.5))[0]
    assert "unknown reason" in broken(8, wire.Closed("bye", 2.0))[0]
    assert violations(GOOD + [wire.Partial(2, "x", 2.0, 2.0)]) == ["partial after closed"]
    # a stream that ran to its end and lost its closed (or everything) kept "every rule"
    assert violations(GOOD[:-1]) == ["no closed at the end"]
    assert violations([]) == ["no message at all"]
    assert violations(GOOD[:-1], ended=False) == []


def test_a_continued_channel_a_rejoin_and_a_refusal_break_no_rule():
    """Finals numbered from the channel's count (an ended id continued), times below 0 (a
    dropped stream's next connection counts from its own start), and a refusal at connect
    (an ``error``, no ``ready``) are what the server may send."""
    on = [READY, wire.Partial(3, "a", -0.4, -0.1), final(3, -0.4, 0.5), final(4, 0.6, 0.9),
          wire.Closed("client_close", 1.0)]
    assert violations(on, sent_s=1.0) == []
    assert violations([wire.Error("server_full", "all 64 sessions are in use")]) == []
    assert violations([READY, final(3, 0.0, 0.5), final(3, 0.6, 0.9)])[0] == (
        "final numbered 3, expected 4")
