"""Helpers for the browser tests: Debian's Chromium under Playwright (never a downloaded one), a
fake microphone playing a WAV of real speech, and waiting on conditions instead of sleeping."""

from __future__ import annotations

import time
import wave
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from conftest import load16k

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

# Counts the page's WebSockets (window.__sockets: url and close code of each), so a test can tell
# a page that retries from one that stopped.
COUNT_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Real {
    constructor(...args) {
      super(...args);
      const rec = { url: String(args[0]), code: null };
      window.__sockets.push(rec);
      this.addEventListener("close", (e) => { rec.code = e.code; });
    }
  };
})();
"""


def write_mic_wav(path: Path, name: str = "jfk.wav", lead_s: float = 1.0,
                  tail_s: float = 6.0) -> Path:
    """One pass of ``name`` with silence around it (Chromium loops the file)."""
    x = np.concatenate([np.zeros(int(16000 * lead_s)), load16k(name),
                        np.zeros(int(16000 * tail_s))])
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    return path


@contextmanager
def launch(mic_wav: Path | None = None) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, its microphone playing ``mic_wav``."""
    from playwright.sync_api import sync_playwright

    args = list(FLAGS)
    if mic_wav is not None:
        args += ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={mic_wav}"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield b
        finally:
            b.close()


def wait_for(fn: Callable[[], Any], timeout: float, what: str, every: float = 0.2,
             page: Any = None) -> Any:
    """Poll ``fn`` until it returns something true and return that; fail the test, saying
    ``what`` was awaited and the last value seen, after ``timeout`` seconds. Pass the ``page``
    when ``fn`` waits on a Playwright callback (a route handler): the sync API runs those only
    while it is called, so the wait goes through the page instead of sleeping."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {v!r})")
        if page is not None:
            page.wait_for_timeout(every * 1000)
        else:
            time.sleep(every)


def sockets(page: Any) -> list[dict]:
    """The WebSockets the page opened so far (needs COUNT_SOCKETS as an init script)."""
    return page.evaluate("window.__sockets")

