"""The mask fill's fast paths against independent oracles.

* ``classify_tokens``' uncertain tokens (those the parser may take) and their suffix classes
  against a direct Python reading of their definition, on random DFAs and byte vocabularies;
* suffix classes sharing one verdict per class at single-scan chart positions and beside scans
  that die inside the tokens (but never across a scan that may take part), and rows built by
  the bounded cheap walk or through signature and store, against the reference recognizer's
  full token masks on a JSON grammar whose string bodies are crossed by many tokens.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammarsd.compiler.compiled import compile_ir
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
from grammarsd.matcher import _kernels as K
from grammarsd.matcher import runtime as runtime_module
from grammarsd.matcher.reference import ReferenceRecognizer
from grammarsd.matcher.runtime import runtime
from grammarsd.tokenizer.info import TokenizerInfo
from grammarsd.tokenizer.trie import TokenTrie

# --------------------------------------------------------------------------- uncertain tokens

BYTES = (0x61, 0x62, 0x63)  # a, b, c
EACH_BYTE = np.arange(256, dtype=np.uint8)  # the columns of a byte table: one per byte


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
    """A random DFA over a, b, c (-1 = dead), accept flags, a FOLLOW set and a vocabulary."""
    n = draw(st.integers(1, 5))
    trans = np.full((n, 256), -1, dtype=np.int32)
    for s, b in itertools.product(range(n), BYTES):
        trans[s, b] = draw(st.integers(-1, n - 1))
    info = np.zeros((n, 7), dtype=np.int32)
    info[:, 4:6] = K.NO_CAP  # no capped terminal (``_kernels.Tables``)
    info[:, 0] = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    follow = np.zeros(4, dtype=np.uint64)
    for b in draw(st.sets(st.sampled_from(BYTES))):
        follow[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    words = draw(st.lists(st.text("abc", min_size=1, max_size=5), min_size=1, max_size=40))
    return trans, info, follow, sorted({w.encode() for w in words})


def _split(trans: np.ndarray, info: np.ndarray, follow: set[int], q: int, tok: bytes):
    """(split, DFA state there) by the definition, or None: the DFA accepts after j >= 1 bytes
    and byte j may follow the terminal (first such j, before the DFA dies)."""
    s = q
    for j, b in enumerate(tok):
        if j >= 1 and info[s, 0] and b in follow:
            return j, s
        s = trans[s, b]
        if s < 0:
            return None
    return None


def _alive(trans: np.ndarray, q: int, tok: bytes) -> bool:
    s = q
    for b in tok:
        s = trans[s, b]
        if s < 0:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(case=cases())
def test_uncertain_tokens_and_classes_match_their_definition(case) -> None:  # noqa: ANN001
    trans, info, follow, vocab = case
    follow_set = {b for b in BYTES if (int(follow[b >> 6]) >> (b & 63)) & 1}
    trie = TokenTrie.from_token_bytes(vocab)  # vocab is sorted: ids are in byte order
    n = len(vocab)
    no_skips = (
        np.zeros((trans.shape[0], 4), np.uint64),
        *(np.zeros(trans.shape[0], np.uint16),) * 2,
    )
    for q in range(trans.shape[0]):
        ids, out = np.empty(n, dtype=np.int32), [np.empty(n, dtype=np.int32) for _ in range(3)]
        bits = np.empty((n + 31) // 32, dtype=np.uint32)
        flips = np.empty(trie.num_nodes + 2, dtype=np.int32)
        n_acc, n_unc, n_cls, _ = K.classify_tokens(
            trans, EACH_BYTE, info, *no_skips, q, follow, -K.NO_CAP, K.NO_CAP, trie.num_nodes, trie.max_depth, trie.byte,
            trie.depth, trie.next, trie.tok_ptr, trie.tok_ids, trie.tok_lcp, trie.below,
            trie.below_utf8, trie.height, trie.tok_bits, trie.seq_ptr, trie.seq_data, flips, ids, bits,
            *out,
        )  # fmt: skip
        alive = [t for t in range(n) if _alive(trans, q, vocab[t])]
        assert ids[:n_acc].tolist() == alive
        splits = {t: _split(trans, info, follow_set, q, vocab[t]) for t in range(n)}
        kept = [t for t in range(n) if splits[t] is not None and t not in alive]
        assert trie.tok_ids[out[0][:n_unc]].tolist() == kept  # trie positions of the ids
        shared = [os.path.commonprefix([vocab[a], vocab[b]]) for a, b in itertools.pairwise(kept)]
        assert out[1][:n_unc].tolist() == [len(p) for p in [b"", *shared]][:n_unc]
        keys = {t: (splits[t][1], vocab[t][splits[t][0] :]) for t in kept}
        classes = out[2][:n_unc].tolist()
        assert sorted(set(classes)) == list(range(n_cls))
        for (i, a), (j, b) in itertools.combinations(enumerate(kept), 2):
            assert (classes[i] == classes[j]) == (keys[a] == keys[b])


# --------------------------------------------------------------------------- masks on a JSON grammar

WS = repeat(char_set(" "), 0, 2)
CHAR = ANY_CHAR.intersect(char_set('"\\').negate()).intersect(chars([(0x20, 0x10FFFF)]))


def _grammar(max_chars: int | None = None) -> Grammar:
    """JSON-like values; strings of at most ``max_chars`` characters (a body of more than
    ``CompileLimits.repeat_alone`` is its own terminal, so an empty body leaves two scans live)."""

    def listing(open_: str, item: str, close: str):  # noqa: ANN202
        more = repeat(seq(WS, lit(","), WS, Ref(item)), 0, None)
        return seq(lit(open_), WS, optional(seq(Ref(item), more)), WS, lit(close))

    return Grammar(
        {
            "value": choice(Ref("object"), Ref("array"), Ref("string"), lit("1")),
            "object": listing("{", "member", "}"),
            "member": seq(Ref("string"), WS, lit(":"), WS, Ref("value")),
            "array": listing("[", "value", "]"),
            "string": seq(lit('"'), repeat(CHAR, 0, max_chars), lit('"')),
        },
        start="value",
    )


def _vocab() -> TokenizerInfo:
    """Id 0 is EOS. Many tokens end a string and go on: body bytes, a quote, then a suffix the
    grammar takes or refuses (equal suffixes after different bodies share a class)."""
    bodies = ["", "a", "b", "ab", "ba", " a", "é"]
    suffixes = [",", ", ", "}", "]", ":", ": ", ",}", "},", "]}", "1", ";", ' "', '"', ",1", "x"]
    pieces = {b.encode() for b in 'ab1{}[]:, "é'}
    pieces |= {"é".encode()[:1], "é".encode()[1:]}
    pieces |= {(b + '"' + s).encode() for b, s in itertools.product(bodies, suffixes)}
    pieces |= {b.encode() for b in bodies if b}
    return TokenizerInfo.from_token_bytes([b"", *sorted(pieces)], eos_ids=[0], special_ids=[0])


VOCAB = _vocab()
DOC = '{"ab": ["a", {"b": "ba é"}, 1], "": "a b"}'


def _walk_against_reference(text: str, grammar: Grammar | None = None) -> tuple[int, int]:
    """Feed ``text`` one byte-token at a time, comparing every full mask with the reference; returns
    how many masks were taken at a single-scan and at a several-scan position where a row has
    shared classes."""
    grammar = _grammar() if grammar is None else grammar
    ref = ReferenceRecognizer(grammar)
    compiled = compile_ir(grammar, VOCAB, cache=False)
    m = compiled.matcher()
    by_bytes = {b: i for i, b in enumerate(VOCAB.token_bytes) if b}
    data = text.encode()
    prefix = b""
    shared_classes = [0, 0]
    k = 0
    while True:
        expected = np.asarray(ref.allowed_tokens(prefix, VOCAB.token_bytes), dtype=bool)
        expected[0] = ref.is_complete(prefix)
        got = np.zeros(VOCAB.vocab_size, dtype=bool)
        got[m.allowed_token_ids()] = True
        diff = np.flatnonzero(expected != got)
        assert not diff.size, f"prefix {prefix!r}: " + ", ".join(
            f"{VOCAB.token_bytes[t]!r} oracle={expected[t]}" for t in diff[:8]
        )
        s, c = m._state, runtime(compiled).cache.arrays
        pos = int(s.meta[K.POS])
        scans = s.scans[s.bounds[pos, 1] : s.bounds[pos + 1, 1], 0]
        rows = c.rows[c.index[scans]]
        shared_classes[len(scans) > 1] += int(np.any(rows[:, 5] < rows[:, 4] - rows[:, 3]))
        if k == len(data):
            return shared_classes[0], shared_classes[1]
        step = 2 if data[k] >= 0x80 else 1  # é as one token
        assert m.accept_token(by_bytes[data[k : k + step]])
        prefix += data[k : k + step]
        k += step


def test_suffix_classes_give_reference_masks() -> None:
    assert _walk_against_reference(DOC)[0] > 0  # the shared-verdict path was taken


def test_suffix_classes_beside_scans_that_die_give_reference_masks() -> None:
    """After an opening quote the bounded body and the closing quote are both live: the body's
    classes are shared over the tokens on which the quote's scan dies (not '"...')."""
    _, several = _walk_against_reference(DOC, _grammar(max_chars=40))
    assert several > 0


