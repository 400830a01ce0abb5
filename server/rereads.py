"""What Whisper says that nothing in the audio says: repetition loops, the forced prefix's
last phrase read again, echoes of final words, runs of words the aligner squeezed to no time.

Pure functions of a decode's words (their text as agreement units, and their times): the
session (:mod:`.session`) asks them which of a decode's words are new speech, and its unit
tests drive them with words.
"""

from __future__ import annotations

from .agreement import unit_key
from .decoding import DecodeRequest
from .text import is_unspaced
from .wire import Word

__all__ = ["centre", "drop_unsure_echoes", "heard_again", "held_end", "loop_phrase",
           "loop_start", "read_again_past", "repeated_head", "rereads", "restarted_head",
           "said_on", "spoken", "spoken_repeats", "spoken_twice", "squeezed", "squeezed_runs",
           "unsaid_words", "words_from"]


def loop_start(prefix: list[str], keys: list[str]) -> int:
    """Where Whisper's repetition loop begins in ``keys`` (the new words after ``prefix``), or
    ``len(keys)`` if there is none: a phrase of three or more units said twice in a row, or of
    one or two units said three times. Only repeats reaching into the new words count. Units
    of unspaced scripts are characters, and people repeat short phrases there ("对对对",
    "对不起对不起"): a phrase of them counts twice from six characters, three times from three,
    else five times."""
    seq = prefix + keys
    n0 = len(prefix)
    for p in range(max(1, n0), len(seq)):
        if _loop_length(seq, p):
            return max(0, p - n0)
    return len(keys)


def loop_phrase(prefix: list[str], keys: list[str]) -> int:
    """How many units the phrase has whose repeats make the loop :func:`loop_start` finds (0:
    none)."""
    cut = loop_start(prefix, keys)
    return _loop_length(prefix + keys, len(prefix) + cut) if cut < len(keys) else 0


def _loop_length(seq: list[str], p: int) -> int:
    """How many units the phrase has whose repeats make a loop from ``seq[p]`` on (0: none)."""
    for length in range(1, p + 1):
        if p + length > len(seq):
            break
        block = seq[p : p + length]
        if block != seq[p - length : p]:
            continue
        times = _loop_times(block)
        if p < (times - 1) * length or any(
                seq[p - k * length : p - (k - 1) * length] != block for k in range(2, times)):
            continue
        return length
    return 0


# A speaker says a word or two this many times in a row ("No, no, no.", "Go, go, go!")
SPOKEN_REPEATS = 4


def spoken_repeats(prefix: list[str], words: list[Word], keys: list[str], cut: int,
                   heard: list[Word] | None = None) -> int:
    """Where the loop that :func:`loop_start` found at ``cut`` really starts, by the words'
    times: a phrase of one or two units said three or four times in a row, each time given
    time by the aligner, is a speaker repeating it, and the text alone cannot tell it from a
    loop ("No, no, no." came out "No No"; "Go, go, go!" out "Go, go,"). Whisper's own loops go
    on to the decode's token limit, the copies past the speech squeezed to no time ("go" 25
    times, the last 22 at 1.80-1.80 s): where ``heard`` (the decode's new words before the
    echo guard took such copies away) says the phrase's units more than four times, or
    squeezes one, it is a loop as before (and the caller asks only of a decode whose text
    does not compress like a loop's). Where the repeats end, a loop may still begin, or
    another phrase said again."""
    seq = prefix + keys
    n0, p = len(prefix), len(prefix) + cut
    for length in (1, 2):
        block = seq[p - length : p]
        if p - length < 0 or seq[p : p + length] != block or (
                block and all(is_unspaced(c) for u in block for c in u)):
            continue
        start, end = next((i, j) for i, j in _run_spans(seq, block) if i < p <= j)
        copies = (end - start) // length
        said = heard if heard is not None else words
        runs = [said[i:j] for i, j in _run_spans([unit_key(w.word) for w in said], block)]
        if not 3 <= copies <= SPOKEN_REPEATS or any(
                len(r) > SPOKEN_REPEATS * length or any(squeezed(w) for w in r) for r in runs):
            return cut  # (fewer than three: the loop found is a longer phrase's)
        after = end - n0
        rest = keys[after:]
        return after + spoken_repeats(seq[:end], words[after:], rest,
                                      loop_start(seq[:end], rest), heard)
    return cut


