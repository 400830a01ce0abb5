"""``python -m bench.backpressure [--ray]``: does a speaker that sends faster than the decoder
reads get held back? All of ../shared/speech/real/ joined (11 min) goes to one session as fast
as the socket takes it; every few seconds we note how much audio the socket has taken, and
the server's RSS (with ``--ray``, the Serve replica's). Standalone, the server stops reading
at ``max_backlog_s`` of undecoded speech and, once the socket buffers between them are full,
TCP holds the client back. Through Ray Serve it cannot: the proxy reads the client's socket
into an unbounded queue (``proxy.py``, ``MessageQueue``), and the replica pulls every
message from it into a queue of its own (``http_util.ASGIReceiveProxy.fetch_until_disconnect``),
read by the app or not. Writes bench/results/backpressure-<server|ray>.json and .md."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from . import harness
from .accuracy import items

SECONDS = 40.0  # how long the client keeps sending


def _pids(pattern: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if pattern in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@contextmanager
def _ray_server() -> Iterator[tuple[str, int]]:
    """A local Ray cluster, Serve's proxy on a free loopback port, one CPU replica."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray
    from ray import serve

    from whisperwire.server.ray_serve import WhisperWire

    port = harness.free_port()
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 << 20)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(WhisperWire.options(num_replicas=1, ray_actor_options={"num_cpus": 1}).bind(),
                  name="whisperwire", route_prefix="/")
        harness.wait_ready(port, 180, why=lambda: "the replica never became ready")
        replicas = _pids("ServeReplica")
        if len(replicas) != 1:
            raise RuntimeError(f"expected one Serve replica on this machine, found {replicas}")
        yield f"ws://127.0.0.1:{port}", replicas[0]
    finally:
        serve.shutdown()
        ray.shutdown()


async def _send(url: str, pcm: bytes, pid: int) -> list[dict]:
    """Samples every 2 s for ``SECONDS`` (the socket stays open after the last frame, so the
    server still holds what it took); ``sent_s`` counts what ``send`` accepted, which
    includes the client's and the kernel's socket buffers."""
    import websockets

    sent = [0]
    marks: list[dict] = []

    async def send_all(ws) -> None:  # type: ignore[no-untyped-def]
        for i in range(0, len(pcm), 32000):  # 1 s frames
            await ws.send(pcm[i : i + 32000])
            sent[0] = min(len(pcm), i + 32000)

    async with websockets.connect(f"{url}/v1/listen?sample_rate=16000", max_size=None,
                                  ping_timeout=None) as ws:
        t0 = time.monotonic()
        task = asyncio.create_task(send_all(ws))
        while time.monotonic() - t0 < SECONDS:
            await asyncio.sleep(2.0)
            marks.append({"t": round(time.monotonic() - t0, 1), "sent_s": sent[0] / 32000,
                          "rss_mib": round(harness.rss_mib(pid), 1)})
        if task.done():
            task.result()  # a send that failed (a refused or closed socket) is no result
        else:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return marks


def measure(ray: bool) -> dict:
    audio = np.concatenate([it.audio for it in items() if it.name.startswith("real/")])
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    if ray:
        with _ray_server() as (url, pid):
            rss0 = harness.rss_mib(pid)
            marks = asyncio.run(_send(url, pcm, pid))
    else:
        with harness.server() as srv:
            rss0 = harness.rss_mib(srv.pid)
            marks = asyncio.run(_send(srv.url, pcm, srv.pid))
    return {"machine": harness.machine(), "through": "ray" if ray else "server",
            "audio_s": len(audio) / 16000, "rss_start_mib": rss0, "marks": marks}


def markdown(name: str, o: dict) -> str:
    lines = [f"# {name}", "",
             f"One speaker sends {o['audio_s']:.0f} s of real/ as fast as the socket takes it, "
             f"through {'Ray Serve (one CPU replica)' if o['through'] == 'ray' else 'the server'}"
             f"; {harness.cpu_name(o['machine'])}. RSS at the start: "
             f"{o['rss_start_mib']:.0f} MiB.", "",
             "| t (s) | audio sent (s) | RSS MiB |", "|---|---|---|"]
    lines += [f"| {m['t']} | {m['sent_s']:.0f} | {m['rss_mib']:.0f} |" for m in o["marks"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.backpressure", description=__doc__)
    p.add_argument("--ray", action="store_true", help="through Ray Serve's proxy")
    p.add_argument("--out", type=Path, default=harness.RESULTS)
    a = p.parse_args(argv)
    o = measure(a.ray)
    name = f"backpressure-{o['through']}"
    harness.save_results(a.out, name, o, markdown(name, o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
