"""Exact byte strings of vocabulary pieces: byte-level BPE, SentencePiece, added tokens.

This module owns the rules that turn a tokenizer's *stored* piece (the string in its vocab) into
the bytes the piece stands for, and the reading of a Hugging Face ``tokenizers`` pipeline
description (normalizer / pre-tokenizer / decoder / model JSON) into a :class:`VocabFormat`.

It never calls ``decode``: decoders strip leading spaces, fuse pieces and replace partial UTF-8
with U+FFFD, so per-token decoding is not exact. Instead:

* **byte-level** (GPT-2, Llama-3, SmolLM2): each byte ``b`` is stored as one printable character,
  ``chr(b)`` for the printable Latin-1 bytes and ``chr(256 + k)`` for the k-th other byte
  (so a space is ``Ġ`` U+0120, a newline ``Ċ`` U+010A). Mapping each character back gives the
  bytes; a character outside this 256-character alphabet is an error, never skipped.
* **SentencePiece** (Llama-2): the space marker (``▁`` U+2581 unless configured otherwise) is a
  space; with byte fallback, the 256 pieces ``<0x00>`` … ``<0xFF>`` are single raw bytes; every
  other piece is its UTF-8 encoding.
* **added tokens**: special ones have no bytes (``b""``, they are control tokens); the others are
  matched literally by the tokenizer before the model runs, so their bytes are the UTF-8 of their
  content.

Everything here is pure Python over strings and JSON-like dicts: no tokenizer library is imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from grammarsd.errors import TokenizerError

VocabKind = Literal["byte_level", "sentencepiece", "raw"]
"""How stored pieces map to bytes. ``raw``: pieces are given as bytes already (toy vocabularies)."""

PrefixRule = Literal["never", "always", "unless_space"]
"""When encoding a fresh non-empty text adds one leading space (``▁`` / ``Ġ``) to it.

``always``: a ``Prepend`` normalizer (Hugging Face's Llama-2 ``tokenizer.json``, like
SentencePiece's ``add_dummy_prefix``). ``unless_space``: a ``Metaspace`` pre-tokenizer
(``prepend_scheme`` ``first``/``always``, as in GGUF-converted Llama-2) or
``ByteLevel(add_prefix_space=True)``, which skip the space when the text already starts with one.
"""

SPACE_MARKER = "\u2581"  # "▁", SentencePiece's visible space


@dataclass(frozen=True)
class VocabFormat:
    """What a tokenizer pipeline says about its pieces' bytes.

    Attributes
    ----------
    kind : how pieces map to bytes (see :data:`VocabKind`).
    prefix_rule : when encoding a fresh text prepends one space (see :data:`PrefixRule`).
    space_marker : the character SentencePiece pieces use for a space (unused for byte-level).
    byte_fallback : SentencePiece pieces ``<0xNN>`` stand for the single byte ``0xNN``.
    """

    kind: VocabKind
    prefix_rule: PrefixRule
    space_marker: str = SPACE_MARKER
    byte_fallback: bool = False


def _byte_level_alphabet() -> dict[str, int]:
    """The GPT-2 byte-to-character table, inverted: character -> byte (256 entries)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\u00a1"), ord("\u00ac") + 1),
        *range(ord("\u00ae"), ord("\u00ff") + 1),
    ]
    shown = set(printable)
    alphabet = {chr(b): b for b in printable}
    k = 0
    for b in range(256):
        if b not in shown:
            alphabet[chr(256 + k)] = b
            k += 1
    return alphabet


BYTE_LEVEL_ALPHABET: Mapping[str, int] = _byte_level_alphabet()
"""Character -> byte for byte-level BPE vocabularies (exactly 256 entries)."""

# str.translate table: alphabet characters -> chr(byte) so that ``.encode("latin-1")`` yields the
# bytes; Latin-1 characters that are *not* in the alphabet map to U+FFFF, which Latin-1 cannot
# encode, so every foreign character makes the encode fail instead of passing through.
_BYTE_LEVEL_TRANSLATE: dict[int, str] = {
    **{c: "\uffff" for c in range(256)},
    **{ord(ch): chr(b) for ch, b in BYTE_LEVEL_ALPHABET.items()},
}

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_level_piece_bytes(piece: str) -> bytes:
    """Bytes of one byte-level BPE piece (``"Ġworld"`` -> ``b" world"``).

    Raises
    ------
    TokenizerError
        If the piece holds a character outside the 256-character byte-level alphabet.
    """
    try:
        return piece.translate(_BYTE_LEVEL_TRANSLATE).encode("latin-1")
    except UnicodeEncodeError:
        bad = next(ch for ch in piece if ch not in BYTE_LEVEL_ALPHABET)
        raise TokenizerError(
            f"byte-level piece {piece!r} holds {bad!r} (U+{ord(bad):04X}), "
            "which is not in the byte-level alphabet",
            hint="the tokenizer is probably not byte-level; check its decoder",
        ) from None


