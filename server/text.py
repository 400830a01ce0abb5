"""How caption text is written, for every script: the rules in one place, pure functions.

Whisper's words carry their own leading spaces, which is right for English and wrong for
Chinese and Japanese: there, no space separates two characters, and none separates a
character from an embedded Latin word either (``一个wifi门铃``). Pieces of text that are
joined later (finals into a line, lines into a transcript) follow the same rule, so no
output ever has a space between two Han characters. Widths are display columns (a CJK
character takes two), and a Chinese session's script (simplified or traditional) is fixed
through OpenCC, because Whisper mixes the two in one sentence.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from functools import lru_cache
from typing import Iterable, Sequence

from .wire import ZH_SCRIPTS, Word

__all__ = ["NO_LINE_START", "ZH_SCRIPTS", "append_piece", "cer", "cer_tokens", "closes",
           "convert_words", "display_width", "finals_text", "glue_piece", "glued", "is_piece",
           "is_unspaced", "join_texts", "join_units", "needs_space", "caption_script", "script_for", "split_units",
           "split_words", "tidy", "to_script", "whole_words", "wrap_units"]

_OPENCC = {"simplified": "t2s", "traditional": "s2tw", "traditional_hk": "s2hk"}  # (wire.ZH_SCRIPTS)

# Unicode ranges of scripts written without spaces between words, and their punctuation
_UNSPACED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x9FFF),  # CJK radicals, CJK punctuation, Kana, CJK ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF00, 0xFFEF),  # full-width forms and punctuation
    (0x20000, 0x2FA1F),  # CJK extensions
)
_UNSPACED_RE = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _UNSPACED)
# a space with an unspaced character on either side of it
_SPACE_NEAR = re.compile(f"(?<=[{_UNSPACED_RE}])\\s+|\\s+(?=[{_UNSPACED_RE}])")
# sentence and clause ends where a line may break, best first
_BREAKS = ("。！？!?…", "；;：:", "，,、")


def is_unspaced(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _UNSPACED)


# "Other punctuation" (Po) that opens what follows rather than closing what came before: a
# straight quote or apostrophe starting a piece opens it ('He said "We', "the '60s")
_OPENING = "\"'¿¡#&@§¶"


def needs_space(left: str, right: str) -> bool:
    """Whether text ``right`` written after ``left`` is separated by a space: not next to a
    character of an unspaced script, and not before closing punctuation."""
    a, b = left.rstrip()[-1:], right.lstrip()[:1]
    if not a or not b:
        return False
    if is_unspaced(a) or is_unspaced(b):
        return False
    return b in _OPENING or not unicodedata.category(b).startswith(("Pe", "Pf", "Po"))


def join_texts(parts: Iterable[str]) -> str:
    """Pieces (finals, lines, words without their own spaces) as one text."""
    out = ""
    for p in parts:
        p = p.strip()
        if p:
            out = f"{out} {p}" if needs_space(out, p) else out + p
    return out


def join_units(units: Iterable[str]) -> str:
    """Units or words (each with its own leading space, or none) as one text: a space only
    where the unit has one and the rules allow it, so ``W`` ``i`` ``-Fi`` stays ``Wi-Fi``."""
    out = ""
    for u in units:
        core = u.strip()
        if core:
            out += f" {core}" if out and u[:1].isspace() and needs_space(out, core) else core
    return out


def glued(words: Sequence[Word]) -> bool:
    """A final (or a run of its words) that goes on the word before it: its first word has no
    leading space where the rules would put one (Whisper split a word across two finals:
    "Cost" | "as", "Wi" | "-Fi")."""
    return bool(words) and not words[0].word[:1].isspace()


def is_piece(before: Word, word: Word) -> bool:
    """Whether ``word`` is the rest of ``before`` (one word Whisper wrote in pieces: "t"
    "-shirt.", "$3" ".5", "Wi" "-Fi"): no leading space, and no character of an unspaced
    script on either side (where every character is a unit of its own)."""
    a, b = before.word.rstrip()[-1:], word.word.lstrip()[:1]
    return bool(a and b) and not word.word[:1].isspace() and not is_unspaced(a) \
        and not is_unspaced(b)


def glue_piece(before: Word, piece: Word) -> Word:
    """One word of ``before`` and its ``piece``: their span, and the less sure of the two."""
    return Word(before.word + piece.word.strip(), before.start, max(before.end, piece.end),
                min(before.probability, piece.probability))


def whole_words(words: Iterable[Word]) -> list[Word]:
    """Words as a reader counts them: each piece glued to the word it belongs to. Lists of
    words that clients read (API word lists, subtitle lines) are made of these; the streaming
    core keeps Whisper's pieces, which it needs to place forced prefixes by token."""
    out: list[Word] = []
    for w in words:
        if out and is_piece(out[-1], w):
            out[-1] = glue_piece(out[-1], w)
        else:
            out.append(w)
    return out