def spoken_twice(prefix: list[str], words: list[Word], keys: list[str], cut: int,
                 after: float, silent_from: float = float("inf"), whole: bool = False,
                 audio_end: float = float("inf")) -> int:
    """Where the loop that :func:`loop_start` found at ``cut`` really starts, when it is a
    phrase of three or more units said again that the speaker said again (:func:`said_on`;
    ``after``: where the final words before ``words`` end). Twice, not more: a third saying
    in a row is Whisper's loop however the aligner times it, on the short encoder inputs
    windows get. ``whole``: the decode heard Whisper's whole 30 s input, where it does not run
    on so (espeak's "Can you hear me?" said three times, read on past the first saying: twice,
    at 2.31-3.35 and 3.39-4.09 s, where a 6 s input looped on to five), and a third saying
    timed in the speech is the speaker's too. A loop of another phrase after it is judged the
    same way."""
    seq = prefix + keys
    n0, p = len(prefix), len(prefix) + cut
    length = _loop_length(seq, p) if cut < len(keys) else 0
    block = seq[p : p + length]
    third = not whole and seq[max(0, p - 2 * length) : p - length] == block
    if length < 3 or _loop_times(block) != 2 or third or not said_on(
            words[cut : cut + length], words[cut - 1].end if cut else after, silent_from,
            audio_end):
        return cut
    end = cut + length
    rest = keys[end:]
    return end + spoken_twice(seq[: n0 + end], words[end:], rest, loop_start(seq[: n0 + end], rest),
                              words[end - 1].end, silent_from, whole, audio_end)


def said_on(words: list[Word], after: float, silent_from: float = float("inf"),
            audio_end: float = float("inf")) -> bool:
    """``words``, a phrase said again (three or more units) or the rest of one, are the
    speaker saying it again, not Whisper reading what came before again: each word has time
    and starts in the speech the VAD heard (before ``silent_from``; the aligner stretches an
    utterance's last word into the silence after it), Whisper is sure of it, and the first
    starts where the saying before ends (``after``), its middle after that. Whisper's own loop
    squeezes its copies past the audio or runs on to the token limit (the caller asks only of
    a decode whose text does not compress like a loop's), and its re-read of final text lies
    over that text's audio. espeak's "Can you hear me? Can you hear me?" was final as "Can you
    hear me?" at every start offset: the end decode, its prefix the first saying (to 2.17 s),
    read the second at 2.27-2.91 s (p 0.98-1.0), then a third with "Can you hear" squeezed at
    2.91 s; "Is it on? Is it on?", "Let me see. Let me see." the same. The last of three or
    more words may be squeezed where the audio ends (``audio_end``) if the speech ran on to
    there (the stream ended inside it, "... I went to the | I went to the" cut in the second
    "the"; not a window that ends in the silence after the speech), the words before it
    timed."""
    cut = audio_end - CUT_SLACK_S  # (where the speech ran on to: the VAD heard no end first)
    if len(words) >= 3 and squeezed(words[-1]) and words[-1].start >= cut <= silent_from:
        words = words[:-1]
    return (bool(words) and words[0].start >= after - REREAD_STRETCH_S
            and centre(words[0]) >= after
            and all(not squeezed(w) and w.probability >= ECHO_PROBABILITY
                    and w.start < silent_from for w in words))


