// The live-captions page: speaker mode (microphone -> /v1/listen) and viewer mode (?view=ID).
import * as wire from "./wire.js";
import { backoff, follow, Segments } from "./connection.js";
import { explainClosed, explainError, explainMic } from "./explain.js";
import { captionLang, detectedLang, glued, leadingMarks, needsSpace } from "./text.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const viewSession = params.get("view");
const token = params.get("token");  // ours, when the server asks for one; may be a speak token
// a speaker's page retries for as long as the server may hold its dropped connection's
// session (its idle timeout, 60 s: a connection that died silently) and then some: 85 s
const SPEAKER_TRIES = 12;
// speech held while the page (re)connects, sent once the server takes it: 2 min of 16 kHz s16
const HELD_MAX_BYTES = 16000 * 2 * 120;
// as long as a speaker's page tries to come back (85 s): viewers gave up after 45 s, while the
// speaker was still coming back, and were left at "Reload the page"
const VIEWER_TRIES = SPEAKER_TRIES;
// refusals that pass when a server restarts: worth retrying when we were connected before
const TRANSIENT = ["shutting_down", "not_ready", "server_full"];
// `closed` reasons that mean the server went, not the session: the page comes back
const GONE = ["server_shutdown", "replica_lost"];

const state = {
  link: null, ctx: null, stream: null, node: null,
  session: params.get("session"),
  // what links to this session carry: the view token the server gave the speaker (never the
  // speaker's own token, which could speak), or in viewer mode the token the viewer came with
  viewToken: viewSession ? token : null,
  joined: false,  // this page was in its session before: a refusal now may pass in a moment
  live: null,  // the speaker socket the server took (`ready`): audio goes there
  held: [], heldBytes: 0,  // microphone audio captured while no socket was live
  segments: new Segments(),
  instance: null,  // the channel's life (transcript.json): a new one after a server restart
  caught: null,  // a speaker's messages held while its catch-up reads the channel
  stopping: false,  // Stop was pressed: send what is held, then close
  finishing: null,  // ... and the socket `close` went to
  // audio sent lately (to say again what a drop lost), how much of it on this connection,
  // where this connection began on the channel's clock, and its last final's end (own clock)
  sent: [], sentBytes: 0, sentOnConn: 0, connOffset: null, joinedAt: null, chOffset: null,
  finalTo: null,  // where the channel is final to, on its clock, as far as this page knows
  mustSay: false,  // `said` goes even at 0 (a new stream on a channel that goes on)
  said: 0,  // seconds at the start of the held audio that were made final already
  lastWord: null,  // the last final word shown, on the channel's clock
  // a restarted server's new stream: where its said seconds end (the channel's clock), and
  // the last word shown if it ends there, sent with `said` (the server has no channel to
  // read it from: client/rejoin.py's said_last)
  saidTo: null, saidWord: null,
  // the captions' language (a BCP 47 tag, null while unknown): what Start asked for, what the
  // server detected, or what a viewer link says
  lang: viewSession ? captionLang(params.get("lang")) : null,
  modelLanguages: [],  // what the loaded model speaks (one: "model default" is that one)
};
const BYTES_PER_S = 16000 * 2;
// a restarted server hears the audio after the last final with this much before it, as context
// (`said`, as client/rejoin.py's LEAD_S): started at the final's end, its first word came clipped
const LEAD_S = 1.0;

function setStatus(text, cls) { const s = $("status"); s.textContent = text; s.className = `status ${cls}`; }
function say(text) { $("message").textContent = text; }
const context = () => ({ session: viewSession || state.session, viewer: Boolean(viewSession),
                         token: Boolean(token),
                         language: $("language").selectedOptions[0]?.textContent });

// Caption text carries its language, the page's own words stay "en": Chinese in an element
// marked English (or Japanese) is drawn with whatever CJK font the locale picks, Japanese
// glyph shapes and punctuation placed as in Japanese. Finals go into runs (spans) of one
// language each, so text shown before a change of language keeps its own.
function setCaptionLang(lang) {
  state.lang = lang;
  if (lang) $("partial").lang = lang; else $("partial").removeAttribute("lang");
}

