"""A ``transformers`` LogitsProcessor that constrains ``model.generate`` to a grammar.

The processor is **prefix-keyed**: each call derives every row's grammar state from the tokens that
row has generated (``input_ids[:, prompt_length:]``), never from how many times it was called. That
is what makes it safe under every call pattern transformers has (ecosystem research §1.3):

* plain greedy / sampling: each call extends each row by one token;
* beam search: rows are re-ordered, duplicated and dropped between calls;
* assisted generation (``assistant_model=``): the same instance is called by the assistant's own
  ``generate`` for the draft, then once per draft position during verification, then the rejected
  draft tokens are rolled back; ``prompt_lookup_num_tokens=`` probes candidate tokens the same way.

Data structures. The processor keeps a *pool* of :class:`_RowState` — a matcher, the generated
tokens it has consumed (``matcher.num_tokens == len(tokens)``), and masks cached by prefix length.
On each call every input row is matched by content to the pool entry sharing its longest common
prefix (the same row index is tried first, so the usual case is one list comparison); an entry
claimed by several rows (beams) is forked; then the entry is rolled back to the common prefix and
advanced over the row's remaining tokens. After the call the pool is exactly the rows' states, in
row order.

A row whose tokens leave the language (a rejected draft position being verified, or the padding
transformers appends after a row's EOS) gets an EOS-only mask: its logits are discarded or end the
row, and the mask never leaves a row with no finite logit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor as _HFLogitsProcessor

from grammarsd.compiler.compiled import (
    CompiledGrammar,
    compile_grammar,
    compile_ir,
    compile_json_schema,
    compile_regex,
)
from grammarsd.errors import MatcherError, TokenizerError
from grammarsd.grammar.ir import Grammar
from grammarsd.kernels.bitmask import apply_token_bitmask_inplace, bitmask_width
from grammarsd.matcher.matcher import GrammarMatcher
from grammarsd.tokenizer.info import TokenizerInfo

_MASK_WINDOW = 128
"""Masks are cached for at most this many prefix lengths behind a row's newest one."""


# -- spec wrappers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Regex:
    """A regular expression (Python ``re`` syntax) the whole output must match."""

    pattern: str


@dataclass(frozen=True)
class Lark:
    """A Lark grammar text; ``start`` names the start rule."""

    text: str
    start: str = "start"


@dataclass(frozen=True)
class GBNF:
    """A GBNF (llama.cpp) grammar text; ``start`` names the start rule."""

    text: str
    start: str = "root"


def tokenizer_info_for(tokenizer: Any, vocab_size: int | None = None) -> TokenizerInfo:
    """A :class:`TokenizerInfo` from a ``TokenizerInfo``, a ``LoadedModel`` or a HF tokenizer.

    ``vocab_size`` is the model's logit width (default: the model's, else the tokenizer's size).
    """
    if isinstance(tokenizer, TokenizerInfo):
        if vocab_size is not None and vocab_size != tokenizer.vocab_size:
            raise TokenizerError(
                f"TokenizerInfo has vocab_size {tokenizer.vocab_size}, but vocab_size={vocab_size}",
                hint="build the TokenizerInfo with the model's logit width",
            )
        return tokenizer
    if hasattr(tokenizer, "tokenizer_info") and hasattr(tokenizer, "model"):  # a LoadedModel
        if vocab_size is None or vocab_size == tokenizer.vocab_size:
            return tokenizer.tokenizer_info
        tokenizer = tokenizer.tokenizer
    return TokenizerInfo.from_huggingface(tokenizer, vocab_size)


def compile_spec(spec: Any, tokenizer: Any, *, vocab_size: int | None = None) -> CompiledGrammar:
    """Compile any supported spec for ``tokenizer``.

    Parameters
    ----------
    spec : a ``CompiledGrammar`` (used as is), a grammar IR ``Grammar``, :class:`Regex`,
        :class:`Lark`, :class:`GBNF`, a JSON Schema ``dict``, or a Pydantic model class / any type
        Pydantic's ``TypeAdapter`` accepts. A bare ``str`` is refused as ambiguous.
    tokenizer : a ``TokenizerInfo``, a ``LoadedModel`` or a Hugging Face tokenizer; may be ``None``
        for a ``CompiledGrammar``.
    vocab_size : the model's logit width, when it exceeds the tokenizer's size.
    """
    if isinstance(spec, CompiledGrammar):
        if vocab_size is not None and vocab_size != spec.tokenizer_info.vocab_size:
            raise TokenizerError(
                f"the grammar was compiled for vocab_size {spec.tokenizer_info.vocab_size}, "
                f"but vocab_size={vocab_size}"
            )
        return spec
    if tokenizer is None:
        raise TypeError(f"a tokenizer is needed to compile a {type(spec).__name__} spec")
    if isinstance(spec, str):
        raise TypeError(
            "a bare string is ambiguous as a spec; wrap it: Regex(...), Lark(...), GBNF(...), "
            "or pass a JSON Schema as a dict"
        )
    info = tokenizer_info_for(tokenizer, vocab_size)
    if isinstance(spec, Grammar):
        return compile_ir(spec, info)
    if isinstance(spec, Regex):
        return compile_regex(spec.pattern, info)
    if isinstance(spec, Lark):
        return compile_grammar(spec.text, info, syntax="lark", start=spec.start)
    if isinstance(spec, GBNF):
        return compile_grammar(spec.text, info, syntax="gbnf", start=spec.start)
    return compile_json_schema(spec, info)


# -- per-row state ---------------------------------------------------------------------------------


