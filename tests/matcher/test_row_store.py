"""Mask-cache rows shared across grammars: the sub-automaton signature and the shared row store.

Oracles: brute-force enumeration of the strings each DFA state accepts (for the signature) and the
reference recognizer's token masks (for grammars served from the store).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammarsd as gs
from grammarsd.matcher import _kernels as K
from grammarsd.matcher import runtime as runtime_module
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.matcher.rowstore import Row, RowStore, shared_row_store
from grammarsd.matcher.runtime import runtime
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = (0x61, 0x62, 0x63)  # the alphabet of the random DFAs: a, b, c
EACH_BYTE = np.arange(256, dtype=np.uint8)  # the columns of a byte table: one per byte


def _signature(trans: np.ndarray, accept: np.ndarray, q: int, max_states: int = 64) -> bytes | None:
    info = np.zeros((trans.shape[0], 3), dtype=np.int32)
    info[:, 0] = accept
    label = np.full(trans.shape[0], -1, dtype=np.int32)
    out = np.empty(4096, dtype=np.int32)
    n = K.sub_dfa_signature(trans, EACH_BYTE, info, q, np.empty(max_states, np.int32), label, out)
    assert (label == -1).all()  # the scratch labels are restored
    return None if n < 0 else out[:n].tobytes()


def _language(
    trans: np.ndarray, accept: np.ndarray, q: int, length: int
) -> set[tuple[bytes, bool]]:
    """Every string over BYTES up to ``length`` that keeps q's DFA alive, with its accept flag."""
    out = set()
    for n in range(length + 1):
        for word in itertools.product(BYTES, repeat=n):
            s = q
            for b in word:
                s = trans[s, b]
                if s < 0:
                    break
            if s >= 0:
                out.add((bytes(word), bool(accept[s])))
    return out


@st.composite
def dfas(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 6))
    trans = np.full((n, 256), -1, dtype=np.int32)
    for s in range(n):
        for b in BYTES:
            trans[s, b] = draw(st.integers(-1, n - 1))
    accept = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.int32)
    return trans, accept


@settings(max_examples=80, deadline=None)
@given(dfa=dfas(), seed=st.integers(0, 2**16))
def test_signature_is_invariant_under_renumbering(
    dfa: tuple[np.ndarray, np.ndarray], seed: int
) -> None:
    trans, accept = dfa
    n = trans.shape[0]
    perm = np.random.default_rng(seed).permutation(n).astype(np.int32)  # old state -> new state
    new_trans = np.full_like(trans, -1)
    new_accept = np.zeros_like(accept)
    for s in range(n):
        row = trans[s]
        new_trans[perm[s]] = np.where(row >= 0, perm[np.maximum(row, 0)], -1)
        new_accept[perm[s]] = accept[s]
    for q in range(n):
        assert _signature(trans, accept, q) == _signature(new_trans, new_accept, int(perm[q]))


@settings(max_examples=80, deadline=None)
@given(dfa=dfas())
def test_equal_signatures_mean_equal_languages(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    trans, accept = dfa
    n = trans.shape[0]
    sigs = [_signature(trans, accept, q) for q in range(n)]
    langs = [_language(trans, accept, q, 5) for q in range(n)]
    for a in range(n):
        for b in range(n):
            if sigs[a] == sigs[b]:
                assert langs[a] == langs[b]


def test_signature_gives_up_past_its_state_bound() -> None:
    trans = np.full((3, 256), -1, dtype=np.int32)
    trans[0, 0x61], trans[1, 0x61] = 1, 2  # a chain of three states
    accept = np.array([0, 0, 1], dtype=np.int32)
    assert _signature(trans, accept, 0, max_states=2) is None
    assert _signature(trans, accept, 1, max_states=2) is not None


# --------------------------------------------------------------------------- the store


def _row(n: int) -> Row:
    ids = np.arange(n, dtype=np.int32)
    return Row(False, ids, ids.copy(), np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32), 1)


