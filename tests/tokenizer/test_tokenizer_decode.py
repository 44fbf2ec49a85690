"""Piece -> bytes rules, checked against the `tokenizers` library's own byte-level alphabet."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from grammarsd.errors import TokenizerError
from grammarsd.tokenizer.decode import (
    BYTE_LEVEL_ALPHABET,
    VocabFormat,
    added_token_bytes,
    byte_level_piece_bytes,
    piece_bytes,
    sentencepiece_piece_bytes,
    vocab_format,
)

_BYTE_LEVEL = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


def test_byte_level_alphabet_matches_tokenizers_library() -> None:
    assert set(BYTE_LEVEL_ALPHABET) == set(pre_tokenizers.ByteLevel.alphabet())
    assert sorted(BYTE_LEVEL_ALPHABET.values()) == list(range(256))


@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_byte_level_inverts_the_library_encoding(s: str) -> None:
    # The library maps text to byte-level characters; we must map them back to the UTF-8 bytes.
    pieces = "".join(p for p, _ in _BYTE_LEVEL.pre_tokenize_str(s))
    assert byte_level_piece_bytes(pieces) == s.encode("utf-8")


@pytest.mark.parametrize("piece", ["hello\n", "a b", "\u2581x", "é\x00"])
def test_byte_level_rejects_characters_outside_the_alphabet(piece: str) -> None:
    with pytest.raises(TokenizerError, match="not in the byte-level alphabet"):
        byte_level_piece_bytes(piece)


SENTENCEPIECE_CASES = [
    ("\u2581hello", True, b" hello"),
    ("<0x0A>", True, b"\n"),
    ("<0xF0>", True, b"\xf0"),
    ("<0x0A>", False, b"<0x0A>"),
    ("<0x0A><0x0A>", True, b"<0x0A><0x0A>"),
    ("\u2581\u2581", True, b"  "),
    ("日本", True, "日本".encode()),
]


@pytest.mark.parametrize(("piece", "fallback", "expected"), SENTENCEPIECE_CASES)
def test_sentencepiece_pieces(piece: str, fallback: bool, expected: bytes) -> None:
    assert sentencepiece_piece_bytes(piece, byte_fallback=fallback) == expected


def test_added_tokens() -> None:
    assert added_token_bytes("<|im_end|>", special=True) == b""
    assert added_token_bytes("  <tool>é", special=False) == "  <tool>é".encode()


FORMAT_CASES = {
    "llama3-byte-level": (
        {"type": "BPE"},
        None,
        {"type": "Sequence", "pretokenizers": [{"type": "Split"}, {"type": "ByteLevel"}]},
        {"type": "ByteLevel"},
        VocabFormat("byte_level", "never"),
    ),
    "roberta-prefix": (
        {"type": "BPE"},
        None,
        {"type": "ByteLevel", "add_prefix_space": True},
        {"type": "ByteLevel"},
        VocabFormat("byte_level", "unless_space"),
    ),
    "llama2-metaspace": (
        {"type": "BPE", "byte_fallback": True},
        None,
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
        {"type": "Sequence", "decoders": [{"type": "Replace", "content": " "}]},
        VocabFormat("sentencepiece", "unless_space", byte_fallback=True),
    ),
    "llama2-hf-normalizer": (
        {"type": "BPE", "byte_fallback": True},
        {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            ],
        },
        None,
        {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
        VocabFormat("sentencepiece", "always", byte_fallback=True),
    ),
    "unigram-never": (
        {"type": "Unigram"},
        None,
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"},
        {"type": "Metaspace"},
        VocabFormat("sentencepiece", "never", byte_fallback=False),
    ),
}


@pytest.mark.parametrize("case", FORMAT_CASES.values(), ids=FORMAT_CASES.keys())
def test_vocab_format(case: tuple) -> None:  # type: ignore[type-arg]
    model, normalizer, pre, decoder, expected = case
    got = vocab_format(model=model, normalizer=normalizer, pre_tokenizer=pre, decoder=decoder)
    assert got == expected


@pytest.mark.parametrize(
    ("model", "decoder"),
    [({"type": "WordPiece"}, {"type": "WordPiece"}), ({"type": "BPE"}, {"type": "BPEDecoder"})],
)
def test_vocab_format_refuses_unknown_piece_encodings(model: dict, decoder: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(TokenizerError):
        vocab_format(model=model, normalizer=None, pre_tokenizer=None, decoder=decoder)


def test_raw_kind_has_no_pieces() -> None:
    with pytest.raises(TokenizerError):
        piece_bytes("x", VocabFormat("raw", "never"))
