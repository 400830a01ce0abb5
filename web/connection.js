// One WebSocket that comes back after drops and stays down after refusals, for the page and the
// overlay. A refusal is the server saying no: an `error` before the stream started, or close code
// 1003 (unsupported) or 1008 (policy). Retrying cannot change its mind, so the owner is told why
// and decides. Any other close (1006 network, 1001 going away, 1012 restart, even 1000) is a drop,
// retried with backoff, at most `tries` times in a row.
import * as wire from "./wire.js";

export const REFUSAL_CODES = [1003, 1008];

/** Exponential backoff: firstMs, twice that, ... capped at maxMs. */
export const backoff = (attempt, firstMs = 500, maxMs = 10000) =>
  Math.min(maxMs, firstMs * 2 ** Math.max(0, attempt - 1));

/**
 * Connect to `url()` (asked again on every attempt) and keep following.
 *   started(m)          true for the message that shows the server took us (default: `ready`)
 *   onOpen(ws)          the socket opened (the server may still refuse us)
 *   onMessage(m, ws, started)  every decoded message (unknown types never get here); started:
 *                       whether this connection saw its `started` message yet
 *   onRefused(err, code, attempt)  the server said no (`err` may be null): return a delay in ms
 *                       to try again anyway, or null to stop
 *   onDrop(attempt, ms, code)      a drop; the next try is in `ms`
 *   onGiveUp(code, err) `tries` failed connections in a row (err: the last one's refusal, if
 *                       it was one that onRefused chose to retry); nothing more happens
 * A connection that started and stayed up `upMs` counts as good and clears the failure count;
 * one that fails sooner counts, so a server that takes and drops us cannot make us loop forever.
 * Returns { stop(), socket() }: stop() ends the following (the open socket is left to its owner).
 */
export function follow(options) {
  const o = { started: (m) => m.type === "ready", onOpen() {}, onRefused: () => null, onDrop() {},
              onGiveUp() {}, tries: 5, delay: (n) => backoff(n), upMs: 10000, ...options };
  let ws = null, stopped = false, failures = 0, timer = null;

  function connect() {
    timer = null;
    if (stopped) return;
    let sock;
    try {
      sock = new WebSocket(o.url());
    } catch (e) {  // a malformed address: trying again cannot fix it
      console.error(e); stopped = true; o.onGiveUp(0, null); return;
    }
    const conn = { refusal: null, startedAt: 0 };
    sock.binaryType = "arraybuffer";
    sock.onmessage = (ev) => {
      const m = wire.decode(ev.data);
      if (!m) return;
      if (!conn.startedAt && m.type === "error") conn.refusal = m;
      else if (!conn.startedAt && o.started(m)) conn.startedAt = Date.now();
      o.onMessage(m, sock, Boolean(conn.startedAt));
    };
    sock.onopen = () => o.onOpen(sock);
    sock.onclose = (e) => closed(sock, conn, e.code);
    ws = sock;
  }

  function closed(sock, conn, code) {
    if (stopped || ws !== sock) return;
    ws = null;
    if (conn.startedAt && Date.now() - conn.startedAt >= o.upMs) failures = 0;
    failures++;
    const refused = conn.refusal !== null || REFUSAL_CODES.includes(code);
    const ms = refused ? o.onRefused(conn.refusal, code, failures) : o.delay(failures);
    if (ms === null || ms === undefined) { stopped = true; return; }
    if (failures > o.tries) { stopped = true; o.onGiveUp(code, conn.refusal); return; }
    if (!refused) o.onDrop(failures, ms, code);
    timer = setTimeout(connect, ms);
  }

  connect();
  return {
    stop() { stopped = true; if (timer) clearTimeout(timer); timer = null; },
    socket: () => ws,
  };
}

/**
 * Which finals are new. After a reconnect the server replays a session's finals; segment
 * numbers only grow within a life of a channel (a channel continues them across speakers), so
 * a final at or below the last one shown is a replay. A viewer's `channel` message names the
 * life: another one (the server restarted, the channel expired and was reopened) numbers its
 * finals from 0 again, so the count starts over. (A partial at or below the last final shown
 * means the same, for a server that sends no `channel`.)
 */
export class Segments {
  constructor() { this.last = -1; this.instance = null; }
  channel(m) {
    if (this.instance !== null && m.instance !== this.instance) this.last = -1;
    this.instance = m.instance;
  }
  isNewFinal(m) {
    if (m.segment <= this.last) return false;
    this.last = m.segment;
    return true;
  }
  sawPartial(m) { if (m.segment <= this.last) this.last = m.segment - 1; }
}
