"""The row-building trie walk that takes whole subtrees (``_kernels.classify_tokens``).

Oracles: a per-token DFA run in plain Python for the rows (accepted / uncertain / rejected), Python's
own UTF-8 codec for the trie's ``below_utf8`` and for ``chain_sets``' multi-byte check, plain set
arithmetic and lengths on token bytes for ``below`` and ``height``, and a breadth-first search over
every string of the step set (bytes, or Python-encoded characters) for ``chain_sets``' radii. Walks
in looping and in length-counting states are also checked to have skipped subtrees, so the tests
fail if the acceleration silently stops working.
"""

from __future__ import annotations

import codecs
import functools
import heapq
import itertools
import random
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grammarsd as gs
from grammarsd.matcher import _kernels as K
from grammarsd.matcher import runtime as runtime_module
from grammarsd.matcher.rowstore import RowStore
from grammarsd.matcher.runtime import runtime
from grammarsd.tokenizer.info import TokenizerInfo
from grammarsd.tokenizer.trie import UTF8_DFA, TokenTrie

# token pieces: ASCII, a quote, whole 2/3/4-byte characters, split characters and invalid UTF-8
PIECES = [b"a", b"b", b" ", b'"', b"\\", "é".encode(), "€".encode(), "😀".encode(), "\ud7ff".encode(),
          b"\xc3", b"\xa9", b"\xe2\x82", b"\x9f\x98\x80", b"\xed\xa0\x80", b"\xff"]  # fmt: skip
STRING_BODY = r'"[^"\\]*"'  # its second DFA state loops on printable ASCII and every character
ANY_BYTE = np.full(4, 2**64 - 1, dtype=np.uint64)  # a FOLLOW set: every byte may follow
EACH_BYTE = np.arange(256, dtype=np.uint8)  # the columns of a byte table: one per byte
COUNTED = r'[^"\\]{0,20}'  # state k (k characters read) steps to k + 1 on every character


def _toy_tokens(seed: int, n: int = 300, pieces: list[bytes] = PIECES) -> list[bytes]:
    rng = random.Random(seed)
    toks = {b"".join(rng.choices(pieces, k=rng.randint(1, 4))) for _ in range(n)}
    return [b"", *sorted(toks)]  # id 0: EOS


def _row_oracle(
    trans: np.ndarray, accept: np.ndarray, q: int, token_bytes: list[bytes],
    follow: frozenset[int] = frozenset(range(256)),
) -> tuple[list[int], list[int]]:
    """(accepted ids, uncertain ids in byte order) by running q's DFA over each token alone:
    accepted = alive over every byte; uncertain = dies after passing an accepting state on one
    byte or more, before a byte of ``follow``; the rest are rejected."""
    acc, unc = [], []
    for t, tb in enumerate(token_bytes):
        if not tb:
            continue
        s, passed = q, False
        for i, b in enumerate(tb):
            passed = passed or (i >= 1 and bool(accept[s]) and b in follow)
            s = int(trans[s, b])
            if s < 0:
                break
        if s >= 0:
            acc.append(t)
        elif passed:
            unc.append(t)
    return sorted(acc), sorted(unc, key=lambda t: (token_bytes[t], t))


