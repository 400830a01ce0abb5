"""A viewer's lives (``client.captions._Lives``) driven with messages: which finals it shows
after a reconnect or a server restart, and where on the first life's clock."""

from whisperwire.client.captions import _Lives
from whisperwire.server import wire


def _final(seg: int, start: float, end: float, eou: bool = False) -> wire.Final:
    return wire.Final(segment=seg, text=f"w{seg}", start=start, end=end, eou=eou)


def _run(msgs: list[wire.Message]) -> list[wire.Message]:
    shown: list[wire.Message] = []
    lives = _Lives(shown.append)
    for m in msgs:
        lives.take(m)
    return shown


def test_a_reconnect_to_the_same_life_shows_each_final_once():
    a = wire.Channel(session="s", instance="one")
    shown = _run([a, _final(0, 0, 1), _final(1, 1, 2), a, _final(0, 0, 1), _final(1, 1, 2),
                  _final(2, 2, 3)])
    assert [(m.segment, m.start) for m in shown] == [(0, 0), (1, 1), (2, 2)]


def test_a_replayed_final_with_its_utterance_end_ends_the_utterance_once_more():
    a = wire.Channel(session="s", instance="one")
    shown = _run([a, _final(0, 0, 1), a, _final(0, 0, 1, eou=True)])
    assert [type(m).__name__ for m in shown] == ["Final", "UtteranceEnd"]
    assert shown[1].end == 1


def test_a_new_life_goes_on_where_the_old_one_was_final_to_less_what_was_said_again():
    shown = _run([wire.Channel(session="s", instance="one"), _final(0, 0, 4), _final(1, 4, 6),
                  wire.Channel(session="s", instance="two", said=1.0), _final(0, 0, 2),
                  _final(1, 2, 3)])
    # the new life's 0 lies 1 s before 6 s, and its finals numbered from 0 are new, not replays
    assert [(m.segment, m.start, m.end) for m in shown] == [
        (0, 0, 4), (1, 4, 6), (0, 5, 7), (1, 7, 8)]
