"""Which decodes the engine runs first, driven with numbers (no model)."""

from __future__ import annotations

import numpy as np

from whisperwire.server.decoding import DecodeRequest
from whisperwire.server.engine import next_batch


def req(i: int, careful: bool) -> tuple[DecodeRequest, int]:
    return DecodeRequest(id=i, audio=np.zeros(16000, np.float32), offset=0.0,
                         careful=careful), i


def test_careful_decodes_go_first_in_a_batch_of_their_own():
    waiting = [req(1, False), req(2, True), req(3, False), req(4, True)]
    batch, rest = next_batch(waiting, 8)
    assert [r.id for r, _ in batch] == [2, 4]
    assert [r.id for r, _ in rest] == [1, 3]  # still in arrival order
    batch, rest = next_batch(rest, 8)
    assert [r.id for r, _ in batch] == [1, 3] and rest == []


def test_a_batch_holds_at_most_max_batch_in_arrival_order():
    waiting = [req(i, True) for i in range(5)] + [req(9, False)]
    batch, rest = next_batch(waiting, 2)
    assert [r.id for r, _ in batch] == [0, 1]
    assert [r.id for r, _ in rest] == [2, 3, 4, 9]
