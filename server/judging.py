"""What a decode's words are worth, by the rules that catch what Whisper invents: no speech,
loops, the forced prefix read again, jumps over speech, an end decode that stops short or
doubts every word of a sliver. Pure: a decode and the run's state in, words and a verdict out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

import numpy as np

from .agreement import join_words, split_units, unit_key
from .audio import MODEL_RATE
from .decoding import DecodeRequest, DecodeResult
from .rereads import (REREAD_UNITS, centre, drop_unsure_echoes, heard_again, loop_phrase,
                      loop_start, repeated_head, restarted_head, said_on, spoken, spoken_repeats,
                      spoken_twice, squeezed, squeezed_runs, unsaid_words, words_from)
from .stream_options import StreamOptions
from .text import is_unspaced
from .text import split_units as text_units
from .utterance import EndMark, Kind, Run
from .voicing import VOICED, a_voice, voiced
from .wire import Word

__all__ = ["Judge", "Verdict"]


class Verdict(enum.Enum):
    """What Whisper's known-invention guards made of one decode."""

    WHOLE = "whole"  # nothing cut
    TRIMMED = "trimmed"  # a loop, echo or re-read phrase cut away; the words before it kept
    REJECTED = "rejected"  # nothing to trust: ask again differently
    NO_SPEECH = "no speech"  # Whisper says the window holds none (asked again: Judge.hushed)


def held_words(u: Run) -> list[Word]:
    """The window's previous hypothesis past the committed point: what a careful decode that
    jumps leaves out (:meth:`Judge.skips`, ``jumped_over``)."""
    return [w for w in u.buffer.pending if w.start >= u.buffer.committed_end - 0.05]


def heard_past(req: DecodeRequest, committed_end: float) -> np.ndarray:
    """The window's audio past the final words (all of it when they end before it)."""
    return req.audio[max(0, int(round((committed_end - req.offset) * MODEL_RATE))):]


def _after_final_text(u: Run, task: str) -> bool:
    """Whether an utterance of its own may be judged by the words after final text in its run
    (not the first thing said, which ``all_doubt`` hears for a voice, nor a translation, whose
    words' chances were never measured)."""
    return task != "translate" and bool(u.buffer.committed)


def end_mark(u: Run, win_end: float) -> EndMark | None:
    """The utterance end the VAD called where a window ends, if it ends at one."""
    return u.ends.get(int(round(win_end * MODEL_RATE)))


@dataclass(frozen=True)
class _Reading:
    """One decode's words as :meth:`Judge.accepted_words` judges them, whichever re-read of
    the final text it then skips (:meth:`Judge._past_head`)."""

    req: DecodeRequest
    r: DecodeResult
    out: list[Word]  # its words in stream time, ...
    keys: list[str]  # ... as units
    prefix: list[str]  # the final text in the window, as units
    unsaid: set[int]  # (ids of) words nothing in the audio says
    committed: list[Word]
    committed_end: float
    silent_from: float  # see Judge.silent_from
    lapsed: bool  # a translation that lapsed into the source's script
    repeats_said: bool  # phrases said again may be the speaker's (Judge._spoken)
    audio_end: float  # where the window's audio ends (a word squeezed there was cut by it)