/** The finals' last run when it is in the captions' language, else a new one. */
function finalsRun() {
  const f = $("finals");
  const last = f.lastChild;
  if (last && last.nodeName === "SPAN" && last.getAttribute("lang") === state.lang) return last;
  const run = document.createElement("span");
  if (state.lang) run.lang = state.lang;
  f.append(run);
  return run;
}

// Finals are appended, never rewritten: the finals region is the page's live region, and
// screen readers announce what is added to it. The partial stays outside it.
function appendFinal(m) {
  const f = $("finals");
  let text = m.text;
  const [marks, rest] = leadingMarks(text);
  if (marks && f.textContent.endsWith("\n")) {
    // closing marks go on the line an utterance's end closed: no line starts with "，" (the
    // one rewrite of shown text: a mark added at a line's end)
    const node = lastText(f);
    if (node && node.data.endsWith("\n")) {
      node.data = node.data.slice(0, -1) + marks + "\n";
      text = rest.trimStart();
    }
  }
  if (marks && !text) { $("partial").textContent = ""; return; }  // (marks only, placed above)
  const sep = f.textContent && !f.textContent.endsWith("\n") && !glued(m)
    && needsSpace(f.textContent, text) ? " " : "";
  finalsRun().append(document.createTextNode(sep + text + (m.eou ? "\n" : "")));
  $("partial").textContent = "";
}

// the last text node of the finals that holds text
function lastText(el) {
  let last = null;
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) if (walk.currentNode.data) last = walk.currentNode;
  return last;
}

function endLine() {
  const f = $("finals");
  if (f.textContent && !f.textContent.endsWith("\n")) finalsRun().append(document.createTextNode("\n"));
  $("partial").textContent = "";
}

function showPartial(m) {
  const f = $("finals").textContent;
  $("partial").textContent = (m.text && f && !f.endsWith("\n") && needsSpace(f, m.text) ? " " : "") + m.text;
}

function showCaption(m) {
  if (m.type === "final" && state.segments.isNewFinal(m)) {
    appendFinal(m);
    if (state.connOffset !== null) {
      state.finalTo = Math.max(state.finalTo ?? 0, state.connOffset + m.end);
      const w = m.words && m.words.length ? m.words[m.words.length - 1] : null;
      state.lastWord = w && { ...w, start: state.connOffset + w.start, end: state.connOffset + w.end };
    }
  }
  // the last final shown, replayed closing its utterance: its utterance_end came while the
  // page was away
  else if (m.type === "final" && m.eou && m.segment === state.segments.last) endLine();
  else if (m.type === "partial") { state.segments.sawPartial(m); showPartial(m); }
  // every word of the utterance was final before the speaker stopped, so no final carried
  // its end: the line breaks here as after a final with `eou`
  else if (m.type === "utterance_end") endLine();
}

/** The language menu and the tasks come from the loaded model (GET /v1/models), so the page
 * never offers a language the model would refuse. Languages are named in their own tongue. */
async function loadModelMenu() {
  let model;
  try {
    const r = await fetch("/v1/models", token ? { headers: { Authorization: `Bearer ${token}` } } : {});
    model = (await r.json()).data[0];
  } catch { return; }  // an older server: "model default" still works
  const langs = model.languages || [];
  state.modelLanguages = langs;
  const sel = $("language");
  if (langs.length > 1) sel.append(new Option("detect", "auto"));
  for (const code of langs) {
    sel.append(new Option(languageName(code), code));
    // Chinese in traditional characters (the server reads "zh-TW" so, as every API here does)
    if (code === "zh") sel.append(new Option("中文（繁體）", "zh-TW"));
  }
  $("task-label").hidden = !(model.tasks || []).includes("translate");
}

// names the browser's own data may lack in their own tongue (Chromium named "yue" "Cantonese"
// and "ba" "ba")
const OWN_NAMES = { yue: "粵語", ba: "башҡорт теле", haw: "ʻŌlelo Hawaiʻi", jw: "Basa Jawa" };

function languageName(code) {
  if (OWN_NAMES[code]) return OWN_NAMES[code];
  try { return new Intl.DisplayNames([code], { type: "language" }).of(code) || code; }
  catch { return code; }
}

