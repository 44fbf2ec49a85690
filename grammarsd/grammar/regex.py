"""Regex front end: Python ``re`` and ECMA-262 patterns lowered to the grammar IR.

Two flavors, one lowering:

* ``"python"`` — Python ``re`` syntax *and* semantics for ``str`` patterns. The pattern is
  parsed by Python's own parser (``re._parser``), whose tree is lowered here. Character classes
  reproduce what ``re``'s matcher does (Unicode ``\\d \\w \\s``, ``re.ASCII``, IGNORECASE with
  ``re``'s simple case mapping and extra case equivalences), checked by brute force against
  ``re`` over all code points in the tests.
* ``"ecma"`` — ECMA-262 with the ``u`` flag, as JSON Schema's ``pattern`` uses it, parsed by a
  small recursive-descent parser in this module. ``\\d`` = ``[0-9]``, ``\\w`` =
  ``[A-Za-z0-9_]``, ``\\s`` = WhiteSpace + LineTerminator, ``.`` excludes ``\\n \\r \\u2028
  \\u2029``; ``\\p{..}`` supports general categories. Like Annex B, a ``{`` that does not start
  a quantifier and a lone ``]`` or ``}`` are literals, and any ASCII punctuation may be escaped.

Both parsers produce a tiny private tree (``_Alt``, ``_Rep``, ``_Anchor`` and IR leaves) that
``_lower`` turns into IR. Semantics are whole-string (``fullmatch``): ``^``/``\\A`` may only
stand where nothing but anchors precedes them and ``$``/``\\Z`` where nothing but anchors follows
(per top-level alternative, and into groups in such positions); there they mean nothing extra.
ECMA anchors may stand anywhere outside repetitions (``_anchored``: ``^`` is the start of the
input, ``$`` its end, as without the ``m`` flag; ``a$b`` matches nothing).
``parse_regex_search`` gives JSON Schema's unanchored semantics instead. Lookarounds,
backreferences, conditionals, word boundaries, possessive quantifiers and atomic groups raise
``UnsupportedSyntaxError`` naming the construct and where it is; malformed patterns raise
``GrammarSyntaxError`` with line and column. Lazy quantifiers denote the same language as
greedy ones.
"""

from __future__ import annotations

import re
import re._constants as sre
import re._parser as sre_parse
from dataclasses import dataclass
from functools import cache, lru_cache
from re._casefix import _EXTRA_CASES
from typing import Any
from typing import Literal as Lit

import numpy as np

from grammarsd.errors import GrammarSyntaxError, UnsupportedSyntaxError
from grammarsd.grammar import unicode as uni
from grammarsd.grammar.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    CharClass,
    Expr,
    Grammar,
    char_set,
    chars,
    choice,
    lit,
    repeat,
    seq,
)
from grammarsd.grammar.passes import nullable

Flavor = Lit["python", "ecma"]

# --------------------------------------------------------------------------- private tree


@dataclass(frozen=True)
class _Anchor:
    """``^`` (``kind="start"``) or ``$`` (``kind="end"``) at character ``offset``."""

    kind: Lit["start", "end"]
    offset: int


@dataclass(frozen=True)
class _Alt:
    """Alternatives, each a sequence of nodes."""

    branches: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True)
class _Rep:
    node: _Node
    min: int
    max: int | None


_Node = _Anchor | _Alt | _Rep | Expr


def _lower(node: _Node, source: str, may_start: bool, may_end: bool) -> Expr:
    """IR for ``node``; anchors are legal only where ``may_start`` / ``may_end`` say so."""
    if isinstance(node, _Anchor):
        if (node.kind == "start" and may_start) or (node.kind == "end" and may_end):
            return EMPTY
        name = "start anchor" if node.kind == "start" else "end anchor"
        raise UnsupportedSyntaxError.at_offset(
            f"{name} not at the start/end of the pattern",
            source,
            node.offset,
            hint="anchors are only allowed at the very start or end of the whole pattern",
        )
    if isinstance(node, _Alt):
        return choice(*(_lower_seq(b, source, may_start, may_end) for b in node.branches))
    if isinstance(node, _Rep):
        return repeat(_lower(node.node, source, False, False), node.min, node.max)
    return node


