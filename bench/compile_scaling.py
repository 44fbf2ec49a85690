"""Compile time per object property, grammarsd beside its peers, as an object grows.

    python bench/compile_scaling.py [--engines grammarsd,llguidance] [--sizes 10,30,60,200]

One object of N string properties (all required, or all optional), compiled with a matcher made
and its first mask filled, as MaskBench times a compile. *cold*: property names never seen in
the process (nothing any cache holds); *warm*: the same names again under a new ``description``
(so no engine's whole-schema cache answers, while grammarsd's terminal DFAs are cached). Minimum
of a few runs each; warm-up (JIT, first compile) is done first and not reported. Prints
microseconds per property and each peer's time over grammarsd's.
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import numpy as np

from grammarsd.bench.engines import Engine, engine_class
from grammarsd.bench.maskbench import _tokenizer

_FRESH = itertools.count()


def _schema(n: int, required: bool, names: str, note: str = "") -> dict[str, Any]:
    props = {f"{names}_{i}": {"type": "string"} for i in range(n)}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(props)
    if note:
        schema["description"] = note
    return schema


def _compile_ms(engine: Engine, schema: dict[str, Any], bitmask: np.ndarray) -> float:
    start = time.perf_counter()
    engine.matcher(engine.compile(schema), bitmask).fill()
    return 1e3 * (time.perf_counter() - start)


def measure(engine: Engine, n: int, required: bool, repeats: int) -> tuple[float, float]:
    """(cold, warm) milliseconds for one object of ``n`` properties, minimum of ``repeats``."""
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    cold = min(_compile_ms(engine, _schema(n, required, f"c{next(_FRESH)}"), bitmask)
               for _ in range(repeats))
    names = f"w{next(_FRESH)}"
    _compile_ms(engine, _schema(n, required, names), bitmask)
    warm = min(_compile_ms(engine, _schema(n, required, names, f"run {next(_FRESH)}"), bitmask)
               for _ in range(repeats))
    return cold, warm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="grammarsd,llguidance")
    ap.add_argument("--sizes", default="10,30,60,200")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokenizer", default="llama3")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    tokenizer = _tokenizer(args.tokenizer)
    results: dict[str, dict[tuple[int, bool], tuple[float, float]]] = {}
    for name in args.engines.split(","):
        try:
            engine = engine_class(name)(tokenizer)
        except ImportError as exc:  # a peer not installed: the others still run
            print(f"{name}: not installed ({exc}); skipped")
            continue
        except ValueError as exc:  # no such engine
            print(f"{name}: {exc}; skipped")
            continue
        _compile_ms(engine, _schema(3, True, "warmup"),
                    np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32))
        results[name] = {(n, req): measure(engine, n, req, args.repeats)
                         for n in sizes for req in (True, False)}
    base = results.get("grammarsd")
    print(f"{'engine':12} {'N':>4} {'keys':8} {'cold µs/prop':>12} {'warm µs/prop':>12}"
          + ("  cold, warm / grammarsd" if base else ""))
    for name, rows in results.items():
        for (n, req), (cold, warm) in rows.items():
            line = (f"{name:12} {n:4d} {'required' if req else 'optional':8} "
                    f"{1e3 * cold / n:12.0f} {1e3 * warm / n:12.0f}")
            if base and name != "grammarsd":
                b_cold, b_warm = base[(n, req)]
                line += f"  {cold / b_cold:.3f}, {warm / b_warm:.3f}"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
