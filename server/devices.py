"""Which CTranslate2 build is installed, what it sees, and what to run on.

Facts are gathered once (:func:`gather_facts`) and the decisions are pure functions of them
(:func:`build_kind`, :func:`choose`), so every branch — CPU-only, CUDA, ROCm — is tested here with
recorded facts. PyTorch is never asked: ROCm PyTorch says "cuda available" while a CUDA
CTranslate2 wheel sees nothing.

Facts used:

* A ROCm/HIP build of CTranslate2 links ``libamdhip64`` (and maps it once imported); it shows
  AMD GPUs as device ``cuda`` (``get_cuda_device_count()``).
* A CUDA build links cuBLAS/cudart; asking it for CUDA compute types with no usable GPU raises.
* A CPU-only build names neither.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass, field

__all__ = [
    "BuildFacts", "Choice", "DeviceError", "build_kind", "choose", "gather_facts",
    "prepare_environment", "ENV_VARS", "cpu_vendor", "mkl_problem",
]

COMPUTE_TYPES = ("int8", "int8_float16", "int8_float32", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32")
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
            "HSA_OVERRIDE_GFX_VERSION", "CT2_CUDA_ALLOCATOR", "CT2_USE_EXPERIMENTAL_PACKED_GEMM",
            "CT2_USE_MKL", "OMP_NUM_THREADS")


class DeviceError(Exception):
    """The requested device or compute type cannot be used; the message says what can."""


@dataclass(frozen=True)
class BuildFacts:
    ct2_version: str
    linked: tuple[str, ...]  # GPU runtime libraries named in CTranslate2's shared library
    mapped: tuple[str, ...]  # GPU runtime libraries mapped in this process after import
    cuda_device_count: int
    cpu_compute_types: tuple[str, ...]
    gpu_compute_types: tuple[str, ...] | None  # None: asking raised
    gpu_error: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    device: str  # "cpu" or "cuda" (AMD GPUs too, on a ROCm build)
    index: int
    compute_type: str
    build: str  # "cpu" | "cuda" | "rocm"
    notes: tuple[str, ...] = ()


def _ct2_libraries() -> list[str]:
    spec = importlib.util.find_spec("ctranslate2")
    if spec is None or not spec.submodule_search_locations:
        return []
    pkg = list(spec.submodule_search_locations)[0]
    return glob.glob(os.path.join(pkg, "*.so*")) + glob.glob(os.path.join(pkg + ".libs", "*.so*")) \
        + glob.glob(os.path.join(os.path.dirname(pkg), "ctranslate2.libs", "*.so*"))


_MARKERS = {b"libamdhip64": "libamdhip64", b"libcublas": "libcublas", b"libcudart": "libcudart"}


def linked_gpu_libraries() -> tuple[str, ...]:
    """GPU runtimes CTranslate2's libraries name, read from the files (no import needed)."""
    found: set[str] = set()
    for path in _ct2_libraries():
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        found.update(name for marker, name in _MARKERS.items() if marker in data)
    return tuple(sorted(found))


def prepare_environment(linked: tuple[str, ...] | None = None,
                        environ: dict[str, str] | None = None) -> list[str]:
    """Set what must be set before CTranslate2 is imported; returns what was done, for the log.

    On ROCm: ``CT2_CUDA_ALLOCATOR=cub_caching`` unless the user chose one (the default allocator
    silently drops transcript text on some Radeon cards: OpenNMT/CTranslate2#2090).
    """
    env = os.environ if environ is None else environ
    linked = linked_gpu_libraries() if linked is None else linked
    notes = []
    if "libamdhip64" in linked and "CT2_CUDA_ALLOCATOR" not in env:
        env["CT2_CUDA_ALLOCATOR"] = "cub_caching"
        notes.append("ROCm build: CT2_CUDA_ALLOCATOR=cub_caching (CTranslate2 issue #2090)")
    return notes


def gather_facts() -> BuildFacts:
    linked = linked_gpu_libraries()
    import ctranslate2

    with open("/proc/self/maps") as f:
        maps = f.read()
    mapped = tuple(sorted(n for n in ("libamdhip64", "libcublas", "libcudart") if n in maps))
    try:
        count = ctranslate2.get_cuda_device_count()
    except Exception:  # noqa: BLE001 - a broken driver reads as no device
        count = 0
    gpu_types: tuple[str, ...] | None
    err = None
    try:
        gpu_types = tuple(sorted(ctranslate2.get_supported_compute_types("cuda")))
    except Exception as exc:  # noqa: BLE001 - the answer is the error
        gpu_types, err = None, str(exc)
    return BuildFacts(
        ct2_version=ctranslate2.__version__,
        linked=linked,
        mapped=mapped,
        cuda_device_count=count,
        cpu_compute_types=tuple(sorted(ctranslate2.get_supported_compute_types("cpu"))),
        gpu_compute_types=gpu_types,
        gpu_error=err,
        env={k: os.environ[k] for k in ENV_VARS if k in os.environ},
    )


