"""Grammar layer: the IR (``ir``), its front ends (regex, Lark, GBNF, ...), passes and the
bundled grammars. Knows nothing of tokens."""

from grammarsd.grammar.bundled import list_bundled, load_bundled
from grammarsd.grammar.gbnf import grammar_from_gbnf
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.lark import grammar_from_lark
from grammarsd.grammar.passes import (
    normalize,
    nullable_rules,
    productive_rules,
    remove_unproductive,
)
from grammarsd.grammar.regex import grammar_from_regex, parse_regex, parse_regex_search

__all__ = [
    "Grammar",
    "grammar_from_gbnf",
    "grammar_from_lark",
    "grammar_from_regex",
    "list_bundled",
    "load_bundled",
    "normalize",
    "nullable_rules",
    "parse_regex",
    "parse_regex_search",
    "productive_rules",
    "remove_unproductive",
]
