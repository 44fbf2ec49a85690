"""Mask time per token of the matcher on a few grammars, Llama-3 vocabulary.

    python bench/mask_baseline.py [--tokenizer llama3]

For every grammar, a sample document is tokenized; the mask is filled before each of its tokens and
the token accepted. The result is asserted (every sample token must be allowed) before timings are
reported. JIT warm-up (first import of the numba kernels) is measured apart from compile time.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import grammarsd as gs
from grammarsd.grammar.bundled import load_bundled

CASES = {
    "json (bundled)": (
        lambda: load_bundled("json.lark"),
        '{"name": "Paris", "population": 2161000, "tags": ["capital", "europe"], '
        '"coords": {"lat": 48.8566, "lon": 2.3522}, "ok": true, "note": null}',
    ),
    "arithmetic (bundled)": (lambda: load_bundled("arithmetic.lark"), "(12 + 3.5) * -x / (y - 4) ^ 2"),
    "regex date-time": (
        lambda: r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        "2026-11-22T08:17:00.123+01:00",
    ),
    "regex email list": (
        lambda: r"([a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}(, )?){1,5}",
        "ada@example.org, alan.turing@cam.ac.uk, grace@navy.mil",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="llama3")
    args = ap.parse_args()
    tok = gs.load_tokenizer(args.tokenizer)
    t0 = time.perf_counter()
    info = gs.TokenizerInfo.from_huggingface(tok)
    print(f"TokenizerInfo build: {1e3 * (time.perf_counter() - t0):.0f} ms, V={info.vocab_size}")
    t0 = time.perf_counter()
    warm = gs.compile_regex("a", info).matcher()
    warm.fill_next_token_bitmask(gs.allocate_token_bitmask(1, info.vocab_size))
    print(f"JIT warm-up + token trie: {1e3 * (time.perf_counter() - t0):.0f} ms")
    print(
        f"{'grammar':24} {'compile ms':>10} {'tokens':>6} {'mean µs':>9} {'p50 µs':>9} {'p99 µs':>9}"
    )
    bitmask = gs.allocate_token_bitmask(1, info.vocab_size)
    for name, (make, text) in CASES.items():
        spec = make()
        t0 = time.perf_counter()
        g = gs.compile_regex(spec, info) if isinstance(spec, str) else gs.compile_ir(spec, info)
        compile_ms = 1e3 * (time.perf_counter() - t0)
        m = g.matcher()
        times = []
        for t in tok.encode(text, add_special_tokens=False):
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(bitmask)
            times.append(time.perf_counter() - t0)
            assert (int(bitmask[0, t // 32]) >> (t % 32)) & 1, f"{name}: sample token {t} masked"
            assert m.accept_token(t)
        assert m.is_accepting(), name
        us = 1e6 * np.asarray(times)
        print(
            f"{name:24} {compile_ms:10.1f} {len(us):6d} {us.mean():9.0f} "
            f"{np.percentile(us, 50):9.0f} {np.percentile(us, 99):9.0f}"
        )
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}"
    )


if __name__ == "__main__":
    main()
