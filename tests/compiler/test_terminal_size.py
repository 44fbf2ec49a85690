"""How big a regular piece may grow before it is split into several terminals.

``CompileLimits.max_terminal_size`` counts nodes as the lexer reads them (``ir.NodeFacts.size``):
a JSON-encoded character is one node, whatever its ~20 spellings, so a pattern string stays one
terminal while an object of many members is split into parts the DFA cache shares. Splitting
changes where the parser takes over, never the language: the oracle is ``jsonschema``.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

import grammarsd as gs
from grammarsd.compiler.tables import CompileLimits, build_tables
from grammarsd.grammar.encodings import encode_class
from grammarsd.grammar.ir import CharClass, Choice, Literal, children, node_facts, seq
from grammarsd.grammar.json_schema import schema_to_grammar
from grammarsd.tokenizer.info import TokenizerInfo

BYTES = TokenizerInfo.from_token_bytes([b""] + [bytes([b]) for b in range(256)], eos_ids=[0],
                                       special_ids=[0])

WIDE = {
    "type": "object",
    "properties": {
        **{f"name{i}": {"type": "string", "maxLength": 8} for i in range(12)},
        **{f"count{i}": {"type": "integer", "minimum": 0} for i in range(6)},
        "kind": {"enum": ["a", "bb", "ccc"]},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
    "required": ["name0", "count0", "kind"],
    "additionalProperties": False,
}


def _tree_size(expr: object) -> int:
    """Oracle: nodes of ``expr`` as a tree."""
    return 1 + sum(_tree_size(k) for k in children(expr))  # type: ignore[arg-type]


def test_an_encoded_character_is_one_lexer_node() -> None:
    char = encode_class(CharClass(((0x61, 0x7A),)))
    assert _tree_size(char) > 5  # its spellings
    assert node_facts(char).size == 1
    assert node_facts(seq(Literal('"'), char, char, Literal('"'))).size == 5
    same = Choice(char.items)  # equal, but not the object ``encode_class`` made: a tree
    assert node_facts(same).size == _tree_size(same)


def test_a_wide_object_is_split_and_its_strings_are_not() -> None:
    split = build_tables(schema_to_grammar(WIDE))
    merged = build_tables(schema_to_grammar(WIDE), limits=CompileLimits(max_terminal_size=4000))
    assert split.num_terminals > merged.num_terminals
    pattern = build_tables(schema_to_grammar({"type": "string", "pattern": "^[a-z]{40}x+$"}))
    assert pattern.num_terminals == 1  # 40 characters, each one lexer node


def _instances(rng: random.Random) -> list[object]:
    """Valid objects of ``WIDE`` and near misses (a wrong type, a long string, a missing or
    unknown key), serialized as ``json.dumps`` would."""
    out: list[object] = []
    for _ in range(40):
        doc: dict[str, object] = {}
        for key in WIDE["properties"]:
            if key not in WIDE["required"] and rng.random() < 0.5:
                continue
            if key.startswith("name"):
                doc[key] = "".join(rng.choice("xy\"é") for _ in range(rng.randint(0, 9)))
            elif key.startswith("count"):
                doc[key] = rng.choice([0, 7, 12345, -1])
            elif key == "kind":
                doc[key] = rng.choice(["a", "bb", "ccc", "d"])
            else:
                doc[key] = [rng.choice(["ab", "z", "A1"]) for _ in range(rng.randint(0, 3))]
        roll = rng.random()
        if roll < 0.1:
            doc.pop("name0", None)
        elif roll < 0.2:
            doc["extra"] = 1
        out.append(doc)
    return out


@pytest.mark.parametrize("size", [4, 40, 300, 4000])
def test_splitting_keeps_the_language(size: int) -> None:
    g = gs.compile_json_schema(WIDE, BYTES, cache=False,
                               limits=CompileLimits(max_terminal_size=size))
    verdicts = []
    for doc in _instances(random.Random(7)):
        text = json.dumps(doc)
        m = g.matcher()
        got = m.accept_string(text) and m.is_accepting()
        verdicts.append(got)
        assert got == jsonschema.Draft202012Validator(WIDE).is_valid(doc), text
    assert any(verdicts) and not all(verdicts)  # both kinds were tried
