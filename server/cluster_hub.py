"""Channels across a Ray cluster: one directory actor, and a :class:`ClusterHub` per replica.

A speaker's WebSocket lives on one replica; its viewers and transcript downloads may land on any
other. So the channel's record (finals, live partial, ``closed``, who speaks on it now) lives in
one named, detached Ray actor, the :class:`Directory`, and every replica's hub talks to it:

- a speaker's replica *claims* the session id there (``session_taken`` holds cluster-wide) and
  sends each event as it publishes it, numbered: an async actor may start one caller's calls
  out of order, so the directory applies them by number (finals keep their order, and the
  speaker's end never overtakes its last final and ``closed``);
- a replica with viewers of a channel *follows* it: one long poll per channel and replica returns
  everything after a cursor (finals and ``closed`` in order, then only the newest partial),
  and the replica's local :class:`~.hub.Outbox` per viewer does the rest exactly as in one process
  (partials coalesced for slow viewers, finals never dropped, a viewer that stops reading let go);
- replicas renew a lease every second; a replica that stops (killed, its node lost) loses its
  live channels after ``lease_s``: the directory publishes ``closed(replica_lost)`` on them, so
  their viewers hear the end and their transcripts keep every final that was published;
- a directory that Ray restarts (its node lost) starts empty, with a new ``epoch``: the next
  lease renewal tells each replica, which gives it back its live channels (*adopt*: their finals
  so far, under the same claim and batch numbers, so the batches sent meanwhile, kept as
  orphans, still apply in order). Until then, for about a second, a second speaker could take
  a live id; before, it could for as long as the speaker spoke on.

The directory's calls are tiny; the blocking ones (claim, first look at a channel, downloads) are
made from the app's synchronous admission code and wait at most ``timeout_s`` (3 s: an
unreachable directory stalls the replica's event loop that long per admission, then refuses with
``not_ready``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .errors import ClientError
from .hub import (Hub, Outbox, Transcript, keep_language, known_language, new_session_id,
                  on_channel_clock, with_languages)
from .wire import Channel, Closed, Final, Language, Message, Partial, UtteranceEnd

__all__ = ["ClusterHub", "Directory", "directory"]

log = logging.getLogger("whisperwire.server")

# The directory's calls change with WhisperWire's code, and a detached actor outlives a
# redeploy: replicas find the directory of their own protocol version by its name.
PROTOCOL = 5
NAME, NAMESPACE = f"whisperwire-hub-v{PROTOCOL}", "whisperwire"


@dataclass
class _Channel:
    """The directory's record of one channel. ``log`` holds finals, utterance ends and
    ``closed`` with their sequence numbers; the partial is kept only as the newest one."""

    session: str
    log: list[tuple[int, str]] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)
    partial: tuple[int, str] | None = None
    closed: str | None = None
    live: bool = True
    owner: str = ""
    claim: int = 0
    offset: float = 0.0
    audio_seconds: float = 0.0
    heard: float = 0.0  # end of the live speaker's last final, on its own clock
    speakers: int = 1
    turns: list[int] = field(default_factory=list)  # each later speaker's first final
    instance: str = field(default_factory=lambda: secrets.token_hex(8))  # this life of the id
    said: float | None = None  # this life's first seconds, final in an earlier one (Channel)
    languages: list[tuple[int, str]] = field(default_factory=list)  # as Transcript.languages
    ended_at: float | None = None
    seq: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    next_batch: int = 0  # the live speaker's next batch number
    # batch number -> (events, the speaker's end, where its stream's 0 moved: ``said``)
    pending: dict[int, tuple[list[str], float | None, float | None]] = field(default_factory=dict)

    def bump(self) -> None:
        """Something changed: the next sequence number, and the followers wake up."""
        self.seq += 1
        self.changed.set()
        self.changed = asyncio.Event()


class Directory:
    """The cluster's channels (a Ray actor: create it with :func:`directory`). Messages travel
    as the protocol's JSON text, so replicas and the actor share no Python objects."""

    def __init__(self, retention_s: float = 3600.0, lease_s: float = 10.0) -> None:
        self.retention_s, self.lease_s = retention_s, lease_s
        self.channels: dict[str, _Channel] = {}
        self.seen: dict[str, float] = {}  # owner -> last lease renewal
        self.lost: dict[str, dict[str, int]] = {}  # owner -> its claims the reaper ended
        self.pids: dict[str, int] = {}
        # batches for a channel this directory does not know (it restarted empty, and the
        # speaker's replica has not given it back yet): (session, claim) -> (when, batches)
        self.orphans: dict[tuple[str, int], tuple[float, dict[int, tuple]]] = {}
        self.epoch = secrets.token_hex(8)  # this life of the directory
        # claim numbers go on from a random point: a restarted directory counting from 0 again
        # gave a new speaker the number a replica still held for the same id, and that
        # replica's batches went into the new speaker's channel
        self._claims = secrets.randbits(48)
        self._reaper: asyncio.Task | None = None

    def configure(self, retention_s: float, lease_s: float) -> None:
        """The deployment's settings: each replica that attaches brings them, so a redeploy
        with new ones applies them to the directory that outlived the last deployment."""
        self.retention_s, self.lease_s = retention_s, lease_s

    def settings(self) -> tuple[float, float]:
        return self.retention_s, self.lease_s

    def _start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def claim(self, session: str | None, owner: str, pid: int = 0) -> dict:
        """A speaker starts on ``session`` (None: a fresh id): the channel's state so far, or
        the error that refuses it."""
        await self.renew(owner, pid)
        sid = session or new_session_id()
        ch = self.channels.get(sid)
        if ch is not None and ch.live:
            return {"error": "session_taken", "message": f"session {sid!r} is already live"}
        self._claims += 1
        if ch is None:
            ch = self.channels[sid] = _Channel(sid)
        else:
            ch.live, ch.closed, ch.ended_at, ch.partial = True, None, None, None
            ch.offset, ch.speakers, ch.heard = ch.audio_seconds, ch.speakers + 1, 0.0
            ch.turns.append(len(ch.finals))
            ch.bump()
        ch.owner, ch.claim, ch.next_batch, ch.pending = owner, self._claims, 0, {}
        return {"session": sid, "claim": ch.claim, "finals": list(ch.finals),
                "offset": ch.offset, "speakers": ch.speakers, "turns": list(ch.turns),
                "instance": ch.instance, "languages": [list(x) for x in ch.languages]}

    async def adopt(self, session: str, owner: str, pid: int, claim: int, batch: int,
                    state: dict) -> dict:
        """A replica gives back a live channel this directory lost when it restarted: its
        finals and place (``state``, as the replica's transcript holds them) up to batch number
        ``batch``, under the claim it had. Refused (``session_taken``) if the id was taken
        again meanwhile."""
        await self.renew(owner, pid)
        ch = self.channels.get(session)
        if ch is not None and (ch.owner, ch.claim) == (owner, claim):
            return {"session": session}  # (given back already: a retry after no answer)
        if ch is not None:
            return {"error": "session_taken", "message": f"session {session!r} was taken"}
        self._claims = max(self._claims, claim)  # (new claims stay unique on every channel)
        ch = self.channels[session] = _Channel(
            session, finals=list(state["finals"]), owner=owner, claim=claim, next_batch=batch,
            offset=state["offset"], audio_seconds=state["offset"], heard=state["heard"],
            speakers=state["speakers"], turns=list(state["turns"]), instance=state["instance"],
            said=state.get("said"))
        ch.languages = [(n, x) for n, x in state.get("languages", ())]
        for text in with_languages(ch.finals, ch.languages):
            ch.bump()
            ch.log.append((ch.seq, text))
        _, orphans = self.orphans.pop((session, claim), (0.0, {}))
        for n, (events, end, offset) in sorted(orphans.items()):
            if n >= batch:  # (those before are in ``state``)
                await self.publish(session, claim, n, events, end, offset)
        return {"session": session}

    async def publish(self, session: str, claim: int, batch: int, events: list[str],
                      end: float | None = None, offset: float | None = None) -> None:
        """Batch number ``batch`` of the live speaker ``claim``: events on the channel's clock,
        and with ``end`` (its audio seconds) the speaker's end; with ``offset``, where its
        stream's 0 lies on the channel's clock from now (``said``: :meth:`.hub.Hub.said`).
        Batches apply in number order; a stale claim's (a replica that lost its lease) are
        ignored."""
        ch = self.channels.get(session)
        if ch is None:  # (kept a while: its replica may be about to give the channel back)
            self.orphans.setdefault((session, claim), (time.monotonic(), {}))[1][batch] = (
                events, end, offset)
            return
        if ch.claim != claim or not ch.live:
            return
        ch.pending[batch] = (events, end, offset)
        while ch.live and ch.next_batch in ch.pending:
            events, end, offset = ch.pending.pop(ch.next_batch)
            ch.next_batch += 1
            if offset is not None:
                ch.offset = ch.audio_seconds = offset
                ch.bump()
            self._apply(ch, events)
            if end is not None:
                self._end(ch, end)

    def _apply(self, ch: _Channel, events: list[str]) -> None:
        for text in events:
            msg = wire.decode(text)
            ch.bump()
            if isinstance(msg, Final):
                ch.log.append((ch.seq, text))
                ch.finals.append(text)
                ch.partial = None
                ch.heard = msg.end - ch.offset
            elif isinstance(msg, Partial):
                ch.partial = (ch.seq, text) if msg.text else None
            elif isinstance(msg, Closed):
                ch.log.append((ch.seq, text))
                ch.closed = text
            elif isinstance(msg, Channel):  # (a new life's ``said``, as Hub.said)
                ch.said = msg.said
                ch.log.append((ch.seq, text))
            elif isinstance(msg, Language):  # (as Hub.deliver keeps it)
                ch.log.append((ch.seq, text))
                keep_language(ch.languages, len(ch.finals), text)
            elif isinstance(msg, UtteranceEnd):  # (as Hub.deliver keeps it)
                ch.log.append((ch.seq, text))
                if ch.finals and not (last := wire.decode(ch.finals[-1])).eou:
                    ch.finals[-1] = wire.encode(dataclasses.replace(last, eou=True))

    def _end(self, ch: _Channel, audio_seconds: float) -> None:
        ch.live = False
        ch.audio_seconds = ch.offset + audio_seconds
        ch.ended_at = time.monotonic()
        ch.bump()

    async def renew(self, owner: str, pid: int = 0) -> dict:
        """A replica's lease: its channels stay live while it renews. Returns the claims it
        lost meanwhile (it stalled past ``lease_s``: a paused VM, a partition), so that it
        ends those speakers instead of decoding for a channel that no longer takes its
        finals; and the directory's ``epoch``, which changes when Ray restarts it empty."""
        self._start()
        self.seen[owner] = time.monotonic()
        if pid:
            self.pids[owner] = pid
        return {"lost": self.lost.pop(owner, {}), "epoch": self.epoch}

    async def snapshot(self, session: str) -> dict | None:
        ch = self.channels.get(session)
        if ch is None:
            return None
        return {"seq": ch.seq, "finals": list(ch.finals), "live": ch.live, "closed": ch.closed,
                "partial": ch.partial[1] if ch.partial else None, "turns": list(ch.turns),
                "audio_seconds": ch.audio_seconds, "instance": ch.instance, "said": ch.said,
                "languages": [list(x) for x in ch.languages]}

    async def since(self, session: str, cursor: int, wait_s: float = 10.0) -> dict | None:
        """What happened on ``session`` after ``cursor``, waiting up to ``wait_s`` for
        something to happen; None once the channel is gone."""
        ch = self.channels.get(session)
        if ch is None:
            return None
        if ch.seq <= cursor:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(ch.changed.wait(), wait_s)
            if self.channels.get(session) is not ch:
                return None
        events = [text for seq, text in ch.log[self._index(ch, cursor):]]
        partial = ch.partial[1] if ch.partial and ch.partial[0] > cursor else None
        return {"seq": ch.seq, "events": events, "partial": partial, "live": ch.live,
                "closed": ch.closed, "has_partial": ch.partial is not None}

    @staticmethod
    def _index(ch: _Channel, cursor: int) -> int:
        """Where the log entries after ``cursor`` start (the log is in sequence order)."""
        lo, hi = 0, len(ch.log)
        while lo < hi:
            mid = (lo + hi) // 2
            if ch.log[mid][0] <= cursor:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def owner(self, session: str) -> dict | None:
        """Who holds ``session``'s live speaker (for operators and tests)."""
        ch = self.channels.get(session)
        if ch is None:
            return None
        return {"owner": ch.owner, "pid": self.pids.get(ch.owner, 0), "live": ch.live}

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for ch in list(self.channels.values()):
                if ch.live and now - self.seen.get(ch.owner, 0.0) > self.lease_s:
                    self._lost(ch)
                elif not ch.live and ch.ended_at and now - ch.ended_at > self.retention_s:
                    del self.channels[ch.session]
                    ch.bump()  # its followers find it gone
            for key, (since, _) in list(self.orphans.items()):
                if now - since > self.lease_s:  # no replica gave its channel back
                    del self.orphans[key]
            # a replica gone this long (scaled down, its node lost) is forgotten, with the
            # claims it was to be told it lost: its channels ended or expired long since
            for owner, t in list(self.seen.items()):
                if now - t > self.retention_s + self.lease_s:
                    del self.seen[owner]
                    self.pids.pop(owner, None)
                    self.lost.pop(owner, None)

    def _lost(self, ch: _Channel) -> None:
        """The speaker's replica stopped renewing: the channel ends with what was published."""
        log.warning("session=%s event=replica_lost owner=%s", ch.session, ch.owner)
        # (on the channel's clock, as every event its viewers get; _end takes the speaker's)
        closed = wire.encode(wire.Closed("replica_lost", ch.offset + ch.heard))
        self.lost.setdefault(ch.owner, {})[ch.session] = ch.claim
        ch.bump()
        ch.log.append((ch.seq, closed))
        ch.closed, ch.partial = closed, None
        self._end(ch, ch.heard)