def _lower_seq(items: tuple[_Node, ...], source: str, may_start: bool, may_end: bool) -> Expr:
    anchors = [isinstance(i, _Anchor) for i in items]
    return seq(
        *(
            _lower(
                item,
                source,
                may_start and all(anchors[:k]),
                may_end and all(anchors[k + 1 :]),
            )
            for k, item in enumerate(items)
        )
    )


def _branches(node: _Node) -> tuple[tuple[_Node, ...], ...]:
    return node.branches if isinstance(node, _Alt) else ((node,),)


# --------------------------------------------------------------------------- public API


def parse_regex(pattern: str, *, flavor: Flavor = "python", flags: int = 0) -> Expr:
    """Lower ``pattern`` to an IR expression matching exactly the strings it fullmatches.

    Parameters
    ----------
    pattern : the regular expression.
    flavor : ``"python"`` (``re`` syntax and semantics) or ``"ecma"`` (ECMA-262, ``u`` flag).
    flags : ``re`` flags (``re.I``, ``re.S``, ``re.X``, ``re.A``, ``re.M``); python flavor only.

    Returns
    -------
    Expr whose language is ``{s : re.fullmatch(pattern, s, flags)}`` (python flavor).

    Raises
    ------
    GrammarSyntaxError : malformed pattern (line/column).
    UnsupportedSyntaxError : lookaround, backreference, conditional, ``\\b``, possessive or
        atomic constructs; anchors in the middle (python flavor) or inside a repetition.
    """
    tree = _parse(pattern, flavor, flags)
    if flavor == "ecma":
        return choice(*_anchored(tree, pattern).values())
    return _lower(tree, pattern, True, True)


def parse_regex_search(pattern: str, *, flavor: Flavor = "ecma", flags: int = 0) -> Expr:
    """Lower ``pattern`` with *search* semantics: it may match anywhere in the string.

    Each top-level alternative not anchored with ``^`` gets any text (newlines included)
    before it, and each one not anchored with ``$`` gets any text after it, as JSON Schema's
    ``pattern`` keyword requires. With ``flavor="ecma"`` anchors may also stand inside groups
    and alternatives (``(^$)|(^a+)``, ``a(b$|c)``), see ``_anchored``. Errors as for
    ``parse_regex``.
    """
    tree = _parse(pattern, flavor, flags)
    anything = repeat(ANY_CHAR)
    if flavor == "ecma":
        return choice(*(seq(EMPTY if start else anything, body, EMPTY if end else anything)
                        for (start, end), body in _anchored(tree, pattern).items()))
    out: list[Expr] = []
    for branch in _branches(tree):
        lead = 0
        while lead < len(branch) and isinstance(branch[lead], _Anchor):
            lead += 1
        trail = len(branch)
        while trail > lead and isinstance(branch[trail - 1], _Anchor):
            trail -= 1
        head, tail = branch[:lead], branch[trail:]
        if lead < trail:  # "$" before or "^" after real content: misplaced
            for anchor in head:
                _lower(anchor, pattern, True, False)
            for anchor in tail:
                _lower(anchor, pattern, False, True)
        kinds = {a.kind for a in head + tail if isinstance(a, _Anchor)}
        anchored_start, anchored_end = "start" in kinds, "end" in kinds
        body = _lower_seq(branch[lead:trail], pattern, False, False)
        out.append(
            seq(
                EMPTY if anchored_start else anything,
                body,
                EMPTY if anchored_end else anything,
            )
        )
    return choice(*out)


_Anchoring = dict[tuple[bool, bool], Expr]


