"""The cores a process may use: its affinity capped by its cgroup's CPU quota, read from
cgroup file systems laid out as Linux lays them out (v1 and v2, host and container views)."""

from __future__ import annotations

import os
from pathlib import Path

from whisperwire.server.cores import cgroup_cpu_limit, usable_cores


def write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def v1_quota(group: Path, quota: str, period: str = "100000") -> None:
    write(group / "cpu.cfs_quota_us", quota + "\n")
    write(group / "cpu.cfs_period_us", period + "\n")


def v2(tmp_path: Path, group: str, limits: dict[str, str]) -> tuple[Path, Path]:
    """A unified hierarchy with ``cpu.max`` at the given group paths ("" is the root)."""
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu memory pids\n")
    (root / group.strip("/")).mkdir(parents=True, exist_ok=True)
    for path, text in limits.items():
        write(root / path / "cpu.max", text)
    proc = tmp_path / "proc_cgroup"
    write(proc, f"0::{group}\n")
    return root, proc


def test_v2_quota_of_a_container_that_sees_its_own_group_at_the_root(tmp_path):
    root, proc = v2(tmp_path, "/", {"": "200000 100000\n"})  # docker run --cpus 2
    assert cgroup_cpu_limit(root, proc) == 2.0


def test_v2_no_quota(tmp_path):
    root, proc = v2(tmp_path, "/user.slice/app.scope", {"user.slice/app.scope": "max 100000\n"})
    assert cgroup_cpu_limit(root, proc) is None


def test_v2_a_parents_tighter_quota_binds_the_child(tmp_path):
    root, proc = v2(tmp_path, "/system.slice/ww.service", {
        "system.slice": "150000 100000\n",  # CPUQuota=150%
        "system.slice/ww.service": "400000 100000\n",
    })
    assert cgroup_cpu_limit(root, proc) == 1.5


def test_v1_quota_on_the_cpu_controller(tmp_path):
    root = tmp_path / "cgroup"
    v1_quota(root / "cpu,cpuacct" / "docker" / "abc", "300000")
    v1_quota(root / "cpu,cpuacct", "-1")
    write(root / "memory" / "memory.limit_in_bytes", "1\n")
    proc = tmp_path / "proc_cgroup"
    write(proc, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_limit(root, proc) == 3.0


def test_v1_container_without_a_cgroup_namespace_reads_the_mount_itself(tmp_path):
    # the process's path names the host's group, which the container's mount does not hold
    root = tmp_path / "cgroup"
    v1_quota(root / "cpu", "50000")
    proc = tmp_path / "proc_cgroup"
    write(proc, "2:cpu:/kubepods/pod1/ctr\n")
    assert cgroup_cpu_limit(root, proc) == 0.5


def test_no_cgroup_files_means_no_limit(tmp_path):
    assert cgroup_cpu_limit(tmp_path / "none", tmp_path / "nothing") is None


def test_the_quota_caps_the_affinity_rounded_down_and_never_below_one(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    root, proc = v2(tmp_path, "/", {"": "150000 100000\n"})
    assert usable_cores(root, proc) == 1
    root, proc = v2(tmp_path / "b", "/", {"": "50000 100000\n"})
    assert usable_cores(root, proc) == 1
    root, proc = v2(tmp_path / "c", "/", {"": f"{(affinity + 8) * 100000} 100000\n"})
    assert usable_cores(root, proc) == affinity  # a quota above the affinity changes nothing
    root, proc = v2(tmp_path / "d", "/", {"": "max 100000\n"})
    assert usable_cores(root, proc) == affinity


def test_a_cgroup_file_it_cannot_read_or_parse_means_no_limit(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    root, proc = v2(tmp_path, "/", {"": "lots 100000\n"})
    assert usable_cores(root, proc) == affinity