def append_piece(text: str, piece: str, glue: bool = False) -> str:
    """``text`` with ``piece`` (a final's text) after it: spaced by the rules, not at all
    where ``glue`` (:func:`glued`)."""
    piece = piece.strip()
    if not piece:
        return text
    return f"{text} {piece}" if text and not glue and needs_space(text, piece) else text + piece


def finals_text(finals: Iterable) -> str:
    """Finals as one text, each after the last as :func:`append_piece` puts it: a word Whisper
    split across two finals ("Wi" | "Fi", the second without a leading space) comes out whole.
    The one rule for every transcript, delta and line that joins finals."""
    text = ""
    for f in finals:
        text = append_piece(text, f.text, glued(f.words))
    return text


def tidy(text: str) -> str:
    """``text`` without spaces next to unspaced-script characters (``你 好`` → ``你好``,
    ``一个 wifi 门铃`` → ``一个wifi门铃``); Latin words keep theirs."""
    return _SPACE_NEAR.sub("", text).strip()


def display_width(text: str) -> int:
    """Columns on a terminal or a subtitle line: wide and full-width characters take two,
    combining marks none."""
    w = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w


def split_units(text: str) -> list[str]:
    """``text`` as the units a line can break between: Latin words (with the space before
    them kept) and single unspaced-script characters."""
    out: list[str] = []
    for m in re.finditer(r"\s*\S+", text):
        tok = m.group()
        run = "" if is_unspaced(tok.lstrip()[0]) else tok[: len(tok) - len(tok.lstrip())]
        for ch in tok.lstrip():
            if is_unspaced(ch):
                if run:
                    out.append(run)
                    run = ""
                out.append(ch)
            else:
                run += ch
        if run:
            out.append(run)
    return out


def split_words(words: Sequence[Word]) -> list[Word]:
    """Words holding unspaced-script text as :func:`split_units` units (one per character,
    Latin runs whole: ``Wi-Fi门铃`` is three), each word's time spread over its units by
    length; other words pass unchanged."""
    out: list[Word] = []
    for w in words:
        units = split_units(w.word)
        if len(units) <= 1 or not any(is_unspaced(c) for c in w.word):
            out.append(w)
            continue
        total, done = sum(len(u.strip()) for u in units), 0
        for u in units:
            start = w.start + (w.end - w.start) * done / total
            done += len(u.strip())
            out.append(replace(w, word=u, start=start, end=w.start + (w.end - w.start) * done / total))
    return out


def _break_rank(unit: str) -> int:
    """How good a line end after ``unit`` is: 0 best (sentence end) .. 3 (anywhere)."""
    last = unit.rstrip()[-1:]
    for rank, chars in enumerate(_BREAKS):
        if last and last in chars:
            return rank
    return 3


# marks no line may start with (Chinese and Japanese typesetting's rule, and Latin's own)
NO_LINE_START = "，。、；：？！）」』》〉】〕〗〙〛”’…‧·,.;:?!)]}%"


def closes(unit: str) -> bool:
    """Whether ``unit`` is closing marks only: a line never starts with it ("，然后...")."""
    u = unit.strip()
    return bool(u) and all(c in NO_LINE_START for c in u)


def _clause_fits(units: Sequence[str], width: int) -> bool:
    """Whether ``units`` hold a punctuation mark within their first ``width`` columns: the
    clause that starts them fits on one line."""
    for n, u in enumerate(units, 1):
        if display_width(join_units(units[:n])) > width:
            return False
        if _break_rank(u) < 3:
            return True
    return True


def _cut(cur: Sequence[str], rest: Sequence[str], width: int, prefer: bool = True) -> int:
    """How many of ``cur`` (a line that ``rest[0]`` would overflow) stay on it. After the best
    punctuation that leaves the line at least half full, or a third full where the clause
    after it then fits the next line whole; else as many as fit. Subtitle guides break lines
    after punctuation (Netflix's); where only punctuation in a line's last third counted,
    Chinese lines broke mid-word ("先融入周 / 圍環境，") with a comma earlier in the line. Never
    before a closing mark: the unit before it goes down with it. ``prefer`` False: no
    punctuation counts."""
    nxt = [*cur, *rest]
    can = [c for c in range(1, len(cur) + 1) if not closes(nxt[c])]
    for rank in range(3 if prefer else 0):
        for c in reversed(can):
            if _break_rank(cur[c - 1]) != rank:
                continue
            full = display_width(join_units(cur[:c]))
            if 2 * full >= width or (3 * full >= width and _clause_fits(nxt[c:], width)):
                return c
    return can[-1] if can else len(cur)


def wrap_units(units: Sequence[str], width: int) -> list[str]:
    """Lines of at most ``width`` display columns (a unit wider than a line gets a line of its
    own), never one that starts with a closing mark (a subtitle line began
    "，然后我们不像猎物。"), broken after punctuation where :func:`_cut` says unless that takes
    more lines than filling each and leaves one under a third of the width: a comma break at
    half a line had "Yeah, so the thing is, ..." take three lines, the last "it.", where
    Chinese clauses of 9, 16 and 8 characters read better than two lines broken mid-word."""
    filled = _wrapped(units, width, prefer=False)
    broken = _wrapped(units, width, prefer=True)
    if len(broken) <= len(filled) or 3 * min(map(display_width, broken)) >= width:
        return broken
    return filled


