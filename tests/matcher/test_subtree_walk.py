"""The row-building trie walk that takes whole subtrees (``_kernels.classify_tokens``).

Oracles: a per-token DFA run in plain Python for the rows (accepted / uncertain / rejected), Python's
own UTF-8 codec for the trie's ``below_utf8`` and for ``loop_sets``' multi-byte check, and plain
set arithmetic on token bytes for ``below``. Each walk is also checked to have skipped subtrees, so
the tests fail if the acceleration silently stops working.
"""

from __future__ import annotations

import codecs
import functools
import random

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


def _toy_tokens(seed: int, n: int = 300) -> list[bytes]:
    rng = random.Random(seed)
    toks = {b"".join(rng.choices(PIECES, k=rng.randint(1, 4))) for _ in range(n)}
    return [b"", *sorted(toks)]  # id 0: EOS


def _row_oracle(
    trans: np.ndarray, accept: np.ndarray, q: int, token_bytes: list[bytes]
) -> tuple[list[int], list[int]]:
    """(accepted ids, uncertain ids in byte order) by running q's DFA over each token alone:
    accepted = alive over every byte; uncertain = dies after passing an accepting state on one
    byte or more; the rest are rejected."""
    acc, unc = [], []
    for t, tb in enumerate(token_bytes):
        if not tb:
            continue
        s, passed = q, False
        for b in tb:
            s = int(trans[s, b])
            if s < 0:
                break
            passed = passed or bool(accept[s])
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
) -> tuple[list[int], list[int], np.ndarray, int]:
    """The kernel's row: accepted ids (sorted), uncertain ids (as written), their lcp, skips."""
    n_states = trans.shape[0]
    loops = np.zeros((n_states, 4), dtype=np.uint64)
    kind = np.zeros(n_states, dtype=np.uint8)
    if skip:
        K.loop_sets(trans, UTF8_DFA, loops, kind)
    dfa_info = np.zeros((n_states, 3), dtype=np.int32)
    dfa_info[:, 0] = accept
    v = info.vocab_size
    out = [np.empty(v, dtype=np.int32) for _ in range(3)]
    n_acc, n_unc, skipped = K.classify_tokens(
        trans, dfa_info, loops, kind, q, trie.num_nodes if budget is None else budget, trie.max_depth, trie.byte, trie.depth,
        trie.next, trie.tok_ptr, trie.tok_ids, trie.below, trie.below_utf8,
        info.token_indptr, info.token_data, *out,
    )  # fmt: skip
    return sorted(out[0][:n_acc].tolist()), out[1][:n_unc].tolist(), out[2][:n_unc], skipped


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
    plain = _walk(trans, accept, q, trie, info, skip=False)
    assert plain[0] == acc and plain[1] == unc and plain[3] == 0
    return skipped


@functools.cache
def _string_body_dfa() -> tuple[np.ndarray, np.ndarray]:
    vocab = TokenizerInfo.from_token_bytes([b"", b"a"], eos_ids=[0], special_ids=[0])
    t = gs.compile_regex(STRING_BODY, vocab, cache=False).tables
    return t.dfa_trans, t.dfa_accept.astype(np.int32)


@functools.cache
def _utf8_characters() -> dict[int, np.ndarray]:
    """Every multi-byte UTF-8 character as Python encodes it, uint8 [n, L] per length L."""
    by_len: dict[int, list[bytes]] = {2: [], 3: [], 4: []}
    for c in range(0x80, 0x110000):
        if not 0xD800 <= c < 0xE000:
            e = chr(c).encode()
            by_len[len(e)].append(e)
    return {n: np.frombuffer(b"".join(v), dtype=np.uint8).reshape(-1, n) for n, v in by_len.items()}


def _utf8_loop_oracle(trans: np.ndarray, s: int) -> bool:
    """Every multi-byte character keeps s's DFA alive on each byte and returns to s."""
    for chars in _utf8_characters().values():
        state = np.full(chars.shape[0], s, dtype=np.int64)
        for col in range(chars.shape[1]):
            if (state < 0).any():
                return False
            state = trans[state, chars[:, col]]
        if (state != s).any():
            return False
    return True


# --------------------------------------------------------------------------- the trie's byte sets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_subtree_byte_sets_match_the_tokens_below(seed: int) -> None:
    tb = _toy_tokens(seed)
    trie = TokenTrie.from_token_bytes(tb)
    prefix: list[bytes] = []
    for k in range(trie.num_nodes):
        del prefix[trie.depth[k] - 1 :]
        prefix.append(bytes([trie.byte[k]]))
        node = b"".join(prefix)
        tails = [t[len(node) :] for t in tb if t.startswith(node)]
        expected = {b for tail in tails for b in tail}
        got = {b for b in range(256) if int(trie.below[k, b >> 6]) >> (b & 63) & 1}
        assert got == expected, node
        decoder_ok = True
        for tail in tails:
            try:
                codecs.getincrementaldecoder("utf-8")().decode(tail, final=False)
            except UnicodeDecodeError:
                decoder_ok = False
        assert bool(trie.below_utf8[k]) == decoder_ok, node
    assert 0 < trie.below_utf8.sum() < trie.num_nodes  # both outcomes occur
    assert trie.nbytes >= trie.below.nbytes + trie.below_utf8.nbytes


# --------------------------------------------------------------------------- loop sets


