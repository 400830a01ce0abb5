"""Run the real server as a separate process and stream real speech to it from N clients."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from whisperwire.client.stream import StreamResult, paced, stream_chunks
from whisperwire.server import wire

CLK = os.sysconf("SC_CLK_TCK")


# where every bench command writes its results file
RESULTS = Path(__file__).resolve().parent / "results"


def save_results(where: Path, name: str, data: object, md: str) -> None:
    """``name``.json and ``name``.md in ``where``; the table is printed too."""
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{name}.json").write_text(json.dumps(data, indent=1))
    (where / f"{name}.md").write_text(md)
    print(md)


def table_main(argv: list[str] | None, prog: str, doc: str | None, name: str,
               count: tuple[str, int], measure, markdown) -> int:  # type: ignore[no-untyped-def]
    """The command line of a bench that measures one table: ``--name``, ``--out`` and one
    count (``count``: its flag and default, handed to ``measure``); writes
    ``name``.json/.md."""
    import argparse

    p = argparse.ArgumentParser(prog=prog, description=doc)
    p.add_argument("--name", default=name)
    p.add_argument(count[0], type=int, default=count[1], dest="count")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    res = measure(a.count)
    save_results(a.out, a.name, res, markdown(a.name, res))
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants: a server with ``--devices cpu,cpu`` decodes in worker
    processes, whose CPU and memory are the server's too."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants (all their threads)."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(parts[11]) + int(parts[12])
    return total / CLK


def rss_mib(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(x.split()[1]) for x in f if x.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total / 1024


@dataclass
class ServerProcess:
    url: str
    pid: int
    proc: subprocess.Popen | None = None

    @property
    def http(self) -> str:
        """The same server's HTTP base (``/metrics``, ``/readyz``, transcripts)."""
        scheme, rest = self.url.split("://", 1)
        return {"ws": "http", "wss": "https"}.get(scheme, scheme) + "://" + rest


def wait_ready(port: int, timeout: float, died=lambda: False,  # type: ignore[no-untyped-def]
               why=lambda: "the server never became ready") -> None:
    """Until ``/readyz`` on 127.0.0.1:``port`` answers 200; RuntimeError(``why()``) once
    ``died()`` or after ``timeout`` seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if died() or time.monotonic() > deadline:
            raise RuntimeError(why())
        time.sleep(0.2)


@contextmanager
def server(max_batch: int = 8, extra: tuple[str, ...] = (), url: str | None = None
           ) -> Iterator[ServerProcess]:
    """A fresh ``whisperwire serve`` on a free port, or the running server at ``url``."""
    if url:
        yield ServerProcess(url, -1)
        return
    port = free_port()
    cmd = [sys.executable, "-m", "whisperwire.server", "serve", "--port", str(port),
           "--max-batch", str(max_batch), "--log-level", "warning", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_ready(port, 120, lambda: proc.poll() is not None,
               lambda: f"server did not start: {proc.stderr.read().decode()[-2000:]}")
    try:
        yield ServerProcess(f"ws://127.0.0.1:{port}", proc.pid, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass
class RunRecord:
    streams: list[StreamResult]
    wall_s: float
    cpu_s: float | None
    rss_baseline_mib: float | None
    rss_peak_mib: float | None
    rss_samples: list[tuple[float, float]] = field(default_factory=list)


def stream_many(srv: ServerProcess, audio: np.ndarray | list[np.ndarray], n: int,
                speed: float = 1.0, stagger_s: float = 0.37) -> RunRecord:
    """N clients stream ``audio`` concurrently (start times staggered, so their windows do not
    fall due in lockstep); CPU and RSS of the server are sampled meanwhile. A list of
    recordings: client i streams recording ``i % len(audio)``."""
    audios = audio if isinstance(audio, list) else [audio]
    pcms = [(np.clip(a, -1, 1) * 32767).astype("<i2").tobytes() for a in audios]
    params = wire.ListenParams()
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    base = rss_mib(srv.pid) if srv.pid > 0 else None

    def sampler() -> None:
        t0 = time.monotonic()
        while not stop.wait(0.5):
            if srv.pid > 0:
                samples.append((time.monotonic() - t0, rss_mib(srv.pid)))

    async def one(i: int) -> StreamResult:
        await asyncio.sleep(i * stagger_s)
        return await stream_chunks(srv.url, paced(pcms[i % len(pcms)], params, speed), params,
                                   close_timeout=600)

    async def all_() -> list[StreamResult]:
        return await asyncio.gather(*(one(i) for i in range(n)))

    th = threading.Thread(target=sampler, daemon=True)
    cpu0 = cpu_seconds(srv.pid) if srv.pid > 0 else None
    t0 = time.monotonic()
    th.start()
    results = asyncio.run(all_())
    wall = time.monotonic() - t0
    stop.set()
    th.join()
    cpu = cpu_seconds(srv.pid) - cpu0 if cpu0 is not None else None
    peak = max((r for _, r in samples), default=base)
    return RunRecord(results, wall, cpu, base, peak, samples)


# vector extensions CTranslate2's int8 kernels use: machines that all call themselves "AMD EPYC"
# differ 2.7x in decode speed by these (offline greedy 0.065 against 0.172 CPU-s per audio-s)
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if not ln.strip():
                    break
                k, _, v = ln.partition(":")
                out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def cpu_name(m: dict) -> str:
    """The CPU as results files name it: model, family/model numbers and vector extensions."""
    extra = ", ".join(x for x in (m.get("cpu_id", ""), " ".join(m.get("isa", ()))) if x)
    return f"{m['cpu_model']}; {extra}" if extra else str(m["cpu_model"])


def machine() -> dict[str, object]:
    info = _cpuinfo()
    model = info.get("model name", "")
    flags = set(info.get("flags", "").split())
    cpu_id = (f"family {info['cpu family']} model {info['model']}"
              if "cpu family" in info and "model" in info else "")
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / 1024 / 1024
    except OSError:
        mem = 0.0
    import ctranslate2

    return {"cpus": os.cpu_count(), "cpu_model": model, "cpu_id": cpu_id,
            "isa": [x for x in ISA_FLAGS if x in flags], "mem_gib": round(mem, 1),
            "python": platform.python_version(), "ctranslate2": ctranslate2.__version__,
            "platform": platform.platform()}
