"""WhisperWire on a real local Ray cluster: two CPU replicas of the Serve deployment with
tiny.en, everything through Ray's HTTP proxy on 127.0.0.1, one cluster for the whole module.

Ray's start-up is the cost here (about 6 s and 0.9 GiB for the cluster, 2 s more for Serve,
then each replica loads its engine), so the tests share one cluster and keep the audio short.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
import signal
import socket
import time

import httpx
import numpy as np
import pytest
from conftest import load16k, references, run, s16
from subtitle_check import check_cues
from viewing import speak, view
from whisperwire.server import wire
from whisperwire.server.wer import wer

pytestmark = pytest.mark.e2e

LEASE_S = 4.0
CLIPS = {"ray-a": ["LJ001-0002.wav", "LJ001-0003.wav"], "ray-b": ["LJ001-0005.wav",
                                                               "LJ001-0007.wav"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _audio(names: list[str]) -> np.ndarray:
    gap = np.zeros(8000, np.float32)
    return np.concatenate([p for n in names for p in (load16k(n), gap)])


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster with Serve's proxy on a free loopback port, and the app deployed
    with two replicas; the directory actor's handle for looking inside."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray
    from ray import serve

    from whisperwire.server.cluster_hub import NAME, NAMESPACE
    port, metrics_port = _free_port(), _free_port()
    t0 = time.monotonic()
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 << 20,  # messages are small; CI's /dev/shm may be too
             _metrics_export_port=metrics_port)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(_deployment(2), name="whisperwire", route_prefix="/")
        http = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while httpx.get(f"{http}/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the replicas never became ready"
            time.sleep(0.2)
        print(f"cluster, Serve and 2 replicas ready in {time.monotonic() - t0:.1f} s")
        hub = ray.get_actor(NAME, namespace=NAMESPACE)
        yield {"url": f"ws://127.0.0.1:{port}", "http": http, "hub": hub,
               "ray_metrics": f"http://127.0.0.1:{metrics_port}/metrics"}
    finally:
        serve.shutdown()
        ray.shutdown()


async def _live(hub, session: str) -> dict:  # type: ignore[no-untyped-def]
    """The directory's word on who holds ``session``, once a speaker does."""
    for _ in range(300):
        info = await hub.owner.remote(session)
        if info and info["live"]:
            return info
        await asyncio.sleep(0.1)
    raise AssertionError(f"{session} never went live")


async def _speak_and_view(cluster: dict, session: str, pcm: bytes) -> tuple:
    """A speaker at about 4x real time and a viewer that joins once the session exists."""
    url = cluster["url"]
    speaker = asyncio.create_task(speak(url, pcm, session=session, pause=0.25, timeout=120))
    await _live(cluster["hub"], session)
    viewer = asyncio.create_task(view(url, session, timeout=120))
    return await speaker, await viewer


def _finals(msgs: list) -> list[str]:
    return [m.text for m in msgs if isinstance(m, wire.Final)]