def _anchored(node: _Node, source: str) -> _Anchoring:
    """``node`` split by the anchors its matches pass: ``(start, end) -> language``.

    ECMA-262 without the ``m`` flag: ``^`` holds only at the start of the input and ``$`` only
    at its end. A match through ``(True, _)`` passed a ``^``, so nothing may precede it (in the
    pattern or in the searched string); ``(_, True)`` passed a ``$``, so nothing may follow.
    Sequences enforce that between their items (what must be empty keeps only the empty
    string, if the item can match it); the caller enforces it for the surrounding text.
    Anchors inside a repetition other than ``?`` are refused.
    """
    if isinstance(node, _Anchor):
        return {(node.kind == "start", node.kind == "end"): EMPTY}
    if isinstance(node, _Alt):
        out: _Anchoring = {}
        for branch in node.branches:
            _merge(out, _anchored_seq(branch, source))
        return out
    if isinstance(node, _Rep) and _has_anchor(node.node):
        if node.max != 1:
            _lower(node.node, source, False, False)  # raises, naming the anchor
        out = dict(_anchored(node.node, source))
        if node.min == 0:
            _merge(out, {(False, False): EMPTY})
        return out
    return {(False, False): _lower(node, source, False, False)}


def _anchored_seq(items: tuple[_Node, ...], source: str) -> _Anchoring:
    acc: _Anchoring = {(False, False): EMPTY}
    for item in items:
        step: _Anchoring = {}
        for (start1, end1), left in acc.items():
            for (start2, end2), right in _anchored(item, source).items():
                body = seq(_empty_part(left) if start2 else left,
                           _empty_part(right) if end1 else right)
                _merge(step, {(start1 or start2, end1 or end2): body})
        acc = step
    return acc


def _merge(into: _Anchoring, more: _Anchoring) -> None:
    for key, body in more.items():
        if body != NOTHING:
            into[key] = choice(into[key], body) if key in into else body


def _empty_part(expr: Expr) -> Expr:
    """The empty string if ``expr`` matches it, else nothing."""
    return EMPTY if nullable(expr) else NOTHING


def _has_anchor(node: _Node) -> bool:
    if isinstance(node, _Anchor):
        return True
    if isinstance(node, _Alt):
        return any(_has_anchor(i) for b in node.branches for i in b)
    return isinstance(node, _Rep) and _has_anchor(node.node)


def grammar_from_regex(pattern: str, *, flavor: Flavor = "python", flags: int = 0) -> Grammar:
    """A one-rule grammar (``start``) for ``parse_regex(pattern, flavor=..., flags=...)``."""
    return Grammar.single(parse_regex(pattern, flavor=flavor, flags=flags))


def _parse(pattern: str, flavor: Flavor, flags: int) -> _Node:
    if flavor == "python":
        return _PythonLowering(pattern, flags).run()
    if flavor == "ecma":
        if flags:
            raise ValueError("flags are only supported for the python flavor")
        return _EcmaParser(pattern).run()
    raise ValueError(f"unknown regex flavor {flavor!r}; expected 'python' or 'ecma'")


# --------------------------------------------------------------------------- python flavor

_CATEGORY_NAMES = {
    sre.CATEGORY_DIGIT: ("digit", False),
    sre.CATEGORY_NOT_DIGIT: ("digit", True),
    sre.CATEGORY_WORD: ("word", False),
    sre.CATEGORY_NOT_WORD: ("word", True),
    sre.CATEGORY_SPACE: ("space", False),
    sre.CATEGORY_NOT_SPACE: ("space", True),
}

_START_ANCHORS = {sre.AT_BEGINNING, sre.AT_BEGINNING_STRING}
_END_ANCHORS = {sre.AT_END, sre.AT_END_STRING}

#: textual markers used to locate a construct in the pattern for error messages
_MARKERS = {
    "lookahead": ("(?=", "(?!"),
    "lookbehind": ("(?<=", "(?<!"),
    "backreference": ("(?P=", *(f"\\{d}" for d in "123456789")),
    "conditional": ("(?(",),
    "word boundary": ("\\b", "\\B"),
    "atomic group": ("(?>",),
    "possessive quantifier": ("*+", "++", "?+", "}+"),
    "start anchor": ("^", "\\A"),
    "end anchor": ("$", "\\Z"),
}


