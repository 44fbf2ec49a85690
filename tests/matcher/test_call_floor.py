"""The matcher's cheap call path against the reference recognizer.

The matcher passes the kernels one packed context naming its arrays and reuses what it validated
last: these tests change what the context or a reused view names — the mask cache publishing new
arrays, the chart growing, a fork, another bitmask array or tensor of the same shape, a tensor
changed in place — and check every mask against ``ReferenceRecognizer``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grammarsd.compiler.compiled import compile_ir
from grammarsd.errors import MatcherError
from grammarsd.grammar.ir import ANY_CHAR, Grammar, Ref, char_set, chars, choice, lit, repeat, seq
from grammarsd.matcher import _kernels as K
from grammarsd.matcher.matcher import GrammarMatcher
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.matcher.runtime import runtime
from grammarsd.tokenizer.info import TokenizerInfo

WORD = "thequickbrownfoxjumpsoverthelazydog"  # a DFA state, and a cache row, per letter
CHAR = ANY_CHAR.intersect(char_set('"\\').negate()).intersect(chars([(0x20, 0x10FFFF)]))
GRAMMAR = Grammar(
    {
        "value": choice(Ref("list"), Ref("string"), lit("1"), lit(WORD)),
        "list": seq(lit("["), Ref("value"), repeat(seq(lit(","), Ref("value")), 0, None), lit("]")),
        "string": seq(lit('"'), repeat(CHAR, 0, None), lit('"')),
    },
    start="value",
)
# id 0: EOS, id 1: a special token without bytes
PIECES = sorted({*(c.encode() for c in '[],1" ' + WORD), b'"a', b'a"', b'",', b'"]', b"ab", b'1,"'})
VOCAB = TokenizerInfo.from_token_bytes([b"", b"", *PIECES], eos_ids=[0], special_ids=[0, 1])
WORDS = (VOCAB.vocab_size + 31) // 32
ID = {b: i for i, b in enumerate(VOCAB.token_bytes) if b}
DOC = f'[1,"ab",["a b",{WORD}],"b"]'
REF = ReferenceRecognizer(GRAMMAR)


def expected(prefix: bytes) -> np.ndarray:
    """The reference mask after ``prefix`` (bool [V])."""
    allowed = np.asarray(REF.allowed_tokens(prefix, VOCAB.token_bytes), dtype=bool)
    allowed[0] = REF.is_complete(prefix)
    return allowed


def bits(row: np.ndarray) -> np.ndarray:
    """The first V bits of an int32 bitmask row as bools."""
    return np.unpackbits(row.view(np.uint8), bitorder="little")[: VOCAB.vocab_size].astype(bool)


def fresh() -> GrammarMatcher:
    return compile_ir(GRAMMAR, VOCAB, cache=False).matcher()


def test_context_follows_cache_arrays_published_by_another_matcher() -> None:
    first = fresh()
    out = np.zeros((1, WORDS), dtype=np.int32)
    first.fill_next_token_bitmask(out)  # packs the cache arrays as they are now
    cache = runtime(first.compiled).cache
    before = cache.arrays
    other = first.compiled.matcher()
    for k in range(len(DOC)):  # adds the rows of every state on the way: the arrays are replaced
        other.fill_next_token_bitmask(out)
        assert other.accept_string(DOC[k])
    assert cache.arrays.rows is not before.rows
    for k in range(len(DOC)):
        first.fill_next_token_bitmask(out)
        np.testing.assert_array_equal(bits(out[0]), expected(DOC[:k].encode()), err_msg=DOC[:k])
        assert first.accept_string(DOC[k])


def test_grown_chart_and_forks_give_reference_masks() -> None:
    m = fresh()
    depth = 600  # past the initial 256 positions and 4096 items
    assert m.accept_string("[" * depth)
    out = np.zeros(WORDS, dtype=np.int32)
    m.fill_next_token_bitmask(out)
    np.testing.assert_array_equal(bits(out), expected(b"[" * depth))
    fork = m.fork()
    assert fork.accept_string('"a",1' + "]" * depth)
    assert fork.is_accepting()
    m.fill_next_token_bitmask(out)  # the fork's state is its own
    np.testing.assert_array_equal(bits(out), expected(b"[" * depth))
    fork.fill_next_token_bitmask(out)
    np.testing.assert_array_equal(bits(out), expected(('[' * depth + '"a",1' + "]" * depth).encode()))


def test_each_array_of_the_same_shape_gets_its_own_mask() -> None:
    m = fresh()
    a = np.zeros((2, WORDS), dtype=np.int32)
    b = np.zeros((2, WORDS), dtype=np.int32)
    m.fill_next_token_bitmask(a, 1)
    assert m.accept_string("[")
    m.fill_next_token_bitmask(b, np.int64(1))
    np.testing.assert_array_equal(bits(a[1]), expected(b""))
    np.testing.assert_array_equal(bits(b[1]), expected(b"["))
    assert not a[0].any() and not b[0].any()


def test_tensor_changed_in_place_is_revalidated() -> None:
    m = fresh()
    t = torch.zeros((1, WORDS), dtype=torch.int32)
    m.fill_next_token_bitmask(t)
    old = t.numpy()  # the storage t had
    np.testing.assert_array_equal(bits(old[0]), expected(b""))
    old[:] = 0
    replacement = torch.zeros((1, WORDS), dtype=torch.int32)
    t.set_(replacement)  # same tensor object, other storage
    m.fill_next_token_bitmask(t)
    np.testing.assert_array_equal(bits(replacement.numpy()[0]), expected(b""))
    assert not old.any()
    with pytest.raises(MatcherError, match="out of range"):
        m.fill_next_token_bitmask(t, 1)
    t.as_strided_((1, WORDS - 1), (WORDS, 1))  # same data pointer, narrower
    with pytest.raises(MatcherError, match="shape"):
        m.fill_next_token_bitmask(t)
    t.set_(torch.zeros((2, WORDS), dtype=torch.int32))  # now row 1 exists
    m.fill_next_token_bitmask(t, 1)
    np.testing.assert_array_equal(bits(t.numpy()[1]), expected(b""))
    t.data = torch.zeros((2, WORDS), dtype=torch.int64)
    with pytest.raises(MatcherError, match="int32"):
        m.fill_next_token_bitmask(t)


def test_row_views_and_padding() -> None:
    m = fresh()
    wide = np.full((2, WORDS + 5), -1, dtype=np.int32)
    view = wide[:, : WORDS + 3]  # not C-contiguous, but each row is
    m.fill_next_token_bitmask(view, 1)
    np.testing.assert_array_equal(bits(wide[1]), expected(b""))
    assert not wide[1, WORDS : WORDS + 3].any()  # padding columns: never allowed
    assert (wide[1, WORDS + 3 :] == -1).all() and (wide[0] == -1).all()  # outside the view


@pytest.mark.parametrize(
    ("bitmask", "index", "message"),
    [
        (np.zeros((1, 2 * WORDS), dtype=np.int32)[:, ::2], 0, "contiguous"),
        (np.zeros((1, WORDS), dtype=np.int32), -1, "out of range"),
        (np.zeros((1, WORDS - 1), dtype=np.int32), 0, "shape"),
        (np.zeros((1, 1, WORDS), dtype=np.int32), 0, "dimensions"),
        (np.broadcast_to(np.zeros(WORDS, dtype=np.int32), (2, WORDS)), 0, "read-only"),
    ],
    ids=["strided-row", "negative-index", "narrow", "3-d", "read-only"],
)
def test_bad_bitmasks_raise(bitmask: np.ndarray, index: int, message: str) -> None:
    with pytest.raises(MatcherError, match=message):
        fresh().fill_next_token_bitmask(bitmask, index)


def test_accept_token_takes_numpy_ids_and_refuses_empty_tokens() -> None:
    m = fresh()
    assert not m.accept_token(1)  # special, no bytes
    assert m.accept_token(np.int64(ID[b"["]))
    assert not m.accept_token(ID[b"]"])
    assert m.accept_token(ID[b'"a'])
    assert m.num_tokens == 2
    with pytest.raises(MatcherError):
        m.accept_token(VOCAB.vocab_size)
    out = np.zeros(WORDS, dtype=np.int32)
    m.fill_next_token_bitmask(out)
    np.testing.assert_array_equal(bits(out), expected(b'["a'))


def test_contexts_only_name_arrays_of_their_layout() -> None:
    rt = runtime(compile_ir(GRAMMAR, VOCAB, cache=False))
    with pytest.raises(TypeError, match="int64"):
        K.new_context(rt.tables, (*rt.vocab_args[:2], np.zeros(1, np.int32), *rt.vocab_args[3:]))
    state = fresh()._state
    with pytest.raises(TypeError, match="C-contiguous"):
        K.pack_state(rt.context.copy(), state._replace(acc=np.zeros(8, np.uint8)[::2]))