def build_kind(f: BuildFacts) -> str:
    if "libamdhip64" in f.linked or "libamdhip64" in f.mapped:
        return "rocm"
    if "libcublas" in f.linked or "libcudart" in f.linked or "libcudart" in f.mapped:
        return "cuda"
    return "cpu"


def cpu_vendor() -> str:
    """The CPU's vendor id as Linux names it ("GenuineIntel", "AuthenticAMD"), or ""."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def mkl_problem(env: dict[str, str], vendor: str) -> str | None:
    """``CT2_USE_MKL`` forcing Intel MKL on an AMD CPU, where CTranslate2 leaves it off: on an
    AMD EPYC (Zen 4) a greedy decode took 19-20x as long and the encoder 2.4-5x
    (bench/results/prefix-cost-amd-stop59-mkl.md)."""
    on = env.get("CT2_USE_MKL", "").strip().lower() in ("1", "true")  # (CTranslate2's reading)
    if on and vendor == "AuthenticAMD":
        return ("CT2_USE_MKL forces Intel MKL on this AMD CPU, where it decodes several times "
                "slower (on an AMD EPYC: greedy decoding 20x, the encoder 2.4-5x, this check's "
                "sample 5x); unset it")
    return None


def _nvidia_driver_loaded() -> bool:
    """The NVIDIA kernel driver's control device (a container gets it with its GPUs), or
    WSL2's GPU device (its driver is the Windows host's)."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")


def _no_gpu_hint(f: BuildFacts, driver: bool | None = None) -> str:
    """Why a build sees no GPU, and what to do. ``driver``: whether an NVIDIA driver is loaded
    (None: look). Without one, CUDA's own reason is 'CUDA driver version is insufficient for
    CUDA runtime version', which points at an upgrade of a driver that is not there."""
    kind = build_kind(f)
    if kind == "cpu":
        return ("this CTranslate2 is a CPU-only build; install the CUDA wheel (pip) or the ROCm "
                "wheel from CTranslate2's releases for a GPU")
    if kind == "rocm":
        return ("the ROCm build sees no AMD GPU: is ROCm installed on the host, is /dev/kfd "
                "readable (add your user to the 'render' and 'video' groups), and for an "
                "unsupported gfx target try HSA_OVERRIDE_GFX_VERSION (e.g. 10.3.0 for RDNA2, "
                "11.0.0 for RDNA3)")
    if not (_nvidia_driver_loaded() if driver is None else driver):
        return ("no NVIDIA driver is loaded on this machine (no /dev/nvidiactl; in a container, "
                "pass the GPUs in, e.g. `docker run --gpus all`): install the driver and check "
                "`nvidia-smi`, or serve on the CPU with --device cpu")
    return ("the CUDA build sees no NVIDIA GPU: check `nvidia-smi`, the driver version, and "
            "CUDA_VISIBLE_DEVICES" + (f" ({f.gpu_error})" if f.gpu_error else ""))


def choose(device: str, compute_type: str, f: BuildFacts) -> Choice:
    """Resolve ``--device`` and ``--compute-type`` against the facts; raises DeviceError with
    what is supported when the request cannot be met."""
    kind = build_kind(f)
    notes: list[str] = []
    if device == "auto":
        dev, index = ("cuda", 0) if f.cuda_device_count > 0 else ("cpu", 0)
    elif device == "cpu":
        dev, index = "cpu", 0
    elif device == "cuda" or device.startswith("cuda:"):
        dev = "cuda"
        try:
            index = int(device.split(":", 1)[1]) if ":" in device else 0
        except ValueError:
            raise DeviceError(f"bad device {device!r}: use cpu, cuda or cuda:N") from None
        if f.cuda_device_count == 0:
            raise DeviceError(f"--device {device}: no GPU available — {_no_gpu_hint(f)}")
        if index >= f.cuda_device_count:
            raise DeviceError(f"--device {device}: only {f.cuda_device_count} GPU(s), "
                              f"cuda:0..cuda:{f.cuda_device_count - 1}")
    else:
        raise DeviceError(f"bad device {device!r}: use auto, cpu, cuda or cuda:N")

    supported = f.cpu_compute_types if dev == "cpu" else (f.gpu_compute_types or ())
    if compute_type == "auto":
        if dev == "cpu":
            ct = "int8" if "int8" in supported else "float32"
        else:
            ct = "float16" if "float16" in supported else "float32"
            if kind == "rocm":
                notes.append("ROCm: float16 by default (int8 on HIP has a shaky history); "
                             "flash attention stays off (unsupported on HIP)")
    else:
        if compute_type not in COMPUTE_TYPES:
            raise DeviceError(f"unknown compute type {compute_type!r}; one of {', '.join(COMPUTE_TYPES)}")
        if compute_type not in supported:
            raise DeviceError(f"compute type {compute_type} is not supported on {dev} here; "
                              f"supported: {', '.join(sorted(supported)) or 'none'}")
        ct = compute_type
    return Choice(dev, index, ct, kind, tuple(notes))
