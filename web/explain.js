// The server's `error` codes and `closed` reasons (see the README) as sentences a person can act
// on. ctx: { session, language (what the user picked, as shown), viewer (true on a viewer page),
// token (true when the page was opened with one) }.

export function explainError(err, ctx = {}) {
  const s = ctx.session ? `Session “${ctx.session}”` : "This session";
  switch (err.code) {
    case "bad_language":
      return `The server's model does not know ${ctx.language || "that language"}. `
        + "Choose another language, or “model default”.";
    case "session_taken":
      return `${s} is already live in another tab or on another device. `
        + "Stop it there, or open this page with another ?session= name.";
    case "unknown_session":
      return `${s} does not exist on this server: it has not started yet, or it ended long `
        + "enough ago to be dropped. Check the link.";
    case "unauthorized":
      return ctx.viewer
        ? "This link needs a valid token. Ask the speaker for a new viewer link."
        : ctx.token
          ? "The server did not accept this page's token: it is wrong, or it only lets you "
            + "watch. Open this page with the speak token given by whoever runs it."
          : "The server needs a token. Open this page with ?token=… as given by whoever runs it.";
    case "server_full":
      return "The server is full: every session is in use. Try again in a while.";
    case "not_ready":
      return "The server is still loading its model. Try again in a moment.";
    case "too_many_viewers":
      return `${s} already has as many viewers as the server allows. Try again later.`;
    case "forbidden_origin":
      return "The server does not take connections from this page's address (its --allow-origin).";
    case "shutting_down":
      return "The server is shutting down.";
    case "bad_session":
      return `“${ctx.session}” cannot name a session: use up to 64 letters, digits, “.”, “-”, “_”.`;
    default:
      return `The server said: ${err.message || err.code} (${err.code}).`;
  }
}

export function explainClosed(reason) {
  switch (reason) {
    case "client_close": return "Stopped.";
    case "idle_timeout": return "Stopped: no audio reached the server for too long.";
    case "max_duration": return "Stopped: the session reached the server's time limit.";
    case "too_many_errors": return "Stopped: the server got too many bad messages from this page.";
    case "slow_consumer": return "Stopped: this page could not keep up with the captions.";
    case "server_shutdown": return "The server is shutting down.";
    case "replica_lost": return "This server lost the session; reconnecting.";
    default: return `Stopped (${reason}).`;
  }
}

/** Why the page got no microphone, as a sentence a person can act on. e: what getUserMedia
 * threw, or null where the browser offers no microphone to the page at all (mediaDevices is
 * only there in a secure context: https, or localhost). */
export function explainMic(e) {
  if (!e) {
    return "This page is not secure (not https, nor localhost), and browsers give such pages "
      + "no microphone. Open it over https, or as localhost on this machine, then press Start.";
  }
  switch (e.name) {
    case "NotAllowedError":
    case "SecurityError":
      return "The microphone is blocked for this page. Allow it (the microphone or lock icon in "
        + "the address bar, or the browser's site settings), then press Start.";
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone found. Plug one in or choose one in the system's sound settings, "
        + "then press Start.";
    case "NotReadableError":
    case "AbortError":
      return "The microphone could not be opened: another program may be using it. Close it, "
        + "then press Start.";
    default:
      return `No microphone (${e.message || e.name || e}). Press Start to try again.`;
  }
}