def _run_spans(keys: list[str], block: list[str]) -> list[tuple[int, int]]:
    """Where ``keys`` say ``block`` twice or more in a row: (first index, end) of each run."""
    n, i, spans = len(block), 0, []
    while i < len(keys):
        j = i
        while keys[j : j + n] == block:
            j += n
        if j - i >= 2 * n:
            spans.append((i, j))
        i = max(j, i + 1)
    return spans


def _loop_times(block: list[str]) -> int:
    """How many times in a row a phrase of these units makes a loop."""
    if block and all(is_unspaced(c) for u in block for c in u):
        return 2 if len(block) >= 6 else 3 if len(block) >= 3 else 5
    return 2 if len(block) >= 3 else 3


def repeated_head(prefix: list[str], keys: list[str]) -> int:
    """How many of the first new units only finish saying again a phrase of three or more
    units that ends the prefix ("... what I call home. I" then "call home."): Whisper
    re-reading what is already final, over a pause."""
    seq = prefix + keys
    n0 = len(prefix)
    head = 0
    for p in range(max(1, n0 - 12), n0 + 1):
        for length in range(max(3, n0 - p + 1), p + 1):
            if p + length > len(seq):
                break
            if seq[p : p + length] == seq[p - length : p]:
                head = max(head, p + length - n0)
    return head


def restarted_head(prefix: list[str], keys: list[str]) -> int:
    """How many of the first new units read the prefix again from its start, four or more:
    a careful decode that restarts its window ("She was the type that makes her worse." as
    prefix, then "She was the type that" over the next sentence, its last words squeezed
    away by the aligner, en-04)."""
    m = 0
    while m < min(len(prefix), len(keys)) and prefix[m] == keys[m]:
        m += 1
    return m if m >= 4 else 0


# a word squeezed this close to where the audio ends was cut by that end (said_on)
CUT_SLACK_S = 0.05
ECHO_PROBABILITY = 0.5
# ... unless it takes this long to say (takes_its_time)
ECHO_SAID_S = 0.2
# ... and one said again in less time than this (and than a third of the first saying) is an
# echo however sure of it Whisper is (:func:`hurried`)
ECHO_HURRIED_S = 0.12
# ... and as soon as the word before it ends: one this long after it was said again (a
# speaker's "yes yes yes": 0.18 s)
ECHO_GAP_S = 0.15
# below this, a final decode's last word that the aligner squeezed to no duration was not said
SQUEEZED_PROBABILITY = 0.1
# runs of squeezed words that are not speech, and a re-read's last word after one (squeezed_runs)
SQUEEZED_RUN = 3
SAME_END = 3
# A word placed in already-final audio is a re-read if it reads the last final units again
# (among the last ``REREAD_UNITS``: see rereads), or if it ends this far inside the final
# audio whatever it says.
REREAD_UNITS = 8
REREAD_SLACK_S = 0.3
REREAD_STRETCH_S = 0.05
# ... and a stretched last final word starts at least this far inside it (stretched)
REREAD_INSIDE_S = 0.15


def rereads(tail: list[str], keys: list[str]) -> bool:
    """``keys[0]``, placed just inside final audio, reads the end of ``tail`` (the last final
    units) again: it equals one of the last two units, or the words from it say the units from
    there on to the end (or stop before it) but for one word left out, put in or misheard, the
    word after it saying one of the two units after it there. A word the finals said further
    back and followed by different words is new: "... didn't know what I wanted to be you"
    final, then "know you look back" (en-02), or a phrase said again that goes on
    differently, "know what I mean, so"."""
    n = len(tail)
    return any(i >= n - 2 or len(keys) < 2
               or (keys[1] in tail[i + 1 : i + 3] and _reads_on(tail[i:], keys))
               for i in range(n) if tail[i] == keys[0])


