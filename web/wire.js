// Wire protocol v1: the browser's copy of server/wire.py, kept by hand; tests/test_wire_js.py
// checks the two against each other (types, fields, paths), so they cannot drift.
export const LISTEN_PATH = "/v1/listen";
// a session id, as server/wire.py's SESSION_ID: one that is not reaches no route at all ("a/b",
// ".."), and a page would take the server's refusal for a network that is down
export const SESSION_ID = /^(?!\.+$)[A-Za-z0-9._-]{1,64}$/;
export const validSession = (session) => SESSION_ID.test(session);
export const eventsPath = (session) => `/v1/sessions/${encodeURIComponent(session)}/events`;
export const transcriptPath = (session, fmt) =>
  `/v1/sessions/${encodeURIComponent(session)}/transcript.${fmt}`;

// Client -> server control messages (binary frames carry PCM).
export const finalize = () => JSON.stringify({ type: "finalize" });
export const close = () => JSON.stringify({ type: "close" });
// before a stream's first audio: its first `seconds` were made final already, and `last` (a
// word, on the stream's clock) the last word shown final (server/wire.py)
export const said = (seconds, last = null) =>
  JSON.stringify(last ? { type: "said", seconds, last } : { type: "said", seconds });

// Server -> client message types and their fields; "name?" is a field that may be left out.
export const SERVER_TYPES = {
  ready: ["session", "model", "device", "compute_type", "sample_rate", "view_token?", "rejoined?"],
  partial: ["segment", "text", "start", "end"],
  final: ["segment", "text", "start", "end", "words?", "eou?"],
  utterance_end: ["end"],
  error: ["code", "message"],
  status: ["audio_seconds", "lag", "backlog?"],
  language: ["language", "probability", "start", "script?"],
  closed: ["reason", "audio_seconds"],
  channel: ["session", "instance", "said?"],
};

/** The message in `text`, or null for anything this page cannot use (not JSON, a type it does
 * not know, a required field missing): clients ignore what they do not understand, so a newer
 * server can add message types. */
export function decode(text) {
  let m;
  try { m = JSON.parse(text); } catch { return null; }
  if (!m || typeof m !== "object" || typeof m.type !== "string") return null;
  if (!Object.hasOwn(SERVER_TYPES, m.type)) return null;
  for (const f of SERVER_TYPES[m.type]) if (!f.endsWith("?") && !(f in m)) return null;
  return m;
}

export function wsUrl(path, params = {}) {
  const u = new URL(path, window.location.href);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, v);
  return u.toString();
}
