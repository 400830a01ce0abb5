"""How many CPU cores this process may really use: its affinity, and its cgroup's CPU quota.

A container's CPU limit (``docker run --cpus 2``, a Kubernetes CPU limit, systemd's
``CPUQuota=``) is a CFS quota, not an affinity: the process still sees every core of the host.
One decode thread per seen core would then start, say, 32 threads in a 2-CPU quota, and the
kernel throttles the whole process for the rest of each 100 ms period once the quota is spent:
every decode waits, latency jumps in steps of the period. So the quota caps the count,
rounded down (1.5 CPUs make one decode thread, not two that get throttled), and never below
one. Both cgroup versions are read, and every level from the process's own group up to the
mount's root, since a parent's limit binds its children too.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cgroup_cpu_limit", "usable_cores"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def _v2_limit(text: str) -> float | None:
    """``cpu.max``: "max 100000" (no limit) or "200000 100000" (2 CPUs)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    quota, period = int(parts[0]), int(parts[1])
    return quota / period if quota > 0 and period > 0 else None


def _v1_limit(quota: str, period: str) -> float | None:
    """``cpu.cfs_quota_us`` (-1: no limit) over ``cpu.cfs_period_us``."""
    q, p = int(quota.strip()), int(period.strip())
    return q / p if q > 0 and p > 0 else None


def _levels(mount: Path, path: str) -> list[Path]:
    """The process's group under ``mount`` and each parent up to the mount itself. Where the
    group's path does not exist under the mount (a container that sees only its own group,
    mounted at the root, without a cgroup namespace), the mount is the group."""
    rel = Path(path.strip().lstrip("/"))
    out = [mount / rel, *(mount / p for p in rel.parents)]
    return [d for d in out if d.is_dir()] or [mount]


def _read(p: Path) -> str | None:
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The tightest CPU quota on this process's cgroup and its parents, in CPUs; None where
    there is none (or no cgroup file system to read, as off Linux)."""
    lines = (_read(proc_cgroup) or "").splitlines()
    limits: list[float] = []
    for line in lines:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":  # cgroup v2, one unified hierarchy
            mount = root / "unified" if (root / "unified" / "cgroup.controllers").exists() \
                and not (root / "cgroup.controllers").exists() else root
            for d in _levels(mount, path):
                text = _read(d / "cpu.max")
                limit = _v2_limit(text) if text else None
                if limit is not None:
                    limits.append(limit)
        elif "cpu" in controllers.split(","):  # cgroup v1: the cpu controller's hierarchy
            mount = next((root / n for n in (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu")
                          if (root / n).is_dir()), None)
            if mount is None:
                continue
            for d in _levels(mount, path):
                quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
                limit = _v1_limit(quota, period) if quota and period else None
                if limit is not None:
                    limits.append(limit)
    return min(limits) if limits else None


def usable_cores(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The cores this process may run on (its CPU affinity: ``taskset``, a cpuset), capped by
    its cgroup's CPU quota rounded down, and at least one."""
    try:
        cores = len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        limit = cgroup_cpu_limit(root, proc_cgroup)
    except (OSError, ValueError):  # a confined process may not stat /sys/fs/cgroup, odd files
        limit = None
    if limit is not None:
        cores = min(cores, max(1, math.floor(limit + 1e-9)))
    return cores
