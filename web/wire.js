// Wire protocol v1 — the browser's mirror of server/wire.py. Keep the two in step.
export const LISTEN_PATH = "/v1/listen";
export const eventsPath = (session) => `/v1/sessions/${encodeURIComponent(session)}/events`;
export const transcriptPath = (session, fmt) =>
  `/v1/sessions/${encodeURIComponent(session)}/transcript.${fmt}`;

// Client -> server control messages (binary frames carry PCM).
export const finalize = () => JSON.stringify({ type: "finalize" });
export const close = () => JSON.stringify({ type: "close" });

// Server -> client message types and their fields.
export const SERVER_TYPES = {
  ready: ["session", "model", "device", "compute_type", "sample_rate"],
  partial: ["segment", "text", "start", "end"],
  final: ["segment", "text", "start", "end", "words", "eou"],
  error: ["code", "message"],
  status: ["audio_seconds", "lag"],
  closed: ["reason", "audio_seconds"],
};

export function decode(text) {
  const m = JSON.parse(text);
  if (!m || typeof m.type !== "string" || !(m.type in SERVER_TYPES)) {
    throw new Error(`unknown message ${String(text).slice(0, 80)}`);
  }
  return m;
}

export function wsUrl(path, params = {}) {
  const u = new URL(path, window.location.href);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, v);
  return u.toString();
}
