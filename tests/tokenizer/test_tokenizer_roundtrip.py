"""Exact bytes for real vocabularies: the oracle is the tokenizer's own ``encode``.

For any text ``s`` (without special-token text), concatenating ``token_bytes`` over
``encode(s, add_special_tokens=False)`` must give ``s.encode()`` — with one leading space for
tokenizers that add it. Which do is written down here per family, not taken from the code under
test: GGUF-converted Llama-2 uses ``Metaspace(prepend_scheme="first")``, which adds ``▁`` unless the
text already starts with a space; a ``Prepend`` normalizer (Hugging Face's own Llama-2 file) always
adds it. A second oracle covers every id, not only those random text reaches: the library's
``decode`` of a single token, wherever that is well defined.
"""

from __future__ import annotations

import random
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, normalizers, pre_tokenizers

from grammarsd.testing import TOKENIZER_NAMES, hf_tokenizer, tokenizer_info
from grammarsd.tokenizer import TokenizerInfo

ADVERSARIAL = [
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t\t x",
    "\r\n",
    "   leading and trailing   ",
    "a\u0301e\u0308\u0327",  # combining marks
    "👩‍👩‍👧‍👦 family 🇫🇷 flag 🎉🎉",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "Ġ▁ Ċ <0x0A> ĠĠ",  # the vocabularies' own marker characters, as text
    '{"key": [1, 2.5e-3, true, null], "nested": {"a": "b\\n"}}',
    "def f(x):\n    return x ** 2  # comment\n",
    "\x00\x01\x7f\u0085\u00a0\u2028\ufeff",
    "    \n    \n\t",
    "1234567890 3.14159 -42",
    "😀" * 7 + "a" + " " * 9,
    "\U0010ffff\U0001f600",
    "Ünïcödé ßtraße ﬁ ½ Ⅻ",
]

_ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    " \t\n\r  ",
    "{}[]:,\"'\\/.-+_=()<>!?#@$%^&*|~`;",
    "éèàùçñøåæœßüöäÿ",
    "日本語中文한국어テキスト",
    "😀🎉👍🏽🇫🇷🚀",
    "\u0301\u0308\u0327\u200d\ufe0f",
    "αβγδεжзийк",
]


def _random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = "".join(rng.sample(_ALPHABETS, rng.randint(1, 4)))
        out.append("".join(rng.choice(chars) for _ in range(rng.randint(0, 40))))
    return out


PREFIX_RULE = {"llama3": "never", "smollm2": "never", "llama2": "unless_space"}


@cache
def _special_texts(name: str) -> tuple[str, ...]:
    return tuple(hf_tokenizer(name).all_special_tokens)


def _unrepresentable(name: str, s: str) -> bool:
    """Text the tokenizer itself cannot encode faithfully: special-token text becomes a control
    token; SentencePiece reads a literal ``▁`` in the input as a space (see
    ``test_sentencepiece_marker_in_text_is_a_space``); a byte-level BPE silently drops bytes that
    have no token (the library's own decode then differs from the text; see
    ``test_smollm2_drops_bytes_it_has_no_token_for``)."""
    if any(t in s for t in _special_texts(name)):
        return True
    if name == "llama2":
        return "\u2581" in s
    tok = hf_tokenizer(name)
    return bool(tok.decode(tok.encode(s, add_special_tokens=False)) != s)


def _expected(rule: str, s: str) -> bytes:
    adds = bool(s) and (rule == "always" or (rule == "unless_space" and not s.startswith(" ")))
    return (b" " if adds else b"") + s.encode("utf-8")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_prefix_rule(name: str) -> None:
    assert tokenizer_info(name).prefix_rule == PREFIX_RULE[name]
    assert tokenizer_info(name).prefix_space == (PREFIX_RULE[name] != "never")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_thousands_of_strings_round_trip(name: str) -> None:
    info, tok = tokenizer_info(name), hf_tokenizer(name)
    candidates = ADVERSARIAL + _random_strings(3000, seed=7)
    texts = [s for s in candidates if not _unrepresentable(name, s)]
    assert len(texts) > 0.95 * len(candidates)
    encoded = tok(texts, add_special_tokens=False)["input_ids"]
    rule = PREFIX_RULE[name]
    bad = [
        (s, ids)
        for s, ids in zip(texts, encoded, strict=True)
        if info.decode_bytes(ids) != _expected(rule, s)
    ]
    assert not bad, bad[:3]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@settings(max_examples=150, deadline=None)