def _walk(
    trans: np.ndarray,
    accept: np.ndarray,
    q: int,
    trie: TokenTrie,
    info: TokenizerInfo,
    skip: bool,
    budget: int | None = None,
    n_ids: int | None = None,
) -> tuple[list[int], list[int], np.ndarray, int]:
    """The kernel's row when any byte may follow the terminal (so every token on which the DFA
    accepts after a byte or more, then dies, is uncertain): accepted ids (sorted, read from the
    bitset), uncertain ids (as written), their lcp, skips. The id list has room for ``n_ids``
    (default: all); when the accepted ids fit, they must all be written there in byte order."""
    steps, rad, rad_utf8 = _chain_sets(trans) if skip else _no_chains(trans.shape[0])
    dfa_info = _dfa_info(accept)
    v = info.vocab_size
    ids = np.empty(v if n_ids is None else n_ids, dtype=np.int32)
    bits = np.full((v + 31) // 32, 0xDEADBEEF, dtype=np.uint32)  # overwritten by the walk
    out = [np.empty(v, dtype=np.int32) for _ in range(3)]
    flips = np.empty(trie.num_nodes + 2, dtype=np.int32)
    n_acc, n_unc, _, skipped = K.classify_tokens(
        trans, EACH_BYTE, dfa_info, steps, rad, rad_utf8, q, ANY_BYTE, -K.NO_CAP, K.NO_CAP,
        trie.num_nodes if budget is None else budget, trie.max_depth, trie.byte, trie.depth,
        trie.next, trie.tok_ptr, trie.tok_ids, trie.tok_lcp, trie.below, trie.below_utf8,
        trie.height, trie.tok_bits, trie.seq_ptr, trie.seq_data, flips, ids, bits, *out,
    )  # fmt: skip
    if n_acc < 0:
        return [], [], out[1][:0], skipped
    accepted = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")[:v])
    assert accepted.shape[0] == n_acc
    in_byte_order = sorted(accepted.tolist(), key=lambda t: (info.token_bytes[t], t))
    if n_acc <= ids.shape[0]:
        assert ids[:n_acc].tolist() == in_byte_order
    return accepted.tolist(), trie.tok_ids[out[0][:n_unc]].tolist(), out[1][:n_unc], skipped


def _dfa_info(accept: np.ndarray) -> np.ndarray:
    """The kernels' per-state info (``_kernels.Tables``) of one uncapped terminal's DFA."""
    dfa_info = np.zeros((accept.shape[0], 7), dtype=np.int32)
    dfa_info[:, 0] = accept
    dfa_info[:, 4:6] = K.NO_CAP  # no capped terminal
    return dfa_info


def _no_chains(n_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty step sets and zero radii: ``chain_sets``' output shape, taking no subtree whole."""
    return (np.zeros((n_states, 4), dtype=np.uint64), np.zeros(n_states, dtype=np.uint16),
            np.zeros(n_states, dtype=np.uint16))  # fmt: skip


def _chain_sets(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    steps, rad, rad_utf8 = _no_chains(trans.shape[0])
    K.chain_sets(trans, EACH_BYTE, UTF8_DFA, steps, rad, rad_utf8)
    return steps, rad, rad_utf8


def _members(bits: np.ndarray) -> set[int]:
    """The bytes of a 256-bit set (uint64 [4])."""
    return {b for b in range(256) if int(bits[b >> 6]) >> (b & 63) & 1}


def _lcp(token_bytes: list[bytes], ids: list[int]) -> list[int]:
    out, prev = [], b""
    for t in ids:
        cur = token_bytes[t]
        n = 0
        while n < min(len(prev), len(cur)) and prev[n] == cur[n]:
            n += 1
        out.append(n if out else 0)
        prev = cur
    return out


def _check_row(
    trans: np.ndarray, accept: np.ndarray, q: int, info: TokenizerInfo, trie: TokenTrie
) -> int:
    """Assert the skipping walk equals the oracle (and the plain walk); return its skip count."""
    tb = list(info.token_bytes)
    acc, unc = _row_oracle(trans, accept, q, tb)
    got_acc, got_unc, got_lcp, skipped = _walk(trans, accept, q, trie, info, skip=True)
    assert got_acc == acc
    assert got_unc == unc
    assert got_lcp.tolist() == _lcp(tb, unc)
    plain = _walk(trans, accept, q, trie, info, skip=False, n_ids=2)  # ids cut short, bits whole
    assert plain[0] == acc and plain[1] == unc and plain[3] == 0
    return skipped


@functools.cache
def _regex_dfa(pattern: str) -> tuple[np.ndarray, np.ndarray]:
    vocab = TokenizerInfo.from_token_bytes([b"", b"a"], eos_ids=[0], special_ids=[0])
    t = gs.compile_regex(pattern, vocab, cache=False).tables
    assert t.term_start.tolist() == [0]
    return t.byte_table, t.dfa_accept.astype(np.int32)


def _string_body_dfa() -> tuple[np.ndarray, np.ndarray]:
    return _regex_dfa(STRING_BODY)


def _chain(trans: np.ndarray, start: int, b: int) -> list[int]:
    """States visited from ``start`` reading byte ``b`` until it dies or loops."""
    out = [start]
    while trans[out[-1], b] >= 0 and trans[out[-1], b] not in out:
        out.append(int(trans[out[-1], b]))
    return out


@functools.cache
def _utf8_characters() -> dict[int, np.ndarray]:
    """Every multi-byte UTF-8 character as Python encodes it, uint8 [n, L] per length L."""
    by_len: dict[int, list[bytes]] = {2: [], 3: [], 4: []}
    for c in range(0x80, 0x110000):
        if not 0xD800 <= c < 0xE000:
            e = chr(c).encode()
            by_len[len(e)].append(e)
    return {n: np.frombuffer(b"".join(v), dtype=np.uint8).reshape(-1, n) for n, v in by_len.items()}


def _utf8_step_oracle(trans: np.ndarray, s: int, target: int) -> bool:
    """Every multi-byte character keeps s's DFA alive on each byte and ends in ``target``."""
    for chars in _utf8_characters().values():
        state = np.full(chars.shape[0], s, dtype=np.int64)
        for col in range(chars.shape[1]):
            if (state < 0).any():
                return False
            state = trans[state, chars[:, col]]
        if (state != target).any():
            return False
    return True


def _distinct_characters(trans: np.ndarray) -> dict[int, np.ndarray]:
    """One multi-byte character per distinct behaviour under ``trans``: bytes with equal columns
    act alike, so characters with equal column sequences do too."""
    _, column = np.unique(trans.T, axis=0, return_inverse=True)
    out = {}
    for n, chars in _utf8_characters().items():
        _, first = np.unique(column.ravel()[chars], axis=0, return_index=True)
        out[n] = chars[first]
    return out


def _radius_holds(
    trans: np.ndarray, s: int, single: set[int], r: int, chars: dict[int, np.ndarray]
) -> bool:
    """Every string of at most ``r`` bytes (``RAD_INF``: any length) made of the bytes ``single`` and
    of the characters ``chars`` (the last one possibly cut short) keeps s's DFA alive: a shortest-
    path search over the DFA states reached at character boundaries, each expanded by every
    allowed byte and character prefix that still fits in ``r``."""
    best = {s: 0}
    heap = [(0, s)]
    while heap:
        m, p = heapq.heappop(heap)
        if m > best[p] or m >= r:
            continue
        ends: list[tuple[int, int]] = [(int(trans[p, b]), m + 1) for b in single]
        for n, group in chars.items():
            state = np.full(group.shape[0], p, dtype=np.int64)
            for col in range(min(n, r - m)):
                state = trans[state, group[:, col]]
                if (state < 0).any():
                    return False
            if n <= r - m:
                ends += [(int(t), m + n) for t in np.unique(state)]
        for t, depth in ends:
            if t < 0:
                return False
            if depth < best.get(t, r):
                best[t] = depth
                heapq.heappush(heap, (depth, t))
    return True


def _check_chain_sets(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Assert ``chain_sets``' output is what its docstring promises, against the oracles above."""
    steps, rad, rad_utf8 = _chain_sets(trans)
    chars = _distinct_characters(trans)
    for s in range(trans.shape[0]):
        members = _members(steps[s])
        live = [b for b in range(256) if trans[s, b] >= 0]
        if not live:
            assert not members and rad[s] == rad_utf8[s] == 0
            continue
        succ = int(trans[s, min(members)])
        assert members == {b for b in live if trans[s, b] == succ}  # one successor, all its bytes
        if any(trans[s, b] == s for b in live):
            assert succ == s  # a self-loop wins
        else:  # the most ASCII bytes, then the most bytes
            weight = {int(trans[s, b]): [0, 0] for b in live}
            for b in live:
                weight[int(trans[s, b])][0] += b < 0x80
                weight[int(trans[s, b])][1] += 1
            assert weight[succ] == max(weight.values())
        assert rad[s] >= 1
        assert bool(rad_utf8[s]) == _utf8_step_oracle(trans, s, succ), s
        ascii_members = {b for b in members if b < 0x80}
        assert _radius_holds(trans, s, members, int(rad[s]), {}), s
        assert _radius_holds(trans, s, ascii_members, int(rad_utf8[s]), chars), s
    return steps, rad, rad_utf8


# --------------------------------------------------------------------------- the trie's byte sets


def _node_bytes(trie: TokenTrie) -> Iterator[tuple[int, bytes]]:
    """Each node with the bytes of the path to it, read from its depth and byte alone."""
    prefix: list[bytes] = []
    for k in range(trie.num_nodes):
        del prefix[trie.depth[k] - 1 :]
        prefix.append(bytes([trie.byte[k]]))
        yield k, b"".join(prefix)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_subtree_byte_sets_match_the_tokens_below(seed: int) -> None:
    tb = _toy_tokens(seed)
    trie = TokenTrie.from_token_bytes(tb)
    for k, node in _node_bytes(trie):
        tails = [t[len(node) :] for t in tb if t.startswith(node)]
        expected = {b for tail in tails for b in tail}
        assert _members(trie.below[k]) == expected, node
        assert trie.height[k] == max(len(tail) for tail in tails), node
        decoder_ok = True
        for tail in tails:
            try:
                codecs.getincrementaldecoder("utf-8")().decode(tail, final=False)
            except UnicodeDecodeError:
                decoder_ok = False
        assert bool(trie.below_utf8[k]) == decoder_ok, node
    assert 0 < trie.below_utf8.sum() < trie.num_nodes  # both outcomes occur
    assert trie.height.max() == max(map(len, tb)) - 1 and trie.height.dtype == np.uint16
    assert trie.nbytes >= trie.below.nbytes + trie.below_utf8.nbytes + trie.height.nbytes
    ordered = [tb[t] for t in trie.tok_ids]  # byte order, shared prefix with the previous
    assert ordered == sorted(ordered)
    assert trie.tok_lcp.tolist() == _lcp(tb, trie.tok_ids.tolist())
    shuffled = random.Random(seed).sample(tb, len(tb))  # ids no longer in byte order
    trie = TokenTrie.from_token_bytes(shuffled)
    seq = trie.seq_data.tobytes()  # token bytes again, in trie order
    assert [seq[a:b] for a, b in itertools.pairwise(trie.seq_ptr.tolist())] == sorted(tb)[1:]
    assert [shuffled[t] for t in trie.tok_ids] == sorted(tb)[1:]
    in_trie = np.unpackbits(trie.tok_bits.view(np.uint8), bitorder="little")
    assert np.flatnonzero(in_trie).tolist() == [i for i, t in enumerate(shuffled) if t]


@pytest.mark.parametrize("seed", [0, 1])
def test_nodes_name_their_bytes_and_subtree_tokens(seed: int) -> None:
    tb = _toy_tokens(seed)
    trie = TokenTrie.from_token_bytes(tb)
    for k, node in _node_bytes(trie):
        own = trie.tok_ids[trie.tok_ptr[k] : trie.tok_ptr[k + 1]].tolist()
        assert sorted(own) == [i for i, t in enumerate(tb) if t == node], node
        subtree = trie.tok_ids[trie.tok_ptr[k] : trie.tok_ptr[trie.next[k]]].tolist()
        assert sorted(subtree) == [i for i, t in enumerate(tb) if t.startswith(node)], node
    assert sorted(trie.tok_ids.tolist()) == [i for i, t in enumerate(tb) if t]


# --------------------------------------------------------------------------- step sets and radii


def test_chain_sets_of_a_string_body() -> None:
    trans, _ = _string_body_dfa()
    steps, rad, rad_utf8 = _check_chain_sets(trans)
    body = int(trans[0, ord('"')])
    assert rad[body] == rad_utf8[body] == K.RAD_INF  # it loops, on every character too
    assert {b for b in _members(steps[body]) if b < 0x80} == set(range(0x80)) - {
        ord('"'),
        ord("\\"),
    }


@pytest.mark.parametrize(
    ("pattern", "length", "radius"),
    [
        (COUNTED, 21, lambda k: 20 - k),  # state k steps to k + 1 on every character
        (r"[a-z]{3,40}", 41, lambda k: 40 - k),  # ASCII only: no UTF-8 steps
        (r"a{5}[a-z]*", 6, lambda k: K.RAD_INF),  # the chain ends in a loop that takes it all
    ],
)
def test_chain_sets_of_counting_dfas(
    pattern: str, length: int, radius: Callable[[int], int]
) -> None:
    trans, _ = _regex_dfa(pattern)
    steps, rad, rad_utf8 = _check_chain_sets(trans)
    chain = _chain(trans, 0, ord("a"))
    assert len(chain) == length
    assert [int(rad[q]) for q in chain[:-1]] == [radius(k) for k in range(length - 1)]
    utf8 = pattern == COUNTED
    expected = [radius(k) if utf8 else 0 for k in range(length - 1)]
    assert [int(rad_utf8[q]) for q in chain[:-1]] == expected


def _zeroed(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros((n, 4), dtype=np.uint64), np.zeros(n, dtype=np.uint16),
            np.zeros(n, dtype=np.uint16))


def test_kept_terminal_chains_equal_a_reading_of_the_whole_table() -> None:
    """``TerminalChains`` reads a grammar's terminals one at a time (each its own range of
    states), keeps a big terminal's arrays and copies them into every grammar that holds it,
    wherever it is placed; the oracle is ``chain_sets`` over each grammar's whole table."""
    vocab = TokenizerInfo.from_token_bytes([b"", b"a"], eos_ids=[0], special_ids=[0])
    string = r'/"[^"\\]*"/'
    one, two = (gs.compile_grammar(text, vocab, cache=False).tables for text in (
        f'start: "(" start ")" | {string}',
        f'start: "[" start "]" | "{{" start "}}" | "<" start ">" | {string}'))
    chains = runtime_module.TerminalChains(min_states=5)  # the string body, not the brackets
    big = [d for d in one.term_dfas if d.num_states >= 5]
    assert len(big) == 1
    places = [int(t.term_start[[d is big[0] for d in t.term_dfas].index(True)])
              for t in (one, two)]
    assert places[0] != places[1]  # one DFA (the DFA cache's), placed apart
    for t in (one, two, two):
        n = t.byte_table.shape[0]
        kept, oracle = _zeroed(n), _zeroed(n)
        for term in range(len(t.term_dfas)):
            chains.fill(t, term, *kept)
        K.chain_sets(t.byte_table, EACH_BYTE, UTF8_DFA, *oracle)
        assert all(np.array_equal(a, b) for a, b in zip(kept, oracle, strict=True))
    assert len(chains._items) == 1  # read once, then copied


def test_a_terminal_is_read_when_a_row_of_its_states_is_first_asked_for() -> None:
    """A matcher fills in a terminal's step sets and radii when it builds the first row of
    one of its states: the string's stay zero until a mask is asked where it may start."""
    vocab = TokenizerInfo.from_token_bytes([b"", b"(", b"b", b")", b"a", b'"'], eos_ids=[0],
                                           special_ids=[0])
    grammar = r'start: "(" start ")" "a" /"[^"\\]*"/ | "b"'  # the string only after a ")"
    compiled = gs.compile_grammar(grammar, vocab, cache=False)
    t = compiled.tables
    string = max(range(len(t.term_dfas)), key=lambda k: t.term_dfas[k].num_states)
    lo, hi = int(t.term_start[string]), int(t.term_start[string]) + t.term_dfas[string].num_states
    matcher = compiled.matcher()
    bitmask = np.zeros((1, 1), dtype=np.int32)
    cache = runtime(compiled).cache
    for token in (1, 2):  # "(" then "b": masks where "(" or "b" may come, then ")"
        matcher.fill_next_token_bitmask(bitmask)
        assert not cache._rad[lo:hi].any()
        assert matcher.accept_token(token)
    matcher.fill_next_token_bitmask(bitmask)
    oracle = _zeroed(t.byte_table.shape[0])
    K.chain_sets(t.byte_table, EACH_BYTE, UTF8_DFA, *oracle)
    assert oracle[1][lo:hi].any()
    for kept, whole in zip((cache._steps, cache._rad, cache._rad_utf8), oracle, strict=True):
        assert np.array_equal(kept[lo:hi], whole[lo:hi])


def _perturbed(seed: int, pattern: str = STRING_BODY) -> tuple[np.ndarray, np.ndarray]:
    """The DFA of ``pattern`` with a few transitions redirected at random (most of them live
    transitions on bytes >= 0x80, which make up the multi-byte characters) and random accept
    flags."""
    trans, accept = _regex_dfa(pattern)
    trans, accept = trans.copy(), accept.copy()
    rng = random.Random(seed)
    n = trans.shape[0]
    interesting = sorted({b for p in PIECES for b in p} | {0xC2, 0xBF, 0x80})
    multibyte = [(s, b) for s in range(n) for b in range(0x80, 256) if trans[s, b] >= 0]
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.75:
            s, b = rng.choice(multibyte)
        else:
            s, b = rng.randrange(n), rng.choice(interesting)
        trans[s, b] = rng.randint(-1, n - 1)
    accept[:] = [rng.random() < 0.3 for _ in range(n)]
    return trans, accept


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pattern", [STRING_BODY, r'[^"\\]{0,6}'])
def test_chain_sets_of_perturbed_dfas_match_the_oracles(pattern: str, seed: int) -> None:
    _check_chain_sets(_perturbed(seed, pattern)[0])


# first and last bytes of each UTF-8 byte range (Unicode Table 3-7)
BOUNDARY_BYTES = (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF4)  # fmt: skip


@pytest.mark.parametrize("pattern", [STRING_BODY, r'[^"\\]{0,3}'])
def test_chain_sets_notice_any_broken_character_transition(pattern: str) -> None:
    """Redirect one live multi-byte transition to a dead or wrong state: where the first state
    no longer steps on every character to its successor, ``chain_sets`` must say so like the
    oracle."""
    clean, _ = _regex_dfa(pattern)
    first = int(clean[0, ord('"')]) if pattern == STRING_BODY else 0
    succ = int(clean[first, ord("a")])  # ASCII decides the successor; these edits keep it
    broken = 0
    for s in range(clean.shape[0]):
        for b in BOUNDARY_BYTES:
            if clean[s, b] < 0:
                continue
            for target in (-1, 0):
                trans = clean.copy()
                trans[s, b] = target
                _, _, rad_utf8 = _chain_sets(trans)
                expected = _utf8_step_oracle(trans, first, succ)
                assert bool(rad_utf8[first]) == expected, (s, hex(b), target)
                broken += not expected
    assert broken > 20


# --------------------------------------------------------------------------- rows


@pytest.mark.parametrize("seed", range(16))
def test_rows_of_perturbed_string_bodies_equal_the_per_token_oracle(seed: int) -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _perturbed(seed)
    for q in range(trans.shape[0]):
        _check_row(trans, accept, q, info, trie)


@pytest.mark.parametrize("seed", range(4))
def test_rows_of_perturbed_counting_dfas_equal_the_per_token_oracle(seed: int) -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _perturbed(seed, COUNTED)
    for q in range(trans.shape[0]):
        _check_row(trans, accept, q, info, trie)


def test_the_string_body_row_skips_subtrees() -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(3), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _string_body_dfa()
    assert _check_row(trans, accept, int(trans[0, ord('"')]), info, trie) > 0


@pytest.mark.parametrize("pattern", [COUNTED, r"[a-z ]{3,30}", r'[^"\\]{5}[^"\\]*'])
def test_counting_rows_skip_subtrees(pattern: str) -> None:
    """Every state of the counting chain has the oracle's row, and states with room for a whole
    token (toy tokens have at most 16 bytes) take subtrees whole, multi-byte ones included."""
    ascii_words = _toy_tokens(5, 100, [b"a", b"b", b" "])[1:]  # ASCII-only subtrees occur too
    info = TokenizerInfo.from_token_bytes(
        _toy_tokens(5) + ascii_words, eos_ids=[0], special_ids=[0]
    )
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _regex_dfa(pattern)
    chain = _chain(trans, 0, ord("a"))
    assert len(chain) > 5
    skips = [_check_row(trans, accept, q, info, trie) for q in chain]
    assert all(n > 0 for n in skips[:3])


@st.composite
def looping_dfas(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Random DFAs over a few bytes where self-loops are common."""
    n = draw(st.integers(1, 5))
    trans = np.full((n, 256), -1, dtype=np.int32)
    for s in range(n):
        for b in (ord("a"), ord("b"), ord(" "), ord('"'), 0xC3, 0xA9):
            trans[s, b] = draw(st.sampled_from([s, s, s, -1, *range(n)]))
    accept = np.array([draw(st.booleans()) for _ in range(n)], dtype=np.int32)
    return trans, accept


@st.composite
def counting_dfas(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Random DFAs where most bytes step to the next state (a counter), some of them through
    a multi-byte character's continuation state, with a few other targets and loops."""
    n = draw(st.integers(2, 12))
    trans = np.full((n + 1, 256), -1, dtype=np.int32)  # state n: inside "é" / "ê" (C3 ..)
    for s in range(n):
        nxt = min(s + 1, n - 1)
        for b in (ord("a"), ord("b"), ord(" "), ord('"'), 0xC3):
            trans[s, b] = draw(st.sampled_from([nxt, nxt, nxt, -1, s, *range(n)]))
    cont = draw(st.sampled_from(range(n)))  # where C3 A9 / C3 AA land
    trans[n, 0xA9] = cont
    trans[n, 0xAA] = draw(st.sampled_from([cont, cont, -1, *range(n)]))
    for s in range(n):
        if trans[s, 0xC3] >= 0:
            trans[s, 0xC3] = n
    accept = np.array([draw(st.booleans()) for _ in range(n + 1)], dtype=np.int32)
    return trans, accept


TOY = TokenizerInfo.from_token_bytes(_toy_tokens(7), eos_ids=[0], special_ids=[0])
TOY_TRIE = TokenTrie.from_token_bytes(TOY.token_bytes)


@settings(max_examples=60, deadline=None)
@given(st.one_of(looping_dfas(), counting_dfas()))
def test_rows_of_random_dfas_equal_the_per_token_oracle(
    dfa: tuple[np.ndarray, np.ndarray],
) -> None:
    trans, accept = dfa
    for q in range(trans.shape[0]):
        _check_row(trans, accept, q, TOY, TOY_TRIE)


def test_a_full_loop_takes_every_depth_one_subtree() -> None:
    trans = np.full((1, 256), 0, dtype=np.int32)  # any byte string, no accepting state
    skipped = _check_row(trans, np.zeros(1, np.int32), 0, TOY, TOY_TRIE)
    inner = TOY_TRIE.next > np.arange(TOY_TRIE.num_nodes) + 1
    inner_roots = int((inner & (TOY_TRIE.depth == 1)).sum())
    assert skipped == inner_roots > 0
    # the budget bounds the nodes covered, skipped ones included, as it does without skips
    for skip in (True, False):
        assert (
            _walk(trans, np.zeros(1, np.int32), 0, TOY_TRIE, TOY, skip, TOY_TRIE.num_nodes)[3] >= 0
        )
        assert (
            _walk(trans, np.zeros(1, np.int32), 0, TOY_TRIE, TOY, skip, TOY_TRIE.num_nodes - 1)[3]
            == -1
        )


def test_a_counter_takes_exactly_the_subtrees_that_fit() -> None:
    """A counter over every byte that dies after r bytes takes a node at depth d whole iff the
    tokens below it have at most r - d more bytes (the topmost such node only)."""
    r = 4
    trans = np.full((r + 1, 256), -1, dtype=np.int32)
    for s in range(r):
        trans[s, :] = s + 1
    skipped = _check_row(trans, np.zeros(r + 1, np.int32), 0, TOY, TOY_TRIE)
    toks = [t for t in TOY.token_bytes if t]
    prefixes = {t[:d] for t in toks for d in range(1, len(t) + 1)}

    def taken(p: bytes) -> bool:
        height = max(len(t) for t in toks if t.startswith(p)) - len(p)
        return len(p) <= r and 1 <= height <= r - len(p)

    expected = [p for p in prefixes if taken(p) and not any(taken(p[:i]) for i in range(1, len(p)))]
    assert skipped == len(expected) > 0


# --------------------------------------------------------------------------- real grammars, Llama-3


def _json_string_chain(compiled: gs.CompiledGrammar) -> list[int]:
    """The longest chain of states that "a" leads through: in a JSON string with a maxLength,
    a ``\\u`` escape's hex digits, then the counting states (at least one character read)."""
    trans = compiled.tables.byte_table
    return max((_chain(trans, q, ord("a")) for q in range(trans.shape[0])), key=len)


def test_llama3_json_rows_equal_the_per_token_oracle(llama3_info: TokenizerInfo) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"},
                                               "c": {"type": "string", "maxLength": 24}}}  # fmt: skip
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    trie = compiled.trie
    trans = compiled.tables.byte_table
    accept = compiled.tables.dfa_accept.astype(np.int32)
    steps, rad, rad_utf8 = _chain_sets(trans)
    sizes = [len(_members(steps[s])) for s in range(trans.shape[0])]
    looping = [s for s in range(trans.shape[0]) if rad[s] == K.RAD_INF]
    body = max(looping, key=lambda s: (rad_utf8[s], sizes[s]))  # the string body
    number = max((s for s in looping if not rad_utf8[s]), key=lambda s: sizes[s])  # digits
    assert rad_utf8[body] == K.RAD_INF and sizes[body] > 90 and sizes[number] >= 10
    counting = [q for q in _json_string_chain(compiled) if rad_utf8[q]]  # 1..23 characters read
    assert [int(rad_utf8[q]) for q in counting] == list(range(23, 0, -1))
    assert [int(rad[q]) for q in counting] == list(range(23, 0, -1))
    for q, least in ((body, 1000), (number, 5), (counting[0], 1000), (counting[-4], 100)):
        assert _check_row(trans, accept, q, llama3_info, trie) > least


@pytest.mark.parametrize("string", [{"type": "string"}, {"type": "string", "maxLength": 40}])
def test_mask_cache_counts_skipped_subtrees(
    llama3_info: TokenizerInfo, monkeypatch: pytest.MonkeyPatch, string: dict[str, object]
) -> None:
    schema = {"type": "object", "properties": {"s": string}, "required": ["s"]}
    text = b'{"s": "caf\xc3\xa9 \xe2\x82\xac'
    masks = {}
    for skip in (True, False):
        monkeypatch.setattr(runtime_module, "SKIP_SUBTREES", skip)
        store = RowStore()  # rows are walked here, not served from another test's grammar
        monkeypatch.setattr(runtime_module, "shared_row_store", lambda store=store: store)
        compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
        m = compiled.matcher()
        assert m.accept_string(text)
        masks[skip] = m.allowed_token_ids()
        cache = runtime(compiled).cache
        assert (cache.skipped_subtrees > 1000) == skip
        assert cache.nbytes > 0
    assert np.array_equal(masks[True], masks[False])
    assert len(masks[True]) > 100_000


# --------------------------------------------------------------------------- loop plans


def _class_oracle(trans: np.ndarray, accept: np.ndarray, q: int, tb: list[bytes],
                  unc: list[int], follow: frozenset[int] = frozenset(range(256)),
                  ) -> list[tuple[int, bytes]]:
    """Per uncertain token: the DFA state at its split (the first j >= 1 where the DFA accepts
    after j bytes, a byte of ``follow`` follows and the DFA is alive) and the bytes from there:
    two tokens share a suffix class iff these agree."""
    keys = []
    for t in unc:
        s, key = q, None
        for j, b in enumerate(tb[t]):
            if j >= 1 and accept[s] and b in follow:
                key = (s, tb[t][j:])
                break
            s = int(trans[s, b])
        assert key is not None
        keys.append(key)
    return keys


def _check_loop_row(trans: np.ndarray, accept: np.ndarray, q: int, info: TokenizerInfo,
                    trie: TokenTrie, utf8: bool | None = None) -> int:
    """Assert the row ``classify_loop_tokens`` builds for ``q`` from the ``loop_plan`` of its
    ``loop_state`` equals the per-token oracle (classes included); return the plan's number of
    exits."""
    steps, rad, rad_utf8 = _chain_sets(trans)
    dfa_info = _dfa_info(accept)
    loop = runtime_module.loop_state(trans, EACH_BYTE, dfa_info, steps, q)
    assert loop >= 0
    if utf8 is None:
        utf8 = K.loops_through_utf8(trans, EACH_BYTE, dfa_info, UTF8_DFA, loop)
    v = info.vocab_size
    words = (v + 31) // 32
    plan_bits = np.empty(words, dtype=np.uint32)
    exits = np.empty((trie.num_nodes, 3), dtype=np.int32)
    n_exits, plan_acc, whole = K.loop_plan(
        steps, rad, rad_utf8, loop, utf8, UTF8_DFA, trie.max_depth, trie.byte, trie.depth, trie.next,
        trie.tok_ptr, trie.tok_ids, trie.below, trie.below_utf8, trie.height, plan_bits, exits)
    bits = np.full(words, 0xDEADBEEF, dtype=np.uint32)
    out = [np.empty(v, dtype=np.int32) for _ in range(3)]
    n_acc, n_unc, n_cls, _ = K.classify_loop_tokens(
        exits[:n_exits], plan_bits, plan_acc, whole, trans, EACH_BYTE, dfa_info, steps, rad, rad_utf8, q, loop,
        ANY_BYTE, trie.max_depth, trie.byte, trie.depth, trie.next, trie.tok_ptr, trie.tok_ids,
        trie.tok_lcp, trie.below, trie.below_utf8, trie.height, trie.seq_ptr, trie.seq_data,
        np.empty(trie.num_nodes + 2, dtype=np.int32), bits, *out)
    tb = list(info.token_bytes)
    acc, unc = _row_oracle(trans, accept, q, tb)
    got = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")[:v]).tolist()
    assert got == acc and n_acc == len(acc)
    assert trie.tok_ids[out[0][:n_unc]].tolist() == unc
    assert out[1][:n_unc].tolist() == _lcp(tb, unc)
    keys = _class_oracle(trans, accept, q, tb, unc)
    classes = out[2][:n_unc].tolist()
    assert len(set(classes)) == n_cls == len(set(keys))
    assert len(set(zip(classes, keys, strict=True))) == n_cls  # the same partition
    return n_exits


def _loops_through_utf8_oracle(trans: np.ndarray, accept: np.ndarray, q: int) -> bool:
    """Every multi-byte character Python encodes, read from q: alive and not accepting after
    each proper prefix, and back in q at its end."""
    for chars in _utf8_characters().values():
        s = np.full(chars.shape[0], q)
        for i in range(chars.shape[1]):
            s = np.where(s >= 0, trans[np.maximum(s, 0), chars[:, i]], -1)
            if i < chars.shape[1] - 1 and ((s < 0).any() or accept[np.maximum(s, 0)].any()):
                return False
        if (s != q).any():
            return False
    return True


def _looping_states(trans: np.ndarray, accept: np.ndarray) -> list[int]:
    """The states with a ``loop_state``: loops and the states that step into one."""
    steps, _, _ = _chain_sets(trans)
    info = _dfa_info(accept)
    return [q for q in range(trans.shape[0])
            if runtime_module.loop_state(trans, EACH_BYTE, info, steps, q) >= 0]


@pytest.mark.parametrize("seed", range(16))
def test_loop_plan_rows_of_perturbed_string_bodies_equal_the_oracle(seed: int) -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _perturbed(seed) if seed else _string_body_dfa()  # 0: the UTF-8 spine holds
    for q in _looping_states(trans, accept):
        for utf8 in (None, False):  # the UTF-8 spine where it holds, and the byte spine
            _check_loop_row(trans, accept, q, info, trie, utf8)


@pytest.mark.parametrize("seed", range(24))
def test_loops_through_utf8_matches_the_character_oracle(seed: int) -> None:
    trans, accept = _perturbed(seed) if seed else _string_body_dfa()
    info = _dfa_info(accept)
    answers = [bool(K.loops_through_utf8(trans, EACH_BYTE, info, UTF8_DFA, q)) for q in range(len(trans))]
    assert answers == [_loops_through_utf8_oracle(trans, accept, q) for q in range(len(trans))]
    if seed == 0:
        assert answers[int(trans[0, ord('"')])]  # the string body loops through characters


def test_an_accepting_middle_of_a_character_ends_the_utf8_spine() -> None:
    trans, accept = _string_body_dfa()
    body = int(trans[0, ord('"')])
    info = _dfa_info(accept)
    assert K.loops_through_utf8(trans, EACH_BYTE, info, UTF8_DFA, body)
    info[int(trans[body, 0xC3]), 0] = 1
    assert not K.loops_through_utf8(trans, EACH_BYTE, info, UTF8_DFA, body)


@settings(max_examples=60, deadline=None)
@given(looping_dfas())
def test_loop_plan_rows_of_random_dfas_equal_the_oracle(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    trans, accept = dfa
    for q in _looping_states(trans, accept):
        _check_loop_row(trans, accept, q, TOY, TOY_TRIE)


def test_llama3_string_body_plan_reads_few_exits(llama3_info: TokenizerInfo) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}}}
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    trans = compiled.tables.byte_table
    accept = compiled.tables.dfa_accept.astype(np.int32)
    looping = _looping_states(trans, accept)
    body = max(looping, key=lambda q: int((trans[q] == q).sum()))
    exits = _check_loop_row(trans, accept, body, llama3_info, compiled.trie)
    assert exits < compiled.trie.num_nodes // 100


