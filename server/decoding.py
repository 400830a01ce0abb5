"""What a session asks the engine for, and what it gets back: plain data, no model inside."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .wire import Word

__all__ = ["DecodeRequest", "DecodeResult"]


@dataclass(frozen=True, eq=False)
class DecodeRequest:
    """Decode ``audio`` (16 kHz float32 mono).

    ``prefix`` is text already committed for the start of ``audio`` (forced as the decoder's
    first tokens, so the result continues after it and never repeats it); ``prompt`` is earlier
    text, given as context only, of which the engine keeps the last tokens; ``user_prompt`` is
    the client's own (names, terms), given whole before it (up to the engine's
    ``prompt_tokens``).
    """

    id: int
    audio: np.ndarray
    offset: float  # stream seconds of audio[0]
    prompt: str = ""
    prefix: str = ""
    user_prompt: str = ""
    language: str | None = None  # None: the model's own; "auto": detect
    task: str = "transcribe"
    final: bool = False  # the window reaches the end of an utterance
    # decode as well as the engine can (beam search, temperature fallback): for windows whose words become final without a second opinion
    careful: bool = False
    session: str = ""  # who asks (a worker pool keeps a session on one device)
    # two-model mode: a window read for a partial only, by the cheap draft model where it
    # speaks the request's language and task (else by the main model, and ``draft`` is off in
    # the result: its words are the main model's, good for finals)
    draft: bool = False
    # encode the window padded to Whisper's whole 30 s input, where its no-speech rule was
    # made (the engine gives a short window a shorter, cheaper input otherwise)
    whole: bool = False

    @property
    def duration(self) -> float:
        return len(self.audio) / 16000.0


@dataclass(frozen=True)
class DecodeResult:
    """The words heard after the request's prefix (times relative to the request's audio[0]),
    plus Whisper's own confidence in the whole window."""

    words: tuple[Word, ...] = field(default_factory=tuple)
    text: str = ""
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 1.0
    language: str | None = None
    language_probability: float = 0.0  # when detected
    draft: bool = False  # read by the draft model: fit for a partial, never for a final
    whole: bool = False  # encoded on Whisper's whole 30 s input (see DecodeRequest.whole)