@given(s=st.text(st.characters(codec="utf-8"), max_size=60))
def test_hypothesis_strings_round_trip(name: str, s: str) -> None:
    if _unrepresentable(name, s):
        return
    ids = hf_tokenizer(name).encode(s, add_special_tokens=False)
    info = tokenizer_info(name)
    assert info.decode_bytes(ids) == _expected(PREFIX_RULE[name], s)
    assert info.decode_bytes(ids) == info.encoding_prefix(s) + s.encode()


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_every_token_agrees_with_library_decode(name: str) -> None:
    """Where one token's bytes are valid UTF-8, the library's decode of it must be that text."""
    info, tok = tokenizer_info(name), hf_tokenizer(name)
    special = set(info.special_ids)
    ids = [i for i in range(info.tokenizer_size) if i not in special]
    decoded = tok.backend_tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)
    checked = 0
    for i, text in zip(ids, decoded, strict=True):
        try:
            mine = info.token_bytes[i].decode("utf-8")
        except UnicodeDecodeError:
            continue  # a partial character: decode would show U+FFFD, ours keeps the bytes
        if info.prefix_space:  # the SentencePiece decoder strips one leading space
            mine = mine[1:] if mine.startswith(" ") else mine
        assert text == mine, (i, text, info.token_bytes[i])
        checked += 1
    assert checked > 0.9 * len(ids)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_special_tokens_have_no_bytes(name: str) -> None:
    info, tok = tokenizer_info(name), hf_tokenizer(name)
    assert set(tok.all_special_ids) <= set(info.special_ids)
    assert all(info.token_bytes[i] == b"" for i in info.special_ids)
    assert set(info.eos_ids) == {tok.eos_token_id}
    # special-token text in user input is matched as the control token, which has no bytes
    eos_text = tok.convert_ids_to_tokens(tok.eos_token_id)
    assert info.decode_bytes(tok.encode(eos_text, add_special_tokens=False)) == b""


def _variant(name: str, *, normalizer: object = None, pre_tokenizer: object = None) -> Tokenizer:
    """A copy of a built-in backend tokenizer with another normalizer / pre-tokenizer."""
    tok = Tokenizer.from_str(hf_tokenizer(name).backend_tokenizer.to_str())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    return tok


VARIANTS = {
    # Hugging Face's own Llama-2 tokenizer.json: Prepend + Replace normalizer, no pre-tokenizer.
    "llama2-prepend": (
        lambda: _variant(
            "llama2",
            normalizer=normalizers.Sequence(
                [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
            ),
        ),
        "always",
    ),
    # RoBERTa-style byte-level BPE that adds a prefix space.
    "smollm2-add-prefix-space": (
        lambda: _variant("smollm2", pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=True)),
        "unless_space",
    ),
}


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_pipeline_variants_round_trip(variant: tuple) -> None:  # type: ignore[type-arg]
    make, rule = variant
    tok = make()
    info = TokenizerInfo.from_huggingface(tok, eos_ids=[2])
    assert info.prefix_rule == rule
    texts = ADVERSARIAL + _random_strings(500, seed=11)
    for s, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False), strict=True):
        if any(t.content in s for t in tok.get_added_tokens_decoder().values()) or "\u2581" in s:
            continue
        assert info.decode_bytes(enc.ids) == _expected(rule, s), (s, enc.tokens)


def test_sentencepiece_marker_in_text_is_a_space() -> None:
    """A known loss of SentencePiece tokenizers: input ``▁`` is encoded as the space marker."""
    ids = hf_tokenizer("llama2").encode("a\u2581b", add_special_tokens=False)
    assert tokenizer_info("llama2").decode_bytes(ids) == b" a b"


def test_smollm2_drops_bytes_it_has_no_token_for() -> None:
    """SmolLM2's vocabulary has no token for some bytes (0x06 among them): encoding drops them."""
    assert hf_tokenizer("smollm2").encode("\x06", add_special_tokens=False) == []
    assert b"\x06" not in tokenizer_info("smollm2").token_bytes