function showShare(session) {
  $("share").hidden = false;
  $("session").textContent = session;
  const t = state.viewToken;
  const view = new URL(location.href); view.search = ""; view.searchParams.set("view", session);
  if (t) view.searchParams.set("token", t);
  const overlay = new URL("overlay", location.href); overlay.searchParams.set("session", session);
  if (t) overlay.searchParams.set("token", t);
  // (the viewers' captions in the language this page knows; a viewer's socket never says it)
  for (const u of [view, overlay]) if (state.lang) u.searchParams.set("lang", state.lang);
  $("share-link").href = view.toString();
  $("overlay-link").href = overlay.toString();
  for (const fmt of ["srt", "vtt", "txt"]) {
    const a = $(`dl-${fmt}`);
    const href = wire.transcriptPath(session, fmt);
    a.href = t ? `${href}?token=${encodeURIComponent(t)}` : href;
    a.setAttribute("download", `${session}.${fmt}`);
  }
}

/** The server said no: say why, in a sentence, and stop (a refusal is never retried). */
function refused(err, code) {
  setStatus("error", "error");
  say((err ? explainError(err, context()) : `The server refused the connection (close code ${code}).`)
      + unsent());
  if (!viewSession) releaseMic();
}

/** What a page that gives up leaves unsent, in a sentence ("" if nothing). */
function unsent() {
  const held = state.heldBytes / BYTES_PER_S;
  return held >= 0.05 ? ` ${held.toFixed(1)} s of speech said meanwhile was not sent.` : "";
}

function onSpeakerMessage(m, ws, started) {
  if (m.type === "ready") {
    const again = state.joined && state.session === m.session;
    state.live = ws;  // (what was said while (re)connecting goes first, after the catch-up)
    state.session = m.session;
    state.viewToken = m.view_token || null;
    state.joined = true;
    catchUp(m.session, again, m.rejoined === true);
    showShare(m.session);
    setStatus("live", "live");
    say(`${m.model} on ${m.device}/${m.compute_type}`);
  } else if (m.type === "language") {
    say(`Language detected: ${languageName(m.language)}`);
    // (a translation is English whatever was spoken)
    if ($("task").value !== "translate") setCaptionLang(detectedLang(state.lang, m.language, m.script));
    showShare(state.session);
  } else if (m.type === "error") {
    if (started) say(explainError(m, context()));  // before `ready` it is a refusal: see refused()
  } else if (m.type === "status") {
    $("latency").textContent = `lag ${m.lag.toFixed(1)} s`;
  } else if (m.type === "closed") {
    // the server ended the session on purpose; only a server restart, or a Ray replica that
    // lost the session (another one holds the channel), is worth following (unless this page
    // asked for the end: Stop, its held speech sent)
    if (!GONE.includes(m.reason) || state.finishing) { state.link.stop(); releaseMic(); }
    else if (ws === state.live) state.live = null;  // (a catch-up under way stops there)
    setStatus("stopped", "idle");
    say(`${explainClosed(m.reason)} ${m.audio_seconds.toFixed(1)} s of audio.`);
  } else if (state.caught) {
    state.caught.push(m);  // after the finals the catch-up brings
  } else {
    showCaption(m);
  }
}

/** A speaker's socket never replays finals, but after a drop the server made finals of the
 * dropped connection's last audio that only the channel has (`transcript.json`; back within
 * the server's rejoin grace, the same stream goes on and made those it decoded meanwhile):
 * shown once, before the new connection's, when the channel is the same life of the id
 * (`instance`); a restarted server's new channel numbers its finals from 0 again, so the count
 * starts over. */