@pytest.mark.parametrize("pattern", [r'"[a-z][^"\\]*"', r'"(é|[^"\\])[^"\\]*"', r'"[^"\\]+"'])
def test_a_state_before_a_loop_follows_its_plan(pattern: str) -> None:
    """The state after the quote steps into the body loop on some first bytes only (or on
    every one, to a different state): its row comes from the loop's plan, redone below the
    first bytes where the two differ."""
    trans, accept = _regex_dfa(pattern)
    after_quote = int(trans[0, ord('"')])
    steps, _, _ = _chain_sets(trans)
    info = _dfa_info(accept)
    loop = runtime_module.loop_state(trans, EACH_BYTE, info, steps, after_quote)
    assert loop not in (-1, after_quote)
    for seed in range(4):
        vocab = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
        _check_loop_row(trans, accept, after_quote, vocab, TokenTrie.from_token_bytes(
            vocab.token_bytes))


# --------------------------------------------------------------------------- chain plans

QUOTE = np.array([1 << ord('"'), 0, 0, 0], dtype=np.uint64)  # a FOLLOW set: only '"' may follow


def _set_of(follow: np.ndarray) -> frozenset[int]:
    return frozenset(_members(follow))


def _chain_row(trans: np.ndarray, accept: np.ndarray, q: int, info: TokenizerInfo,
               trie: TokenTrie, follow: np.ndarray) -> tuple[int, int] | None:
    """Assert the row ``classify_chain_tokens`` builds for ``q`` from the ``loop_plan`` of its step
    set, where ``chain_states`` takes it, equals the per-token oracle with ``follow`` (classes
    included); return (m, the accepted ids as written) or None where the plan does not apply."""
    steps, rad, rad_utf8 = _chain_sets(trans)
    dfa_info = _dfa_info(accept)
    chain = np.empty(trie.max_depth + 1, dtype=np.int64)
    m, utf8 = K.chain_states(trans, EACH_BYTE, dfa_info, steps, rad_utf8, follow, q, chain)
    if m < 0:
        return None
    v = info.vocab_size
    words = (v + 31) // 32
    plan_bits = np.empty(words, dtype=np.uint32)
    exits = np.empty((trie.num_nodes, 3), dtype=np.int32)
    inf = K.RAD_INF
    n_exits, plan_acc, whole = K.loop_plan(
        steps[q:q + 1], np.array([inf], np.uint16), np.array([inf if utf8 else 0], np.uint16), 0,
        utf8, UTF8_DFA, trie.max_depth, trie.byte, trie.depth, trie.next, trie.tok_ptr,
        trie.tok_ids, trie.below, trie.below_utf8, trie.height, plan_bits, exits)
    spine_ids = np.empty(plan_acc, dtype=np.int32)
    spine_ptr = np.empty(trie.max_depth + 2, dtype=np.int64)
    assert K.spine_by_steps(plan_bits, utf8, trie.tok_ids, trie.seq_ptr, trie.seq_data,
                            spine_ids, spine_ptr) == plan_acc
    bits = np.full(words, 0xDEADBEEF, dtype=np.uint32)
    ids = np.full(words, -1, dtype=np.int32)
    out = [np.empty(v, dtype=np.int32) for _ in range(3)]
    n_acc, n_unc, n_cls, _ = K.classify_chain_tokens(
        exits[:n_exits], plan_bits, spine_ids, spine_ptr, whole, chain, m, utf8, trans, EACH_BYTE, dfa_info,
        steps, rad, rad_utf8, follow, trie.max_depth, trie.byte, trie.depth, trie.next,
        trie.tok_ptr, trie.tok_ids, trie.tok_lcp, trie.below, trie.below_utf8, trie.height,
        trie.seq_ptr, trie.seq_data, np.empty(trie.num_nodes + 2, dtype=np.int32), ids, bits, *out)
    tb = list(info.token_bytes)
    can_follow = _set_of(follow)
    acc, unc = _row_oracle(trans, accept, q, tb, can_follow)
    got = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")[:v]).tolist()
    assert got == acc and n_acc == len(acc)
    if n_acc <= words:
        assert ids[:n_acc].tolist() == acc
    assert trie.tok_ids[out[0][:n_unc]].tolist() == unc
    assert out[1][:n_unc].tolist() == _lcp(tb, unc)
    keys = _class_oracle(trans, accept, q, tb, unc, can_follow)
    classes = out[2][:n_unc].tolist()
    assert len(set(classes)) == n_cls == len(set(keys))
    assert len(set(zip(classes, keys, strict=True))) == n_cls  # the same partition
    return m, n_acc


