"""What a speaker may rely on in the messages it receives, as rules a stream is checked against.

``wire`` defines each message; these are the rules between them, the ones a caption client is
built on: ``ready`` first and ``closed`` last, finals numbered in order that never overlap, each
final's words inside its span and in order, a partial always for the next final's segment, no
time past the audio sent. The tests and ``python -m bench accuracy`` hold every stream of real
speech to them, so a broken rule shows up as a figure, not as a viewer's garbled line.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import wire

__all__ = ["CLOSE_REASONS", "violations"]

# every ``closed`` reason the server gives (README's protocol table)
CLOSE_REASONS = ("client_close", "disconnected", "idle_timeout", "max_duration", "too_many_errors",
                 "slow_consumer", "server_shutdown", "decode_failed", "replica_lost")
EPS = 1e-3  # times go over the wire in milliseconds


def violations(messages: Iterable[wire.Message], sent_s: float | None = None,
               ended: bool = True) -> list[str]:
    """Each rule the speaker's ``messages`` (in arrival order) break, in words; [] if none.
    ``sent_s``: how much audio the speaker sent (seconds), which no time may pass; ``ended``:
    the stream ran to its end (the speaker closed, or the server ended it), so it ends with
    ``closed`` (a stream that lost its ``closed``, or every message, kept "every rule")."""
    msgs = list(messages)
    out: list[str] = []
    if msgs and not any(isinstance(m, wire.Ready) for m in msgs) \
            and all(isinstance(m, wire.Error) for m in msgs):
        return out  # refused at connect (server_full, unauthorized, ...): an error, no session
    if msgs and not isinstance(msgs[0], wire.Ready):
        out.append(f"first message is {msgs[0].type}, not ready")
    # finals are numbered from the channel's count (an ended id continued, a dropped stream
    # rejoined), and a rejoined connection's times start below 0
    finals = next((m.segment for m in msgs if isinstance(m, (wire.Partial, wire.Final))), 0)
    last_end = float("-inf")
    for k, m in enumerate(msgs):
        if isinstance(m, wire.Closed) and k != len(msgs) - 1:
            out.append(f"{msgs[k + 1].type} after closed")
        if isinstance(m, wire.Closed) and m.reason not in CLOSE_REASONS:
            out.append(f"closed for an unknown reason {m.reason!r}")
        if isinstance(m, wire.Ready) and k:
            out.append(f"ready again at message {k}")
        if isinstance(m, wire.Partial):
            if m.segment != finals:
                out.append(f"partial for segment {m.segment} where the next final is {finals}")
            if m.end < m.start - EPS:
                out.append(f"partial {m.text!r} ends before it starts")
        if isinstance(m, wire.Final):
            out += _final(m, finals, last_end)
            finals, last_end = finals + 1, max(last_end, m.end)
        if isinstance(m, wire.Status) and (m.lag < -EPS or m.backlog < -EPS):
            out.append(f"status with a negative lag or backlog: {m}")
        if sent_s is not None and isinstance(m, (wire.Final, wire.Partial, wire.UtteranceEnd)) \
                and m.end > sent_s + EPS:
            out.append(f"{m.type} ends at {m.end:.3f} s, past the {sent_s:.3f} s of audio sent")
    if ended and not any(isinstance(m, wire.Closed) for m in msgs):  # (one before the end:
        out.append("no closed at the end" if msgs else "no message at all")  # said above)
    return out


def _final(f: wire.Final, number: int, last_end: float) -> list[str]:
    out = []
    if f.segment != number:
        out.append(f"final numbered {f.segment}, expected {number}")
    if not f.text.strip():
        out.append(f"final {f.segment} has no text")
    if f.end < f.start - EPS:
        out.append(f"final {f.text!r} ends before it starts")
    if f.start < last_end - EPS:
        out.append(f"final {f.text!r} starts at {f.start:.3f} s, before the last one's end "
                   f"({last_end:.3f} s)")
    prev = f.start
    for w in f.words:
        if w.end < w.start - EPS or w.start < prev - EPS:
            out.append(f"final {f.segment}: word {w.word!r} out of order")
        if w.start < f.start - EPS or w.end > f.end + EPS:
            out.append(f"final {f.segment}: word {w.word!r} outside the final's span")
        prev = max(prev, w.start)
    return out