def _reads_on(tail: list[str], keys: list[str], slips: int = 1) -> bool:
    """``keys`` say ``tail`` to its end, or as far as they go, but for ``slips`` words left out
    (a re-read may drop a short word: "be vet." for "be a vet."), put in or misheard; each
    kind is tried at a mismatch, not only the first that fits."""
    j = 0
    while j < len(tail) and j < len(keys) and tail[j] == keys[j]:
        j += 1
    if j == len(tail) or j == len(keys):
        return True
    return slips > 0 and any(_reads_on(tail[j + a :], keys[j + b :], slips - 1)
                             for a, b in ((1, 0), (0, 1), (1, 1)))


def heard_again(req: DecodeRequest, out: list[Word], keys: list[str], prefix: list[str],
                 committed: list[Word], committed_end: float) -> int:
    """How many of the first words (in stream time, ``keys`` their units) are final already.

    Words placed in audio that is already final were heard again (Whisper re-reading the end
    of its prefix): committed text never comes twice. They go before the loop guard looks:
    "just incredibly" + "incredibly, incredibly valuable" is a speaker saying a word twice,
    not a word said three times. A word the aligner merely squeezed against the final audio's
    end ("blank. I" final, then "mean" placed 0.05 s before its end) is new unless it reads
    the end of the final text again (see rereads)."""
    first = 0
    # (the committed words, not only the prefix: a retry without the prefix reads them all)
    tail = ([unit_key(w.word) for w in _before(committed, req.offset)] + prefix)[-REREAD_UNITS:]
    while first < len(out) and centre(out[first]) < committed_end and (
            out[first].end < committed_end - REREAD_SLACK_S or rereads(tail, keys[first:])):
        first += 1
    if stretched(out, keys, first, tail, committed_end):
        first += 1
    # A retry without the prefix reads the final words again, and the aligner may stretch the
    # last of them from the final audio's end into the pause after it (en-07: "... on a plane"
    # final, then "... on the plane." with "plane." at 16.99-17.87): that is the last final
    # word again, not a new one
    elif (not req.prefix and first < len(out) and committed
            and keys[first] == unit_key(committed[-1].word)
            and out[first].start <= committed_end + REREAD_STRETCH_S):
        first += 1
    return first


def stretched(out: list[Word], keys: list[str], first: int, tail: list[str],
              committed_end: float) -> bool:
    """``out[first]`` is the last final word again, stretched from well inside the final audio
    past its end, after the aligner squeezed the word before it to no time: Whisper read the
    end of its prefix again (en-04: "You, are." final, "are." at 16.57-17.21; then "You are."
    with "You" squeezed at 16.96 and "are." at 16.96-17.72; "You, are. are." was final). A
    word that starts less than ``REREAD_INSIDE_S`` inside, or after a re-read word with time,
    may be the speaker saying it again ("that that", the aligner's start 0.05 s early); and
    not in unspaced scripts, where one character (的, 了, 是) begins many words."""
    if not 0 < first < len(out) or not tail or keys[first] != tail[-1]:
        return False
    w = out[first]
    return (keys[first - 1] in tail[-3:-1] and squeezed(out[first - 1])
            and w.start <= committed_end - REREAD_INSIDE_S
            and not any(is_unspaced(c) for c in w.word))