def directory(retention_s: float = 3600.0, lease_s: float = 10.0) -> Any:
    """The cluster's directory actor: the running one, or a new detached one (it outlives the
    replica that created it; ``ray stop`` ends it), with these settings either way (a running
    one kept the first deployment's: a redeploy's ``_RETENTION_MINUTES`` was ignored). Needs
    a connected Ray."""
    import ray

    actor = ray.remote(Directory).options(
        name=NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, num_cpus=0,
        max_concurrency=10_000, max_restarts=-1)
    handle = actor.remote(retention_s, lease_s)
    handle.configure.remote(retention_s, lease_s)
    return handle


def _speaker_ended(t: Transcript) -> None:
    """A mirror's note that a speaker ended after its last final: the next speaker's first
    final starts a turn (``Transcript.turns``, which replays to late viewers go by)."""
    if t.finals and (not t.turns or t.turns[-1] != len(t.finals)):
        t.turns.append(len(t.finals))


@dataclass
class _Mirror:
    """A channel this replica has viewers of, kept current by one long poll."""

    transcript: Transcript
    cursor: int
    task: asyncio.Task | None = None


class ClusterHub(Hub):
    """The app's hub on one replica of a cluster. Live speakers' transcripts are local while
    they speak; everything viewers and downloads read comes from the :class:`Directory`."""

    # a dropped speaker's next connection may land on any replica, and downloads read the
    # directory's ``offset``: its stream ends at the drop, and the new one starts there
    rejoins = False

    def __init__(self, actor: Any, owner: str, retention_s: float = 3600.0,
                 max_viewers: int = 100, timeout_s: float = 3.0, pid: int = 0) -> None:
        super().__init__(retention_s, max_viewers)
        self.actor, self.owner, self.timeout_s, self.pid = actor, owner, timeout_s, pid
        self._claims: dict[str, int] = {}
        self._batches: dict[str, int] = {}
        self._mirrors: dict[str, _Mirror] = {}
        self._epoch: str | None = None  # the directory's life this replica last renewed with

    def _call(self, ref: Any) -> Any:
        import ray

        try:
            return ray.get(ref, timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure: the directory is unreachable
            log.error("event=directory_unreachable error=%s", type(exc).__name__)
            raise ClientError("not_ready", "the session directory is unreachable") from None

    async def renew_forever(self, every_s: float = 1.0) -> None:
        """Keep this replica's lease (run as a task for the replica's life); a speaker whose
        claim the directory ended meanwhile is told so (``on_lost``)."""
        while True:
            r: dict = {}
            with contextlib.suppress(Exception):
                r = await asyncio.wait_for(
                    asyncio.wrap_future(self.actor.renew.remote(self.owner, self.pid).future()),
                    self.timeout_s) or {}
            if r.get("epoch") not in (None, self._epoch):
                # (a channel not given back, for want of an answer, is tried again next time)
                if self._epoch is None or await self._give_back():
                    self._epoch = r["epoch"]
            for sid, claim in r.get("lost", {}).items():
                if self._claims.get(sid) == claim:
                    self._claims.pop(sid, None)  # its finals would be ignored: send none
                    log.warning("session=%s event=claim_lost (this replica stalled)", sid)
                    if self.on_lost is not None:
                        self.on_lost(sid)
            await asyncio.sleep(every_s)

    async def _give_back(self) -> bool:
        """The directory restarted empty: give it this replica's live channels back; whether
        it answered for each (a retry gives back again what it took already). A channel whose
        id was taken meanwhile is lost, as after a stall (``on_lost``)."""
        answered = True
        for sid, claim in list(self._claims.items()):
            t = self._sessions.get(sid)
            if t is None:
                continue
            own = [f for f in t.finals if f.end > t.offset]  # (this speaker's finals)
            state = {"finals": [wire.encode(f) for f in t.finals], "offset": t.offset,
                     "heard": own[-1].end - t.offset if own else 0.0,
                     "speakers": t.speakers, "turns": list(t.turns), "instance": t.instance,
                     "said": t.said,
                     "languages": [[n, wire.encode(x)] for n, x in t.languages]}
            # (the transcript and the batch number are read together: the batches sent after
            # this call are the ones it does not hold)
            ref = self.actor.adopt.remote(sid, self.owner, self.pid, claim, self._batches[sid],
                                          state)
            r: dict = {}
            with contextlib.suppress(Exception):
                r = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
            if not r:
                answered = False
                log.warning("session=%s event=give_back_unanswered", sid)
            elif "error" in r and self._claims.get(sid) == claim:
                self._claims.pop(sid, None)
                log.warning("session=%s event=claim_lost (taken while the directory restarted)",
                            sid)
                if self.on_lost is not None:
                    self.on_lost(sid)
            else:
                log.warning("session=%s event=channel_given_back", sid)
        return answered

    # -- speakers (local while live) ---------------------------------------------------------
    def open(self, session: str | None) -> Transcript:
        r = self._call(self.actor.claim.remote(session, self.owner, self.pid))
        if "error" in r:
            raise ClientError(r["error"], r["message"])
        sid = r["session"]
        t = Transcript(sid, finals=[wire.decode(f) for f in r["finals"]], offset=r["offset"],
                       speakers=r["speakers"], turns=r["turns"], instance=r["instance"],
                       languages=[(n, wire.decode(x)) for n, x in r.get("languages", ())])
        self._sessions[sid], self._claims[sid], self._batches[sid] = t, r["claim"], 0
        return t

    def _send(self, sid: str, events: list[str], end: float | None = None,
              offset: float | None = None) -> None:
        claim = self._claims.get(sid)
        if claim is not None:
            n = self._batches[sid]
            self._batches[sid] = n + 1
            self.actor.publish.remote(sid, claim, n, events, end, offset)

    def publish(self, t: Transcript, msg: Message) -> None:
        if not isinstance(msg, (Final, Partial, Closed, UtteranceEnd, Language)) \
                or known_language(t, msg):
            return
        msg = on_channel_clock(msg, t.offset)
        self.deliver(t, msg)
        self._send(t.session, [wire.encode(msg)])

    def said(self, t: Transcript, seconds: float) -> bool:
        before = t.offset
        goes_on = super().said(t, seconds)
        if t.offset != before:  # (a batch: it applies in its number's order)
            self._send(t.session, [], offset=t.offset)
        elif not goes_on:  # a new life: viewers on any replica learn where its clock sits
            self._send(t.session, [wire.encode(Channel(t.session, t.instance, t.said))])
        return goes_on

    def end(self, t: Transcript, audio_seconds: float = 0.0) -> None:
        t.live = False
        t.audio_seconds = t.offset + audio_seconds
        t.ended_at = time.monotonic()
        self._send(t.session, [], end=audio_seconds)
        self._claims.pop(t.session, None)
        self._batches.pop(t.session, None)
        if self._sessions.get(t.session) is t:
            del self._sessions[t.session]

    # -- viewers and downloads (from the directory) ------------------------------------------
    def get(self, session: str) -> Transcript | None:
        snap = self._call(self.actor.snapshot.remote(session))
        if snap is None:
            return None
        return Transcript(session, finals=[wire.decode(f) for f in snap["finals"]],
                          live=snap["live"], turns=list(snap.get("turns", ())),
                          audio_seconds=snap.get("audio_seconds", 0.0),
                          instance=snap.get("instance", ""))

    def watch(self, session: str) -> Outbox:
        m = self._mirrors.get(session)
        if m is None:
            snap = self._call(self.actor.snapshot.remote(session))
            if snap is None:
                raise ClientError("unknown_session", f"no session {session!r}")
            t = Transcript(session, finals=[wire.decode(f) for f in snap["finals"]],
                           live=snap["live"], turns=list(snap.get("turns", ())),
                           instance=snap.get("instance", ""), said=snap.get("said"),
                           languages=[(n, wire.decode(x)) for n, x in snap.get("languages", ())])
            if not t.live:
                _speaker_ended(t)
            t.partial = wire.decode(snap["partial"]) if snap["partial"] else None
            t.closed = wire.decode(snap["closed"]) if snap["closed"] else None
            m = self._mirrors[session] = _Mirror(t, snap["seq"])
            m.task = asyncio.get_running_loop().create_task(self._follow(m))
        return self.add_viewer(m.transcript)

    async def _follow(self, m: _Mirror) -> None:
        """Keep ``m`` current until its last viewer leaves; when the channel is gone (expired,
        or the directory lost it) or following fails, its viewers get what they have and end."""
        t = m.transcript
        try:
            while t.viewers or self._mirrors.get(t.session) is m:
                r = await self._poll(t.session, m.cursor)
                if r is None:
                    break
                self._catch_up(m, r)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug here must not leave viewers waiting for ever
            log.exception("session=%s event=follow_failed", t.session)
        for v in list(t.viewers):
            v.finish()
        if self._mirrors.get(t.session) is m:
            del self._mirrors[t.session]

    async def _poll(self, session: str, cursor: int) -> dict | None:
        """The directory's news after ``cursor``; retried for 30 s while it is unreachable
        (restarting), then None."""
        for _ in range(30):
            try:
                return await self.actor.since.remote(session, cursor, 10.0)
            except Exception:  # noqa: BLE001 - any failure of the call: retry a while
                await asyncio.sleep(1.0)
        return None

    def _catch_up(self, m: _Mirror, r: dict) -> None:
        t = m.transcript
        for text in r["events"]:
            msg = wire.decode(text)
            self.deliver(t, msg)
            if isinstance(msg, wire.Closed):
                _speaker_ended(t)
        if r["partial"]:
            self.deliver(t, wire.decode(r["partial"]))
        t.live = r["live"]
        t.closed = wire.decode(r["closed"]) if r["closed"] else None
        if not r["has_partial"]:
            t.partial = None
        m.cursor = r["seq"]

    def unwatch(self, session: str, v: Outbox) -> None:
        m = self._mirrors.get(session)
        if m is None:
            return
        m.transcript.viewers.discard(v)
        if not m.transcript.viewers:
            self._mirrors.pop(session, None)
            if m.task is not None:
                m.task.cancel()

    def finish_viewers(self) -> None:
        for m in self._mirrors.values():
            for v in m.transcript.viewers:
                v.finish()

    @property
    def viewer_count(self) -> int:
        return sum(len(m.transcript.viewers) for m in self._mirrors.values())
