"""Batched mask filling on threads and the compile cache."""

from __future__ import annotations

import random

import numpy as np
import pytest

import grammarsd as gs
from grammarsd.compiler.compiled import CompileCache
from grammarsd.matcher.batch import fill_next_token_bitmasks
from grammarsd.tokenizer.info import TokenizerInfo

PIECES = [b"", b"{", b"}", b"a", b"b", b'"', b'"a', b"a}", b"{}", b" ", b'":', b"1", b"12", b","]
VOCAB = TokenizerInfo.from_token_bytes(PIECES, eos_ids=[0], special_ids=[0])
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    "required": ["a"],
}


def _matchers(n: int) -> list[gs.GrammarMatcher]:
    compiled = gs.compile_json_schema(SCHEMA, VOCAB)
    rng = random.Random(0)
    out = []
    for i in range(n):
        m = compiled.matcher()
        for _ in range(i):
            ids = [t for t in m.allowed_token_ids() if t != 0]
            if not ids:
                break
            m.accept_token(int(rng.choice(ids)))
        out.append(m)
    return out


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_batch_fill_equals_one_by_one(threads: int) -> None:
    matchers = _matchers(8)
    batch = gs.allocate_token_bitmask(len(matchers), VOCAB.vocab_size)
    need = fill_next_token_bitmasks(matchers, batch, num_threads=threads)
    for i, m in enumerate(matchers):
        single = gs.allocate_token_bitmask(1, VOCAB.vocab_size)
        assert need[i] == m.fill_next_token_bitmask(single)
        assert np.array_equal(batch[i].numpy(), single[0].numpy())


def test_batch_fill_with_indices_and_errors() -> None:
    matchers = _matchers(3)
    batch = gs.allocate_token_bitmask(5, VOCAB.vocab_size)
    before = batch.clone()
    fill_next_token_bitmasks(matchers, batch, indices=[4, 0, 2])
    assert np.array_equal(batch[1].numpy(), before[1].numpy())  # untouched rows stay
    with pytest.raises(gs.MatcherError):
        fill_next_token_bitmasks([matchers[0], matchers[0]], batch)
    with pytest.raises(gs.MatcherError):
        fill_next_token_bitmasks(matchers, batch, indices=[0])


def test_compile_cache_reuses_and_distinguishes() -> None:
    a = gs.compile_json_schema(SCHEMA, VOCAB)
    assert gs.compile_json_schema(dict(SCHEMA), VOCAB) is a  # same content, new dict
    assert gs.compile_json_schema(SCHEMA, VOCAB, cache=False) is not a
    assert gs.compile_json_schema(SCHEMA, VOCAB, whitespace="compact") is not a
    assert gs.compile_regex("a+", VOCAB) is gs.compile_regex("a+", VOCAB)
    assert gs.compile_regex("a+", VOCAB) is not gs.compile_regex("b+", VOCAB)


def test_compile_cache_keeps_schemas_apart_that_differ_in_property_order() -> None:
    """Properties come in schema order, so a reordered ``properties`` is another language;
    the oracle is the order each schema writes (both orders are valid JSON for both)."""
    both = {"a": {"type": "integer"}, "b": {"type": "integer"}}
    ab = {"type": "object", "properties": both, "required": ["a", "b"]}
    ba = {"type": "object", "properties": dict(reversed(both.items())), "required": ["a", "b"]}

    def accepts(compiled: gs.CompiledGrammar, text: str) -> bool:
        m = compiled.matcher()
        return m.accept_string(text) and m.is_accepting()

    first, second = gs.compile_json_schema(ab, VOCAB), gs.compile_json_schema(ba, VOCAB)
    assert first is not second
    assert accepts(first, '{"a":1,"b":2}') and not accepts(first, '{"b":2,"a":1}')
    assert accepts(second, '{"b":2,"a":1}') and not accepts(second, '{"a":1,"b":2}')


def test_compile_cache_is_bounded_by_memory() -> None:
    cache = CompileCache(max_bytes=1)
    first = cache.get_or_compile(("x",), lambda: gs.compile_regex("a+", VOCAB, cache=False))
    cache.get_or_compile(("y",), lambda: gs.compile_regex("b+", VOCAB, cache=False))
    assert len(cache) == 1  # the newest entry always stays
    assert cache.get_or_compile(("x",), lambda: first) is first
    assert cache.misses == 3 and cache.hits == 0