@dataclass
class _RowState:
    """One generated prefix's grammar state.

    Invariant: ``matcher.num_tokens == len(tokens)``; ``masks[k]`` (int32 words) is the mask after
    ``tokens[:k]`` and exists only for ``k <= len(tokens)``.
    """

    matcher: GrammarMatcher
    tokens: list[int] = field(default_factory=list)
    masks: dict[int, np.ndarray] = field(default_factory=dict)

    def fork(self) -> _RowState:
        return _RowState(self.matcher.fork(), list(self.tokens), dict(self.masks))

    def sync(self, row: list[int], common: int) -> bool:
        """Roll back to ``row[:common]`` then advance along ``row``; False if ``row`` leaves the
        language (the state then holds the longest accepted prefix)."""
        drop = len(self.tokens) - common
        if drop:
            self.matcher.rollback(drop)
            del self.tokens[common:]
            for k in [k for k in self.masks if k > common]:
                del self.masks[k]
        for tok in row[common:]:
            if not self.matcher.accept_token(tok):
                return False
            self.tokens.append(tok)
        return True


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix (list slices compare in C; binary search on mismatch)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# -- the processor ---------------------------------------------------------------------------------


class LogitsProcessor(_HFLogitsProcessor):
    """Constrain ``model.generate`` to ``spec`` (see the module docstring for the state model).

    Parameters
    ----------
    spec : anything :func:`compile_spec` accepts (Pydantic model, JSON Schema dict,
        ``CompiledGrammar``, :class:`Regex`, :class:`Lark`, :class:`GBNF`, grammar IR).
    tokenizer : the model's tokenizer (HF tokenizer, ``TokenizerInfo`` or ``LoadedModel``).
    vocab_size : the model's logit width if it exceeds the tokenizer's size.
    prompt_length : where generated tokens start in ``input_ids``; default: the length of
        ``input_ids`` at the first call.

    One instance serves one ``generate`` call (all its rows, beams and draft calls); call
    :meth:`reset` to reuse it for another prompt. Logits columns past the tokenizer are masked.
    """

    def __init__(
        self,
        spec: Any,
        tokenizer: Any = None,
        *,
        vocab_size: int | None = None,
        prompt_length: int | None = None,
    ) -> None:
        self.compiled = compile_spec(spec, tokenizer, vocab_size=vocab_size)
        info = self.compiled.tokenizer_info
        self._width = bitmask_width(info.vocab_size)
        self._eos_only = np.zeros(self._width, dtype=np.int32)
        eos_words = self._eos_only.view(np.uint32)
        for t in info.eos_ids:
            if t < info.vocab_size:
                eos_words[t >> 5] |= np.uint32(1 << (t & 31))
        self._fixed_prompt_length = prompt_length
        self.reset()

    def reset(self) -> None:
        """Forget every row (and the recorded prompt length): ready for a new ``generate`` call."""
        self.prompt_length: int | None = self._fixed_prompt_length
        self._pool: list[_RowState] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Return ``scores`` with every token the grammar disallows after its row set to ``-inf``.

        ``input_ids`` is ``(batch, length)``, ``scores`` ``(batch, logit width)``; ``scores`` is not
        modified (transformers' prompt-lookup probing reuses it).
        """
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
        if input_ids.shape[1] < self.prompt_length:
            raise MatcherError(
                f"input_ids has {input_ids.shape[1]} tokens, fewer than the prompt "
                f"({self.prompt_length})",
                hint="one LogitsProcessor serves one generate() call; call .reset() to reuse it",
            )
        rows = input_ids[:, self.prompt_length :].tolist()
        states = self._claim(rows)
        bitmask = np.empty((len(rows), self._width), dtype=np.int32)
        for i, (row, state) in enumerate(zip(rows, states, strict=True)):
            bitmask[i] = self._mask(row, state)
        self._pool = states
        out = scores.clone()
        mask = torch.from_numpy(bitmask).to(scores.device)
        apply_token_bitmask_inplace(out, mask)
        return out  # type: ignore[return-value]

    def _claim(self, rows: list[list[int]]) -> list[_RowState]:
        """One state per row: the pool entry with the longest common prefix, forked if shared."""
        pool = self._pool
        picks: list[int] = []
        for i, row in enumerate(rows):
            best, best_len = -1, -1
            if i < len(pool):  # the usual case: the same row, one token longer
                best, best_len = i, _common_prefix_len(pool[i].tokens, row)
            if best_len < len(row):
                for j, entry in enumerate(pool):
                    if j != i and (n := _common_prefix_len(entry.tokens, row)) > best_len:
                        best, best_len = j, n
            picks.append(best)
        # Every fork is taken here, before any state moves; the first claimant keeps the original.
        claimed: set[int] = set()
        states: list[_RowState] = []
        for j in picks:
            if j < 0:
                states.append(_RowState(self.compiled.matcher()))
            elif j in claimed:
                states.append(pool[j].fork())
            else:
                claimed.add(j)
                states.append(pool[j])
        return states

    def _mask(self, row: list[int], state: _RowState) -> np.ndarray:
        """The mask after ``row`` (int32 words), from ``state``'s cache when it has it."""
        common = _common_prefix_len(state.tokens, row)
        if not state.sync(row, common):
            return self._eos_only
        n = len(state.tokens)
        cached = state.masks.get(n)
        if cached is None:
            cached = np.zeros(self._width, dtype=np.int32)
            state.matcher.fill_next_token_bitmask(cached)
            if not cached.any():  # terminated, or no token can continue: end the row cleanly
                cached = self._eos_only
            state.masks[n] = cached
            state.masks.pop(n - _MASK_WINDOW, None)
        return cached


__all__ = ["GBNF", "Lark", "LogitsProcessor", "Regex", "compile_spec", "tokenizer_info_for"]