class Judge:
    """The guards, with the stream's options."""

    def __init__(self, opt: StreamOptions) -> None:
        self.opt = opt

    def skips(self, u: Run, req: DecodeRequest, words: list[Word]) -> bool:
        """A decode forced past a prefix starts its words after ``skip_retry_words`` or more
        words that the window's previous hypothesis (not final yet) heard after the committed
        point, and says none of them: Whisper jumped over them. (Words it says again, placed
        elsewhere by the aligner, are no jump.) Judged by time, and by text: the aligner may
        stretch the first word after a jump back over what was left out (en-02: held "C. And I
        got to go work on military ships", read "work on military ships" with "work" from
        74.26 s, right after the final "Navi")."""
        heard = [w for w in words if spoken(w)]
        if self.opt.skip_retry_words <= 0 or not req.prefix or not heard:
            return False  # (hearing nothing at all is for the mute rule)
        said = {unit_key(w.word) for w in heard}
        passed = [w for w in held_words(u) if spoken(w) and centre(w) < heard[0].start
                  and unit_key(w.word) not in said]
        return len(passed) >= self.opt.skip_retry_words or self.jumped_over(u, words) > 0

    def jumped_over(self, u: Run, words: list[Word]) -> int:
        """How many held units (the window's previous hypothesis past the committed point)
        come before the place where ``words`` start saying them again (their first two, or
        else their first), if those are ``skip_retry_words`` or more spoken words and
        ``words`` never say two of them in a row; else 0."""
        said = [unit_key(w.word) for w in split_units(words) if spoken(w)]
        held = held_words(u)
        keys = [unit_key(w.word) for w in held]
        i = next((i for n in (2, 1) for i in range(len(held)) if said
                  and keys[i : i + n] == said[:n]), 0)
        pairs = set(zip(said, said[1:]))
        if sum(spoken(w) for w in held[:i]) < self.opt.skip_retry_words or any(
                p in pairs for p in zip(keys[:i], keys[1:i])):
            return 0
        return i

    def with_jumped_over(self, u: Run, words: list[Word]) -> list[Word]:
        """``words``, after the held words they jumped over (:meth:`jumped_over`), if a
        careful decode heard them. Asked from the last final on without prompt or prefix,
        Whisper may still start further on and stretch its first word over what it left out
        (en-02 flat out: "And" at 11.88-13.56 s, where the full window before it heard "Like
        how did I know? Yeah. And mine was blank."): that hypothesis is the one reading of
        those words there is, and words are never dropped."""
        if u.held_by in (None, Kind.STEP):
            return words  # a greedy step's words are no reading to trust: it may invent them
        i = self.jumped_over(u, words)
        if not i:
            return words
        held = held_words(u)
        t = held[i - 1].end  # the decode's words start after them
        return held[:i] + [replace(w, start=max(w.start, t), end=max(w.end, t)) for w in words]

    def all_doubt(self, u: Run, words: list[Word], win_end: float, no_speech: float) -> bool:
        """An end decode of an utterance shorter than ``doubted_end_ms``, none of it final yet,
        in which Whisper doubts every word it places in the audio and says the window may hold
        no speech (``no_speech``: its no-speech probability), and whose audio holds no voice
        (a breath; not espeak's lone "Sure.", doubted as much). (Not the doubted last word of
        a longer utterance: "We will be sure if I" final, then "can." at p < 0.3, en-08; nor
        when the window holds words of an earlier utterance not final yet: a backlog's end
        decode, a phrase held for the language joined by the next.)"""
        o = self.opt
        mark = end_mark(u, win_end)
        if mark is None:
            return False  # (not an utterance's end: a pause or finalize)
        start = mark.began / MODEL_RATE
        placed = [w for w in words_from(words, u.buffer.committed_end)
                  if spoken(w) and not squeezed(w)]
        return bool(o.doubted_end_ms and placed
                    and no_speech >= o.doubted_end_no_speech
                    and u.buffer.committed_end <= start
                    and all(centre(w) >= start for w in placed)
                    and win_end - start < o.doubted_end_ms / 1000
                    and all(w.probability < o.commit_probability for w in placed)
                    and not (o.doubted_end_voicing
                             and voiced(u.audio(mark.began, mark.spoken_to),
                                        o.doubted_end_voicing)))

    def lone_doubt(self, u: Run, words: list[Word], win_end: float, task: str = "transcribe"
                   ) -> bool:
        """An end decode adds to the final text only words Whisper all but rules out (p <
        ``lone_doubt_probability``): one word after final words of its own utterance, or, in
        an utterance of its own after final text (its window reaches back over it), every word
        it places in the audio, with at most one word after them that the aligner squeezes to
        no time (a word squeezed before or between them may be real speech the aligner could
        not place: the decode stands).

        Forced past final text and asked to go on over a sound that is not speech, it writes a
        conjunction with almost no chance: jfk's "... for your country." final, then a
        sawtooth buzz, a 50 Hz hum or noise bursts 0.15 s after it, inside the VAD's hangover,
        and the end decode wrote "And" over the sound at p 0.002-0.008 (no-speech 0.07), where
        offline decoding of the same audio says nothing more. 1 s after it the sound is an
        utterance of its own, and its end decode wrote "And" (clicks, the buzz, piano notes: p
        0.002-0.006), "Ah." (a hum: 0.006) or, heard without the final words, "Thank"
        (0.003-0.009) and a "you." squeezed to no time. The sound passes every test of a voice
        (periodic, not tonal, no-speech low after speech); the words' chance is what tells.
        Speech misheard comes out surer: on real/ in real time and under load, the lone
        doubted words of end decodes ("Oh.", "lake.", "knew.", "Boy.", "Mm.") had p 0.04-0.09,
        espeak's lone "Sure." and "Hello." 0.17-0.18. A backlog's window of several utterances
        none final is judged whole: every word in it has to be that unsure (a square wave's
        beeps, each an utterance, came out "I" stretched over six of them at p 0.002). Not for
        the first thing said in the run (all_doubt's, which hears for a voice), nor a
        translation (its words were not measured)."""
        p = self.opt.lone_doubt_probability
        mark = end_mark(u, win_end)
        if not p or mark is None:
            return False
        committed_end = u.buffer.committed_end
        began = mark.began / MODEL_RATE
        new = [w for w in words_from(words, committed_end) if spoken(w)]
        if committed_end > began:  # the utterance has final words
            return len(new) == 1 and new[0].probability < p
        if not _after_final_text(u, task):
            return False
        if len(new) > 1 and squeezed(new[-1]):  # Whisper ends its stock phrase: "Thank" "you."
            new = new[:-1]
        return bool(new) and all(not squeezed(w) and w.probability < p for w in new)

    def unvoiced_doubt(self, u: Run, words: list[Word], win_end: float,
                       task: str = "transcribe") -> bool:
        """An end decode of utterances of their own after final text (none of them final
        yet), in which Whisper doubts every new word (p < ``unvoiced_doubt_probability``,
        placed or squeezed) and whose audio, from the first of them to the last's end, holds
        no voice (:func:`.voicing.voiced`). 1 s after jfk a 50 Hz hum or noise bursts
        (voicing 0.14-0.19) were read "Ah." at p 0.006, then "Aah!" at 0.14-0.16, and read on
        "Aah!" at 0.50; a lone word misheard in speech is doubted as much ("Boy." 0.08, "Mm."
        0.09 on real/) but said with a voice (0.89 and more). An utterance partly final
        (agreement committed its first words) keeps its decode: its audio would not be all
        judged. Not for the first thing said (``all_doubt``), nor a translation (unmeasured).
        Whispered speech has no pitch period either: a whispered reply doubted in every word
        would go (unmeasured: ../shared has none)."""
        o = self.opt
        mark = end_mark(u, win_end)
        if not o.unvoiced_doubt_probability or mark is None or not _after_final_text(u, task):
            return False
        at = int(round(win_end * MODEL_RATE))
        open_ = [m for e, m in u.ends.items() if e <= at]
        committed_end = u.buffer.committed_end
        if any(m.began / MODEL_RATE < committed_end for m in open_):
            return False
        new = [w for w in words_from(words, committed_end) if spoken(w)]
        if not new or any(w.probability >= o.unvoiced_doubt_probability for w in new):
            return False
        # from the first open utterance or word, whichever comes first: words Whisper placed
        # in no utterance the VAD still holds (its end mark cleared by a join) are judged on
        # their own audio too. (``doubted_end_voicing`` 0 turns off all_doubt's voice test,
        # not this rule's: without a voice test this rule would be lone doubt at p 0.3)
        first = min(min(m.began for m in open_), int(min(w.start for w in new) * MODEL_RATE))
        return not voiced(u.audio(first, mark.spoken_to), o.doubted_end_voicing or VOICED)

    def stops_short(self, u: Run, words: list[Word], win_end: float) -> bool:
        """An end decode's last word ends ``tail_check_ms`` or more before the speech the VAD
        heard in the window (asked once per utterance end)."""
        end = int(round(win_end * MODEL_RATE))
        heard = [w for w in words if spoken(w)]
        if not self.opt.tail_check_ms or not heard or u.tail_for == end or end not in u.ends:
            return False  # (not once the utterance went on while its end decode was out)
        mark = u.ends.get(end)
        spoken_to = (end if mark is None else mark.spoken_to) / MODEL_RATE
        return spoken_to - heard[-1].end >= self.opt.tail_check_ms / 1000

    def doubted_read_on(self, new: list[Word]) -> bool:
        """A read-on (``tail_check_ms``) hears the speech after the words its end decode stopped
        at only unsurely: every word it places there under ``doubted_read_on_probability``.
        Forced past those words, Whisper goes on from them whatever they are, and when it
        stopped where it misheard ("for old" for "for at Old Dominion"), what comes after is a
        guess ("minion?", p 0.15, placed in the last 0.36 s of speech). A word the aligner
        squeezes to no time says nothing of the audio: en-04 flat out read on "Women." (p 0.13)
        squeezed, and asked again without forced words the window came out worse (56.6 -> 59.4
        and 64.2 % in two replays: the asking draws sampled fallbacks there)."""
        p = self.opt.doubted_read_on_probability
        heard = [w for w in new if spoken(w) and not squeezed(w)]
        return bool(p and heard) and all(w.probability < p for w in heard)

    def degenerate(self, r: DecodeResult) -> bool:
        """A greedy decode whose text compresses this well failed by faster-whisper's own rule
        (which then decodes again with sampling); the loop guard cuts what it can, but the
        words before the loop are not to be trusted either."""
        return r.compression_ratio > self.opt.compression_ratio_threshold

    def says_no_speech(self, r: DecodeResult, voice_loop: bool = False) -> bool:
        """Whisper itself says the window holds no speech. ``voice_loop``: the decode is a
        voice's loop (see :meth:`voice_loops`)."""
        o = self.opt
        if o.sure_no_speech and r.no_speech_prob > o.sure_no_speech:
            return True
        return r.no_speech_prob > o.no_speech_threshold and (
            r.avg_logprob < o.logprob_threshold
            # beam search can make a hallucination on noise ("you") look likely as a whole;
            # its words stay unlikely one by one
            or bool(r.words and max(w.probability for w in r.words) < 0.5)
            # a tone heard as a loop ("Beep Beep Beep...", "F- F- F-...", no-speech 0.74-0.85):
            # likely words, each the last one again
            or (self.degenerate(r) and not voice_loop))

    def voice_loops(self, r: DecodeResult, heard: np.ndarray) -> bool:
        """A decode that loops on a phrase of three units or more, where Whisper says the window
        may hold no speech (over ``no_speech_threshold``) and the audio past the final words,
        ``heard``, is a voice (:func:`.voicing.a_voice`): someone saying a question again and
        again, not a tone. espeak's "Can you hear me?" said three times looped on to six in
        every end decode, at no-speech 0.58-0.74, and the rule for a tone heard as a loop left
        nothing at all said. What a tone, a beep, a buzz or music loops on is a word or two
        ("Beep", "F-", "Thank you."); and a harmonic sound (a square wave, a buzz, an
        instrument) is as periodic as a voice and no more tonal, so it takes both."""
        if not self.degenerate(r) or r.no_speech_prob <= self.opt.no_speech_threshold:
            return False
        keys = [unit_key(w.word) for w in split_units(r.words)]
        return loop_phrase([], keys) >= 3 and a_voice(heard)

    def hushed(self, req: DecodeRequest, r: DecodeResult, committed_end: float) -> bool:
        """A careful decode that Whisper's no-speech rule called silence (not sure of it:
        ``sure_no_speech``) on an encoder input shorter than its 30 s (the engine says which
        input it used), where the audio past
        the final words is a voice (:func:`.voicing.a_voice`). The rule was made on the whole
        input Whisper trained on. espeak's "Is it on? Is it on?" with a 1 s lead: its 1.8 s
        end decode, encoded in 8 s, read "It's all, it's all, it's all" at log-probability
        -1.14 and no-speech 0.73, and nothing was said; on the 30 s input, "Give it on, give
        it on." at -0.78 and 0.39 (in 16 s still 0.64)."""
        o = self.opt
        return (o.hushed_retry and req.careful and not r.whole
                and not (o.sure_no_speech and r.no_speech_prob > o.sure_no_speech)
                and a_voice(heard_past(req, committed_end)))

    def looped_short(self, req: DecodeRequest, r: DecodeResult, verdict: Verdict,
                     new: list[Word]) -> bool:
        """A careful decode that loops (faster-whisper's compression rule, after its sampled
        fallback), of which the guards kept no new spoken word (``new``), on an encoder input
        shorter than Whisper's 30 s. Near the end of a short input Whisper runs on saying what
        it just said. espeak's "Can you hear me?" said three times (1 s lead): the end decode's
        read-on past the first saying (window 0.93-4.59 s, encoded in 6 s) wrote the question
        five times, the last three squeezed into the window's end (compression 3.6), and was
        rejected; encoded in 8 and 10 s, four and three times; in 16 and 30 s twice, the two
        sayings left, at 1.8. "Hello, can you hear me?" said three times, its read-on past two
        sayings: the third saying squeezed and said again (2.7), nothing kept; in 30 s once.
        (Not a loop the guards call silence: a tone's or a buzz's "Beep Beep Beep".)"""
        return (self.opt.loop_retry and req.careful and not r.whole and self.degenerate(r)
                and verdict != Verdict.NO_SPEECH and not any(spoken(w) for w in new))

    def overturns(self, r: DecodeResult) -> bool:
        """A window asked again on the whole input after :meth:`hushed` is speech only where
        both of Whisper's measures say so: no-speech at most ``no_speech_threshold`` and average
        log-probability at least ``logprob_threshold`` (its rule alone needs one). A buzzer, a
        sawtooth or piano notes 0.15 s after jfk pass for a voice (harmonic, as a voice is), and
        their 30 s readings wrote "Thank you.", "You" or "Yeah." at no-speech 0.55-0.59 and
        log-probability -1.22 to -1.52 (bench.nonspeech --gap 0.15: runs with invented words
        after speech 9 -> 12 of 51 without this); "Is it on? Is it on?" read at 0.39, -0.78."""
        o = self.opt
        return r.no_speech_prob <= o.no_speech_threshold and r.avg_logprob >= o.logprob_threshold

    def silent_from(self, u: Run, win_end: float) -> float:
        """Where the VAD heard the speech stop, when the window ends at an utterance's end
        (the hangover's silence follows); else never."""
        mark = end_mark(u, win_end)
        return float("inf") if mark is None else mark.spoken_to / MODEL_RATE

    def accepted_words(self, req: DecodeRequest, r: DecodeResult, win_end: float,
                        committed_end: float, committed: list[Word] | None = None,
                        silent_from: float = float("inf"), silence_asked: bool = False
                        ) -> tuple[list[Word], Verdict]:
        """The result's words in stream time, minus Whisper's known inventions; and what the
        guards made of the decode (a loop they could not cut away rejects it as a whole).
        ``silent_from``: see :meth:`silent_from`; ``silence_asked``: the decode asks a verdict
        of silence again (:meth:`hushed`, :meth:`overturns`)."""
        voice = self.voice_loops(r, heard_past(req, committed_end))
        if self.says_no_speech(r, voice) or (silence_asked and not self.overturns(r)):
            return [], Verdict.NO_SPEECH
        out = []
        for w in r.words:
            start = min(req.offset + w.start, win_end)
            out.append(Word(w.word, start, min(max(req.offset + w.end, start), win_end), w.probability))
        # Whisper translates into English only: a translation that lapses into the source's
        # script (after a forced English prefix, base writes "...the effect of壮机的规模") is
        # asked again differently; its English words stay if it keeps lapsing
        lapsed = req.task == "translate" and any(is_unspaced(c) for w in out for c in w.word)
        if lapsed:
            out = [w for w in out if not any(is_unspaced(c) for c in w.word)]
        keys = [unit_key(w.word) for w in out]
        # what is already final in the window: the forced prefix, or, when a retry went without
        # it, the final words Whisper hears again ("Gator loves China" final; then "Gator
        # Love's China. Jumanjo" with "China." squeezed past its audio)
        said = req.prefix or join_words(words_from(committed or [], req.offset))
        prefix = [unit_key(x) for x in text_units(said)]
        # a decode that ran on saying it is Whisper's loop; but a voice's loop in an utterance's
        # end decode, which knows where the speech stopped, keeps the sayings said in it before
        # the loop ran on past them (espeak's "Can you hear me?" said three times: six sayings,
        # the second 2.27-3.25 s with p 0.97-1.0, the copies after the third squeezed at
        # 3.97-4.09 s)
        repeats_said = not self.degenerate(r) or (voice and silent_from < float("inf"))
        # words nothing in the audio says: they go after the loop cut (below)
        # (not in a translation: its English has no place in the audio, and the aligner
        # squeezes its last words to no time as often as not: "... and the low-level effect
        # of" was all of zh-08's that came)
        unsaid = (set() if req.task == "translate" else unsaid_words(
            req, out, prefix[-REREAD_UNITS:])) | squeezed_runs(prefix, out, keys)
        # Whisper re-reading the phrase that ends its prefix, wherever the aligner put it (often
        # squeezed into the window's last instant, past the final audio) ...
        head = repeated_head(prefix, keys)
        skip = max(head, restarted_head(prefix, keys))
        g = _Reading(req, r, out, keys, prefix, unsaid, committed or [], committed_end,
                     silent_from, lapsed, repeats_said, win_end)
        # ... unless the speaker said that phrase again ("Can you hear me? Can you hear me?";
        # "I think so, I think" final, then "so."): unless what follows then loops from its
        # first word on ("Go, go, go!" final, then "Go, go, go!" with time), which was the
        # re-read. (A restart from the prefix's start, restarted_head, stays one.)
        if (skip and skip == head and not self.degenerate(r)
                and said_on(out[:skip], committed_end, silent_from, win_end)):
            kept, verdict = self._past_head(0, g)
            if verdict != Verdict.REJECTED:
                return kept, verdict
        return self._past_head(skip, g)

    def _past_head(self, skip: int, g: _Reading) -> tuple[list[Word], Verdict]:
        """:meth:`accepted_words` for the words after the first ``skip`` (a re-read)."""
        out, keys, prefix = g.out[skip:], g.keys[skip:], g.prefix
        first = heard_again(g.req, out, keys, prefix, g.committed, g.committed_end)
        out, keys = out[first:], keys[first:]
        new, heard = len(out), out
        out, keys = drop_unsure_echoes(prefix, out, keys, g.silent_from)
        # a loop is cut where it starts, also when the aligner squeezed its repeat past the
        # audio (en-06: "Does he" final, then "know the biscuit? Does he know the biscuit?",
        # the second "know the biscuit?" squeezed: cut after it, "Does he" was said twice)
        cut = loop_start(prefix, keys)
        if g.repeats_said:
            cut = self._spoken(prefix, out, keys, cut, heard, g)
        kept = [w for w in out[:cut] if id(w) not in g.unsaid]
        trimmed = cut < len(keys) or len(kept) < new or first + new < len(g.r.words)
        if not trimmed and g.r.compression_ratio > self.opt.compression_ratio_threshold:
            return [], Verdict.REJECTED  # repetitive, and no loop found to cut away
        if cut == 0 and any(id(w) not in g.unsaid for w in out):
            return [], Verdict.REJECTED  # it loops from its first word on
        # a loop keeps what came before it
        if g.lapsed:
            return kept, Verdict.REJECTED
        return kept, Verdict.TRIMMED if trimmed else Verdict.WHOLE

    @staticmethod
    def _spoken(prefix: list[str], out: list[Word], keys: list[str], cut: int,
                heard: list[Word], g: _Reading) -> int:
        """Where the loop found at ``cut`` really starts, past the phrases the speaker said
        again (a word or two three or four times, a longer phrase twice, or more on the
        ``whole`` input: :func:`.rereads.spoken_twice`), in any order ("and so my, and so my,
        no, no, no")."""
        while True:
            past = spoken_twice(prefix, out, keys, spoken_repeats(prefix, out, keys, cut, heard),
                                g.committed_end, g.silent_from, g.req.whole, g.audio_end)
            if past == cut:
                return cut
            cut = past