def sentencepiece_piece_bytes(
    piece: str, *, space_marker: str = SPACE_MARKER, byte_fallback: bool = True
) -> bytes:
    """Bytes of one SentencePiece piece (``"▁hello"`` -> ``b" hello"``, ``"<0x0A>"`` -> ``b"\\n"``).

    With ``byte_fallback`` the exact pieces ``<0x00>`` … ``<0xFF>`` are one raw byte each (possibly
    part of a multi-byte UTF-8 character); every other piece is UTF-8 with the marker as a space.
    """
    if byte_fallback:
        m = _BYTE_PIECE.fullmatch(piece)
        if m is not None:
            return bytes([int(m.group(1), 16)])
    return piece.replace(space_marker, " ").encode("utf-8")


def _components(node: Mapping[str, Any] | None, list_key: str) -> list[Mapping[str, Any]]:
    """Flatten a (possibly ``Sequence``-typed) pipeline component into its leaf steps."""
    if node is None:
        return []
    if node.get("type") == "Sequence":
        out: list[Mapping[str, Any]] = []
        for child in node.get(list_key, []):
            out.extend(_components(child, list_key))
        return out
    return [node]


def vocab_format(
    *,
    model: Mapping[str, Any],
    normalizer: Mapping[str, Any] | None,
    pre_tokenizer: Mapping[str, Any] | None,
    decoder: Mapping[str, Any] | None,
) -> VocabFormat:
    """Read a ``tokenizers`` pipeline description (its JSON parts) into a :class:`VocabFormat`.

    Parameters
    ----------
    model : the ``model`` object; only ``type`` and ``byte_fallback`` are read.
    normalizer, pre_tokenizer, decoder : the pipeline's JSON objects, or ``None``.

    Raises
    ------
    TokenizerError
        For a model type or decoder whose piece -> bytes mapping is not known exactly
        (WordPiece, WordLevel, a BPE with neither a byte-level nor a SentencePiece decoder).
    """
    mtype = model.get("type")
    norms = _components(normalizer, "normalizers")
    pres = _components(pre_tokenizer, "pretokenizers")
    decs = _components(decoder, "decoders")
    if mtype not in ("BPE", "Unigram"):
        raise TokenizerError(
            f"unsupported tokenizer model type {mtype!r}; exact token bytes are known for "
            "byte-level BPE and SentencePiece (BPE or Unigram) vocabularies",
        )

    if any(d.get("type") == "ByteLevel" for d in decs) or any(
        p.get("type") == "ByteLevel" for p in pres
    ):
        adds = any(p.get("type") == "ByteLevel" and p.get("add_prefix_space") for p in pres)
        return VocabFormat(kind="byte_level", prefix_rule="unless_space" if adds else "never")

    marker: str | None = None
    prefix: PrefixRule = "never"
    for n in norms:  # normalizers run first: a Prepend makes the text start with the marker
        if n.get("type") == "Replace" and n.get("pattern", {}).get("String") == " ":
            marker = n.get("content", marker)
        if n.get("type") == "Prepend":
            prefix = "always"
            marker = marker or n.get("prepend")
    for p in pres:
        if p.get("type") == "Metaspace":
            marker = p.get("replacement", SPACE_MARKER)
            scheme = p.get("prepend_scheme")
            adds = (
                scheme in ("always", "first")
                if scheme is not None
                else bool(p.get("add_prefix_space", True))
            )
            if adds and prefix == "never":
                prefix = "unless_space"
    for d in decs:
        if d.get("type") == "Metaspace":
            marker = marker or d.get("replacement", SPACE_MARKER)
        if d.get("type") == "Replace" and d.get("content") == " ":
            marker = marker or d.get("pattern", {}).get("String")
    if marker is None:
        raise TokenizerError(
            f"cannot tell how this {mtype} tokenizer stores spaces: no byte-level step and no "
            "SentencePiece space marker (Metaspace / Replace ' ') in its pipeline",
        )
    return VocabFormat(
        kind="sentencepiece",
        prefix_rule=prefix,
        space_marker=marker,
        byte_fallback=bool(model.get("byte_fallback", False)),
    )


def piece_bytes(piece: str, fmt: VocabFormat) -> bytes:
    """Bytes of one stored vocabulary piece under ``fmt`` (see the module docstring)."""
    if fmt.kind == "byte_level":
        return byte_level_piece_bytes(piece)
    if fmt.kind == "sentencepiece":
        return sentencepiece_piece_bytes(
            piece, space_marker=fmt.space_marker, byte_fallback=fmt.byte_fallback
        )
    raise TokenizerError(f"vocabulary kind {fmt.kind!r} has no stored pieces to decode")


def added_token_bytes(content: str, *, special: bool) -> bytes:
    """Bytes of an added token: ``b""`` when ``special``, else its content's UTF-8."""
    return b"" if special else content.encode("utf-8")


__all__ = [
    "BYTE_LEVEL_ALPHABET",
    "SPACE_MARKER",
    "PrefixRule",
    "VocabFormat",
    "VocabKind",
    "added_token_bytes",
    "byte_level_piece_bytes",
    "piece_bytes",
    "sentencepiece_piece_bytes",
    "vocab_format",
]