async function catchUp(session, again, goesOn) {
  const ws = state.live;
  state.caught = [];
  // (`said` stays while the held audio still begins with its lead: a connection that went
  // before sending it leaves both for the next; a first connection has none)
  if (!again) { state.said = 0; state.mustSay = false; }
  let tr = null;
  try {
    const t = state.viewToken || token;
    const r = await fetch(wire.transcriptPath(session, "json"),
                          t ? { headers: { Authorization: `Bearer ${t}` } } : {});
    if (r.ok) tr = await r.json();
  } catch { tr = null; }
  if (state.live !== ws) return;  // the connection went meanwhile, or the page stopped
  const sentOld = state.sentOnConn / BYTES_PER_S;  // audio the dropped connection sent
  const same = again && tr && state.instance && tr.instance === state.instance;
  if (same) {
    appendChannelFinals(tr);
    // back after the server's rejoin grace, this connection is the channel's next speaker
    // (its turn starts at the next final): a line of its own, as a viewer has it
    if ((tr.turns || []).includes(tr.finals.length)) endLine();
    // what was in flight when it dropped: sent, never heard; and when the server's stream
    // is a new one on the channel (`ready` without `rejoined`: a Ray replica gone, or back
    // after the server's grace), all after where the channel is final to, and a second
    // before it as context, as on a restarted server (client/rejoin.py counts the same)
    if (state.connOffset !== null) {
      if (goesOn || sentOld <= 0) {  // (nothing sent: a lead not sent yet stays)
        sayAgain(state.connOffset + sentOld - tr.offset);
      } else {
        // (or the last final known, which a restarted server's channel does not hold; a
        // lead sent only in part is still the held audio's front, `unheard` below 0)
        const resume = Math.max(resumeAt(tr) ?? 0, state.finalTo ?? 0);
        const unheard = state.connOffset + sentOld - resume;
        const lead = Math.min(LEAD_S, Math.max(0, resume - state.connOffset));
        state.said = Math.max(0, sayAgain(unheard + lead) - unheard);
        state.mustSay = true;  // (0 too: the stream's 0 goes where the channel is final)
      }
    }
    state.finalTo = Math.max(state.finalTo ?? 0, resumeAt(tr) ?? 0);
  } else if (again) {
    // a restarted server lost what it had not made final: all after the last final shown,
    // and a second before it (within the dropped connection) as context, said to be final
    if (tr && state.instance) {
      // (the last final known, on the dropped connection's clock: shown, or said before it)
      const fin = state.finalTo === null || state.connOffset === null ? null
        : Math.max(0, state.finalTo - state.connOffset);
      const unheard = sentOld - (fin ?? 0);
      const lead = fin === null ? 0 : Math.min(LEAD_S, fin);
      state.said = Math.max(0, sayAgain(unheard + lead) - unheard);
      const w = state.lastWord;
      state.saidTo = state.finalTo;
      state.saidWord = w && Math.abs(w.end - state.finalTo) < 1e-6 ? w : null;
    }
    state.finalTo = state.said;  // (the new channel's clock: its first seconds said)
    state.segments = new Segments();
    if (tr && tr.finals.length) state.segments.last = tr.finals[tr.finals.length - 1].segment;
  } else {
    // a page that goes on in a channel (reloaded mid-session, or a session id used before)
    // shows what it holds so far, as its Download links and a viewer have it
    // (Start again on the same channel: all of it once, not twice)
    state.segments = new Segments();
    if (tr && tr.finals.length) {
      $("finals").replaceChildren();
      appendChannelFinals(tr);
      endLine();  // this page is the channel's next speaker: a line of its own
    }
    state.finalTo = tr ? resumeAt(tr) : null;
  }
  state.instance = tr ? tr.instance : null;
  // (on a channel with a clock before the stream, `said` puts the stream's 0 that long
  // before where the channel is final to: server/hub.py's Hub.said)
  state.joinedAt = tr ? resumeAt(tr) : null;
  state.chOffset = tr ? tr.offset : null;
  state.connOffset = connZero();
  state.sentOnConn = 0;
  const held = state.caught;
  state.caught = null;
  const last = state.segments.last;
  for (const m of held) {
    // it may have said meanwhile what the channel just gave (a partial of it would make
    // its final new again)
    if (tr && (m.type === "final" || m.type === "partial") && m.segment <= last) continue;
    showCaption(m);
  }
  if (state.stopping && ws.readyState === WebSocket.OPEN) finish(ws);
  else sendAudio(null);
}

/** The channel's finals not shown yet, each speaker's turn on a line of its own, as the
 * Download links and a viewer have them (`turns`: the index of each later speaker's first
 * final; the last final before one may have gone out without `eou`, and two speakers' words
 * made one line). */