def test_store_is_an_lru_bounded_by_memory() -> None:
    one = len(b"k0") + len(b"f") + _row(10).nbytes
    store = RowStore(max_bytes=2 * one)
    store.put("fp", b"k0", b"f", _row(10))
    store.put("fp", b"k1", b"f", _row(10))
    assert store.get("fp", b"k0", b"f") is not None  # k0 is now the most recently used
    store.put("fp", b"k2", b"f", _row(10))
    assert store.get("fp", b"k1", b"f") is None and len(store) == 2 and store.nbytes <= 2 * one
    got = store.get("fp", b"k0", b"f")
    assert got is not None and np.array_equal(got.accepted, np.arange(10))
    with pytest.raises(ValueError):
        got.accepted[0] = 5  # stored rows are read-only
    assert store.get("other tokenizer", b"k0", b"f") is None
    assert store.get("fp", b"k0", b"g") is None  # other FOLLOW bytes: another row
    store.put("fp", b"big", b"f", _row(1000))  # bigger than the whole bound: not stored
    assert store.get("fp", b"big", b"f") is None and store.get("fp", b"k2", b"f") is not None
    assert (store.hits, store.misses) == (3, 4)


# --------------------------------------------------------------------------- shared rows are right

PIECES = [b"", b'"', b'":', b'":"', b"a", b"b", b"x", b"ab", b"ax", b"ba", b'a"', b'b"', b'x"']
PIECES += [
    "é".encode(),
    "é".encode()[:1],
    "é".encode()[1:],
    'é"'.encode(),
    b"1",
    b"2",
    b"12",
    b":",
    b"k",
]
PIECES += [
    b"ke",
    b"key",
    b'key":"',
    b"e",
    b"y",
    b"zz-row-store-test",
]  # the last one: a unique vocab
VOCAB = TokenizerInfo.from_token_bytes(PIECES, eos_ids=[0], special_ids=[0])


def _walk_against_reference(compiled: gs.CompiledGrammar, text: bytes) -> None:
    """Feed ``text`` byte-token by byte-token (where one exists), comparing every mask."""
    ref = ReferenceRecognizer(compiled.grammar)
    m = compiled.matcher()
    by_bytes = {b: i for i, b in enumerate(VOCAB.token_bytes) if b}
    prefix = b""
    for k in range(len(text) + 1):
        expected = [t for t in np.flatnonzero(ref.allowed_tokens(prefix, VOCAB.token_bytes)) if t]
        got = [t for t in m.allowed_token_ids() if t != 0]
        assert list(expected) == got, f"prefix {prefix!r}"
        if k < len(text):
            assert m.accept_token(by_bytes[text[k : k + 1]])
            prefix += text[k : k + 1]


