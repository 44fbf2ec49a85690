"""The grammar's DFA table by byte class (``EarleyTables.dfa_trans`` [Q, K] and ``byte_col``).

Two oracles independent of the placing code: bytes share a column iff every terminal's DFA puts
them in one class (asked byte pair by byte pair), and the table read through ``byte_col`` equals
each terminal's own byte table (``PackedDfa.unpack``) shifted to its offset.
"""

from __future__ import annotations

import numpy as np
import pytest

from grammarsd.compiler.tables import _joint_columns, build_tables
from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.grammar.lark import grammar_from_lark


def _numbered(raw: np.ndarray) -> np.ndarray:
    """A byte -> class map numbered by first occurrence, as ``PackedDfa.classes`` is."""
    order: dict[int, int] = {}
    return np.array([order.setdefault(int(v), len(order)) for v in raw], np.uint8)


@pytest.mark.parametrize("seed", range(20))
def test_joint_columns_group_bytes_every_map_groups(seed: int) -> None:
    rng = np.random.default_rng(seed)
    maps = np.array([_numbered(rng.integers(0, rng.integers(1, 6), 256))
                     for _ in range(rng.integers(0, 6))], np.uint8).reshape(-1, 256)
    col, first = _joint_columns(maps)
    signature = [tuple(maps[:, b]) for b in range(256)]
    for a in range(256):
        for b in range(a, 256):
            assert (col[a] == col[b]) == (signature[a] == signature[b])
    assert [int(first[c]) for c in range(len(first))] == [
        min(b for b in range(256) if col[b] == c) for c in range(len(first))]


@pytest.mark.parametrize("grammar", [
    schema_to_grammar({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "when": {"type": "string", "format": "date"},
        "n": {"type": "integer", "minimum": 3}, "tags": {"type": "array", "items": {"enum": ["a", "é"]}}},
        "required": ["name"]}),
    grammar_from_lark('start: WORD ("," WORD)*\nWORD: /[a-zA-Z\\u00e0-\\u00ff]+/'),
])
def test_the_table_read_through_its_columns_is_each_terminals_byte_table(grammar) -> None:  # noqa: ANN001
    t = build_tables(grammar)
    assert t.dfa_trans.shape[1] == t.byte_col.max() + 1 < 256
    table = t.byte_table
    for start, dfa in zip(t.term_start.tolist(), t.term_dfas, strict=True):
        own = dfa.unpack().trans
        expected = np.where(own < 0, -1, own + start)
        assert np.array_equal(table[start:start + len(own)], expected)
        assert np.array_equal(t.dfa_has_out[start:start + len(own)], (own >= 0).any(axis=1))