def _wrapped(units: Sequence[str], width: int, prefer: bool) -> list[str]:
    lines: list[str] = []
    cur: list[str] = []
    for i, u in enumerate(units):
        # (again while it overflows: a cut after punctuation leaves words that, with the next
        # unit, may still be over the width)
        while cur and display_width(join_units(cur + [u])) > width:
            cut = _cut(cur, units[i:], width, prefer)
            lines.append(join_units(cur[:cut]))
            cur = cur[cut:]
        cur.append(u)
    if cur:
        lines.append(join_units(cur))
    return lines


# -- Chinese and Japanese punctuation ----------------------------------------------------
_FULL_WIDTH = str.maketrans(",?!:;", "，？！：；")


def _is_han_or_kana(ch: str) -> bool:
    o = ord(ch)
    return (0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF
            or 0x20000 <= o <= 0x2FA1F)


def cjk_marks(words: Sequence[Word], before: str = "") -> list[Word]:
    """The words with an ASCII comma, question or exclamation mark, colon or semicolon that
    follows a Chinese or Japanese character written full-width: Whisper mixes "," with "。"
    and "、" ("有孕,不能。"), where Chinese text (and every Chinese subtitle) writes "，".
    ``before``: the text the words follow. Only what is shown: decodes keep Whisper's own."""
    prev = before.rstrip()[-1:]
    out = []
    for w in words:
        chars = []
        for ch in w.word:
            if prev and ch in ",?!:;" and _is_han_or_kana(prev):
                ch = ch.translate(_FULL_WIDTH)
            chars.append(ch)
            if not ch.isspace():
                prev = ch
        word = "".join(chars)
        out.append(w if word == w.word else replace(w, word=word))
    return out


# -- script ----------------------------------------------------------------------------
def caption_script(language: str | None, zh_script: str | None) -> str | None:
    """The script a ``language`` event names (wire.Language.script): Chinese's, else none."""
    return script_for("zh", zh_script) if language == "zh" else None


def script_for(language: str | None, zh_script: str | None) -> str:
    """The script a session's text is written in: ``zh_script`` if given, else simplified
    for Chinese and the model's own for every other language."""
    if zh_script:
        return zh_script
    return "simplified" if language == "zh" else "as_is"


@lru_cache(maxsize=None)
def _converter(script: str):  # type: ignore[no-untyped-def]
    import opencc

    return opencc.OpenCC(_OPENCC[script])


def to_script(text: str, script: str) -> str:
    if script not in _OPENCC or not any(is_unspaced(c) for c in text):
        return text
    return _converter(script).convert(text)


def convert_words(words: Sequence[Word], script: str, before: str = "") -> list[Word]:
    """The words in ``script``, without the spaces :func:`needs_space` forbids (``before`` is
    the text they follow). OpenCC converts the words together (some conversions depend on the next
    character) and the result is shared back out when it keeps every word's length."""
    texts = [w.word.strip() for w in words]
    if script in _OPENCC:
        whole = to_script("".join(texts), script)
        if len(whole) == sum(map(len, texts)):
            out, i = [], 0
            for t in texts:
                out.append(whole[i : i + len(t)])
                i += len(t)
            texts = out
        else:
            texts = [to_script(t, script) for t in texts]
    result = []
    prev = before
    for w, t in zip(words, texts):
        # a space is kept where the rules allow one, never added: Whisper writes the tokens
        # of an embedded Latin word (W, i, -Fi) as words without spaces
        word = (" " + t) if w.word[:1].isspace() and needs_space(prev, t) else t
        result.append(replace(w, word=word))
        prev = t or prev
    return result


# -- scoring ---------------------------------------------------------------------------
def cer_tokens(text: str, script: str = "as_is") -> list[str]:
    """``text`` as character-error-rate tokens: each CJK character one token, each Latin or
    digit run one token (``wifi`` is one); case, punctuation and spaces dropped, and the
    Chinese in ``script`` (score in simplified to forgive Whisper's script mixing)."""
    text = to_script(unicodedata.normalize("NFKC", text).lower(), script)
    out: list[str] = []
    run = ""
    for ch in text:
        if is_unspaced(ch) and ch.isalnum():
            if run:
                out.append(run)
                run = ""
            out.append(ch)
        elif ch.isalnum():
            run += ch
        elif ch in "-'" and run:
            continue  # Wi-Fi is wifi
        elif run:
            out.append(run)
            run = ""
    if run:
        out.append(run)
    return out


def cer(reference: str, hypothesis: str, script: str = "as_is") -> float:
    from .wer import word_errors

    ref = cer_tokens(reference, script)
    return word_errors(ref, cer_tokens(hypothesis, script)) / max(1, len(ref))