@pytest.fixture
def no_cheap_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row goes through signature and store (toy vocabularies make every walk cheap)."""
    monkeypatch.setattr(runtime_module, "CHEAP_WALK_NODES", 0)


@pytest.mark.usefixtures("no_cheap_walks")
def test_rows_served_from_the_store_equal_the_reference() -> None:
    store = shared_row_store()
    first = gs.compile_regex(r'"key":"[^"]*"', VOCAB, cache=False)
    _walk_against_reference(first, b'"key":"ab')
    hits, walks_before = store.hits, runtime(first).cache.walks
    assert walks_before > 0
    # a different grammar whose string body is the same sub-automaton: its rows come from the store
    second = gs.compile_regex(r'1[0-9]*:"[^"]*"', VOCAB, cache=False)
    _walk_against_reference(second, b'12:"xa')
    cache = runtime(second).cache
    assert store.hits > hits and cache.walks < cache.num_states
    # same shape, smaller body alphabet: a different signature, so no stale row may be reused
    third = gs.compile_regex(r'1[0-9]*:"[^"x]*"', VOCAB, cache=False)
    _walk_against_reference(third, b'12:"ab')


@pytest.mark.usefixtures("no_cheap_walks")
def test_rows_are_not_shared_across_tokenizers() -> None:
    other = TokenizerInfo.from_token_bytes([*PIECES, b"-other"], eos_ids=[0], special_ids=[0])
    gs.compile_regex(r'k[a-z]*"', VOCAB, cache=False).matcher().allowed_token_ids()
    compiled = gs.compile_regex(r'k[a-z]*"', other, cache=False)
    compiled.matcher().allowed_token_ids()
    assert runtime(compiled).cache.walks == 1


@pytest.mark.usefixtures("no_cheap_walks")
def test_states_of_terminals_past_the_signature_bound_are_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a signature would give up on them after reading thousands of states: they skip it
    monkeypatch.setattr(runtime_module, "_SIG_MAX_STATES", 8)
    asked: list[int] = []
    signature = K.sub_dfa_signature

    def spy(trans, byte_col, info, q, *rest):  # noqa: ANN001, ANN202
        asked.append(int(q))
        return signature(trans, byte_col, info, q, *rest)

    monkeypatch.setattr(K, "sub_dfa_signature", spy)
    compiled = gs.compile_grammar('start: "k" start "y" | /[ab]{0,20}/', VOCAB, cache=False)
    _walk_against_reference(compiled, b"kkabayy")
    t = compiled.tables
    sizes = np.bincount(t.state_term)
    assert asked and all(sizes[t.state_term[q]] <= 8 for q in asked)
    assert runtime(compiled).cache.walks > 0  # the big terminal's states were walked


def _rows_by_tile(compiled: gs.CompiledGrammar) -> dict[bytes, tuple[bool, list[int], list[int]]]:
    cache = runtime(compiled).cache
    tiles = compiled.tables.state_tile
    out = {}
    any_byte = np.full(4, 2**64 - 1, dtype=np.uint64)  # one FOLLOW set for every grammar
    for q in np.flatnonzero(tiles[:, 0] >= 0):
        row = cache._walk(int(q), any_byte, -1)
        assert row is not None
        out[tiles[q].tobytes()] = (row.dense, list(row.accepted), list(row.unc_pos))
    return out


@pytest.mark.usefixtures("no_cheap_walks")
def test_tiled_states_share_rows_across_bounds_and_grammars() -> None:
    # a tile (unit automaton, place in it, copies left, copies needed) names the language from
    # its state: states of [ab]{0,40} and [ab]{3,60} with equal tiles have equal rows
    first = gs.compile_regex(r"k[ab]{0,40}y", VOCAB, cache=False)
    second = gs.compile_regex(r'"[ab]{3,60}"', VOCAB, cache=False)
    a, b = _rows_by_tile(first), _rows_by_tile(second)
    common = set(a) & set(b)
    assert len(common) >= 30  # the last 40 copies of the longer repeat, and more
    assert all(a[key] == b[key] for key in common)
    # no token is longer than the trie is deep: counts beyond it share one row (and one key)
    cache, tiles = runtime(second).cache, second.tables.state_tile
    cap = cache._trie.max_depth + 1
    deep = np.flatnonzero((tiles[:, 0] >= 0) & (tiles[:, 2] > cap) & (tiles[:, 3] == 0))
    assert len(deep) >= 20 and len({cache._signature(int(q)) for q in deep}) == 1
    assert len({str(b[tiles[q].tobytes()]) for q in deep}) == 1  # walked: equal rows indeed
    store = shared_row_store()
    _walk_against_reference(first, b"kabab")
    hits = store.hits
    third = gs.compile_regex(r"xx[ab]{0,40}y", VOCAB, cache=False)  # same repeat, new context
    _walk_against_reference(third, b"xxabab")
    assert store.hits > hits  # its counter states came from the store, and the masks are right


@pytest.mark.usefixtures("no_cheap_walks")
def test_rows_are_shared_only_for_the_same_follow_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the counter states of [ab]{0,40} are walked for what may follow the repeat: "y" twice
    # (the second grammar copies the rows), then "e" (walked anew)
    store = RowStore()
    monkeypatch.setattr(runtime_module, "shared_row_store", lambda: store)
    walked: list[int] = []
    classify, classify_chain = K.classify_tokens, K.classify_chain_tokens

    def spy(trans, byte_col, info, steps, rad, rad_utf8, q, *rest):  # noqa: ANN001, ANN202
        walked.append(int(q))
        return classify(trans, byte_col, info, steps, rad, rad_utf8, q, *rest)

    def chain_spy(*args):  # noqa: ANN002, ANN202
        walked.append(int(args[5][0]))  # the chain's first state
        return classify_chain(*args)

    monkeypatch.setattr(K, "classify_tokens", spy)
    monkeypatch.setattr(K, "classify_chain_tokens", chain_spy)

    def tiled_walks(pattern: str, text: bytes) -> int:
        walked.clear()
        compiled = gs.compile_regex(pattern, VOCAB, cache=False)
        _walk_against_reference(compiled, text)
        return sum(compiled.tables.state_tile[q, 0] >= 0 for q in walked)

    assert tiled_walks(r"12[ab]{0,40}y", b"12abab") > 0
    assert tiled_walks(r"ke[ab]{0,40}y", b"keabab") == 0
    assert tiled_walks(r"ke[ab]{0,40}e", b"keabab") > 0