@pytest.mark.timeout(240)
def test_two_speakers_and_their_viewers_through_the_proxy(cluster):
    import ray

    http = cluster["http"]

    async def both() -> list:
        return await asyncio.gather(*(_speak_and_view(cluster, sid, s16(_audio(names)))
                                      for sid, names in CLIPS.items()))

    results = run(both())
    refs = references()
    for (sid, names), ((spoken, code), (seen, _)) in zip(CLIPS.items(), results):
        assert code == 1000 and isinstance(spoken[-1], wire.Closed), spoken[-3:]
        assert spoken[-1].reason == "client_close"
        assert _finals(seen) == _finals(spoken), f"{sid}: the viewer saw other finals"
        assert isinstance(seen[-1], wire.Closed) and seen[-1].reason == "client_close"
        r = httpx.get(f"{http}/v1/sessions/{sid}/transcript.srt", timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-sub")
        cues = check_cues(r.text, vtt=False)
        squeeze = lambda text: "".join(text.split())  # lines may wrap inside "42-line"
        assert squeeze("".join("".join(lines) for _, _, lines in cues)) == \
            squeeze("".join(_finals(spoken)))
        hyp = httpx.get(f"{http}/v1/sessions/{sid}/transcript.txt", timeout=30).text
        ref = " ".join(refs[n] for n in names)
        assert wer(ref, hyp) <= 0.25, (sid, hyp)
    owners = {ray.get(cluster["hub"].owner.remote(sid))["owner"] for sid in CLIPS}
    print(f"speakers were on {len(owners)} replica(s)")
    # each session's event lines are in the replicas' logs, as `whisperwire serve` prints them
    # (under Serve they went nowhere: only warnings reached a log)
    logs = Path(ray._private.worker._global_node.get_logs_dir_path())  # noqa: SLF001
    text = "".join(p.read_text(errors="replace") for p in logs.rglob("*.err"))
    for sid in CLIPS:
        assert f"session={sid} event=open" in text and f"session={sid} event=closed" in text


@pytest.mark.timeout(120)
def test_session_ids_are_unique_across_the_cluster(cluster):
    """While one replica holds an id, a speaker on any replica is refused ``session_taken``;
    unknown ids are refused to viewers and downloads everywhere."""
    url, http = cluster["url"], cluster["http"]

    async def go() -> list:
        first = asyncio.create_task(speak(url, s16(_audio(["LJ001-0009.wav"])),
                                          session="ray-taken", pause=0.25))
        await asyncio.sleep(1.5)
        tries = [await speak(url, b"", session="ray-taken") for _ in range(4)]
        await first
        return tries

    for msgs, code in run(go()):  # four tries: the proxy spreads them over both replicas
        assert isinstance(msgs[0], wire.Error) and msgs[0].code == "session_taken", msgs
        assert code == 1008
    assert httpx.get(f"{http}/v1/sessions/nobody/transcript.srt").status_code == 404
    seen, _ = run(view(url, "nobody", timeout=10))
    assert isinstance(seen[0], wire.Error) and seen[0].code == "unknown_session"


@pytest.mark.timeout(90)
def test_viewers_on_another_replica_get_one_process_guarantees(cluster):
    """Two replicas' hubs on the cluster's directory (here, in this process): the viewer's hub
    is not the speaker's, and a viewer that does not read loses partials, never finals; finals
    come in order and ``closed`` ends each speaker. A replica that stops renewing its lease
    loses its live channel: ``closed(replica_lost)``, the published finals kept."""
    from whisperwire.server.cluster_hub import ClusterHub
    from whisperwire.server.errors import ClientError

    actor = cluster["hub"]

    async def go() -> tuple:
        a, b = ClusterHub(actor, "test-a"), ClusterHub(actor, "test-b")
        renew = asyncio.create_task(a.renew_forever())
        t = a.open("hub-x")
        with pytest.raises(ClientError) as taken:
            b.open("hub-x")
        slow, fast = b.watch("hub-x"), b.watch("hub-x")
        got_fast: list = []
        for i in range(60):
            a.publish(t, wire.Partial(i // 6, f"p{i}", 0.0, i + 0.5))
            if i % 6 == 5:
                a.publish(t, wire.Final(i // 6, f"f{i // 6}", float(i), i + 1.0))
            while len(got_fast) < 2 * (i // 6):  # a viewer that keeps up
                got_fast.append(await asyncio.wait_for(fast.next(), 20))
            await asyncio.sleep(0.01)
        a.publish(t, wire.Closed("client_close", 60.0))
        a.end(t, 60.0)
        while not got_fast or not isinstance(got_fast[-1], wire.Closed):
            got_fast.append(await asyncio.wait_for(fast.next(), 20))
        got_slow = []  # read only now: everything queued while it slept
        while not got_slow or not isinstance(got_slow[-1], wire.Closed):
            got_slow.append(await asyncio.wait_for(slow.next(), 20))
        t2 = b.open("hub-x")  # the channel's next speaker, on the other replica, goes on
        assert (len(t2.finals), t2.offset, t2.speakers) == (10, 60.0, 2)
        b.publish(t2, wire.Final(10, "next", 0.5, 1.0))
        nxt = await asyncio.wait_for(fast.next(), 20)
        assert (nxt.text, nxt.start, nxt.segment) == ("next", 60.5, 10), nxt
        b.publish(t2, wire.Closed("client_close", 1.0))
        b.end(t2, 1.0)
        # late viewers, on a hub that mirrored both speakers and on a fresh one (from the
        # directory's snapshot): the first speaker's last final ("f9", sent without eou)
        # closes its utterance in their replay
        late = []
        for hub in (b, ClusterHub(actor, "test-late")):
            v, got = hub.watch("hub-x"), []
            while not got or not isinstance(got[-1], wire.Closed):
                got.append(await asyncio.wait_for(v.next(), 20))
            hub.unwatch("hub-x", v)
            late.append([(m.text, m.eou) for m in got if isinstance(m, wire.Final)][-2])
        renew.cancel()
        c = ClusterHub(actor, "test-gone")  # claims, publishes, never renews
        lost = c.open("hub-lost")
        c.publish(lost, wire.Final(0, "kept", 0.0, 1.0))
        watcher = b.watch("hub-lost")
        tail = []
        while not tail or not isinstance(tail[-1], wire.Closed):
            tail.append(await asyncio.wait_for(watcher.next(), LEASE_S + 15))
        return taken.value.code, got_fast, got_slow, tail, b.get("hub-lost"), late

    code, fast, slow, tail, lost, late = run(go())
    assert late == [("f9", True)] * 2, late  # (the last speaker's end: its ``closed``)
    assert code == "session_taken"
    for got in (fast, slow):
        assert [m.text for m in got if isinstance(m, wire.Final)] == [f"f{k}" for k in range(10)]
        assert isinstance(got[-1], wire.Closed) and got[-1].reason == "client_close"
    partials = [m for m in slow if isinstance(m, wire.Partial)]
    assert len(partials) <= 11, "a slow viewer's partials are coalesced (one per gap)"
    assert [m.text for m in tail if isinstance(m, wire.Final)] == ["kept"]
    assert tail[-1].reason == "replica_lost" and [f.text for f in lost.finals] == ["kept"]
    assert not lost.live


@pytest.mark.timeout(90)
def test_a_new_lifes_said_and_an_utterance_end_reach_viewers_on_another_replica(cluster):
    """A new life of an id whose speaker says ``said``, and an ``utterance_end`` after a final
    without ``eou``, reach a viewer on another replica and a late one (from the directory's
    snapshot). Under Ray Serve both went only to the speaker's replica, where no viewer is:
    a captions viewer's saved file ran 1 s late after a restart, and lines ran together."""
    from whisperwire.server.cluster_hub import ClusterHub

    actor = cluster["hub"]

    async def until_closed(v) -> list:  # type: ignore[no-untyped-def]
        got: list = []
        while not got or not isinstance(got[-1], wire.Closed):
            got.append(await asyncio.wait_for(v.next(), 20))
        return got

    async def go() -> tuple[list, list]:
        a, b = ClusterHub(actor, "test-said-a"), ClusterHub(actor, "test-said-b")
        renew = asyncio.create_task(a.renew_forever())
        t = a.open("said-x")
        early = b.watch("said-x")  # (a viewer waiting when the speaker came back)
        a.said(t, 1.0)
        a.publish(t, wire.Final(0, "one two.", 1.2, 2.0))
        a.publish(t, wire.UtteranceEnd(2.0))
        a.publish(t, wire.Final(1, "three.", 6.0, 6.5))
        a.publish(t, wire.Closed("client_close", 7.0))
        a.end(t, 7.0)
        got = await until_closed(early)
        late = await until_closed(ClusterHub(actor, "test-said-late").watch("said-x"))
        renew.cancel()
        return got, late

    got, late = run(go())
    assert [m.said for m in got if isinstance(m, wire.Channel)][-1] == 1.0, got
    assert [m.type for m in got if m.type in ("final", "utterance_end")] == [
        "final", "utterance_end", "final"], got
    assert isinstance(late[0], wire.Channel) and late[0].said == 1.0, late
    assert [(m.text, m.eou) for m in late if isinstance(m, wire.Final)][0] == ("one two.", True)


@pytest.mark.timeout(60)
def test_a_redeploy_brings_its_retention_and_lease_to_the_running_directory(cluster):
    """The directory outlives a deployment; a later one's ``_RETENTION_MINUTES`` and
    ``_LEASE_S`` were ignored (attached with get_if_exists, it kept the first's)."""
    import ray

    from whisperwire.server.cluster_hub import directory

    hub = cluster["hub"]
    before = ray.get(hub.settings.remote())
    try:
        directory(6.0, 2.0)  # what a replica of a redeploy with other settings calls
        deadline = time.monotonic() + 10
        while ray.get(hub.settings.remote()) != (6.0, 2.0):
            assert time.monotonic() < deadline, ray.get(hub.settings.remote())
            time.sleep(0.05)
    finally:
        directory(*before)


def test_the_directory_applies_a_speakers_calls_in_their_order():
    """An async actor may start one caller's calls out of order: the speaker's end arriving
    before its last final and ``closed`` must not lose them (no Ray needed: the class itself)."""
    from whisperwire.server.cluster_hub import Directory

    final = wire.encode(wire.Final(0, "last words", 0.0, 1.0))
    closed = wire.encode(wire.Closed("client_close", 1.2))

    async def go() -> tuple:
        d = Directory(lease_s=60)
        r = await d.claim("order", "replica-1")
        await d.publish("order", r["claim"], 2, [], end=1.2)  # the end overtakes...
        await d.publish("order", r["claim"], 1, [closed])
        before = await d.snapshot("order")
        await d.publish("order", r["claim"], 0, [final])  # ...until the first batch arrives
        return before, await d.snapshot("order"), await d.since("order", 0, 0.1)

    before, after, since = run(go())
    assert before["live"] and not before["finals"] and before["closed"] is None
    assert not after["live"] and after["finals"] == [final] and after["closed"] == closed
    assert since["events"] == [final, closed]


def test_the_directory_moves_a_new_streams_clock_back_by_said():
    """As the replica's hub (``Hub.said``): a speaker back on its channel on another replica
    sends a second before the channel's end as context; the directory's clock for its stream
    moves back with it, so its finals, its end and a later speaker stay where they are. The
    move is a numbered batch, so it applies before the stream's finals and end whatever order
    an async actor runs the calls in."""
    from whisperwire.server.cluster_hub import Directory

    async def go() -> dict:
        d = Directory(lease_s=60)
        r = await d.claim("seam", "replica-1")
        await d.publish("seam", r["claim"], 0, [wire.encode(wire.Final(0, "one", 7.0, 9.0))],
                        end=9.0)
        r = await d.claim("seam", "replica-2")
        assert r["offset"] == 9.0
        await d.publish("seam", r["claim"] + 1, 0, [], offset=5.0)  # (another claim's)
        await d.publish("seam", r["claim"], 1, [], end=3.0)  # (overtaking the move...)
        await d.publish("seam", r["claim"], 0, [], offset=8.0)  # (...which applies first)
        return await d.snapshot("seam")

    snap = run(go())
    assert snap["audio_seconds"] == 11.0  # 8.0 + 3.0: the stream's 0 was at 8.0 (not 9.0)


def test_a_restarted_directory_takes_a_live_channel_back_with_the_batches_sent_meanwhile():
    """Ray restarts the directory empty (its node lost): the live speaker's replica gives the
    channel back under its claim, with its finals and its next batch number as the replica
    holds them; a batch it sent after that, which reached the directory first, still applies
    in order, and one before it (in the finals given back) is not applied twice. A retry
    after no answer is taken; another replica's is refused; new claims do not reuse the old
    number (no Ray needed: the class itself)."""
    from whisperwire.server.cluster_hub import Directory

    f = [wire.encode(wire.Final(i, f"f{i}", float(i), i + 0.5)) for i in range(4)]

    async def go() -> tuple:
        old = Directory(lease_s=60)
        r = await old.claim("back", "replica-1")
        await old.publish("back", r["claim"], 0, [f[0]])
        new = Directory(lease_s=60)  # the restart
        await new.publish("back", r["claim"], 1, [f[1]])  # before the replica noticed
        epochs = ((await old.renew("replica-1"))["epoch"], (await new.renew("replica-1"))["epoch"])
        # the replica's transcript holds f0 and f1 (batches 0 and 1); it gives back at 2, and
        # its batch 2, sent just after, reaches the directory before the give-back
        state = {"finals": f[:2], "offset": 0.0, "heard": 1.5, "speakers": 1, "turns": [],
                 "instance": r["instance"]}
        await new.publish("back", r["claim"], 2, [f[2]])
        back = await new.adopt("back", "replica-1", 0, r["claim"], 2, state)
        again = await new.adopt("back", "replica-1", 0, r["claim"], 2, state)  # a retry
        await new.publish("back", r["claim"], 3, [f[3]])
        taken = await new.claim("back", "replica-2")
        other = await new.adopt("back", "replica-3", 0, 7, 0, state)
        # a new speaker on the id before the replica gave it back: another claim number
        raced = await Directory(lease_s=60).claim("back", "replica-2")
        return (epochs, back, again, taken, other, raced["claim"] != r["claim"],
                await new.snapshot("back"), new.orphans, new.channels["back"].pending)

    (was, now), back, again, taken, other, unique, snap, orphans, pending = run(go())
    assert was != now and back == again == {"session": "back"}
    assert taken["error"] == "session_taken" and other["error"] == "session_taken"
    assert unique
    assert snap["finals"] == f and snap["live"] and orphans == {} and pending == {}


def test_the_directory_forgets_a_replica_gone_longer_than_it_keeps_channels():
    """A replica that stops renewing (scaled down, its node lost) left its lease time, pid and
    the claims it was to be told it lost in the directory for as long as the cluster ran."""
    from whisperwire.server.cluster_hub import Directory

    async def go() -> tuple:
        d = Directory(retention_s=2.0, lease_s=0.5)  # (the reaper looks every second)
        claim = (await d.claim("gone", "replica-gone", pid=4242))["claim"]
        await asyncio.sleep(1.5)  # the reaper ended its channel: a lost claim waits for it
        during = ("replica-gone" in d.seen, dict(d.lost), claim)
        await asyncio.sleep(3.1)  # 2.5 s unseen: forgotten; its channel expired too
        return during, (d.seen, d.pids, d.lost, d.channels)

    (seen, lost, claim), after = run(go())
    assert seen and lost == {"replica-gone": {"gone": claim}}
    assert after == ({}, {}, {}, {})


def test_the_autoscaling_policy_counts_speakers_not_sockets():
    """Replicas for the speakers the replicas report, ``target_ongoing_requests`` of them
    each; Serve applies bounds and delays (the policy alone, as Serve's controller calls it)."""
    from types import SimpleNamespace

    from whisperwire.server.ray_autoscale import streams_policy

    def ctx(streams: dict, current: int = 2, target: float = 2.0):  # type: ignore[no-untyped-def]
        return SimpleNamespace(current_num_replicas=current, target_num_replicas=current,
                               aggregated_metrics={"streams": streams} if streams else {},
                               config=SimpleNamespace(get_target_ongoing_requests=lambda: target))

    assert streams_policy(ctx({"r1": 3.0, "r2": 2.0}))[0] == 2.5
    assert streams_policy(ctx({"r1": 0.0, "r2": 0.0}))[0] == 0.0
    assert streams_policy(ctx({}, current=3))[0] == 3, "nothing reported yet: stay"
    assert streams_policy(ctx({}, current=0))[0] == 0


@pytest.mark.timeout(90)
def test_health_and_metrics_per_replica(cluster):
    http = cluster["http"]
    assert httpx.get(f"{http}/healthz").text == "ok"
    assert httpx.get(f"{http}/overlay").status_code == 200  # the OBS overlay, from any replica
    ready = httpx.get(f"{http}/readyz").json()
    assert ready["ready"] is True
    # one decode per CPU Ray gave the replica (num_cpus 1), not per core of the machine
    assert ready["decode_workers"] == 1
    replicas = set()
    for _ in range(20):
        text = httpx.get(f"{http}/metrics").text
        line = next(ln for ln in text.splitlines() if ln.startswith("whisperwire_sessions{"))
        assert 'deployment="WhisperWire"' in line and 'application="whisperwire"' in line
        replicas.add(line.split('replica="')[1].split('"')[0])
    assert len(replicas) == 2, "every replica labels its own series"
    # and through Ray's metrics export, where one scrape sees every replica. The gauge, not
    # the audio counter: Serve's router may have sent every earlier speaker to one replica, and
    # a counter never incremented is never exported (CI saw that once).
    deadline, seen = time.monotonic() + 45, set()
    while len(seen) < 2:
        assert time.monotonic() < deadline, f"Ray's export shows replicas {seen}"
        time.sleep(2)
        with contextlib.suppress(httpx.HTTPError):
            seen = {ln.split('replica="')[1].split('"')[0]
                    for ln in httpx.get(cluster["ray_metrics"], timeout=10).text.splitlines()
                    if ln.startswith("ray_whisperwire_sessions") and 'replica="' in ln}


@pytest.mark.timeout(180)
def test_a_killed_replica_ends_its_sessions_and_keeps_their_finals(cluster):
    """SIGKILL the replica of a live speaker: the speaker's socket ends without a normal close,
    viewers elsewhere get ``closed(replica_lost)``, the transcript keeps every final the
    viewers saw, and the other replica goes on serving."""
    import ray

    from whisperwire.server.cluster_hub import ClusterHub

    url, http, actor = cluster["url"], cluster["http"], cluster["hub"]
    pcm = s16(_audio([f"LJ001-00{i:02d}.wav" for i in range(10, 16)]))

    async def go() -> tuple:
        speaker = asyncio.create_task(speak(url, pcm, session="ray-dies", pause=0.9,
                                            timeout=60))
        watcher = ClusterHub(actor, "test-viewer")  # a replica's hub, in this process
        info = await _live(actor, "ray-dies")
        outbox = watcher.watch("ray-dies")
        seen: list = []
        while sum(isinstance(m, wire.Final) for m in seen) < 2:
            seen.append(await asyncio.wait_for(outbox.next(), 60))
        os.kill(info["pid"], signal.SIGKILL)
        killed = time.monotonic()
        while not isinstance(seen[-1], wire.Closed):
            seen.append(await asyncio.wait_for(outbox.next(), 30))
        spoken, code = await speaker
        watcher.unwatch("ray-dies", outbox)
        return seen, spoken, code, time.monotonic() - killed

    seen, spoken, code, took = run(go())
    assert seen[-1].reason == "replica_lost" and took < LEASE_S + 10
    assert code in (1006, 1011), code  # Serve's proxy drops it (1006: no close frame)
    assert code != 1000 and not any(isinstance(m, wire.Closed) for m in spoken), code
    finals = _finals(seen)
    r = httpx.get(f"{http}/v1/sessions/ray-dies/transcript.json", timeout=30)
    assert r.status_code == 200, r.text
    assert [f["text"] for f in r.json()["finals"]] == finals
    # the survivor still takes speakers (the proxy routes round the dead one)
    msgs, code = run(speak(url, s16(load16k("LJ001-0002.wav")), session="ray-after"))
    assert code == 1000 and _finals(msgs), msgs
    assert ray.get(actor.owner.remote("ray-after"))["pid"] != 0


@pytest.mark.timeout(180)
def test_a_replica_that_stalls_past_its_lease_ends_its_speaker_who_can_come_back(cluster):
    """A replica paused longer than the lease (a paused VM, a partition; here SIGSTOP) lost
    its claim, and on waking went on decoding: its speaker got every final and a normal
    close while the channel silently dropped them, and a second speaker was let in under the
    same id. Now it learns the claim is gone, ends its speaker with ``closed(replica_lost)``
    and 1012, and the speaker who connects again continues the channel: with the second
    before the channel's end as context (``said``), its stream's clock starts that second
    earlier, on the replica and in the directory, and its finals after the channel's."""
    url, http, actor = cluster["url"], cluster["http"], cluster["hub"]
    pcm = s16(_audio([f"LJ001-00{i:02d}.wav" for i in range(10, 16)]))

    async def go() -> tuple:
        speaker = asyncio.create_task(speak(url, pcm, session="ray-stalls", pause=0.9,
                                            timeout=90))
        info = await _live(actor, "ray-stalls")
        await asyncio.sleep(4.0)  # some finals first
        os.kill(info["pid"], signal.SIGSTOP)
        await asyncio.sleep(LEASE_S + 3)
        os.kill(info["pid"], signal.SIGCONT)
        return await speaker

    spoken, code = run(go())
    closed = [m for m in spoken if isinstance(m, wire.Closed)]
    assert code == 1012 and closed and closed[-1].reason == "replica_lost", (code, closed)
    kept = httpx.get(f"{http}/v1/sessions/ray-stalls/transcript.json", timeout=30).json()
    before = len(kept["finals"])
    assert before >= 1
    again = load16k("LJ001-0002.wav")
    msgs, code = run(speak(url, s16(again), session="ray-stalls", said=1.0))
    assert code == 1000 and _finals(msgs), msgs  # the channel takes its speaker again
    after = httpx.get(f"{http}/v1/sessions/ray-stalls/transcript.json", timeout=30).json()
    assert after["finals"][:before] == kept["finals"] and len(after["finals"]) > before
    assert after["finals"][before]["start"] >= kept["finals"][-1]["end"]
    assert after["offset"] == pytest.approx(kept["offset"] - 1.0 + len(again) / 16000, abs=0.01)


@pytest.mark.timeout(240)
def test_scale_down_finalises_the_drained_replicas_speakers(cluster):
    """From two replicas to one while a speaker is live on each: the speaker on the replica
    Serve drains gets its last finals and ``closed(server_shutdown)`` (1000); the other one
    goes on to its own end."""
    from ray import serve

    url = cluster["url"]
    deadline = time.monotonic() + 150  # the killed replica's replacement loads first, and
    while len(_replicas_answering(cluster["http"])) < 2:  # the proxy learns of it
        assert time.monotonic() < deadline, "Serve did not bring back the second replica"
        time.sleep(0.5)
    pcm = s16(_audio([f"LJ001-00{i:02d}.wav" for i in range(16, 20)]))

    async def go() -> tuple:
        speakers, owners = [], []
        while len(set(owners)) < 2:  # the proxy sends a new socket to the less busy replica
            assert len(speakers) < 4, f"all speakers went to one replica: {owners}"
            sid = f"ray-down-{len(speakers)}"
            speakers.append(asyncio.create_task(speak(url, pcm, session=sid, pause=0.5,
                                                      timeout=150)))
            owners.append((await _live(cluster["hub"], sid))["owner"])
        await asyncio.sleep(3.0)
        await asyncio.to_thread(serve.run, _deployment(1), name="whisperwire",
                                route_prefix="/", blocking=False)
        return owners, await asyncio.gather(*speakers)

    owners, results = run(go())
    ends: dict[str, set] = {}
    for owner, (msgs, code) in zip(owners, results):
        assert code == 1000 and isinstance(msgs[-1], wire.Closed), msgs[-3:]
        assert _finals(msgs), "every speaker got its finals"
        ends.setdefault(owner, set()).add(msgs[-1].reason)
    assert sorted(map(sorted, ends.values())) == [["client_close"], ["server_shutdown"]], ends


@pytest.mark.timeout(120)
def test_a_live_id_stays_taken_when_ray_restarts_the_directory(cluster):
    """Kill the directory actor (Ray restarts it empty, as when its node dies) while a speaker
    is live: a second speaker on that id used to be let in, and the transcript lost what was
    said before the restart. Runs last: the directory comes back with its first settings."""
    import ray

    from whisperwire.server.cluster_hub import ClusterHub
    from whisperwire.server.errors import ClientError

    actor = cluster["hub"]

    async def go() -> tuple:
        a, b = ClusterHub(actor, "test-restart-a"), ClusterHub(actor, "test-restart-b")
        renew = asyncio.create_task(a.renew_forever(every_s=0.2))
        await asyncio.sleep(0.5)  # (its first lease: the directory's life it knows)
        t = a.open("hub-restart")
        a.publish(t, wire.Final(0, "before", 0.0, 1.0))
        ray.kill(actor, no_restart=False)
        for _ in range(300):  # until the restarted actor answers
            with contextlib.suppress(Exception):
                await asyncio.wait_for(actor.settings.remote(), 1.0)
                break
            await asyncio.sleep(0.1)
        a.publish(t, wire.Final(1, "during", 1.0, 2.0))
        # the replica gives the channel back at a lease renewal (a loaded machine: a while)
        for _ in range(150):
            with contextlib.suppress(Exception):
                snap = await asyncio.wait_for(actor.snapshot.remote("hub-restart"), 1.0)
                if snap and snap["live"]:
                    break
            await asyncio.sleep(0.2)
        # (the restarted actor may still be unavailable to another handle for a moment:
        # not_ready, 1013, which a client retries; what counts is that it is never let in)
        code = "let in"
        for _ in range(50):
            try:
                b.open("hub-restart")
            except ClientError as exc:
                code = exc.code
                if code == "not_ready":
                    await asyncio.sleep(0.2)
                    continue
            break
        a.publish(t, wire.Final(2, "after", 2.0, 3.0))
        a.publish(t, wire.Closed("client_close", 3.0))
        a.end(t, 3.0)
        await asyncio.sleep(0.5)
        renew.cancel()
        return code, b.get("hub-restart")

    code, kept = run(go())
    assert code == "session_taken"
    assert kept is not None and [f.text for f in kept.finals] == ["before", "during", "after"]
    assert not kept.live


def _deployment(replicas: int):  # type: ignore[no-untyped-def]
    from whisperwire.server.ray_serve import WhisperWire

    env = {"WHISPERWIRE_LEASE_S": str(LEASE_S)}
    # one code version, as `serve deploy` of an edited config has: a new replica count then
    # scales the running replicas instead of replacing them all
    return WhisperWire.options(num_replicas=replicas, version="test", _internal=True,
                               ray_actor_options={"num_cpus": 1,
                                                  "runtime_env": {"env_vars": env}}).bind()


def _replicas_answering(http: str, tries: int = 12) -> set[str]:
    """The replicas the proxy sent ``tries`` scrapes of /metrics to."""
    seen = set()
    for _ in range(tries):
        with contextlib.suppress(httpx.HTTPError, StopIteration, IndexError):
            text = httpx.get(f"{http}/metrics", timeout=10).text
            line = next(ln for ln in text.splitlines() if ln.startswith("whisperwire_sessions{"))
            seen.add(line.split('replica="')[1].split('"')[0])
    return seen