function appendChannelFinals(tr) {
  const turns = new Set(tr.turns || []);
  tr.finals.forEach((f, i) => {
    if (!state.segments.isNewFinal(f)) return;
    if (turns.has(i)) endLine();
    appendFinal(f);
    // (the last word shown, which `said` tells a restarted server: the channel's clock)
    if (f.words && f.words.length) state.lastWord = f.words[f.words.length - 1];
  });
}

/** The last `seconds` of audio sent, put back in front of the held audio; how much there was. */
function sayAgain(seconds) {
  let n = Math.max(0, Math.floor(seconds * BYTES_PER_S / 2) * 2);
  const back = [];
  while (n > 0 && state.sent.length) {
    let c = state.sent.pop();
    state.sentBytes -= c.byteLength;
    if (c.byteLength > n) {
      state.sent.push(c.slice(0, c.byteLength - n));
      state.sentBytes += c.byteLength - n;
      c = c.slice(c.byteLength - n);
    }
    back.unshift(c);
    n -= c.byteLength;
  }
  state.held = back.concat(state.held);
  const bytes = back.reduce((a, c) => a + c.byteLength, 0);
  state.heldBytes += bytes;
  return bytes / BYTES_PER_S;
}

function connectSpeaker() {
  setStatus("connecting", "connecting");
  // what Start asked for, kept for every reconnect: a stream the server holds for the page
  // after a drop takes it back only with the same (and the menus are locked while live)
  const asked = { language: $("language").value, task: $("task").value };
  setCaptionLang(askedLang(asked));
  state.link = follow({
    url: () => wire.wsUrl(wire.LISTEN_PATH, { sample_rate: 16000, encoding: "pcm_s16le",
      ...asked, session: state.session, token }),
    tries: SPEAKER_TRIES,
    onMessage: onSpeakerMessage,
    onRefused: (err, code, attempt) => {
      // after a drop the server may still be finishing our old connection for a moment
      const again = err && (err.code === "session_taken" || TRANSIENT.includes(err.code));
      if (state.joined && again) return backoff(attempt);
      refused(err, code);
      return null;
    },
    onDrop: (attempt) => {
      setStatus("reconnecting", "connecting");
      // a partial (it may still change) and a lag from before the drop are not current
      $("partial").textContent = ""; $("latency").textContent = "";
      say(state.joined
        ? `Connection lost; reconnecting to the same session (try ${attempt} of ${SPEAKER_TRIES}).`
        : `Cannot reach the server; trying again (${attempt} of ${SPEAKER_TRIES}).`);
    },
    onGiveUp: (code, err) => {
      setStatus("disconnected", "error");
      say((err ? explainError(err, context())
        : "Connection lost; captions stopped. Press Start to try again.") + unsent());
      releaseMic();
    },
  });
}

/** The captions' language from what Start asks for: English for a translation, the model's
 * only language for "model default", null until the server detects it (auto, or default on
 * a multilingual model). */
function askedLang(asked) {
  if (asked.task === "translate") return "en";
  if (!asked.language && state.modelLanguages.length === 1) return captionLang(state.modelLanguages[0]);
  return captionLang(asked.language);
}

/** The controls that choose a session's parameters, locked from Start until it ends. */
function lockChoices(locked) {
  for (const id of ["language", "task"]) $(id).disabled = locked;
}

