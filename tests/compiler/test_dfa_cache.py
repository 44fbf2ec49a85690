"""The terminal DFA cache: packed storage round-trips, keys are structural, the bound holds."""

from __future__ import annotations

import numpy as np
import pytest

import grammarsd.compiler.tables as tables
from grammarsd.compiler.lexer import build_byte_dfa
from grammarsd.compiler.tables import _DfaCache, _fingerprint, _PackedDfa
from grammarsd.grammar.ir import Capped, Choice, Expr, Literal, Ref, Repeat, Seq, chars
from grammarsd.grammar.regex import parse_regex

PATTERNS = ["[a-z]+@[0-9]{2,5}\u00e9", "(ab|cd)*x?", "[\u0080-\U0010ffff]{1,3}", "\\d+(\\.\\d+)?"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_packing_round_trips(pattern: str) -> None:
    dfa = build_byte_dfa(parse_regex(pattern), nonempty=True)
    packed = _PackedDfa.pack(dfa)
    back = packed.unpack()
    assert np.array_equal(back.trans, dfa.trans) and np.array_equal(back.accept, dfa.accept)
    assert packed.table.shape[1] == len({dfa.trans[:, b].tobytes() for b in range(256)})
    assert packed.nbytes < dfa.trans.nbytes


def _expr(n: int) -> Expr:
    """Built afresh on every call: equal structure, distinct objects."""
    tail = Choice((Literal("z"), Seq((Literal("y"), Repeat(chars([(97, 99)]), 0, n)))))
    return Seq((Literal("k"), tail, tail))


def test_equal_structure_shares_an_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Expr] = []

    def counting(expr: Expr, **kwargs: object) -> object:
        built.append(expr)
        return build_byte_dfa(expr, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tables, "build_byte_dfa", counting)
    cache = _DfaCache()
    first = cache.get(_expr(3), 1_000).unpack()
    again = cache.get(_expr(3), 1_000).unpack()
    other = cache.get(_expr(4), 1_000).unpack()  # negative control: one bound differs
    assert len(built) == 2
    assert np.array_equal(first.trans, again.trans)
    assert first.num_states != other.num_states
    assert again.matches(b"kyabcz") and not again.matches(b"kyabcaz")


def test_fingerprints_separate_what_differs() -> None:
    exprs: list[Expr] = [Literal("ab"), Literal("ba"), chars([(97, 98)]), Ref("ab"),
                         Repeat(Literal("ab"), 0, 2), Repeat(Literal("ab"), 0, None),
                         Capped(Literal("ab"), 2), Seq((Literal("a"), Literal("b"))),
                         Choice((Literal("a"), Literal("b")))]
    digests = {_fingerprint(e) for e in exprs}
    assert len(digests) == len(exprs)
    assert _fingerprint(_expr(3)) == _fingerprint(_expr(3))


def test_byte_bound_evicts_least_recently_used() -> None:
    cache = _DfaCache(max_bytes=1)
    cache.get(parse_regex("a+"), 1_000)
    cache.get(parse_regex("b+"), 1_000)
    assert len(cache._items) == 1  # only the newest stays, whatever its size
    roomy = _DfaCache()
    for pattern in PATTERNS:
        roomy.get(parse_regex(pattern), 1_000)
    assert len(roomy._items) == len(PATTERNS)
    assert roomy._bytes == sum(p.nbytes for p in roomy._items.values())
