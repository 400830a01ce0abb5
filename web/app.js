// The live-captions page: speaker mode (microphone -> /v1/listen) and viewer mode (?view=ID).
import * as wire from "./wire.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const viewSession = params.get("view");
const token = params.get("token");  // only when the server asks for one
const withToken = (href) => (token ? `${href}${href.includes("?") ? "&" : "?"}token=${encodeURIComponent(token)}` : href);

const state = { ws: null, ctx: null, stream: null, node: null, session: null, sent: 0,
                stopping: false, reconnects: 0, lastFinalSegment: -1 };

function setStatus(text, cls) { const s = $("status"); s.textContent = text; s.className = `status ${cls}`; }
function say(text) { $("message").textContent = text; }

function showFinal(m) {
  if (m.segment <= state.lastFinalSegment) return;  // viewers may see a final twice on reconnect
  state.lastFinalSegment = m.segment;
  const f = $("finals");
  f.textContent += (f.textContent && !f.textContent.endsWith("\n") ? " " : "") + m.text + (m.eou ? "\n" : "");
  $("partial").textContent = "";
}

function showPartial(m) {
  const f = $("finals").textContent;
  $("partial").textContent = (m.text && f && !f.endsWith("\n") ? " " : "") + m.text;
}

function onMessage(ev) {
  let m;
  try { m = wire.decode(ev.data); } catch (e) { console.warn(e); return; }
  if (m.type === "ready") {
    if (state.session && state.session !== m.session) state.lastFinalSegment = -1;  // a new session
    state.session = m.session;
    showShare(m.session);
    setStatus(viewSession ? "watching" : "live", "live");
    say(`${m.model} on ${m.device}/${m.compute_type}`);
  } else if (m.type === "partial") {
    showPartial(m);
    if (!viewSession) $("latency").textContent = `lag ${Math.max(0, state.sent / 16000 - m.end).toFixed(1)} s`;
  } else if (m.type === "final") {
    showFinal(m);
  } else if (m.type === "error") {
    say(`error ${m.code}: ${m.message}`);
  } else if (m.type === "status") {
    if (!viewSession) $("latency").textContent = `lag ${m.lag.toFixed(1)} s`;
  } else if (m.type === "closed") {
    setStatus("stopped", "idle");
    say(`stopped (${m.reason}), ${m.audio_seconds.toFixed(1)} s of audio`);
  }
}

function showShare(session) {
  $("share").hidden = false;
  $("session").textContent = session;
  const view = new URL(location.href); view.search = ""; view.searchParams.set("view", session);
  $("share-link").href = view.toString();
  const overlay = new URL("overlay", location.href); overlay.searchParams.set("session", session);
  if (token) overlay.searchParams.set("token", token);
  $("overlay-link").href = overlay.toString();
  for (const fmt of ["srt", "vtt", "txt"]) {
    const a = $(`dl-${fmt}`);
    a.href = withToken(wire.transcriptPath(session, fmt));
    a.setAttribute("download", `${session}.${fmt}`);
  }
}

function connectSpeaker() {
  const lang = $("language").value;
  setStatus("connecting", "connecting");
  const ws = new WebSocket(wire.wsUrl(wire.LISTEN_PATH, {
    sample_rate: 16000, encoding: "pcm_s16le", language: lang, session: params.get("session"), token }));
  ws.binaryType = "arraybuffer";
  ws.onmessage = onMessage;
  ws.onopen = () => { state.reconnects = 0; };
  ws.onclose = () => {
    if (state.stopping || state.ws !== ws) return;
    // dropped: continue as a new session, a few times, then say it stopped
    if (state.reconnects < 5) {
      state.reconnects++;
      setStatus("reconnecting", "connecting");
      say("connection lost — reconnecting as a new session");
      setTimeout(() => { if (!state.stopping) state.ws = connectSpeaker(); }, 500 * state.reconnects);
    } else {
      setStatus("disconnected", "error");
      say("connection lost; captions stopped. Press Start to try again.");
      stop();
    }
  };
  return ws;
}

async function start() {
  $("start").disabled = true;
  state.stopping = false;
  try {
    state.stream = await navigator.mediaDevices.getUserMedia({
      // browser DSP (noise suppression, AGC) distorts speech more than Whisper minds noise
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
  } catch (e) {
    say(`no microphone: ${e.message}`); setStatus("no microphone", "error"); $("start").disabled = false; return;
  }
  state.ctx = new AudioContext();
  await state.ctx.audioWorklet.addModule("worklet.js");
  const src = state.ctx.createMediaStreamSource(state.stream);
  state.node = new AudioWorkletNode(state.ctx, "pcm16k");
  state.node.port.onmessage = ({ data }) => {
    $("level").value = Math.min(1, data.rms * 4);
    if (state.ws && state.ws.readyState === WebSocket.OPEN) {
      state.ws.send(data.pcm);
      state.sent += data.pcm.byteLength / 2;
    }
  };
  src.connect(state.node);
  state.ws = connectSpeaker();
  $("stop").disabled = false;
}

function stop() {
  state.stopping = true;
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(wire.close());
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
  if (state.ctx) state.ctx.close();
  state.stream = state.ctx = state.node = null;
  $("start").disabled = false;
  $("stop").disabled = true;
  $("level").value = 0;
}

function watch(session) {
  document.body.classList.add("viewer");
  setStatus("connecting", "connecting");
  showShare(session);
  const ws = new WebSocket(wire.wsUrl(wire.eventsPath(session), { token }));
  ws.onmessage = onMessage;
  ws.onopen = () => {  // the server replays every final on connect
    setStatus("watching", "live");
    $("finals").textContent = ""; $("partial").textContent = ""; state.lastFinalSegment = -1;
  };
  ws.onclose = (e) => {
    if (e.code === 1000) return;
    setStatus("reconnecting", "connecting");
    setTimeout(() => watch(session), 1000);
  };
}

if (viewSession) {
  watch(viewSession);
} else {
  $("start").onclick = start;
  $("stop").onclick = stop;
}
window.whisperwire = { state };