# a maxLength string with its closing quote; a counter that may end anywhere before a quote (two
# of its characters multi-byte, the others not: it steps by bytes);
# one with escapes (their states leave the chain and come back a step further)
CHAINS = [r'[^"\\]{0,12}"', "[a-z é€]{0,9}", r'([^"\\]|\\["\\n]){0,10}"']


def _spine_steps_oracle(tb: bytes, utf8: bool) -> int:
    return sum((b & 0xC0) != 0x80 for b in tb) if utf8 else len(tb)


@pytest.mark.parametrize("pattern", CHAINS)
def test_chain_rows_equal_the_per_token_oracle(pattern: str) -> None:
    """Every state of a counter that ``chain_states`` takes has the oracle's row, and it takes
    the counting states: each has one character less room than the one before."""
    trans, accept = _regex_dfa(pattern)
    counting = _chain(trans, 0, ord("a"))
    for seed in range(3):
        info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
        trie = TokenTrie.from_token_bytes(info.token_bytes)
        rooms = [_chain_row(trans, accept, q, info, trie, QUOTE) for q in counting]
        assert [r[0] for r in rooms if r is not None] == list(range(len(counting) - 1, 0, -1))
        for q in range(trans.shape[0]):
            _chain_row(trans, accept, q, info, trie, QUOTE)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pattern", CHAINS)
