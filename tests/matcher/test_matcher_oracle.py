"""The numba matcher against the slow reference recognizer, on toy vocabularies.

Random grammars (hypothesis) over a small alphabet with multi-byte characters; a toy vocabulary that
includes tokens splitting those characters; at every step of a random walk the full token mask and
the EOS decision must equal the oracle's.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammarsd.compiler.compiled import compile_ir
from grammarsd.errors import EmptyLanguageError, MatcherError
from grammarsd.grammar.ir import (
    ANY_CHAR,
    Expr,
    Grammar,
    Ref,
    char_set,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.tokenizer.info import TokenizerInfo

ALPHABET = "ab{é€😀"
EOS = 0


def toy_vocab(seed: int = 0) -> TokenizerInfo:
    """Id 0 is EOS (special); every char, every UTF-8 fragment, and random 2-4 char strings."""
    rng = random.Random(seed)
    pieces: list[bytes] = [b""]
    for ch in ALPHABET:
        enc = ch.encode()
        pieces.append(enc)
        pieces.extend(enc[:k] for k in range(1, len(enc)))
        pieces.extend(enc[k:] for k in range(1, len(enc)))
    for _ in range(60):
        pieces.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 4))).encode())
    pieces.append("é".encode()[1:] + b"a")  # crosses a character boundary
    pieces.append(b"\xff")  # never valid UTF-8
    unique = list(dict.fromkeys(pieces[1:]))
    unique.append(unique[3])  # a duplicate id with identical bytes
    return TokenizerInfo.from_token_bytes([b""] + unique, eos_ids=[EOS], special_ids=[EOS])


VOCAB = toy_vocab()


def engine_mask(matcher) -> np.ndarray:  # noqa: ANN001
    ids = matcher.allowed_token_ids()
    mask = np.zeros(VOCAB.vocab_size, dtype=bool)
    mask[ids] = True
    return mask


def oracle_mask(ref: ReferenceRecognizer, prefix: bytes) -> np.ndarray:
    mask = np.asarray(ref.allowed_tokens(prefix, VOCAB.token_bytes), dtype=bool)
    mask[EOS] = ref.is_complete(prefix)
    return mask


def walk_and_compare(grammar: Grammar, seed: int, steps: int = 8) -> None:
    ref = ReferenceRecognizer(grammar)
    try:
        compiled = compile_ir(grammar, VOCAB)
    except EmptyLanguageError:
        assert not ref.is_prefix(b"")
        return
    m = compiled.matcher()
    rng = random.Random(seed)
    prefix = b""
    for _ in range(steps):
        expected = oracle_mask(ref, prefix)
        got = engine_mask(m)
        diff = np.flatnonzero(expected != got)
        assert not diff.size, f"grammar:\n{grammar}\nprefix={prefix!r}\n" + "\n".join(
            f"  token {t} {VOCAB.token_bytes[t]!r}: oracle={expected[t]} engine={got[t]}"
            for t in diff[:10]
        )
        assert m.is_accepting() == ref.is_complete(prefix)
        choices = [t for t in np.flatnonzero(expected) if t != EOS]
        if not choices:
            break
        t = int(rng.choice(choices))
        assert m.accept_token(t)
        prefix += VOCAB.token_bytes[t]


# --------------------------------------------------------------------------- random grammars

RULES = ("r0", "r1", "r2")


def _leaf() -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.text(alphabet=ALPHABET, min_size=1, max_size=3).map(lit),
        st.sets(st.sampled_from(ALPHABET), min_size=1, max_size=3).map(
            lambda s: char_set("".join(sorted(s)))
        ),
        st.sampled_from(RULES).map(Ref),
        st.just(ANY_CHAR),
    )


def _expr() -> st.SearchStrategy[Expr]:
    return st.recursive(
        _leaf(),
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: choice(*xs)),
            st.tuples(inner, st.sampled_from([(0, 1), (0, None), (1, None), (2, 3), (0, 2)])).map(
                lambda t: repeat(t[0], *t[1])
            ),
        ),
        max_leaves=6,
    )


grammars = st.tuples(_expr(), _expr(), _expr()).map(
    lambda es: Grammar({"r0": es[0], "r1": es[1], "r2": es[2]}, start="r0")
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammar=grammars, seed=st.integers(0, 2**16))
def test_random_grammars_match_oracle(grammar: Grammar, seed: int) -> None:
    walk_and_compare(grammar, seed)


# --------------------------------------------------------------------------- named cases

CASES = {
    "left_recursion": Grammar({"start": choice(seq(Ref("start"), lit("a")), lit("b"))}),
    "right_recursion": Grammar({"start": choice(seq(lit("a"), Ref("start")), lit("€"))}),
    "nullable_chain": Grammar(
        {
            "start": seq(Ref("x"), Ref("x"), lit("b"), Ref("x")),
            "x": choice(lit(""), lit("a"), seq(Ref("x"), lit("é"))),
        }
    ),
    "balanced": Grammar({"start": repeat(seq(lit("{"), Ref("start"), lit("b")), 0, None)}),
    "ambiguous_terminals": Grammar(
        {"start": seq(repeat(char_set("a"), 1, None), repeat(char_set("ab"), 1, None))}
    ),
    "unicode_class_split": Grammar({"start": repeat(char_set("é€😀"), 1, 3)}),
    "any_char": Grammar({"start": seq(repeat(ANY_CHAR, 0, 2), lit("b"))}),
    "unproductive_branch": Grammar(
        {"start": choice(lit("a"), Ref("dead")), "dead": seq(lit("b"), Ref("dead"))}
    ),
    "postponed_closures": Grammar(  # name-like terminals accept at every byte
        {
            "start": seq(Ref("ws"), Ref("expr"), Ref("ws")),
            "expr": choice(
                Ref("name"), seq(Ref("expr"), Ref("ws"), char_set("b{"), Ref("ws"), Ref("name"))
            ),
            "name": repeat(char_set("aé😀"), 1, None),
            "ws": repeat(lit("€"), 0, 2),
        }
    ),
    "bounded_nonregular_repeat": Grammar(
        {"start": repeat(seq(lit("{"), Ref("start"), lit("b")), 1, 3)}
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", range(4))
def test_named_grammars_match_oracle(name: str, seed: int) -> None:
    walk_and_compare(CASES[name], seed, steps=10)


def test_empty_language_is_an_error() -> None:
    with pytest.raises(EmptyLanguageError):
        compile_ir(Grammar({"start": seq(lit("a"), Ref("start"))}), VOCAB)


# --------------------------------------------------------------------------- state operations


def _accept_random(m, rng: random.Random, n: int) -> list[int]:  # noqa: ANN001
    taken = []
    for _ in range(n):
        ids = [t for t in m.allowed_token_ids() if t != EOS]
        if not ids:
            break
        t = int(rng.choice(ids))
        assert m.accept_token(t)
        taken.append(t)
    return taken


@pytest.mark.parametrize("seed", range(6))
def test_rollback_equals_fresh_matcher_on_shorter_prefix(seed: int) -> None:
    compiled = compile_ir(CASES["balanced"], VOCAB)
    rng = random.Random(seed)
    m = compiled.matcher()
    taken = _accept_random(m, rng, 12)
    for k in range(len(taken) + 1):
        probe = m.fork()
        probe.rollback(k)
        fresh = compiled.matcher()
        for t in taken[: len(taken) - k]:
            assert fresh.accept_token(t)
        assert np.array_equal(probe.allowed_token_ids(), fresh.allowed_token_ids())
        assert probe.is_accepting() == fresh.is_accepting()


def test_fork_is_independent() -> None:
    compiled = compile_ir(CASES["balanced"], VOCAB)
    m = compiled.matcher()
    brace = VOCAB.token_bytes.index(b"{")
    assert m.accept_token(brace)
    other = m.fork()
    assert other.accept_token(brace)
    assert m.num_tokens == 1 and other.num_tokens == 2
    assert not m.is_accepting()


def test_eos_termination_and_rollback() -> None:
    compiled = compile_ir(Grammar({"start": lit("ab")}), VOCAB)
    m = compiled.matcher()
    assert not m.accept_token(EOS)
    assert m.accept_string("ab")
    assert m.is_accepting()
    assert m.accept_token(EOS)
    assert m.is_terminated() and not m.is_accepting()
    assert m.allowed_token_ids().size == 0
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()
    with pytest.raises(MatcherError):
        m.rollback(5)


def test_rejected_token_leaves_state_unchanged() -> None:
    compiled = compile_ir(Grammar({"start": lit("aé")}), VOCAB)
    m = compiled.matcher()
    assert not m.accept_string("b")
    assert m.num_tokens == 0
    assert m.accept_string("a")
    assert m.accept_string("é".encode()[:1])
    assert not m.accept_string(b"a")
    assert m.accept_string("é".encode()[1:])
    assert m.is_accepting()


def test_long_input_grows_state() -> None:
    compiled = compile_ir(
        Grammar({"start": repeat(seq(lit("{"), Ref("start"), lit("b")), 0, None)}), VOCAB
    )
    m = compiled.matcher()
    assert m.accept_string("{" * 700 + "b" * 700)
    assert m.is_accepting()


def test_bitmask_validation() -> None:
    compiled = compile_ir(Grammar({"start": lit("a")}), VOCAB)
    m = compiled.matcher()
    words = (VOCAB.vocab_size + 31) // 32
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(np.zeros((1, words), dtype=np.int64))
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), dtype=np.int32))
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(np.zeros((2, words), dtype=np.int32), index=2)
    out = np.zeros((2, words), dtype=np.int32)
    assert m.fill_next_token_bitmask(out, index=1)
    assert not out[0].any() and out[1].any()