class _Sized:
    """A stand-in for a compiled grammar whose size the test sets (and counts the asks)."""

    def __init__(self, size: int) -> None:
        self.size, self.asked = size, 0

    def memory_bytes(self) -> int:
        self.asked += 1
        return self.size


def _insert(cache: CompileCache, key: str, entry: _Sized) -> None:
    assert cache.get_or_compile((key,), lambda: entry) is entry  # type: ignore[arg-type,return-value]


def test_compile_cache_sees_an_entry_grow() -> None:
    cache = CompileCache(max_bytes=10)
    a, b = _Sized(4), _Sized(4)
    _insert(cache, "a", a)
    _insert(cache, "b", b)
    assert len(cache) == 2
    a.size = 8  # its mask cache grew while it was used: 8 + 4 + 1 > 10
    _insert(cache, "c", _Sized(1))
    assert len(cache) == 2  # a small cache re-measures on every insertion: "a" (oldest) goes
    assert cache.get_or_compile(("a",), lambda: _Sized(1)) is not a  # type: ignore[arg-type,return-value]


def test_compile_cache_measures_in_amortised_constant_time_and_catches_up() -> None:
    cache = CompileCache(max_bytes=10**9)
    entries = [_Sized(1) for _ in range(400)]
    for i, entry in enumerate(entries):
        _insert(cache, str(i), entry)
    # measuring every entry on every insertion would ask 400 * 401 / 2 times
    assert sum(e.asked for e in entries) <= 400 * (1 + 2 * CompileCache.REMEASURE_EVERY)
    for entry in entries[:200]:
        entry.size = 10**7  # the older half grows: 2e9 bytes in all
    for i in range(100):  # more than len(cache) / REMEASURE_EVERY insertions
        _insert(cache, f"new{i}", _Sized(1))
    # least recently used first, until the rest fits: 99 grown entries (9.9e8 bytes) stay
    assert [i for i in range(400) if (str(i),) in cache] == list(range(101, 400))


def test_memory_bytes_counts_the_mask_cache_but_not_the_shared_scratch() -> None:
    from grammarsd.matcher import runtime as R
    from grammarsd.testing import tokenizer_info

    info = tokenizer_info("llama3")
    compiled = gs.compile_regex("[a-z]+", info, cache=False)
    before = compiled.memory_bytes()  # tables only: the mask cache is built on first use
    compiled.matcher().allowed_token_ids()
    grown = compiled.memory_bytes() - before
    # the cache's own arrays: at least the dense row of [a-z]+ (a vocabulary bitset)
    assert grown >= 4 * ((info.vocab_size + 31) // 32)
    # the row builder's vocabulary-sized scratch is per thread, shared by every grammar
    assert grown < 3 * 4 * info.vocab_size
    other = gs.compile_regex("[0-9]+", info, cache=False)
    trie = other.trie
    mine = R._scratch((info.vocab_size + 31) // 32, info.vocab_size, trie.num_nodes)
    other.matcher().allowed_token_ids()
    assert R._scratch((info.vocab_size + 31) // 32, info.vocab_size, trie.num_nodes) is mine


def test_memory_bytes_follows_the_mask_cache_arrays_as_they_grow() -> None:
    """``memory_bytes`` keeps a running sum, not a walk: it must move exactly as the cache's
    published arrays do (the rest of what it counts never changes)."""
    from grammarsd.matcher.runtime import runtime

    compiled = gs.compile_json_schema(SCHEMA, VOCAB, cache=False)
    m = compiled.matcher()
    cache = runtime(compiled).cache
    rest = compiled.memory_bytes() - sum(a.nbytes for a in cache.arrays)
    sizes = set()
    for piece in [b"{", b'"a', b'":', b"12", b",", b'"', b"b", b'":', b'"a', b'"', b"}"]:
        m.allowed_token_ids()
        assert m.accept_token(PIECES.index(piece))
        arrays = sum(a.nbytes for a in cache.arrays)
        sizes.add(arrays)
        assert compiled.memory_bytes() == rest + arrays
    assert len(sizes) > 1  # the arrays did grow on the way