def test_loop_sets_of_a_string_body() -> None:
    trans, _ = _string_body_dfa()
    n = trans.shape[0]
    loops = np.zeros((n, 4), dtype=np.uint64)
    kind = np.zeros(n, dtype=np.uint8)
    K.loop_sets(trans, UTF8_DFA, loops, kind)
    for s in range(n):
        members = {b for b in range(256) if int(loops[s, b >> 6]) >> (b & 63) & 1}
        assert members == {b for b in range(256) if trans[s, b] == s}
        assert bool(kind[s] & K.LOOPS_UTF8) == _utf8_loop_oracle(trans, s)
        assert bool(kind[s] & K.LOOPS_SOME) == bool(members)
    body = int(trans[0, ord('"')])
    assert (
        kind[body] == K.LOOPS_SOME | K.LOOPS_UTF8
    )  # RFC 8259: unescaped = %x20-21 / %x23-5B / %x5D-10FFFF
    assert {b for b in range(128) if int(loops[body, b >> 6]) >> (b & 63) & 1} == set(
        range(128)
    ) - {ord('"'), ord("\\")}


def _perturbed(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The string-body DFA with a few transitions redirected at random (most of them live
    transitions on bytes >= 0x80, which make up the multi-byte characters) and random accept
    flags."""
    trans, accept = _string_body_dfa()
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


@pytest.mark.parametrize("seed", range(10))
def test_loop_sets_of_perturbed_dfas_match_the_utf8_oracle(seed: int) -> None:
    trans, _ = _perturbed(seed)
    n = trans.shape[0]
    loops = np.zeros((n, 4), dtype=np.uint64)
    kind = np.zeros(n, dtype=np.uint8)
    K.loop_sets(trans, UTF8_DFA, loops, kind)
    for s in range(n):
        assert bool(kind[s] & K.LOOPS_UTF8) == _utf8_loop_oracle(trans, s), s


# first and last bytes of each UTF-8 byte range (Unicode Table 3-7)
BOUNDARY_BYTES = (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF4)  # fmt: skip


def test_loop_sets_notice_any_broken_character_transition() -> None:
    """Redirect one live multi-byte transition of the string body to a dead or wrong state: the
    body no longer loops on every character, and ``loop_sets`` must say so like the oracle."""
    clean, _ = _string_body_dfa()
    body = int(clean[0, ord('"')])
    n = clean.shape[0]
    cases = 0
    for s in range(1, n):
        for b in BOUNDARY_BYTES:
            if clean[s, b] < 0:
                continue
            for target in (-1, 0):
                trans = clean.copy()
                trans[s, b] = target
                loops = np.zeros((n, 4), dtype=np.uint64)
                kind = np.zeros(n, dtype=np.uint8)
                K.loop_sets(trans, UTF8_DFA, loops, kind)
                assert kind[body] & K.LOOPS_UTF8 == _utf8_loop_oracle(trans, body) == 0, (
                    s,
                    hex(b),
                    target,
                )
                cases += 1
    assert cases > 40


# --------------------------------------------------------------------------- rows


@pytest.mark.parametrize("seed", range(16))
def test_rows_of_perturbed_string_bodies_equal_the_per_token_oracle(seed: int) -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(seed), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _perturbed(seed)
    for q in range(trans.shape[0]):
        _check_row(trans, accept, q, info, trie)


def test_the_string_body_row_skips_subtrees() -> None:
    info = TokenizerInfo.from_token_bytes(_toy_tokens(3), eos_ids=[0], special_ids=[0])
    trie = TokenTrie.from_token_bytes(info.token_bytes)
    trans, accept = _string_body_dfa()
    assert _check_row(trans, accept, int(trans[0, ord('"')]), info, trie) > 0


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


TOY = TokenizerInfo.from_token_bytes(_toy_tokens(7), eos_ids=[0], special_ids=[0])
TOY_TRIE = TokenTrie.from_token_bytes(TOY.token_bytes)


@settings(max_examples=60, deadline=None)
@given(looping_dfas())
def test_rows_of_random_looping_dfas_equal_the_per_token_oracle(
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


# --------------------------------------------------------------------------- real grammars, Llama-3


def test_llama3_json_rows_equal_the_per_token_oracle(llama3_info: TokenizerInfo) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}}}
    compiled = gs.compile_json_schema(schema, llama3_info, cache=False)
    trie = compiled.trie
    trans = compiled.tables.dfa_trans
    accept = compiled.tables.dfa_accept.astype(np.int32)
    n = trans.shape[0]
    loops = np.zeros((n, 4), dtype=np.uint64)
    kind = np.zeros(n, dtype=np.uint8)
    K.loop_sets(trans, UTF8_DFA, loops, kind)
    loop_sizes = [sum(bin(int(w)).count("1") for w in loops[s]) for s in range(n)]
    body = max(range(n), key=lambda s: (kind[s] & K.LOOPS_UTF8, loop_sizes[s]))  # the string body
    number = max(
        (s for s in range(n) if not kind[s] & K.LOOPS_UTF8), key=lambda s: loop_sizes[s]
    )  # digits
    assert kind[body] & K.LOOPS_UTF8 and loop_sizes[body] > 90 and loop_sizes[number] >= 10
    for q in (body, number):
        skipped = _check_row(trans, accept, q, llama3_info, trie)
        assert skipped > (1000 if q == body else 5)


def test_mask_cache_counts_skipped_subtrees(
    llama3_info: TokenizerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
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
