"""Bundled grammars: the ``.lark`` and ``.gbnf`` files shipped with grammarsd.

They live at the repository root in ``grammars/`` and are packaged into the wheel as
``grammarsd/grammars/`` (pyproject ``force-include``). Lookup tries the package directory first
and falls back to the repository folder (editable installs). ``load_bundled`` dispatches on the
file suffix: ``.lark`` -> ``grammar_from_lark``, ``.gbnf`` -> ``grammar_from_gbnf``.
"""

from __future__ import annotations

from pathlib import Path

from grammarsd.grammar.gbnf import grammar_from_gbnf
from grammarsd.grammar.ir import Grammar
from grammarsd.grammar.lark import grammar_from_lark

_SUFFIXES = (".lark", ".gbnf")
_PACKAGE_DIR = Path(__file__).resolve().parent.parent / "grammars"
_REPO_DIR = Path(__file__).resolve().parent.parent.parent / "grammars"


def _directory() -> Path:
    for candidate in (_PACKAGE_DIR, _REPO_DIR):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no bundled grammar folder at {_PACKAGE_DIR} or {_REPO_DIR}")


def list_bundled() -> list[str]:
    """File names (with suffix, sorted) of the bundled grammars, e.g. ``"json.lark"``."""
    return sorted(p.name for p in _directory().iterdir() if p.suffix in _SUFFIXES)


def load_bundled(name: str) -> Grammar:
    """Load bundled grammar ``name`` (``"json.lark"``, ``"json.gbnf"``, ...).

    Raises
    ------
    KeyError : no bundled grammar has that name (the message lists the ones that exist).
    """
    available = list_bundled()
    if name not in available:
        raise KeyError(f"no bundled grammar {name!r}; available: {', '.join(available)}")
    text = (_directory() / name).read_text(encoding="utf-8")
    if name.endswith(".gbnf"):
        return grammar_from_gbnf(text)
    return grammar_from_lark(text)


__all__ = ["list_bundled", "load_bundled"]
