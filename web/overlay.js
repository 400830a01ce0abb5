// OBS browser-source overlay: /overlay?session=ID&lines=2&fade=6&font=...&size=48&color=...
//   &outline=3&outline_color=#000&shadow=1&align=center&position=bottom&bg=transparent&partial=1
import * as wire from "./wire.js";
import { backoff, follow, Segments } from "./connection.js";
import { joinText, wrap as wrapText } from "./text.js";

const p = new URLSearchParams(location.search);
const opt = {
  session: p.get("session"),
  lines: Math.max(1, parseInt(p.get("lines") || "2", 10)),
  fade: parseFloat(p.get("fade") || "6"),
  font: p.get("font") || "system-ui, sans-serif",
  size: parseInt(p.get("size") || "48", 10),
  color: p.get("color") || "#ffffff",
  outline: parseFloat(p.get("outline") || "3"),
  outlineColor: p.get("outline_color") || "#000000",
  shadow: p.get("shadow") !== "0",
  align: p.get("align") || "center",
  position: p.get("position") || "bottom",
  bg: p.get("bg") || "transparent",
  partial: p.get("partial") !== "0",
  width: parseInt(p.get("width") || "42", 10),
};

const box = document.getElementById("box");
Object.assign(box.style, {
  fontFamily: opt.font, fontSize: `${opt.size}px`, color: opt.color, textAlign: opt.align,
  lineHeight: "1.2", background: opt.bg,
  webkitTextStroke: opt.outline > 0 ? `${opt.outline}px ${opt.outlineColor}` : "",
  paintOrder: "stroke fill",
  textShadow: opt.shadow ? `0 0 ${Math.max(2, opt.outline * 2)}px ${opt.outlineColor}` : "none",
});
box.style[opt.position === "top" ? "top" : "bottom"] = "2%";
if (opt.position === "middle") { box.style.top = "50%"; box.style.transform = "translateY(-50%)"; }

let lines = [];      // committed lines (strings)
let partial = "";
let lastActivity = Date.now();
const segments = new Segments();  // survives reconnects: replayed finals are not shown twice

// lines of at most opt.width columns (a CJK character takes two), Chinese without spaces
const wrap = (text) => wrapText(text, opt.width);

function render() {
  const committed = wrap(lines.reduce(joinText, ""));
  const tail = opt.partial && partial ? wrap(joinText(committed.length ? committed.pop() : "", partial)) : [];
  const all = committed.concat(tail).slice(-opt.lines);
  box.replaceChildren(...all.map((t, i) => {
    const d = document.createElement("div");
    d.className = "line" + (tail.length && i >= all.length - tail.length ? " partial" : "");
    d.textContent = t;
    return d;
  }));
}

function fadeCheck() {
  if (opt.fade > 0 && Date.now() - lastActivity > opt.fade * 1000 && (lines.length || partial)) {
    for (const el of box.children) el.classList.add("faded");
    setTimeout(() => { if (Date.now() - lastActivity > opt.fade * 1000) { lines = []; partial = ""; render(); } }, 700);
  }
}
setInterval(fadeCheck, 250);

function onMessage(m) {
  if (m.type === "final") {
    if (!segments.isNewFinal(m)) return;
    lines.push(m.text); partial = ""; lines = lines.slice(-20);
    lastActivity = Date.now(); render();
  } else if (m.type === "partial") {
    segments.sawPartial(m);
    partial = m.text; if (m.text) lastActivity = Date.now(); render();
  } else if (m.type === "closed" && partial) {
    partial = ""; render();  // the speaker ended; the socket stays open for the next one
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