async function start() {
  $("start").disabled = true;
  lockChoices(true);
  state.joined = false;
  try {
    if (!navigator.mediaDevices) throw new Error("insecure");  // (explainMic says why)
    state.stream = await navigator.mediaDevices.getUserMedia({
      // browser DSP (noise suppression, AGC) distorts speech more than Whisper minds noise
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
  } catch (e) {
    say(explainMic(navigator.mediaDevices ? e : null)); setStatus("no microphone", "error");
    $("start").disabled = false; lockChoices(false); return;
  }
  state.ctx = new AudioContext();
  await state.ctx.audioWorklet.addModule("worklet.js");
  const src = state.ctx.createMediaStreamSource(state.stream);
  state.node = new AudioWorkletNode(state.ctx, "pcm16k");
  state.node.port.onmessage = ({ data }) => {
    $("level").value = Math.min(1, data.rms * 4);
    sendAudio(data.pcm);
  };
  src.connect(state.node);
  connectSpeaker();
  $("stop").disabled = false;
}

/** Where the channel is final to: its offset (the last stream's end), or its last final's
 * end if later; null for a channel whose clock has not run (server/hub.py's resume_at). */
function resumeAt(tr) {
  if (!(tr.offset > 0 || tr.finals.length)) return null;
  return Math.max(tr.offset, tr.finals.length ? tr.finals[tr.finals.length - 1].end : 0);
}

/** The last word shown, on the new stream's clock, for `said` to a restarted server. */
function saidLast() {
  const w = state.saidWord;
  if (!w || state.saidTo === null || !(state.said > 0)) return null;
  const zero = state.saidTo - state.said;  // (the new stream's 0, on the channel's clock)
  if (w.end - zero <= 0) return null;  // (let go from the held audio's front with the lead)
  const r = (x) => Number(x.toFixed(3));
  return { word: w.word, start: r(Math.max(0, w.start - zero)), end: r(w.end - zero),
           probability: w.probability };
}

/** Where this connection's 0 lies on the channel's clock once `said` is sent. */
function connZero() {
  if (state.chOffset === null) return null;
  if (state.joinedAt === null || !(state.said > 0 || state.mustSay)) return state.chOffset;
  return Math.max(0, state.joinedAt - state.said);
}

/** Audio to the live socket; while there is none (connecting, or reconnecting after a drop)
 * it is held, up to HELD_MAX_BYTES (the oldest goes first), and sent when the server takes the
 * page again: a network blip loses no speech. Before, it was sent to no one. */
function sendAudio(pcm) {
  const ws = state.link && state.link.socket();
  if (ws && ws === state.live && ws.readyState === WebSocket.OPEN && !state.caught) {
    if (state.said || state.mustSay) {
      ws.send(wire.said(Number(state.said.toFixed(3)), saidLast()));
      state.said = 0; state.mustSay = false; state.saidWord = null;
    }
    for (const chunk of state.held) send(ws, chunk);
    state.held = []; state.heldBytes = 0;
    if (pcm) send(ws, pcm);
    return;
  }
  if (!pcm) return;
  state.held.push(pcm); state.heldBytes += pcm.byteLength;
  while (state.heldBytes > HELD_MAX_BYTES) {
    const gone = state.held.shift().byteLength;
    state.heldBytes -= gone;
    const pending = state.said > 0 || state.mustSay;  // (`said` not sent yet)
    state.said = Math.max(0, state.said - gone / BYTES_PER_S);  // (its context went first)
    if (pending) state.connOffset = connZero();
  }
}

function send(ws, chunk) {
  ws.send(chunk);
  state.sent.push(chunk); state.sentBytes += chunk.byteLength; state.sentOnConn += chunk.byteLength;
  while (state.sentBytes > HELD_MAX_BYTES) state.sentBytes -= state.sent.shift().byteLength;
}

/** The Stop button: the microphone stops at once, and nothing said before it is lost. With the
 * page live, the server answers `close` with the last finals and `closed`. While the page is
 * catching up or reconnecting, it holds speech the server has not had: it goes on until the
 * server takes it, then closes (before, Stop threw it away). A second press gives it up. */
function stop() {
  if (state.stopping) { giveUpHeld(); return; }
  state.stopping = true;
  stopMic();
  const ws = state.link && state.link.socket();
  if (ws && ws === state.live && ws.readyState === WebSocket.OPEN && !state.caught) finish(ws);
  else if (state.link && (state.caught || state.heldBytes)) {
    const held = state.heldBytes / BYTES_PER_S;
    const what = held >= 0.05
      ? `the ${held.toFixed(1)} s of speech said while the connection was down`
      : "what the server has not had yet";
    say(`Stopping: sending ${what}. Press Stop again to drop it.`);
  } else giveUpHeld();
}

/** Everything held is sent: end the session. The server answers with its last finals and
 * `closed`; a socket that goes before that ends it all the same. */
function finish(ws) {
  if (state.link) state.link.stop();
  sendAudio(null);
  ws.send(wire.close());
  state.finishing = ws;
  ws.addEventListener("close", () => {
    if (state.finishing !== ws) return;  // (`closed` came first)
    setStatus("stopped", "idle");
    releaseMic();
  });
  $("stop").disabled = true;
}

function giveUpHeld() {
  const ws = state.link && state.link.socket();
  if (state.link) state.link.stop();
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(wire.close());
  setStatus("stopped", "idle");
  if (state.heldBytes) say(`Stopped.${unsent()}`);
  releaseMic();
}

/** No more audio captured; what is held stays to be sent. */
function stopMic() {
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
  if (state.ctx) state.ctx.close();
  state.stream = state.ctx = state.node = null;
  $("level").value = 0;
}

function releaseMic() {
  stopMic();
  state.held = []; state.heldBytes = 0; state.live = null; state.caught = null;
  state.stopping = false; state.finishing = null;
  state.sent = []; state.sentBytes = 0; state.sentOnConn = 0;
  $("start").disabled = false;
  $("stop").disabled = true;
  lockChoices(false);
}

function watch(session) {
  document.body.classList.add("viewer");
  if (!wire.validSession(session)) {
    // ("a/b", "..": no route takes it, and the server's refusal read as a network down:
    // "Cannot reach the server; trying again")
    refused({ code: "bad_session", message: "" }, 1008);
    return;
  }
  setStatus("connecting", "connecting");
  showShare(session);
  state.link = follow({
    url: () => wire.wsUrl(wire.eventsPath(session), { token }),
    started: (m) => m.type !== "error",  // viewers get no `ready`: any event means we are in
    onOpen: () => setStatus("watching", "live"),
    tries: VIEWER_TRIES,
    onMessage: (m) => {
      if (m.type === "error") return;  // a refusal, said when the socket closes
      if (m.type === "closed") {  // the socket stays open: a speaker may continue the session
        endLine();  // the next speaker starts a line (the last final may have had no eou)
        setStatus("speaker stopped", "idle");
        say("The speaker stopped; captions continue here if they start again.");
        return;
      }
      // `channel` comes first on every connection the server takes (after a drop too): the
      // page is in, and a "reconnecting" said meanwhile is over
      if (m.type === "channel" || !state.joined || $("status").textContent !== "watching") {
        state.joined = true;
        setStatus("watching", "live");
        say("");
      }
      if (m.type === "channel") state.segments.channel(m);
      // (each speaker's captions' language; the link's lang stands till it comes)
      else if (m.type === "language") setCaptionLang(detectedLang(state.lang, m.language, m.script));
      else showCaption(m);
    },
    onRefused: (err, code, attempt) => {
      // after a server restart the speaker's page brings the session back within seconds
      const again = err && (err.code === "unknown_session" || TRANSIENT.includes(err.code));
      if (state.joined && again) return backoff(attempt);
      if (err && err.code === "unknown_session") {
        // a link opened before its speaker starts (as the overlay does, it waits): tries
        // afresh every 3 s, so the waiting never counts as failures
        setStatus("waiting", "connecting");
        say(`${explainError(err, context())} This page waits for it and shows it when it starts.`);
        setTimeout(() => watch(session), 3000);
        return null;
      }
      refused(err, code);
      return null;
    },
    onDrop: (attempt) => {
      setStatus("reconnecting", "connecting");
      // a partial (it may still change) and a lag from before the drop are not current
      $("partial").textContent = ""; $("latency").textContent = "";
      say(state.joined ? `Connection lost; reconnecting (try ${attempt} of ${VIEWER_TRIES}).`
        : `Cannot reach the server; trying again (${attempt} of ${VIEWER_TRIES}).`);
    },
    onGiveUp: (code, err) => {
      setStatus("disconnected", "error");
      say(err ? explainError(err, context()) : "Connection lost. Reload the page to try again.");
    },
  });
}

if (viewSession) {
  setCaptionLang(state.lang);  // (the viewer link's)
  watch(viewSession);
} else {
  $("start").onclick = start;
  $("stop").onclick = stop;
  loadModelMenu();
}
window.whisperwire = { state };
