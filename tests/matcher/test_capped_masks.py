"""Masks of capped terminals (``ir.Capped``): the numba matcher against the reference recognizer.

A capped terminal is a pattern's DFA plus a count of decoded characters the matcher keeps per scan
(``_kernels.Tables``). The vocabulary mixes JSON escapes, multi-byte characters, tokens cut inside
them and tokens that cross the closing quote, and the caps are a few characters above and below
the longest token, so walks use both a state's own mask-cache row and the rows kept for the
characters left near the cap. Every mask and EOS decision must equal the reference's (which counts
with its own JSON decoder), and a reference one character more lenient must disagree somewhere.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from grammarsd.compiler.compiled import compile_ir
from grammarsd.compiler.tables import CompileLimits
from grammarsd.errors import GrammarError
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import (
    ANY_CHAR,
    Capped,
    Grammar,
    char_set,
    chars,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.tokenizer.info import TokenizerInfo

EOS = 0
PIECES = ("a", "b", " ", "é", "😀", "\\n", "\\u00e9", "\\ud83d\\ude00", '"', ",", "}", '{"')


def _vocab(seed: int = 0) -> TokenizerInfo:
    """Id 0 is EOS; every piece and byte-level cut of one, and random runs of 2-6 pieces."""
    rng = random.Random(seed)
    pieces: list[bytes] = []
    for p in PIECES:
        enc = p.encode()
        pieces.append(enc)
        pieces.extend(enc[:k] for k in range(1, len(enc)))
        pieces.extend(enc[k:] for k in range(1, len(enc)))
    for _ in range(120):
        pieces.append("".join(rng.choice(PIECES[:8]) for _ in range(rng.randint(2, 6))).encode())
    for _ in range(20):  # letter runs: walks reach long caps in few steps
        pieces.append("".join(rng.choice("ab") for _ in range(rng.randint(2, 8))).encode())
    for _ in range(30):  # runs that close the string
        pieces.append(("".join(rng.choice(PIECES[:4]) for _ in range(rng.randint(1, 3)))
                       + rng.choice(['"', '",', '"}'])).encode())
    unique = list(dict.fromkeys(pieces))
    return TokenizerInfo.from_token_bytes([b""] + unique, eos_ids=[EOS], special_ids=[EOS])


VOCAB = _vocab()
NOT_SPACE = encode_class(chars([(0, 0x10FFFF)]).intersect(char_set(" \n").negate()))
SPACE = encode_class(char_set(" \n"))
WORDS = seq(repeat(seq(repeat(NOT_SPACE, 1), repeat(SPACE, 1)), 0, 4), repeat(NOT_SPACE, 1))
LETTERS = repeat(char_set("ab"), 0)  # raw letters only: no escape spelling


def _string(body: Capped) -> Grammar:
    return Grammar.single(seq(lit('"'), body, lit('"')))


def _object(first: Capped, second: Capped) -> Grammar:
    """Two capped fields, the second optional: the first string's closing quote is followed by
    ``,`` or ``}``, so tokens crossing it are walked through the parser."""
    field2 = seq(lit(',"'), second, lit('"'))
    return Grammar.single(seq(lit('{"'), first, lit('"'), choice(lit(""), field2), lit("}")))


def _mask(ref: ReferenceRecognizer, prefix: bytes) -> np.ndarray:
    mask = np.asarray(ref.allowed_tokens(prefix, VOCAB.token_bytes), dtype=bool)
    mask[EOS] = ref.is_complete(prefix)
    return mask


def _walk(grammar: Grammar, oracle: Grammar, seed: int, steps: int,
          limits: CompileLimits | None = None) -> str | None:
    """Walk ``grammar``'s matcher by random allowed tokens; the first disagreement with the
    reference of ``oracle`` (prefix and tokens), or None."""
    ref = ReferenceRecognizer(oracle)
    m = compile_ir(grammar, VOCAB, limits=limits).matcher()
    rng = random.Random(seed)
    prefix = b""
    for _ in range(steps):
        expected = _mask(ref, prefix)
        got = np.zeros(VOCAB.vocab_size, dtype=bool)
        got[m.allowed_token_ids()] = True
        diff = np.flatnonzero(expected != got)
        if diff.size:
            return f"prefix={prefix!r}: " + ", ".join(
                f"{VOCAB.token_bytes[t]!r} ref={expected[t]}" for t in diff[:6])
        assert m.is_accepting() == ref.is_complete(prefix)
        # prefer tokens that stay inside the string, so walks reach the cap
        inside = [t for t in np.flatnonzero(expected) if t != EOS
                  and b'"' not in VOCAB.token_bytes[t]]
        choices = inside or [t for t in np.flatnonzero(expected) if t != EOS]
        if not choices:
            return None
        t = int(rng.choice(choices))
        assert m.accept_token(t)
        prefix += VOCAB.token_bytes[t]
    return None


CASES = [
    ("words-3", lambda c: _string(Capped(WORDS, c)), 3),
    ("words-9", lambda c: _string(Capped(WORDS, c)), 9),
    ("words-40", lambda c: _string(Capped(WORDS, c)), 40),
    ("letters-30", lambda c: _string(Capped(LETTERS, c)), 30),
    ("letters-110", lambda c: _string(Capped(LETTERS, c)), 110),
    ("object", lambda c: _object(Capped(WORDS, c), Capped(LETTERS, c + 2)), 6),
]


@pytest.mark.parametrize(("name", "make", "cap"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", range(3))
def test_capped_masks_match_reference(name: str, make, cap: int, seed: int) -> None:  # noqa: ANN001
    grammar = make(cap)
    problem = _walk(grammar, grammar, seed, steps=30)
    assert problem is None, f"{name}, seed {seed}: {problem}"


@pytest.mark.parametrize(("name", "make", "cap"), CASES, ids=[c[0] for c in CASES])
def test_a_looser_cap_is_noticed(name: str, make, cap: int) -> None:  # noqa: ANN001
    """Negative control: the reference of the cap plus one disagrees on some walk."""
    found = any(_walk(make(cap), make(cap + 1), seed, steps=80) for seed in range(6))
    assert found, name


def test_a_cap_no_string_fits_is_a_typed_error() -> None:
    """``"ab"{3,}`` under a cap of 2 would start a scan that can never accept: refused when the
    matcher is built, never an allowed dead end."""
    grammar = _string(Capped(repeat(char_set("ab"), 3), 2))
    with pytest.raises(GrammarError, match="needs 3 characters, cap 2"):
        compile_ir(grammar, VOCAB).matcher()


# A counted repeat of JSON characters longer than a chunk (a long ``maxLength`` string) is lowered
# to a capped terminal; the reference runs the counted repeat itself. Small chunks keep it short.
SMALL_CHUNKS = CompileLimits(repeat_chunk=16)


def _long_string(most: int) -> Grammar:
    return Grammar.single(seq(lit('"'), repeat(encode_class(ANY_CHAR), 2, most), lit('"')))


@pytest.mark.parametrize("seed", range(3))
def test_long_string_repeat_masks_match_reference(seed: int) -> None:
    grammar = _long_string(40)
    assert compile_ir(grammar, VOCAB, limits=SMALL_CHUNKS).tables.term_cap.max() == 40
    problem = _walk(grammar, grammar, seed, steps=30, limits=SMALL_CHUNKS)
    assert problem is None, f"seed {seed}: {problem}"


def test_long_string_repeat_looser_bound_is_noticed() -> None:
    """Negative control: the reference of a bound one higher disagrees on some walk."""
    assert any(_walk(_long_string(40), _long_string(41), seed, steps=80, limits=SMALL_CHUNKS)
               for seed in range(6))
