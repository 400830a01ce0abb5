// The text rules of server/text.py for the page and the overlay: no space next to a character
// of a script written without spaces (Chinese, Japanese, Thai, ...), so Chinese finals join as
// 你好世界 and 一个wifi门铃; widths in columns (a CJK character takes two); lines broken
// between units (Latin words, single CJK characters). tests/test_lang_web.py checks it against
// the Python module.
const UNSPACED = [[0x0E00, 0x0EFF], [0x1000, 0x109F], [0x1780, 0x17FF], [0x2E80, 0x9FFF],
  [0xF900, 0xFAFF], [0xFE30, 0xFE4F], [0xFF00, 0xFFEF], [0x20000, 0x2FA1F]];
const WIDE = [[0x1100, 0x115F], [0x2E80, 0x303E], [0x3041, 0x33FF], [0x3400, 0x4DBF],
  [0x4E00, 0x9FFF], [0xA000, 0xA4CF], [0xAC00, 0xD7A3], [0xF900, 0xFAFF], [0xFE30, 0xFE4F],
  [0xFF00, 0xFF60], [0xFFE0, 0xFFE6], [0x20000, 0x3FFFD]];

const within = (ranges, ch) => {
  const o = ch.codePointAt(0);
  return ranges.some(([lo, hi]) => lo <= o && o <= hi);
};
export const isUnspaced = (ch) => within(UNSPACED, ch);

const OPENING = "\"'¿¡#&@§¶";

/** Whether `right` written after `left` is separated by a space. */
export function needsSpace(left, right) {
  const a = [...left.trimEnd()].pop();
  const b = [...right.trimStart()][0];
  if (!a || !b || isUnspaced(a) || isUnspaced(b)) return false;
  // "other punctuation" that opens what follows (server/text.py's _OPENING)
  return OPENING.includes(b) || !/[\p{Pe}\p{Pf}\p{Po}]/u.test(b);
}

/** `left` and `right` as one text, spaced by the rules; not at all where `glue` (below). */
export const joinText = (left, right, glue = false) => {
  const r = right.trim();
  if (!r) return left;
  return left + (!glue && needsSpace(left, r) ? " " : "") + r;
};

/** A final that goes on the word before it: its first word has no leading space (Whisper split
 * a word across two finals, "Cost" | "as"; server/text.py's glued). */
export const glued = (m) =>
  Array.isArray(m.words) && m.words.length > 0 && !/^\s/.test(m.words[0].word);

/** Columns the text takes on screen. */
export const displayWidth = (text) => [...text].reduce((w, ch) => w + (within(WIDE, ch) ? 2 : 1), 0);

/** The units a line may break between: Latin words and single unspaced-script characters. */
export function units(text) {
  const out = [];
  for (const tok of text.split(/\s+/).filter(Boolean)) {
    let run = "";
    for (const ch of tok) {
      if (isUnspaced(ch)) { if (run) out.push(run); run = ""; out.push(ch); } else run += ch;
    }
    if (run) out.push(run);
  }
  return out;
}

// marks no line may start with (server/text.py's NO_LINE_START)
const NO_LINE_START = "，。、；：？！）」』》〉】〕〗〙〛”’…‧·,.;:?!)]}%";

/** Whether `unit` is closing marks only: a line never starts with it ("，然后..."). */
export const closes = (unit) => {
  const u = unit.trim();
  return u.length > 0 && [...u].every((c) => NO_LINE_START.includes(c));
};

const joinUnits = (us) => us.reduce((a, b) => joinText(a, b), "");

/** `text` as [the closing marks it opens with, the rest]: after a line an utterance's end
 * closed, the marks go on that line ("，然后..." started one, a review found). */
export function leadingMarks(text) {
  const lead = text.length - text.trimStart().length;
  let n = lead;
  while (n < text.length && closes(text[n])) n++;
  return [text.slice(lead, n), n > lead ? text.slice(n) : text];
}

/** Lines of at most `width` columns (a unit wider than a line gets a line of its own), never
 * one that starts with a closing mark: the unit before it goes down with it. Greedy, unlike
 * the subtitles' wrap (server/text.py), which prefers a break after punctuation: live lines are
 * wrapped again as each final and partial comes, and a preferred break there moved words
 * already shown down a line and back as the partial changed. */
export function wrap(text, width) {
  const lines = [];
  for (const u of units(text)) {
    const last = lines.length ? lines[lines.length - 1] : null;
    if (last !== null && displayWidth(joinUnits([...last, u])) <= width) last.push(u);
    else if (last !== null && closes(u) && last.length > 1) {
      const down = [u];  // (marks after marks, "。”": down to the character before them)
      while (last.length > 1 && closes(down[0])) down.unshift(last.pop());
      lines.push(down);
    } else lines.push([u]);
  }
  return lines.map(joinUnits);
}

// Chinese subtags as server/wire.py's language_tag reads them
const CHINESE = ["zh", "cmn", "zho", "chi"];
const TRADITIONAL = ["tw", "hant", "cht"];
const HONG_KONG = ["hk", "mo"];
// the tag caption text in each Chinese script carries: with Han unification a browser draws
// Chinese marked as another language (the page's "en", a Japanese locale's default) with
// Japanese glyph shapes and punctuation placed as in Japanese ("，" "。" in the box's corner)
const ZH_TAGS = { simplified: "zh-CN", traditional: "zh-TW", traditional_hk: "zh-HK", as_is: "zh" };

/** The `lang` of caption text in `language` (Whisper's code, or a tag the server takes:
 * "zh-TW", "zh-Hant-HK") written in the Chinese `script` asked for (server/wire.py's
 * ZH_SCRIPTS; the server writes Chinese in simplified unless asked or the tag says otherwise,
 * and "hans" asks for nothing);
 * null when the language is not known ("", "auto"). */
export function captionLang(language, script = null) {
  const parts = String(language || "").replace(/_/g, "-").toLowerCase().split("-");
  const base = parts[0];
  if (!/^[a-z]{2,3}$/.test(base) || base === "auto") return null;
  if (!CHINESE.includes(base)) return base;
  const rest = parts.slice(1);
  const tagged = rest.includes("hans") ? "simplified"
    : rest.some((p) => HONG_KONG.includes(p)) ? "traditional_hk"
    : rest.some((p) => TRADITIONAL.includes(p)) ? "traditional" : null;
  // (a zh_script asked for wins over the tag's, as on the server)
  return ZH_TAGS[script || tagged || "simplified"] || "zh";
}

/** The captions' `lang` once the server says they are in `language` (a `language` event:
 * detected on language=auto; to a viewer, each speaker's), in the Chinese `script` the event
 * names; without one, `current` where that is the same language, as it knows the script
 * ("zh-TW" stays, where "zh" alone would read as simplified). */
export function detectedLang(current, language, script = null) {
  const tag = captionLang(language, script);
  if (!tag) return current;  // (a code this page cannot read tells it nothing)
  if (script) return tag;
  return current && current.split("-")[0] === tag.split("-")[0] ? current : tag;
}
