"""Fill the masks of many matchers at once, on threads (the numba kernels release the GIL).

One row per matcher: ``fill_next_token_bitmasks(matchers, bitmask)`` writes row ``i`` for
``matchers[i]`` (or row ``indices[i]``). Matchers may share a compiled grammar; its lazy mask cache
is safe to read while another thread adds a row.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grammarsd.errors import MatcherError
from grammarsd.matcher.matcher import GrammarMatcher

_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(threads: int) -> ThreadPoolExecutor:
    if threads not in _POOLS:
        _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="grammarsd-mask")
    return _POOLS[threads]


def fill_next_token_bitmasks(
    matchers: Sequence[GrammarMatcher],
    bitmask: Any,
    *,
    indices: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> list[bool]:
    """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` for ``matchers[i]``.

    Returns each row's ``need_apply``. ``num_threads`` defaults to the CPU count (capped by the
    batch size); 1 runs inline. Each matcher must appear once (matchers are not thread-safe).
    """
    rows = list(range(len(matchers))) if indices is None else list(indices)
    if len(rows) != len(matchers):
        raise MatcherError(f"{len(matchers)} matchers but {len(rows)} row indices")
    if len({id(m) for m in matchers}) != len(matchers):
        raise MatcherError("a matcher appears twice in one batch")
    threads = min(num_threads or os.cpu_count() or 1, len(matchers))
    if threads <= 1:
        return [m.fill_next_token_bitmask(bitmask, r) for m, r in zip(matchers, rows, strict=True)]
    futures = [
        _pool(threads).submit(m.fill_next_token_bitmask, bitmask, r)
        for m, r in zip(matchers, rows, strict=True)
    ]
    return [f.result() for f in futures]


__all__ = ["fill_next_token_bitmasks"]
