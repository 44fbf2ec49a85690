"""End-to-end time per output token on SmolLM2: constrained vs unconstrained, and forced runs.

Runs the public API only (``grammarsd.generate_result``). For each case: one warm-up call (JIT,
grammar compile, caches), then ``--repeats`` timed calls; reports the median TPOT (time per
output token after the first, prefill excluded), tokens, forced tokens, forward passes and the
share of time spent filling masks. Outputs are checked (parse/validate) before they are timed.

    python bench/e2e_tpot.py [--model smollm2] [--device cpu|cuda] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

import torch

import grammarsd as gs

PROMPT = "List five European capitals with their countries and populations, as JSON."
CITIES = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 24},
            "country": {"type": "string", "maxLength": 24},
            "population": {"type": "integer", "minimum": 0, "maximum": 100000000},
        },
        "required": ["city", "country", "population"],
    },
    "minItems": 5,
    "maxItems": 5,
}


def run(lm: gs.LoadedModel, repeats: int, **options: Any) -> dict[str, float]:
    gs.generate_result(lm, PROMPT, **options)  # warm-up
    runs = [gs.generate_result(lm, PROMPT, **options) for _ in range(repeats)]
    r = runs[-1]
    if "schema" in options:
        json.loads(r.text)
    total = [x.stats.ttft + x.stats.tpot * max(x.stats.tokens - 1, 0) for x in runs]
    return {
        "tpot_ms": 1e3 * statistics.median(x.stats.tpot for x in runs),
        "total_s": statistics.median(total),
        "tokens": r.stats.tokens,
        "forced": r.stats.forced_tokens,
        "forwards": r.stats.forward_passes,
        "mask_share": statistics.median(
            x.stats.mask_seconds / t for x, t in zip(runs, total, strict=False) if t > 0
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    lm = gs.load_model(args.model, device=args.device)
    where = torch.cuda.get_device_name() if lm.device.type == "cuda" else (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")
    print(f"# {where}, torch {torch.__version__}, grammarsd {gs.__version__}, model {lm.name}")
    compact = {"whitespace": "compact"}
    cases: dict[str, dict[str, Any]] = {
        "schema (flexible ws)": {"schema": CITIES, "max_tokens": 400},
        "schema (compact ws)": {"schema": CITIES, "max_tokens": 400, "json_options": compact},
        "schema, forced runs off": {"schema": CITIES, "max_tokens": 400, "batch_forced": False,
                                    "json_options": compact},
    }
    rows = {}
    for name, options in cases.items():
        start = time.perf_counter()
        rows[name] = run(lm, args.repeats, **options)
        print(f"{name:26s} " + "  ".join(f"{k}={v:.4g}" for k, v in rows[name].items())
              + f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    # same prompt, same length: free text gets the flexible schema output's token count
    n = int(rows["schema (flexible ws)"]["tokens"])
    rows["unconstrained"] = run(lm, args.repeats, max_tokens=n)
    print(f"{'unconstrained':26s} " + "  ".join(f"{k}={v:.4g}" for k, v in
                                               rows["unconstrained"].items()))
    base = rows["unconstrained"]["tpot_ms"]
    for name in list(cases)[:2]:
        print(f"{name}: TPOT {100 * (rows[name]['tpot_ms'] / base - 1):+.1f}% vs unconstrained")
    on, off = rows["schema (compact ws)"], rows["schema, forced runs off"]
    print(f"forced runs: {on['forwards']:.0f} vs {off['forwards']:.0f} forward passes, "
          f"total {on['total_s']:.2f} s vs {off['total_s']:.2f} s")


if __name__ == "__main__":
    main()