def test_chain_rows_of_perturbed_counters_equal_the_oracle(pattern: str, seed: int) -> None:
    """Redirected transitions and random accept flags: where ``chain_states`` still takes a
    state (an open end, an accepting state before a byte that may follow, a broken character
    must all be refused), its row is the oracle's."""
    info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _perturbed(seed, pattern)
    rng = random.Random(seed)
    follow = QUOTE.copy()
    for b in rng.sample(sorted({b for p in PIECES for b in p}), 2):
        follow[b >> 6] |= np.uint64(1 << (b & 63))
    for q in range(trans.shape[0]):
        for can_follow in (QUOTE, follow):
            _chain_row(trans, accept, q, info, trie, can_follow)


@settings(max_examples=60, deadline=None)
@given(counting_dfas(), st.sampled_from([QUOTE, ANY_BYTE, np.zeros(4, dtype=np.uint64)]))
def test_chain_rows_of_random_counters_equal_the_oracle(
    dfa: tuple[np.ndarray, np.ndarray], follow: np.ndarray
) -> None:
    trans, accept = dfa
    for q in range(trans.shape[0]):
        _chain_row(trans, accept, q, TOY, TOY_TRIE, follow)


def test_chain_states_refuse_what_the_spine_cannot_describe() -> None:
    """The three conditions, one broken at a time on a counter that passes them."""
    trans, accept = _regex_dfa(CHAINS[0])
    steps, _, rad_utf8 = _chain_sets(trans)
    q = 0
    chain = np.empty(17, dtype=np.int64)

    def room(trans: np.ndarray = trans, accept: np.ndarray = accept,
             follow: np.ndarray = QUOTE) -> int:
        steps, _, rad_utf8 = _chain_sets(trans)
        return K.chain_states(trans, EACH_BYTE, _dfa_info(accept), steps, rad_utf8, follow, q, chain)[0]

    assert room() == 12 and chain[12] == _chain(trans, 0, ord("a"))[-1]
    end = int(chain[12])
    open_end = trans.copy()
    open_end[end, ord("a")] = end  # the end reads one more character
    assert room(trans=open_end) == -1
    accepting = accept.copy()
    accepting[int(chain[3])] = 1
    assert room(accept=accepting) == 12  # only '"' may follow: no spine byte
    a_follows = QUOTE.copy()
    a_follows[1] |= np.uint64(1 << (ord("a") - 64))
    assert room(accept=accepting, follow=a_follows) == -1
    assert room(follow=a_follows) == 12  # no state accepts on the spine
    high_follows = QUOTE.copy()
    high_follows[3] = np.uint64(1)  # byte 0xC0 may follow: a character may not split
    assert room(follow=high_follows) == -1
    assert K.chain_states(trans, EACH_BYTE, _dfa_info(accept), steps, rad_utf8, QUOTE, q,
                          np.empty(6, dtype=np.int64)) == (5, True)  # cut where tokens end


