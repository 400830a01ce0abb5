// OBS browser-source overlay: /overlay?session=ID&lines=2&fade=6&font=...&size=48&color=ffffff
//   &outline=3&outline_color=000000&shadow=1&align=center&position=bottom&bg=transparent&partial=1
//   &lang=zh-TW (the captions' language; the page's overlay link carries it)
import * as wire from "./wire.js";
import { backoff, follow, Segments } from "./connection.js";
import { captionLang, detectedLang, glued, joinText, leadingMarks, wrap as wrapText } from "./text.js";

const p = new URLSearchParams(location.search);
// a number that is not one (or too small to show anything) falls back to the default
const num = (name, dflt, min) => {
  const v = parseFloat(p.get(name) ?? "");
  return Number.isFinite(v) && v >= min ? v : dflt;
};
// "#" starts a URL's fragment, so a colour written ffff00 (or %23ffff00) is taken too
const colour = (name, dflt) => {
  const v = p.get(name);
  return !v ? dflt : /^([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i.test(v) ? `#${v}` : v;
};
// a word that is none of the choices falls back to the default too (align=bogus left-aligned)
const oneOf = (name, choices) => (choices.includes(p.get(name)) ? p.get(name) : choices[0]);
const opt = {
  session: p.get("session"),
  lines: Math.floor(num("lines", 2, 1)),
  fade: num("fade", 6, 0),
  font: p.get("font") || "system-ui, sans-serif",
  size: num("size", 48, 6),
  color: colour("color", "#ffffff"),
  outline: num("outline", 3, 0),
  outlineColor: colour("outline_color", "#000000"),
  shadow: p.get("shadow") !== "0",
  align: oneOf("align", ["center", "left", "right", "start", "end"]),
  position: oneOf("position", ["bottom", "top", "middle"]),
  bg: colour("bg", "transparent"),
  partial: p.get("partial") !== "0",
  width: Math.floor(num("width", 42, 8)),
};

const box = document.getElementById("box");
Object.assign(box.style, {
  fontFamily: opt.font, fontSize: `${opt.size}px`, color: opt.color, textAlign: opt.align,
  lineHeight: "1.2", background: opt.bg,
  webkitTextStroke: opt.outline > 0 ? `${opt.outline}px ${opt.outlineColor}` : "",
  paintOrder: "stroke fill",
  textShadow: opt.shadow ? `0 0 ${Math.max(2, opt.outline * 2)}px ${opt.outlineColor}` : "none",
});
// The captions carry their language: Chinese in a box marked as the page's "en" was drawn
// with whatever CJK font the browser's locale picks (Japanese glyphs and punctuation). Each
// line keeps the language it was said in: a box-wide tag relabelled the Chinese lines still
// on screen "en" when the next speaker spoke English. ``lang``: the language of what comes
// (what is shown in another language than the open line's starts a line of its own; a
// reconnect's replayed history changes it back and forth, and breaks no line).
let lang = captionLang(p.get("lang"));
function setLang(tag) { lang = tag; }
if (opt.position === "middle") { box.style.top = "50%"; box.style.transform = "translateY(-50%)"; }
else box.style[opt.position === "top" ? "top" : "bottom"] = "2%";

// Finals fill lines once: a line that is full never changes (wrapping all recent finals again
// at every update moved every line break once the oldest final dropped off, and the text
// jumped with no new speech). ``open`` is the line being filled; the partial follows it. An
// utterance's or a speaker's end closes it (endLine).
let done = [];       // full lines, the last ``opt.lines`` of them: {text, lang}
let open = "";
let openLang = null;  // the language ``open`` is in
let partial = "";
let lastActivity = Date.now();
const segments = new Segments();  // survives reconnects: replayed finals are not shown twice

// lines of at most opt.width columns (a CJK character takes two), Chinese without spaces
const wrap = (text) => wrapText(text, opt.width);

function addFinal(text, glue = false) {
  if (open && openLang !== lang) endLine();
  if (!open && done.length) {
    // closing marks a final opens with go on the line an utterance's end closed: no line
    // starts with "，" or "」" (they may hang past its width, as in Chinese typesetting)
    const [marks, rest] = leadingMarks(text);
    if (marks) {
      const last = done[done.length - 1];
      done[done.length - 1] = { ...last, text: joinText(last.text, marks, true) };
      [text, glue] = [rest, false];
    }
  }
  const w = wrap(joinText(open, text, glue));
  open = w.pop() || "";
  openLang = lang;
  done = done.concat(w.map((t) => ({ text: t, lang }))).slice(-opt.lines);
}

// A speaker or an utterance ended: what comes next starts a line of its own, as on the page
// (app.js's endLine). Filled by width only, two utterances without a full stop ran together
// ("Wi-Fi門鈴也住推了土" / "地市場的火爆他稱他製").
function endLine() {
  if (open) done = done.concat([{ text: open, lang: openLang }]).slice(-opt.lines);
  open = "";
}

function onFinal(m) {
  if (segments.isNewFinal(m)) {
    addFinal(m.text, glued(m)); partial = "";
    if (m.eou) endLine();  // the utterance's last final
    lastActivity = Date.now();
  }
  // the last final shown, replayed closing its utterance: its utterance_end came while the
  // overlay was away
  else if (m.eou && m.segment === segments.last) endLine();
  else return;
  render();
}

function render() {
  const said = opt.partial && partial;
  const lines = (text, tag) => (text ? wrap(text) : []).map((t) => ({ text: t, lang: tag }));
  // (a partial in another language than the open line's goes on a line of its own)
  const apart = open && openLang !== lang;
  const tail = apart ? lines(open, openLang).concat(said ? lines(partial, lang) : [])
    : lines(said ? joinText(open, partial) : open, lang);
  const all = done.concat(tail).slice(-opt.lines);
  const live = !said ? 0 : apart ? lines(partial, lang).length : tail.length;
  box.replaceChildren(...all.map((line, i) => {
    const d = document.createElement("div");
    d.className = "line" + (live && i >= all.length - live ? " partial" : "") + (fading() ? " faded" : "");
    if (line.lang) d.lang = line.lang;
    d.textContent = line.text;
    return d;
  }));
}

// (an utterance's end redraws the lines without speech: a fading line stays faded)
const fading = () => opt.fade > 0 && Date.now() - lastActivity > opt.fade * 1000;

function fadeCheck() {
  if (fading() && (done.length || open || partial)) {
    for (const el of box.children) el.classList.add("faded");
    setTimeout(() => {
      if (Date.now() - lastActivity > opt.fade * 1000) { done = []; open = ""; partial = ""; render(); }
    }, 700);
  }
}
setInterval(fadeCheck, 250);

function onMessage(m) {
  if (m.type === "channel") {
    segments.channel(m);
  } else if (m.type === "final") {
    onFinal(m);
  } else if (m.type === "utterance_end") {
    // every word of the utterance was final before it ended, so no final carried its end;
    // not speech: the fade's clock goes on
    partial = ""; endLine(); render();
  } else if (m.type === "partial") {
    segments.sawPartial(m);
    partial = m.text; if (m.text) lastActivity = Date.now(); render();
  } else if (m.type === "closed") {
    partial = ""; endLine(); render();  // the speaker ended; the socket stays open for the next one
  } else if (m.type === "language") {
    setLang(detectedLang(lang, m.language, m.script));  // (each speaker's)
    render();
  }
}

// An OBS source must keep working across speaker restarts and network blips without anyone
// touching it: it follows the session for ever, and waits quietly for one that has not started
// yet (sources are set up before the stream). Only a wrong token or id stops it.
const PERMANENT = ["unauthorized", "forbidden_origin", "bad_session"];  // the URL is wrong

function connect() {
  if (!opt.session) { box.textContent = ""; return; }
  follow({
    url: () => wire.wsUrl(wire.eventsPath(opt.session), { token: p.get("token") }),
    started: (m) => m.type !== "error",
    tries: Infinity,
    delay: (n) => backoff(n, 1000, 10000),
    onMessage,
    onRefused: (err, code, attempt) => {
      if (err && PERMANENT.includes(err.code)) {
        console.error(`whisperwire overlay: ${err.code}: ${err.message}; not retrying`);
        return null;
      }
      return err && err.code === "unknown_session" ? 3000 : backoff(attempt, 1000, 10000);
    },
  });
}
connect();