def drop_unsure_echoes(prefix: list[str], words: list[Word], keys: list[str],
                       silent_from: float = float("inf")) -> tuple[list[Word], list[str]]:
    """Words that only say the unit or two units before them again, and that Whisper itself
    doubts or the aligner cannot place: over the silence after an utterance it echoes its last
    word ("Yummy." then "Yummy.", p=0.44 for 0.08 s, or p=0.89 squeezed into the window's last
    instant) or its last two ("Ask not. Ask not.", the second "Ask" squeezed to no time, jfk),
    where a speaker's own "no, no" comes out sure or takes time to say. Nor is an echo placed in
    what the VAD heard as the silence after the speech (``silent_from``, at an utterance's end)
    said, however sure: espeak's lone "Maybe." came out "Maybe... Maybe...", the second at
    p=0.74 over the hangover; a speaker's second "no" is speech the VAD hears."""
    def unsure(w: Word) -> bool:
        return squeezed(w) or centre(w) >= silent_from

    kept_w: list[Word] = []
    kept_k: list[str] = []
    i = 0
    while i < len(words):
        before = (prefix + kept_k)[-2:]
        pair = keys[i : i + 2]
        # (one unit said again is the next rule's: "go, go, go" is no pair said twice). Within
        # the decode, an echo begins where nothing is said or has a word nothing says: a pair
        # whose first word has time in the speech, its second some time, is the speaker's
        # ("Thank you. Thank you.", the second "you." running on past where the VAD heard the
        # speech stop). The prefix's last pair said again is a re-read if either word is unsure.
        pair_w = words[i : i + 2]
        if len(pair) == 2 and pair == before and pair[0] != pair[1] and (
                any(unsure(w) for w in pair_w) if len(kept_k) < 2
                else unsure(pair_w[0]) or squeezed(pair_w[1])):
            i += 2
            continue
        w, k = words[i], keys[i]
        if k and before and k == before[-1] and (unsure(w) or hurried(w, kept_w) or (
                w.probability < ECHO_PROBABILITY and not takes_its_time(w, kept_w))) and (
                not placed_between(words, i, kept_w, silent_from)):
            i += 1
            continue
        kept_w.append(w)
        kept_k.append(k)
        i += 1
    return kept_w, kept_k


def placed_between(words: list[Word], i: int, kept: list[Word],
                   silent_from: float = float("inf")) -> bool:
    """``words[i]``, saying the word before it again, is one the aligner could give no time
    but placed between two sayings: ``ECHO_GAP_S`` or more after the word it says again, and
    before another word that has time, in the speech the VAD heard, and Whisper is sure of
    it. An echo follows its word at once, or ends the decode. espeak's "Sorry, sorry, go
    ahead.": the end decode's second "sorry," at 1.84-1.84 s (p 0.81), after "Sorry," at
    0.78-1.32 s and before "go" at 2.04 s; "Sorry, go ahead" was final at every start offset.
    (Before the same word again it stays an echo: en-04's hesitant reader, "You," at
    15.85-16.01 s, "you," squeezed at 16.37 s, "you" at 16.77-17.07 s, came out "You, you,
    are.", the reference's "you are" at 62.3 → 71.7 % WER for the file as the decodes after it
    went another way.)"""
    w, after = words[i], words[i + 1] if i + 1 < len(words) else None
    return (squeezed(w) and bool(kept) and after is not None and not squeezed(after)
            and unit_key(after.word) != unit_key(w.word)
            and w.start - kept[-1].end >= ECHO_GAP_S and after.start >= w.end
            and w.probability >= ECHO_PROBABILITY and w.start < silent_from)


def takes_its_time(w: Word, kept: list[Word]) -> bool:
    """``w``, saying the word before it again, takes ``ECHO_SAID_S`` or more and at least a
    third of that word's time: the speaker's "Bye bye." (the second "bye." at 1.32-1.78 s, p
    0.46, after "Bye" at 0.78-1.32 s; or, the end decode begun at a shorter pause, "bye!" at
    1.34-1.58 s, p 0.47, after "Bye" at 0.78-1.34 s), said however much Whisper doubts it,
    where its doubted echo of "Yummy." lasted 0.08 s. (An echo of the prefix's last word has
    no saying here to compare with: it goes. Where the final saying's time stood in for it,
    en-04's hesitant reader, "This." final at 44.87-45.13 s, got "This" again at 45.66-45.92
    s, p 0.40, in one long "This" offline decoding hears at 44.92-45.68 s.)"""
    d = w.end - w.start
    return bool(kept) and d >= ECHO_SAID_S and d >= (kept[-1].end - kept[-1].start) / 3