def _find_marker(pattern: str, construct: str, nth: int = 0) -> int:
    """Offset of the ``nth`` occurrence of ``construct`` outside escapes and classes."""
    markers = _MARKERS[construct]
    found = 0
    i, in_class = 0, False
    while i < len(pattern):
        if not in_class and any(pattern.startswith(m, i) for m in markers):
            if found == nth:
                return i
            found += 1
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + pattern.startswith("^", i + 1)
            i += pattern.startswith("]", i)  # a leading "]" is a member
            continue
        i += 1
    return 0


class _PythonLowering:
    """Walks ``re._parser``'s tree, tracking flags, and builds the private tree."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags
        self.anchors_seen = {"start": 0, "end": 0}

    def run(self) -> _Node:
        try:
            parsed = sre_parse.parse(self.pattern, self.flags)
        except re.error as exc:
            line = exc.lineno if exc.lineno is not None else 1
            col = exc.colno if exc.colno is not None else 1
            raise GrammarSyntaxError(exc.msg, line=line, column=col, source=self.pattern) from None
        except (OverflowError, RecursionError) as exc:
            raise GrammarSyntaxError(str(exc), line=1, column=1, source=self.pattern) from None
        return self._alt([list(parsed)], parsed.state.flags)

    def _unsupported(self, construct: str, nth: int = 0) -> UnsupportedSyntaxError:
        return UnsupportedSyntaxError.at_offset(
            construct, self.pattern, _find_marker(self.pattern, construct, nth)
        )

    def _alt(self, branches: list[list[tuple[object, Any]]], flags: int) -> _Node:
        out = tuple(tuple(self._item(op, av, flags) for op, av in b) for b in branches)
        if len(out) == 1 and len(out[0]) == 1:
            return out[0][0]
        return _Alt(out)

    def _item(self, op: object, av: Any, flags: int) -> _Node:
        if op is sre.LITERAL or op is sre.NOT_LITERAL:
            cls = _py_literal(av, flags)
            if op is sre.NOT_LITERAL:
                return cls.negate()
            return lit(chr(av)) if cls.ranges == ((av, av),) else cls
        if op is sre.ANY:
            return ANY_CHAR if flags & re.DOTALL else char_set("\n").negate()
        if op is sre.IN:
            return _py_class(tuple(av), flags)
        if op is sre.BRANCH:
            return self._alt([list(b) for b in av[1]], flags)
        if op is sre.SUBPATTERN:
            _group, add, delete, sub = av
            inner = _combine_flags(flags, add, delete)
            return self._alt([list(sub)], inner)
        if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            lo, hi, sub = av
            node = self._alt([list(sub)], flags)
            return _Rep(node, lo, None if hi == sre.MAXREPEAT else hi)
        if op is sre.POSSESSIVE_REPEAT:
            raise self._unsupported("possessive quantifier")
        if op is sre.ATOMIC_GROUP:
            raise self._unsupported("atomic group")
        if op is sre.ASSERT or op is sre.ASSERT_NOT:
            raise self._unsupported("lookahead" if av[0] >= 0 else "lookbehind")
        if op is sre.GROUPREF:
            raise self._unsupported("backreference")
        if op is sre.GROUPREF_EXISTS:
            raise self._unsupported("conditional")
        if op is sre.AT:
            if av in _START_ANCHORS or av in _END_ANCHORS:
                kind: Lit["start", "end"] = "start" if av in _START_ANCHORS else "end"
                nth = self.anchors_seen[kind]
                self.anchors_seen[kind] += 1
                return _Anchor(kind, _find_marker(self.pattern, f"{kind} anchor", nth))
            raise self._unsupported("word boundary")
        raise self._unsupported(f"regex operator {op}")


def _combine_flags(flags: int, add: int, delete: int) -> int:
    if add & sre_parse.TYPE_FLAGS:
        flags &= ~sre_parse.TYPE_FLAGS
    return (flags | add) & ~delete


def _category_key(cat: object, flags: int) -> tuple[str, bool]:
    name, negated = _CATEGORY_NAMES[cat]
    prefix = "py_" if flags & re.UNICODE and not flags & re.ASCII else "ascii_"
    return prefix + name, negated


@lru_cache(maxsize=4096)
def _py_literal(cp: int, flags: int) -> CharClass:
    """The code points ``re`` matches against literal ``cp`` under ``flags``."""
    if not flags & re.IGNORECASE:
        return chars([(cp, cp)])
    unicode = not flags & re.ASCII
    cased = bool(uni.cased_mask()[cp]) if unicode else chr(cp).isascii() and chr(cp).isalpha()
    if not cased:
        return chars([(cp, cp)])
    lower = uni.simple_lower() if unicode else uni.ascii_lower()
    lo = int(lower[cp])
    targets = (lo, *(_EXTRA_CASES.get(lo, ()) if unicode else ()))
    return uni.mask_to_class(np.isin(lower, np.array(targets, dtype=np.int32)))


@lru_cache(maxsize=4096)
def _py_class(items: tuple[tuple[object, Any], ...], flags: int) -> CharClass:
    """The code points ``re`` matches against the set ``[items]`` under ``flags``.

    Mirrors ``re``'s compiler and matcher: with IGNORECASE and any cased member, the set is
    tested against the *lowercased* input character, members are lowercased (plus ``re``'s
    extra case equivalences), and non-BMP ranges also match via the uppercase of the input.
    """
    negate = any(op is sre.NEGATE for op, _ in items)
    plain: list[tuple[int, int]] = []
    categories: list[tuple[str, bool]] = []
    for op, av in items:
        if op is sre.LITERAL:
            plain.append((av, av))
        elif op is sre.RANGE:
            plain.append(av)
        elif op is sre.CATEGORY:
            categories.append(_category_key(av, flags))
    cased = _has_cased(plain, flags)
    if not cased:
        cls = chars(plain)
        for name, neg in categories:
            part = uni.category_class(name)
            cls = cls.union(part.negate() if neg else part)
        return cls.negate() if negate else cls
    unicode = not flags & re.ASCII
    lower = uni.simple_lower() if unicode else uni.ascii_lower()
    # accepted[x] says whether the lowercased input character x is in the compiled set
    accepted = np.zeros(uni.SIZE, dtype=np.bool_)
    for a, b in plain:
        bmp_end = min(b, 0xFFFF)
        if a <= bmp_end:
            lowered = lower[a : bmp_end + 1]
            small = lowered[lowered <= 0xFFFF]
            accepted[small] = True
            if unicode:
                for lo in np.unique(small).tolist():
                    for extra in _EXTRA_CASES.get(lo, ()):
                        accepted[extra] = True
            if small.size == lowered.size and b <= 0xFFFF:
                continue
        if a == b:  # non-BMP literal (or one whose lowercase is outside the BMP)
            accepted[a] = True
        else:  # RANGE_UNI_IGNORE: the character or its uppercase falls in the range
            accepted[a : b + 1] = True
            upper = uni.simple_upper()
            accepted |= (upper >= a) & (upper <= b)
    for name, neg in categories:
        mask = uni.category_mask(name)
        accepted |= ~mask if neg else mask
    matched = accepted[lower]
    return uni.mask_to_class(~matched if negate else matched)


def _has_cased(plain: list[tuple[int, int]], flags: int) -> bool:
    if not flags & re.IGNORECASE:
        return False
    if any(b > 0xFFFF for _, b in plain):
        return True
    if flags & re.ASCII:
        return any(
            (a <= ord("Z") and b >= ord("A")) or (a <= ord("z") and b >= ord("a")) for a, b in plain
        )
    cased = uni.cased_mask()
    return any(bool(cased[a : b + 1].any()) for a, b in plain)


# --------------------------------------------------------------------------- ecma flavor

_ECMA_SYNTAX = set("^$\\.*+?()[]{}|/")
_ECMA_CONTROL = {"t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r"}
_ECMA_DOT = char_set("\n\r\u2028\u2029").negate()
_BRACE = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*>")
_PROPERTY = re.compile(r"\\[pP]\{([A-Za-z_=&]+)\}")
_BRACED_HEX = re.compile(r"([0-9A-Fa-f]+)\}")
_LOW_SURROGATE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


@cache
def _ecma_category(letter: str) -> CharClass:
    if letter == "d":
        return chars([(0x30, 0x39)])
    if letter == "w":
        return char_set("0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return uni.category_class("ecma_space")


class _EcmaParser:
    """Recursive descent over ECMA-262 ``Pattern`` (``u`` mode, Annex B leniencies above)."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0

    # -- helpers
    def _error(self, message: str, offset: int | None = None) -> GrammarSyntaxError:
        return GrammarSyntaxError.at_offset(
            message, self.src, self.pos if offset is None else offset
        )

    def _unsupported(self, construct: str, offset: int) -> UnsupportedSyntaxError:
        return UnsupportedSyntaxError.at_offset(construct, self.src, offset)

    def _peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def _eat(self, text: str) -> bool:
        if self.src.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    # -- grammar
    def run(self) -> _Node:
        node = self._disjunction()
        if self.pos < len(self.src):
            raise self._error("unbalanced ')'")
        return node

    def _disjunction(self) -> _Node:
        branches = [self._alternative()]
        while self._eat("|"):
            branches.append(self._alternative())
        if len(branches) == 1 and len(branches[0]) == 1:
            return branches[0][0]
        return _Alt(tuple(branches))

    def _alternative(self) -> tuple[_Node, ...]:
        items: list[_Node] = []
        while self.pos < len(self.src) and self._peek() not in "|)":
            items.append(self._term())
        return tuple(items)

    def _term(self) -> _Node:
        start = self.pos
        c = self._peek()
        if c in "^$":
            self.pos += 1
            node: _Node = _Anchor("start" if c == "^" else "end", start)
            if self._quantifier_ahead():
                raise self._error("nothing to repeat")
            return node
        for opener, construct in (
            ("(?=", "lookahead"),
            ("(?!", "lookahead"),
            ("(?<=", "lookbehind"),
            ("(?<!", "lookbehind"),
        ):
            if self.src.startswith(opener, self.pos):
                raise self._unsupported(construct, start)
        if self.src.startswith("\\b", self.pos) or self.src.startswith("\\B", self.pos):
            raise self._unsupported("word boundary", start)
        return self._quantified(self._atom())

    def _quantifier_ahead(self) -> bool:
        c = self._peek()
        return c in ("*", "+", "?") or (c == "{" and self._brace_quantifier(peek=True) is not None)

    def _quantified(self, atom: _Node) -> _Node:
        at = self.pos
        c = self._peek()
        bounds: tuple[int, int | None] | None
        if c == "*":
            bounds = (0, None)
            self.pos += 1
        elif c == "+":
            bounds = (1, None)
            self.pos += 1
        elif c == "?":
            bounds = (0, 1)
            self.pos += 1
        elif c == "{":
            bounds = self._brace_quantifier(peek=False)
        else:
            bounds = None
        if bounds is None:
            return atom
        self._eat("?")  # lazy: same language
        if self._quantifier_ahead():
            raise self._error("nothing to repeat")
        lo, hi = bounds
        if hi is not None and hi < lo:
            raise self._error("numbers out of order in {} quantifier", at)
        return _Rep(atom, lo, hi)

    def _brace_quantifier(self, *, peek: bool) -> tuple[int, int | None] | None:
        m = _BRACE.match(self.src, self.pos)
        if m is None:
            return None
        if not peek:
            self.pos = m.end()
        lo = int(m.group(1))
        if m.group(2) is None:
            return (lo, lo)
        return (lo, int(m.group(3)) if m.group(3) else None)

    def _atom(self) -> _Node:
        start = self.pos
        c = self._peek()
        if c == ".":
            self.pos += 1
            return _ECMA_DOT
        if c == "(":
            return self._group()
        if c == "[":
            return self._class()
        if c == "\\":
            return self._atom_escape()
        if c in ("*", "+", "?") or (c == "{" and self._brace_quantifier(peek=True) is not None):
            raise self._error("nothing to repeat")
        self.pos += 1
        if 0xD800 <= ord(c) <= 0xDFFF:
            raise self._unsupported("lone surrogate", start)
        return lit(c)

    def _group(self) -> _Node:
        start = self.pos
        self.pos += 1
        if self._eat("?"):
            if self._eat(":"):
                pass
            elif self._eat("<"):
                m = _GROUP_NAME.match(self.src, self.pos)
                if m is None:
                    raise self._error("invalid group name")
                self.pos = m.end()
            else:
                raise self._unsupported("group modifier", start)
        node = self._disjunction()
        if not self._eat(")"):
            raise self._error("missing ')'", start)
        return node

    def _atom_escape(self) -> _Node:
        start = self.pos
        nxt = self._peek(1)
        if nxt.isdigit() and nxt != "0":
            raise self._unsupported("backreference", start)
        if nxt == "k" and self._peek(2) == "<":
            raise self._unsupported("backreference", start)
        if nxt in "dDwWsS" and nxt:
            self.pos += 2
            cls = _ecma_category(nxt.lower())
            return cls.negate() if nxt.isupper() else cls
        if nxt in ("p", "P") and nxt:
            return self._property()
        cp = self._char_escape(in_class=False)
        return lit(chr(cp))

    def _property(self) -> CharClass:
        start = self.pos
        negated = self._peek(1) == "P"
        m = _PROPERTY.match(self.src, self.pos)
        if m is None:
            raise self._error("invalid property escape")
        self.pos = m.end()
        name = m.group(1)
        for prefix in ("General_Category=", "gc="):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        parts = _GC_ALIASES.get(name, (name,))
        majors = {g[0] for g in uni.GENERAL_CATEGORIES}
        if any(p not in uni.GENERAL_CATEGORIES and p not in majors for p in parts):
            raise self._unsupported(f"unicode property {m.group(1)}", start)
        cls = chars(())
        for part in parts:
            cls = cls.union(uni.category_class("gc:" + part))
        return cls.negate() if negated else cls

    def _char_escape(self, *, in_class: bool) -> int:
        """Consume ``\\...`` that denotes one code point; return it."""
        start = self.pos
        self.pos += 1
        c = self._peek()
        if not c:
            raise self._error("pattern ends with a backslash", start)
        self.pos += 1
        if c in _ECMA_CONTROL:
            return ord(_ECMA_CONTROL[c])
        if c == "0" and not self._peek().isdigit():
            return 0
        if c == "c" and self._peek().isascii() and self._peek().isalpha():
            letter = self._peek()
            self.pos += 1
            return ord(letter) % 32
        if c == "x":
            return self._hex(2, start)
        if c == "u":
            if self._eat("{"):
                m = _BRACED_HEX.match(self.src, self.pos)
                if m is None or int(m.group(1), 16) > 0x10FFFF:
                    raise self._error("invalid \\u{...} escape", start)
                self.pos = m.end()
                cp = int(m.group(1), 16)
            else:
                cp = self._hex(4, start)
                if 0xD800 <= cp <= 0xDBFF and _LOW_SURROGATE.match(self.src, self.pos):
                    low = int(self.src[self.pos + 2 : self.pos + 6], 16)
                    self.pos += 6
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            if 0xD800 <= cp <= 0xDFFF:
                raise self._unsupported("lone surrogate", start)
            return cp
        if in_class and c in "b-":
            return 8 if c == "b" else ord("-")
        if c in _ECMA_SYNTAX or (c.isascii() and not c.isalnum() and c.isprintable()):
            return ord(c)
        raise self._error(f"invalid escape \\{c}", start)

    def _hex(self, n: int, start: int) -> int:
        text = self.src[self.pos : self.pos + n]
        if len(text) != n or any(ch not in "0123456789abcdefABCDEF" for ch in text):
            raise self._error("invalid hexadecimal escape", start)
        self.pos += n
        return int(text, 16)

    def _class(self) -> CharClass:
        start = self.pos
        self.pos += 1
        negate = self._eat("^")
        cls = chars(())
        while not self._eat("]"):
            if self.pos >= len(self.src):
                raise self._error("unterminated character class", start)
            left = self._class_atom()
            if isinstance(left, int) and self._peek() == "-" and self._peek(1) not in ("]", ""):
                dash = self.pos
                self.pos += 1
                right = self._class_atom()
                if not isinstance(right, int):
                    raise self._error("invalid character class range", dash)
                if right < left:
                    raise self._error("range out of order in character class", dash)
                cls = cls.union(chars([(left, right)]))
            else:
                cls = cls.union(left if isinstance(left, CharClass) else chars([(left, left)]))
        return cls.negate() if negate else cls

    def _class_atom(self) -> int | CharClass:
        c = self._peek()
        start = self.pos
        if c == "\\":
            nxt = self._peek(1)
            if nxt and nxt in "dDwWsS":
                self.pos += 2
                cls = _ecma_category(nxt.lower())
                return cls.negate() if nxt.isupper() else cls
            if nxt in ("p", "P") and nxt:
                return self._property()
            if nxt.isdigit() and nxt != "0":
                raise self._unsupported("backreference", start)
            return self._char_escape(in_class=True)
        self.pos += 1
        if 0xD800 <= ord(c) <= 0xDFFF:
            raise self._unsupported("lone surrogate", start)
        return ord(c)