@pytest.mark.parametrize("cheap_nodes", [0, 10**9])
def test_cheap_and_stored_rows_give_reference_masks(
    monkeypatch: pytest.MonkeyPatch, cheap_nodes: int
) -> None:
    monkeypatch.setattr(runtime_module, "CHEAP_WALK_NODES", cheap_nodes)
    _walk_against_reference(DOC)


# --------------------------------------------------------------------------- several scans


def _two_scans_grammar(t1_first: bool) -> Grammar:
    """At the start two terminals are live, ``[ab]+`` (then ";1") and "ab" (then ";2"): "ab;2"
    and "bb;2" are one suffix class of the first one's row, but only "ab;2" is allowed (through
    the second). Nested parentheses keep the grammar non-regular."""
    alternatives = [
        seq(repeat(char_set("ab"), 1, None), Ref("r1")),
        seq(lit("ab"), Ref("r2")),
    ]
    nest = optional(seq(lit("("), Ref("start"), lit(")")))
    return Grammar(
        {
            "start": choice(*(alternatives if t1_first else alternatives[::-1])),
            "r1": seq(lit(";1"), nest),
            "r2": seq(lit(";2"), nest),
        },
        start="start",
    )


@pytest.mark.parametrize("t1_first", [True, False])
def test_classes_are_not_shared_across_scans(t1_first: bool) -> None:
    pieces = [b"a", b"b", b";", b"1", b"2", b"(", b")", b"ab", b"bb", b"ba"]
    pieces += [p + s for p in (b"ab", b"bb", b"ba", b"a", b"b") for s in (b";1", b";2", b";2(")]
    vocab = TokenizerInfo.from_token_bytes([b"", *pieces], eos_ids=[0], special_ids=[0])
    grammar = _two_scans_grammar(t1_first)
    ref = ReferenceRecognizer(grammar)
    m = compile_ir(grammar, vocab, cache=False).matcher()
    prefix = b""
    for token in [b"ab;2(", b"bb;1", b")", None]:
        expected = np.asarray(ref.allowed_tokens(prefix, vocab.token_bytes), dtype=bool)
        expected[0] = ref.is_complete(prefix)
        got = np.zeros(vocab.vocab_size, dtype=bool)
        got[m.allowed_token_ids()] = True
        if prefix in (b"", b"ab;2("):  # the case the grammar is built for
            assert expected[vocab.token_bytes.index(b"ab;2")]
            assert not expected[vocab.token_bytes.index(b"bb;2")]
        diff = np.flatnonzero(expected != got)
        assert not diff.size, [(vocab.token_bytes[t], bool(expected[t])) for t in diff]
        if token is None:
            break
        assert m.accept_token(vocab.token_bytes.index(token))
        prefix += token
