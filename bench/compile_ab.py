"""Two checkouts of grammarsd side by side on MaskBench schemas, interleaved schema by schema.

    python bench/compile_ab.py DATA_DIR BASE [NEW] [--limit N] [--cores 0,1]

``BASE`` and ``NEW`` are checkouts (a ``git worktree`` of the commit to compare; ``NEW``
defaults to this one). Each core runs two warm worker processes, one per checkout, and hands
every schema of its share to both in turn (A B, then B A for the next), so a machine whose
speed drifts over minutes slows both alike, schema by schema. Each worker compiles the schema,
fills the first mask and runs the instances, as ``maskbench`` does. Prints, per core and
overall, each checkout's compile mean, their ratio, the median per-schema ratio and the ratio
of all mask time.

Run the same checkout as both to see the noise: 0.992-0.996 here (session 37), where running
each checkout through all schemas in turn, on swapped cores, gave 0.964.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np

HERE = Path(__file__).resolve().parents[1]


def _worker(checkout: str, data_dir: str, core: int) -> None:
    """Answer the schema file names read from stdin with ``compile_s mask_s`` lines (-1: no
    compile)."""
    if hasattr(os, "sched_setaffinity"):  # Linux; elsewhere the lanes float
        os.sched_setaffinity(0, {core})
    sys.path.insert(0, checkout)
    from grammarsd.bench.engines import engine_class
    from grammarsd.bench.maskbench import _tokenizer, _warm_up, load_case, run_case

    tokenizer = _tokenizer("llama3")
    engine = engine_class("grammarsd")(tokenizer)
    _warm_up(engine, tokenizer)
    bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
    print("ready", flush=True)
    for line in sys.stdin:
        record = run_case(engine, load_case(Path(data_dir) / line.strip(), tokenizer), bitmask)
        compile_s = -1.0 if record.compile_s is None else record.compile_s
        print(compile_s, sum(record.mask_ns) / 1e9, flush=True)


class _Worker:
    def __init__(self, checkout: str, args: argparse.Namespace, core: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", checkout, str(core), args.data_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.checkout = checkout
        self.stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        self.stdout: IO[str] = self.proc.stdout  # type: ignore[assignment]
        if self.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker for {checkout} did not start")

    def run(self, name: str) -> tuple[float, float]:
        self.stdin.write(f"{name}\n")
        self.stdin.flush()
        reply = self.stdout.readline().split()
        if len(reply) != 2:
            raise RuntimeError(f"the worker for {self.checkout} died on {name} (its stderr above)")
        return float(reply[0]), float(reply[1])

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait()
        self.stdout.close()


def _lane(args: argparse.Namespace, core: int, share: list[str]) -> dict[str, Any]:
    """Both checkouts over the schemas ``share`` on ``core``: name -> ((compile, masks) of A,
    (compile, masks) of B)."""
    a, b = _Worker(args.base, args, core), _Worker(args.new, args, core)
    out = {}
    for k, name in enumerate(share):
        if k % 2 == 0:
            first, second = a.run(name), b.run(name)
        else:
            second, first = b.run(name), a.run(name)
        out[name] = (first, second)
    a.close()
    b.close()
    return out


def _summary(label: str, results: dict[str, Any]) -> str:
    both = [v for v in results.values() if v[0][0] >= 0 and v[1][0] >= 0]
    a = np.array([v[0][0] for v in both])
    b = np.array([v[1][0] for v in both])
    masks = sum(v[1][1] for v in both) / max(sum(v[0][1] for v in both), 1e-12)
    return (f"{label}: {len(both)} schemas, compile mean {1e3 * a.mean():.3f} -> "
            f"{1e3 * b.mean():.3f} ms (ratio {b.mean() / a.mean():.4f}), median per-schema "
            f"ratio {np.median(b / a):.4f}, masks ratio {masks:.4f}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        checkout, pinned, data_dir = argv[1:4]
        _worker(checkout, data_dir, int(pinned))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("base", help="the checkout to compare against (A)")
    parser.add_argument("new", nargs="?", default=str(HERE), help="the checkout measured (B)")
    parser.add_argument("--limit", type=int, default=None, help="evenly spread schemas")
    parser.add_argument("--cores", default="0,1", help="one lane of two workers per core")
    args = parser.parse_args(argv)
    for checkout in (args.base, args.new):
        if not (Path(checkout) / "grammarsd" / "__init__.py").is_file():
            parser.error(f"{checkout} is not a grammarsd checkout (no grammarsd/__init__.py)")
    sys.path.insert(0, args.new)
    from grammarsd.bench.maskbench import schema_files

    names = [p.name for p in schema_files(Path(args.data_dir), args.limit)]
    cores = [int(c) for c in args.cores.split(",")]
    lanes = [names[j::len(cores)] for j in range(len(cores))]
    with ThreadPoolExecutor(len(cores)) as pool:
        parts = list(pool.map(_lane, [args] * len(cores), cores, lanes))
    for core, part in zip(cores, parts, strict=True):
        print(_summary(f"core {core}", part))
    print(_summary("all", {name: v for part in parts for name, v in part.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
