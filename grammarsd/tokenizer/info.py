"""TokenizerInfo: the exact bytes of every token id, EOS ids and the model's logit width.

This is the one description of a vocabulary that the compiler and matcher see. It is built once
per (tokenizer, logit width) from a Hugging Face tokenizer's backend pipeline (see
:mod:`grammarsd.tokenizer.decode` for the piece -> bytes rules) or from a list of byte strings
(toy vocabularies in tests), and it is frozen, picklable and keyed by a content fingerprint.

Layout (``V`` = ``vocab_size``, the model's logit width)::

    token_bytes   list[bytes]   [V]      exact bytes of each id; b"" for special/hole/padding ids
    token_indptr  int64         [V + 1]  CSR offsets: token i is token_data[indptr[i]:indptr[i+1]]
    token_data    uint8         [sum]    all token bytes concatenated in id order
    eos_ids       tuple[int]             sorted, unique, each < V
    special_ids   tuple[int]             sorted, unique control tokens, each < tokenizer_size

Ids in ``[tokenizer_size, V)`` are padding: the model has logits for them but the tokenizer has no
token, so nothing may ever select them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grammarsd.errors import TokenizerError
from grammarsd.tokenizer.decode import (
    PrefixRule,
    VocabFormat,
    VocabKind,
    added_token_bytes,
    piece_bytes,
    vocab_format,
)


@dataclass(frozen=True, eq=False)
class TokenizerInfo:
    """Exact token bytes for one vocabulary at one logit width (see the module docstring).

    Attributes
    ----------
    vocab_size : the model's logit width ``V``; ``>= tokenizer_size``.
    token_bytes : ``V`` byte strings, ``b""`` for special tokens, holes and padding ids.
    eos_ids : ids that end generation (sorted, unique).
    special_ids : control tokens a grammar never produces unless asked (sorted, unique).
    tokenizer_size : number of ids the tokenizer itself knows (``len(tokenizer)``).
    kind : how the vocabulary stores pieces (``"byte_level"``, ``"sentencepiece"``, ``"raw"``).
    prefix_rule : when encoding a fresh text prepends one space (``"never"``, ``"always"``,
        ``"unless_space"``; see :data:`grammarsd.tokenizer.decode.PrefixRule`).
    prefix_space : ``prefix_rule != "never"``: the tokenizer adds a leading space / ``▁``.
    fingerprint : sha256 hex over ``vocab_size``, eos/special ids and all token bytes.
    token_indptr, token_data : the same bytes as flat CSR arrays (read-only) for numba code.

    Two infos compare equal iff their fingerprints do.
    """

    vocab_size: int
    token_bytes: list[bytes]
    eos_ids: tuple[int, ...]
    special_ids: tuple[int, ...]
    tokenizer_size: int
    kind: VocabKind
    prefix_rule: PrefixRule
    fingerprint: str = field(init=False)
    token_indptr: np.ndarray = field(init=False, repr=False)
    token_data: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        v = self.vocab_size
        if len(self.token_bytes) != v:
            raise TokenizerError(
                f"token_bytes has {len(self.token_bytes)} entries, vocab_size is {v}"
            )
        if not 0 < self.tokenizer_size <= v:
            raise TokenizerError(
                f"tokenizer has {self.tokenizer_size} tokens but the model's vocab_size "
                f"(logit width) is {v}",
                hint="a model cannot emit tokens past its logit width; pass the right vocab_size",
            )
        for name, ids, bound in (
            ("eos", self.eos_ids, v),
            ("special", self.special_ids, self.tokenizer_size),
        ):
            if list(ids) != sorted(set(ids)):
                raise TokenizerError(f"{name}_ids must be sorted and unique, got {ids}")
            bad = [i for i in ids if not 0 <= i < bound]
            if bad:
                raise TokenizerError(f"{name}_ids {bad} out of range [0, {bound})")
        for i in range(self.tokenizer_size, v):
            if self.token_bytes[i]:
                raise TokenizerError(f"padding id {i} (>= tokenizer_size) has bytes")
        lengths = np.fromiter(map(len, self.token_bytes), dtype=np.int64, count=v)
        indptr = np.zeros(v + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        data = np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8)
        indptr.flags.writeable = False
        h = hashlib.sha256()
        h.update(json.dumps([v, list(self.eos_ids), list(self.special_ids)]).encode())
        h.update(indptr.tobytes())
        h.update(data.tobytes())
        object.__setattr__(self, "token_indptr", indptr)
        object.__setattr__(self, "token_data", data)
        object.__setattr__(self, "fingerprint", h.hexdigest())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenizerInfo):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def prefix_space(self) -> bool:
        """The tokenizer adds a leading space (``▁`` / ``Ġ``) when encoding a fresh text."""
        return self.prefix_rule != "never"

    def encoding_prefix(self, text: str) -> bytes:
        """The bytes encoding ``text`` afresh adds in front of it: ``b" "`` or ``b""``.

        Invariant: ``decode_bytes(encode(text)) == encoding_prefix(text) + text.encode()`` for
        text holding no special-token text.
        """
        if not text or self.prefix_rule == "never":
            return b""
        if self.prefix_rule == "unless_space" and text.startswith(" "):
            return b""
        return b" "

    @property
    def padding_ids(self) -> range:
        """Ids the model has logits for but the tokenizer does not know: never allowed."""
        return range(self.tokenizer_size, self.vocab_size)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated exact bytes of ``ids`` (special and padding ids contribute nothing)."""
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    @classmethod
    def from_token_bytes(
        cls,
        token_bytes: Sequence[bytes],
        *,
        eos_ids: Iterable[int],
        special_ids: Iterable[int] = (),
        vocab_size: int | None = None,
        prefix_rule: PrefixRule = "never",
    ) -> TokenizerInfo:
        """Build a ``"raw"`` info from explicit byte strings (toy vocabularies, tests).

        ``token_bytes[i]`` are the bytes of id ``i``; ``vocab_size`` (default ``len``) may pad
        the vocabulary with byte-less ids.
        """
        size = len(token_bytes)
        v = size if vocab_size is None else vocab_size
        if v < size:
            raise TokenizerError(
                f"tokenizer has {size} tokens but the model's vocab_size (logit width) is {v}"
            )
        special = sorted(set(special_ids))
        tb = [bytes(b) for b in token_bytes] + [b""] * (v - size)
        for i in special:
            if 0 <= i < size:
                tb[i] = b""
        return cls(
            vocab_size=v,
            token_bytes=tb,
            eos_ids=tuple(sorted(set(eos_ids))),
            special_ids=tuple(special),
            tokenizer_size=size,
            kind="raw",
            prefix_rule=prefix_rule,
        )

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        vocab_size: int | None = None,
        *,
        eos_ids: Iterable[int] | None = None,
        generation_config: Any = None,
    ) -> TokenizerInfo:
        """Build the info of a Hugging Face tokenizer (fast / ``tokenizers``-backed).

        Parameters
        ----------
        tokenizer : a ``transformers`` tokenizer with a ``backend_tokenizer``, or a
            ``tokenizers.Tokenizer``. Its pipeline JSON and vocab are read; ``decode`` is not used.
        vocab_size : the model's logit width; default ``len(tokenizer)``. Ids past the tokenizer
            are padding.
        eos_ids : overrides every other EOS source when given.
        generation_config : a ``GenerationConfig`` (or a mapping) whose ``eos_token_id``, an int
            or a list, is added to the tokenizer's own ``eos_token_id``.

        Raises
        ------
        TokenizerError
            If the tokenizer is larger than ``vocab_size``, has no EOS, is not a fast tokenizer,
            or stores pieces in a way whose bytes are not known exactly.
        """
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        if not all(hasattr(backend, a) for a in ("get_vocab", "model", "get_added_tokens_decoder")):
            raise TokenizerError(
                f"{type(tokenizer).__name__} is not a tokenizers-backed (fast) tokenizer",
                hint="load it with AutoTokenizer.from_pretrained(..., use_fast=True)",
            )
        fmt = _pipeline_format(backend)
        vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
        added: Mapping[int, Any] = backend.get_added_tokens_decoder()
        max_id = max([*vocab.values(), *added.keys()], default=-1)
        size = max(len(tokenizer) if hasattr(tokenizer, "__len__") else 0, max_id + 1)
        v = size if vocab_size is None else int(vocab_size)
        if size > v:
            raise TokenizerError(
                f"tokenizer has {size} tokens but the model's vocab_size (logit width) is {v}",
                hint="the tokenizer does not belong to this model",
            )

        token_bytes = [b""] * v
        for piece, i in vocab.items():
            token_bytes[i] = piece_bytes(piece, fmt)
        special = {i for i, tok in added.items() if tok.special}
        special.update(getattr(tokenizer, "all_special_ids", ()))
        for i, tok in added.items():
            token_bytes[i] = added_token_bytes(tok.content, special=i in special)
        for i in special:
            token_bytes[i] = b""

        if eos_ids is None:
            eos = _eos_from(getattr(tokenizer, "eos_token_id", None))
            if generation_config is not None:
                eos |= _eos_from(_config_get(generation_config, "eos_token_id"))
        else:
            eos = set(eos_ids)
        if not eos:
            raise TokenizerError(
                "no EOS token: the tokenizer has no eos_token_id and no generation config gave one",
                hint="pass eos_ids= explicitly",
            )
        return cls(
            vocab_size=v,
            token_bytes=token_bytes,
            eos_ids=tuple(sorted(eos)),
            special_ids=tuple(sorted(special)),
            tokenizer_size=size,
            kind=fmt.kind,
            prefix_rule=fmt.prefix_rule,
        )


def _state(component: Any) -> dict[str, Any] | None:
    """JSON description of one ``tokenizers`` pipeline component (``None`` if absent)."""
    if component is None:
        return None
    state: dict[str, Any] = json.loads(component.__getstate__())
    return state


def _pipeline_format(backend: Any) -> VocabFormat:
    """Read the backend's pipeline; the model's vocab is not serialized for BPE (it is big)."""
    model = backend.model
    mtype = type(model).__name__
    if mtype == "BPE":
        header: dict[str, Any] = {"type": "BPE", "byte_fallback": bool(model.byte_fallback)}
    else:  # Unigram & co. expose byte_fallback only in their state
        full = _state(model) or {}
        header = {"type": full.get("type", mtype), "byte_fallback": full.get("byte_fallback")}
    return vocab_format(
        model=header,
        normalizer=_state(backend.normalizer),
        pre_tokenizer=_state(backend.pre_tokenizer),
        decoder=_state(backend.decoder),
    )


def _config_get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):
        return config.get(key)
    return getattr(config, key, None)


def _eos_from(value: int | Sequence[int] | None) -> set[int]:
    """EOS ids from a tokenizer or generation-config value: ``None``, an int or a list."""
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(i) for i in value}


__all__ = ["TokenizerInfo"]