#: ECMA-262 General_Category value aliases -> short names (UAX #44 PropertyValueAliases)
_GC_ALIASES: dict[str, tuple[str, ...]] = {
    "LC": ("Lu", "Ll", "Lt"),
    "Letter": ("L",),
    "Cased_Letter": ("Lu", "Ll", "Lt"),
    "Uppercase_Letter": ("Lu",),
    "Lowercase_Letter": ("Ll",),
    "Titlecase_Letter": ("Lt",),
    "Modifier_Letter": ("Lm",),
    "Other_Letter": ("Lo",),
    "Mark": ("M",),
    "Nonspacing_Mark": ("Mn",),
    "Spacing_Mark": ("Mc",),
    "Enclosing_Mark": ("Me",),
    "Number": ("N",),
    "Decimal_Number": ("Nd",),
    "digit": ("Nd",),
    "Letter_Number": ("Nl",),
    "Other_Number": ("No",),
    "Punctuation": ("P",),
    "punct": ("P",),
    "Connector_Punctuation": ("Pc",),
    "Dash_Punctuation": ("Pd",),
    "Open_Punctuation": ("Ps",),
    "Close_Punctuation": ("Pe",),
    "Initial_Punctuation": ("Pi",),
    "Final_Punctuation": ("Pf",),
    "Other_Punctuation": ("Po",),
    "Symbol": ("S",),
    "Math_Symbol": ("Sm",),
    "Currency_Symbol": ("Sc",),
    "Modifier_Symbol": ("Sk",),
    "Other_Symbol": ("So",),
    "Separator": ("Z",),
    "Space_Separator": ("Zs",),
    "Line_Separator": ("Zl",),
    "Paragraph_Separator": ("Zp",),
    "Other": ("C",),
    "Control": ("Cc",),
    "cntrl": ("Cc",),
    "Format": ("Cf",),
    "Surrogate": ("Cs",),
    "Private_Use": ("Co",),
    "Unassigned": ("Cn",),
}

__all__ = ["Flavor", "grammar_from_regex", "parse_regex", "parse_regex_search"]