def hurried(w: Word, kept: list[Word]) -> bool:
    """``w`` says the word before it again in less than a third of that word's time, and in
    under ``ECHO_HURRIED_S``: no one says a word again that fast. espeak's lone "Right." came
    out "Right. Right." from beam search, the second at 1.30-1.36 s after the first at
    0.90-1.30 s, sure of it (p 0.95), in the middle of the speech; a speaker's own "no, no"
    takes as long the second time. And an echo follows the word at once: a copy that comes
    ``ECHO_GAP_S`` or more after it was said again, briefly as the aligner may time it
    (espeak's "Wait, wait, wait, hold on.": the second "wait" 0.10 s long after the first's
    0.58 s, but 0.64 s after it). (The caller compares the units.)"""
    if not kept or any(is_unspaced(c) for c in kept[-1].word):
        return False  # (Chinese and Japanese double syllables: 妈妈, 看看, each timed alone)
    first = kept[-1].end - kept[-1].start
    return (w.end - w.start < min(ECHO_HURRIED_S, first / 3)
            and w.start - kept[-1].end < ECHO_GAP_S)


def unsaid_words(req: DecodeRequest, out: list[Word], tail: list[str]) -> set[int]:
    """The words at the end of a decode that the aligner could not place in the audio (by
    ``id``: two squeezed words may be equal): two or more squeezed to no duration were not said
    (Whisper continues its prompt over silence). One such word that Whisper itself doubts is
    not either, at the end of a decode whose words all become final: no later decode can
    confirm it ("answer now?" then "No.", p=0.07); nor, doubted less, one that says a word of
    ``tail`` (the final text's last units) again ("... Asp. What you can do. For your
    country." final, then "Asp." at 10.97-10.97 s, p=0.36, over the silence after jfk)."""
    n = len(out)
    while n and squeezed(out[n - 1]):
        n -= 1
    last = out[-1] if out else None
    if len(out) - n >= 2 or (req.final and last is not None and n < len(out) and (
            last.probability < SQUEEZED_PROBABILITY
            or (last.probability < ECHO_PROBABILITY and unit_key(last.word) in tail))):
        return {id(w) for w in out[n:]}
    return set()


def squeezed_runs(prefix: list[str], out: list[Word], keys: list[str]) -> set[int]:
    """Final text Whisper reads again that the text guards miss, because its first word is
    new or misheard: a run of ``SQUEEZED_RUN`` or more words the aligner gave no time, which
    from its first or second word says the prefix's last units again (jfk with a final forced
    every 20 ms: "Asp. And so my fellow Americans." at 2.30-2.30 s, the final "and so my fellow
    American" read again, then "Asp." at 3.44-3.88 s, the speaker's "ask"); or such a run and
    the word after it that ends the decode on the prefix's last units, stretched over what was
    left of the window ("Ask not what your country can do for" at 7.66-7.66 s and "you." at
    7.66-7.74 s, "... can do for you." final). A run that says something else may be speech
    the aligner could not place (en-01: "right? Yeah. It" squeezed, and said); so may one
    that says a few of the prefix's words without reaching its end ("I said" ... "I said
    no"). Where the words after a re-read say the decode's new words again from their start,
    that is a second reading and goes too ("Asp." at 3.38-3.74 s, the re-read at 3.74-3.74 s,
    then "Asp." at 3.74-3.84 s: "Asp. Asp." final, jfk under load); what follows it stays."""
    gone: set[int] = set()
    tail = prefix[-2 * REREAD_UNITS :]
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and squeezed(out[j]):
            j += 1
        if j - i >= SQUEEZED_RUN:
            run = keys[i:j]
            if any(tail[t] == run[k] and _says_to_end(tail[t:], run[k:]) >= SQUEEZED_RUN
                   for k in (0, 1) for t in range(len(tail))):
                gone |= {id(w) for w in out[i : _said_again(keys, i, j)]}
            elif j == len(out) - 1 and len(prefix) >= SAME_END \
                    and keys[-SAME_END:] == prefix[-SAME_END:]:
                gone |= {id(w) for w in out[i:]}
        i = j + 1
    return gone


