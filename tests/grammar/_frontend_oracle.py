"""Shared helpers for the grammar front-end tests: the IR is evaluated with the reference
recognizer (``grammarsd.matcher.reference``), never with code from the front ends."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from grammarsd.grammar.ir import Expr, Grammar
from grammarsd.matcher.reference import ReferenceRecognizer


def recognizer(g: Grammar | Expr) -> ReferenceRecognizer:
    return ReferenceRecognizer(g if isinstance(g, Grammar) else Grammar.single(g))


def assert_agrees(
    g: Grammar | Expr, oracle: Callable[[str], bool], samples: Iterable[str], label: str = ""
) -> None:
    """``g`` accepts exactly the samples ``oracle`` accepts."""
    rec = recognizer(g)
    for s in samples:
        assert rec.accepts(s) == oracle(s), f"{label}: {s!r} oracle={oracle(s)}"
