"""The matcher against the reference recognizer on the three real vocabularies.

Llama-3 (128k byte-level BPE), SmolLM2 (49k byte-level BPE) and Llama-2 (32k SentencePiece with byte
fallback). Prefixes come from the tokenizers' own encodings of sample texts, so they include the
tokens a model would really emit (multi-byte pieces, split UTF-8, leading spaces).
"""

from __future__ import annotations

import numpy as np
import pytest

from grammarsd.compiler.compiled import compile_ir
from grammarsd.grammar.bundled import load_bundled
from grammarsd.grammar.ir import (
    ANY_CHAR,
    Grammar,
    Ref,
    char_set,
    chars,
    choice,
    lit,
    optional,
    repeat,
    seq,
)
from grammarsd.grammar.regex import grammar_from_regex
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.testing import hf_tokenizer

DIGIT = chars([(0x30, 0x39)])
WS = repeat(char_set(" \n\t"), 0, 4)


def _json_grammar() -> Grammar:
    char = ANY_CHAR.intersect(char_set('"\\').negate()).intersect(chars([(0x20, 0x10FFFF)]))
    escape = seq(lit("\\"), char_set('"\\/bfnrt'))
    number = seq(
        optional(lit("-")),
        choice(lit("0"), seq(chars([(0x31, 0x39)]), repeat(DIGIT, 0, None))),
        optional(seq(lit("."), repeat(DIGIT, 1, None))),
    )

    def listing(open_: str, item: str, close: str):  # noqa: ANN202
        more = repeat(seq(WS, lit(","), WS, Ref(item)), 0, None)
        return seq(lit(open_), WS, optional(seq(Ref(item), more)), WS, lit(close))

    return Grammar(
        {
            "value": choice(
                Ref("object"), Ref("array"), Ref("string"), number, lit("true"), lit("null")
            ),
            "object": listing("{", "member", "}"),
            "member": seq(Ref("string"), WS, lit(":"), WS, Ref("value")),
            "array": listing("[", "value", "]"),
            "string": seq(lit('"'), repeat(choice(char, escape), 0, None), lit('"')),
        },
        start="value",
    )


GRAMMARS = {
    "json": (
        _json_grammar(),
        '{"city": "Zürich ☃ 東京", "n": [1, -2.5, {"deep": null}], "emoji": "😀"}',
    ),
    "dates": (
        Grammar(
            {"start": repeat(seq(DIGIT, DIGIT, lit("-"), char_set("01"), DIGIT, lit("\n")), 1, 4)}
        ),
        "12-05\n99-11\n00-07\n",
    ),
    "bundled_json_lark": (
        load_bundled("json.lark"),
        '{"a": [true, false, null], "b": {"c": "d\\n\\u00e9"}, "e": -0.5e+3}',
    ),
    "bundled_json_gbnf": (load_bundled("json.gbnf"), '[{"k": ["v", 1, 2.5]}, "x", true]'),
    "bundled_arithmetic": (load_bundled("arithmetic.lark"), "(1 + 2.5) * x - 3 / (y + 4)"),
    "python_regex": (
        grammar_from_regex(r"(?i:[a-z]+)@\w+\.(com|org)( \d{1,3})?"),
        "Ada@exämple.org 42",
    ),
}


@pytest.mark.parametrize("vocab", ["llama3", "smollm2", "llama2"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_match_oracle_on_real_vocabularies(request, vocab: str, name: str) -> None:  # noqa: ANN001
    info = request.getfixturevalue(f"{vocab}_info")
    tokenizer = hf_tokenizer(vocab)
    grammar, text = GRAMMARS[name]
    ref = ReferenceRecognizer(grammar)
    m = compile_ir(grammar, info).matcher()
    ids = tokenizer.encode(text, add_special_tokens=False)
    prefix = info.decode_bytes(ids)
    if info.prefix_space:  # SentencePiece: the first piece carries the leading "▁"
        assert prefix.startswith(b" ")
        prefix = prefix[1:]
        assert m.accept_string(b"")
    assert prefix == text.encode()
    checks = sorted(set(np.linspace(0, len(ids), 4).astype(int)))
    done = b""
    for i in range(len(ids) + 1):
        if i in checks:
            allowed = np.zeros(info.vocab_size, dtype=bool)
            allowed[m.allowed_token_ids()] = True
            expected = np.asarray(ref.allowed_tokens(done, info.token_bytes), dtype=bool)
            for e in info.eos_ids:
                expected[e] = ref.is_complete(done)
            diff = np.flatnonzero(allowed != expected)
            assert not diff.size, [
                (int(t), info.token_bytes[t], bool(expected[t])) for t in diff[:10]
            ]
        if i == len(ids):
            break
        piece = info.token_bytes[ids[i]]
        if i == 0 and info.prefix_space:
            piece = piece[1:]
            assert m.accept_string(piece)
        else:
            assert m.accept_token(ids[i])
        done += piece
    assert m.is_accepting()