def _said_again(keys: list[str], i: int, j: int) -> int:
    """Where the words from ``j`` on stop saying ``keys[:i]`` (the decode's new words before a
    re-read at ``i:j``) again from their start, once or more; ``j`` if they do not."""
    while True:
        n = 0
        while n < i and j + n < len(keys) and keys[j + n] == keys[n]:
            n += 1
        if n == 0:
            return j
        j += n


def _says_to_end(tail: list[str], keys: list[str], slips: int = 1) -> int:
    """How many of ``tail``'s units ``keys`` say, if they say it to its end but for ``slips``
    units left out, put in or misheard; -1 if they stop short or say something else."""
    j = 0
    while j < len(tail) and j < len(keys) and tail[j] == keys[j]:
        j += 1
    if j == len(tail):
        return j
    if j == len(keys) or not slips:
        return -1
    rest = max(_says_to_end(tail[j + a :], keys[j + b :], slips - 1)
               for a, b in ((1, 0), (0, 1), (1, 1)))
    return j + rest if rest >= 0 else -1


def squeezed(w: Word) -> bool:
    """The aligner gave the word no time: nothing in the audio says it. (Its times step by
    20 ms; a word of one step has time, however adding the window's offset rounds it: the
    third "wait" of "Wait, wait, wait" at 1.72-1.74 s in a window from 1.23 s lasted
    0.0199999 s.)"""
    return w.end - w.start < 0.01


# a word the aligner made longer than this is stretched over speech its decode never wrote
STRETCHED_WORD_S = 1.0


def read_again_past(tail: list[Word], words: list[Word]) -> int:
    """How many of a read-on's first ``words`` (the window read again past ``tail``, the words
    an end decode stopped at) are the held sentence read again, however worded: those it
    places before the tail's end ("They all took a little ..." squeezed there, for the held
    "They all to take a little of this Christmas spirit.", en-05). Where the aligner stretched
    the tail's last word over speech the end decode never wrote, only a word the aligner gave
    no time, or a first run that says the tail's last words again in order ("Hello." after
    the held "... Hello."), is read again: the end decode stopped at "am.", put it at
    3.30-6.86 s, and the read-on's "And you know what you" (4.34-6.84 s) were lost (en-07's
    first 10 s sent at 24 kHz); and a word the held text had elsewhere ("I" after "... you
    and") is no re-read."""
    end = tail[-1].end
    stretched = held_end(tail) < end
    keys = [unit_key(w.word) for w in tail]
    new = [unit_key(w.word) for w in words]
    again = max((k for k in range(1, min(len(keys), len(new)) + 1) if new[:k] == keys[-k:]),
                default=0)
    i = 0
    while i < len(words) and centre(words[i]) < end and (
            not stretched or squeezed(words[i]) or i < again):
        i += 1
    return i


def held_end(tail: list[Word]) -> float:
    """Where the words an end decode stopped at surely end, for the question of which of the
    read-on's words are final audio heard again: the last one's end, or its start where the
    aligner stretched it (:func:`read_again_past`)."""
    last = tail[-1]
    return last.start if last.end - last.start > STRETCHED_WORD_S else last.end


def centre(w: Word) -> float:
    """Where a word lies, for the questions of which side of a point it falls on: the aligner
    may put either of its ends a little across."""
    return (w.start + w.end) / 2


def words_from(words: list[Word], t: float) -> list[Word]:
    """The words of a window that starts at stream time ``t`` (those centred in it)."""
    return [w for w in words if centre(w) >= t]


def _before(words: list[Word], t: float) -> list[Word]:
    """The words before a window that starts at stream time ``t``: those ``words_from`` leaves."""
    return [w for w in words if centre(w) < t]


def spoken(w: Word) -> bool:
    return any(c.isalnum() for c in w.word)