def test_spine_by_steps_orders_the_plan_by_characters() -> None:
    trie = TOY_TRIE
    words = (TOY.vocab_size + 31) // 32
    rng = random.Random(1)
    chosen = sorted(rng.sample(range(1, TOY.vocab_size), 80))
    bits = np.zeros(words, dtype=np.uint32)
    for t in chosen:
        bits[t >> 5] |= np.uint32(1 << (t & 31))
    for utf8 in (True, False):
        ids = np.empty(len(chosen), dtype=np.int32)
        ptr = np.empty(trie.max_depth + 2, dtype=np.int64)
        assert K.spine_by_steps(bits, utf8, trie.tok_ids, trie.seq_ptr, trie.seq_data, ids,
                                ptr) == len(chosen)
        for c in range(trie.max_depth + 1):
            expected = {t for t in chosen if _spine_steps_oracle(TOY.token_bytes[t], utf8) == c}
            assert set(ids[ptr[c]:ptr[c + 1]].tolist()) == expected


def test_llama3_counting_rows_follow_the_chain_plan(
    llama3_info: TokenizerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A maxLength string's counting states near its end (the walks that cannot take tall
    subtrees whole) get their rows from the string body's plan, equal to the oracle's; the mask
    cache uses it."""
    schema = {"type": "object", "properties": {"c": {"type": "string", "maxLength": 6}}}
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    trans = compiled.tables.byte_table
    accept = compiled.tables.dfa_accept.astype(np.int32)
    follow = compiled.tables.follow_bytes[compiled.tables.state_term]
    counting = [q for q in _json_string_chain(compiled) if _chain_sets(trans)[2][q]]
    assert len(counting) == 5
    for q in (counting[-1], counting[-3]):
        room = _chain_row(trans, accept, q, llama3_info, compiled.trie, follow[q])
        assert room is not None and room[0] <= 3
    walked = []
    real = K.classify_chain_tokens
    monkeypatch.setattr(K, "classify_chain_tokens",
                        lambda *a: walked.append(a[6]) or real(*a))  # the room
    monkeypatch.setattr(runtime_module, "shared_row_store", RowStore)  # walked here, not shared
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    m = compiled.matcher()
    assert m.accept_string(b'{"c": "abcd')
    assert len(m.allowed_token_ids()) > 1000
    assert 2 in walked  # the state after "abcd": two characters left
