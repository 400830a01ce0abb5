"""Accessibility of the page, measured in Chromium from the styles it computes: text contrast of
at least 4.5:1 (WCAG 2.x AA) in light and dark mode, and a live region that announces finals
only, never the partial that is rewritten several times a second."""

from __future__ import annotations

import pytest
from browser_support import launch, wait_for, write_mic_wav

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

# contrast ratio of an element's text colour against the first opaque background behind it
CONTRAST = """
(el) => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  let bg = null;
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length < 4 || c[3] === 1) { bg = c; break; }
    if (c[3] > 0) throw new Error("translucent background: " + getComputedStyle(e).backgroundColor);
  }
  if (!bg) bg = [255, 255, 255];  // the canvas
  const fg = rgb(getComputedStyle(el).color);
  if (fg.length === 4 && fg[3] < 1) throw new Error("translucent text");
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with launch(write_mic_wav(tmp_path_factory.mktemp("mic") / "mic.wav")) as b:
        yield b


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_contrast_is_at_least_4_5(live_server, browser, scheme):
    page = browser.new_page(color_scheme=scheme)
    page.goto(live_server.http + "/")
    # give every element text in each state it can be in, as the page would
    page.evaluate("""() => {
        for (const id of ["partial", "latency", "message", "finals"]) document.getElementById(id).textContent = "text";
    }""")
    low = {}
    for sel in ("#partial", "#latency", "#message", "#finals", "h1", "label", "#start",
                "#share-link", "#session"):
        low[sel] = page.eval_on_selector(sel, CONTRAST)
    page.eval_on_selector("#stop", "e => { e.disabled = true; }")
    low["#stop (disabled)"] = page.eval_on_selector("#stop", CONTRAST)
    for cls in ("idle", "connecting", "live", "error"):
        page.eval_on_selector("#status", f"e => {{ e.className = 'status {cls}'; }}")
        low[f"status {cls}"] = page.eval_on_selector("#status", CONTRAST)
    bad = {k: round(v, 2) for k, v in low.items() if v < 4.5}
    assert not bad, f"{scheme}: contrast below 4.5:1: {bad}"
    page.close()


LIVE = """(el) => {
  // the nearest live region around el: its politeness, or null
  for (let e = el; e; e = e.parentElement) {
    if (e.getAttribute("aria-hidden") === "true") return "hidden";
    const live = e.getAttribute("aria-live");
    if (live) return live;
    const role = e.getAttribute("role");
    if (role === "log" || role === "status") return "polite";
    if (role === "alert") return "assertive";
  }
  return null;
}"""


def test_only_finals_are_announced(live_server, browser):
    page = browser.new_page()
    page.goto(live_server.http + "/")
    assert page.eval_on_selector("[data-testid=finals]", LIVE) == "polite"
    assert page.eval_on_selector("[data-testid=partial]", LIVE) in (None, "off", "hidden")
    # each final is added to the region, never a rewrite of what was announced already
    page.eval_on_selector("[data-testid=finals]", """(el) => {
        window.__removed = 0;
        new MutationObserver((ms) => { for (const m of ms) window.__removed += m.removedNodes.length
            + (m.type === "characterData" ? 1 : 0); })
          .observe(el, { childList: true, subtree: true, characterData: true });
    }""")
    page.click("[data-testid=start]")
    wait_for(lambda: "country" in page.inner_text("[data-testid=finals]").lower(), 60,
             "finals to arrive")
    assert page.evaluate("window.__removed") == 0
    page.click("[data-testid=stop]")
    page.close()
