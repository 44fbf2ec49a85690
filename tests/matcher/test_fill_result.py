"""What ``fill_next_token_bitmask`` returns and writes around the mask itself.

The return value says whether any token is masked out (decided inside the kernel from the last
word's valid bits); the row is overwritten whatever it held, and padding columns past the vocabulary
are cleared. Expected masks come from Python's ``re`` on prefix-closed languages.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from grammarsd.compiler.compiled import compile_regex
from grammarsd.tokenizer.info import TokenizerInfo

EOS = 0


def ab_vocab(size: int) -> TokenizerInfo:
    """EOS (id 0, special) then the first ``size - 1`` strings over {a, b}, shortest first."""
    words = (
        "".join(p).encode() for n in itertools.count(1) for p in itertools.product("ab", repeat=n)
    )
    tokens = [b"", *itertools.islice(words, size - 1)]
    return TokenizerInfo.from_token_bytes(tokens, eos_ids=[EOS], special_ids=[EOS])


def expected(info: TokenizerInfo, pattern: str) -> np.ndarray:
    """Allowed ids at the empty prefix for a prefix-closed, nullable ``pattern``."""
    ok = [t == EOS or re.fullmatch(pattern, info.token_bytes[t].decode()) is not None
          for t in range(info.vocab_size)]  # fmt: skip
    return np.flatnonzero(ok)


def allowed(row: np.ndarray, vocab: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab])


@pytest.mark.parametrize("size", [31, 32, 33, 63, 64])
@pytest.mark.parametrize(("pattern", "masked"), [("[ab]*", False), ("a*", True)])
def test_return_value_and_overwrite(size: int, pattern: str, masked: bool) -> None:
    info = ab_vocab(size)
    m = compile_regex(pattern, info).matcher()
    words = (size + 31) // 32
    out = np.full((1, words), -1, dtype=np.int32)  # stale bits everywhere, past the vocabulary too
    assert m.fill_next_token_bitmask(out) is masked
    assert allowed(out[0], size).tolist() == expected(info, pattern).tolist()
    rest = size % 32
    if rest:
        assert int(out[0, -1].view(np.uint32)) >> rest == 0  # no bits past the vocabulary


def test_padding_columns_are_cleared() -> None:
    info = ab_vocab(40)
    m = compile_regex("[ab]*", info).matcher()
    out = np.full((2, 5), -1, dtype=np.int32)  # 2 words needed, 3 columns of padding
    assert not m.fill_next_token_bitmask(out, index=1)
    assert (out[1, 2:] == 0).all()
    assert (out[0] == -1).all()  # other rows untouched
    assert allowed(out[1], 40).tolist() == list(range(40))


def test_terminated_matcher_masks_everything() -> None:
    info = ab_vocab(33)
    m = compile_regex("a", info).matcher()
    assert m.accept_token(1) and m.accept_token(EOS)
    out = np.full((1, 2), -1, dtype=np.int32)
    assert m.fill_next_token_bitmask(out)
    assert not out.any()
