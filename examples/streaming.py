"""Streaming: print text as tokens arrive (never half a character), then the final Result.

    python examples/streaming.py
"""

from __future__ import annotations

import grammarsd as gs

if __name__ == "__main__":
    model = gs.load_model()
    pieces = gs.stream(model, "Write a haiku about the sea.", max_tokens=60, temperature=0.7,
                       seed=1)
    while True:
        try:
            print(next(pieces), end="", flush=True)
        except StopIteration as stop:
            result = stop.value
            break
    print(f"\n[{result.stats.tokens} tokens, {1 / max(result.stats.tpot, 1e-9):.1f} tokens/s, "
          f"finish {result.finish_reason}]")
