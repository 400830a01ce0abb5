"""Punctuation around a step's forced prefix in Chinese (``Engine._words``), with the base
model's real tokenizer and faster-whisper's word split; only the aligner's times are made up
(0.2 s a word). The decoder and the aligner themselves run in tests/test_lang_e2e.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from whisperwire.server.engine import Engine
from whisperwire.server.text import join_units


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    import tokenizers
    from faster_whisper.tokenizer import Tokenizer
    from whisperwire.server.models import resolve_model

    hf = tokenizers.Tokenizer.from_file(f"{resolve_model('base')}/tokenizer.json")
    return Tokenizer(hf, True, task="transcribe", language="zh")


def words(tok, text: str, prefix: str = "") -> list:  # type: ignore[no-untyped-def]
    """The words ``_words`` keeps of ``text`` decoded after ``prefix`` forced."""
    ids = tok.encode(prefix + text)
    skip = len(tok.encode(prefix)) if prefix else 0
    assert ids[:skip] == tok.encode(prefix)[:skip]
    ws, wt = tok.split_to_word_tokens(ids + [tok.eot])
    al = [{"word": w, "tokens": x, "start": i * 0.2, "end": i * 0.2 + 0.2, "probability": 0.9}
          for i, (w, x) in enumerate(zip(ws, wt))]
    me = SimpleNamespace(_wm=SimpleNamespace(find_alignment=lambda *a: [[dict(x) for x in al]]))
    return Engine._words(me, [None], [tok], [ids], [skip], [SimpleNamespace(duration=5.0)])[0]


@pytest.mark.parametrize("text", ["他说：“我们走吧。”", "我看了，《三体》。", "很好。（笑）",
                                  "他表示，“要坚持。”"])
def test_marks_without_a_prefix_are_all_kept(tok, text):
    """Opening quotes and brackets after a mark were dropped as "a mark after a mark"."""
    assert join_units(w.word for w in words(tok, text)) == text


def test_a_mark_after_the_prefixs_last_character_is_a_unit_of_its_own(tok):
    """The prefix ends on the character a comma follows: the comma comes merged onto that
    character's word, which is final already. It stays, as a unit at that word's end."""
    out = words(tok, "，能在黑暗中", prefix="他们的夜市能力很强")
    assert out[0].word == "，" and out[0].start == out[0].end
    assert join_units(w.word for w in out) == "，能在黑暗中"
    # ... and an opening mark after a prefix that ends on one opens what follows
    out = words(tok, "“我们走吧。”", prefix="他说：")
    assert join_units(w.word for w in out) == "“我们走吧。”"
