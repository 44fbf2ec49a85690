"""Apply-bitmask time of the torch and Triton backends on a GPU: batch 1 / 64 / 4096 × 128k vocabulary.

    python bench/bitmask_kernels.py [--vocab 128256] [--batch 1 64 4096] [--dtype float32]

Every backend's result is checked against ``torch.where`` on a bool mask before it is timed. The
first (JIT) call is reported apart from steady state; steady-state times are CUDA-event medians over
``--iters`` runs, each on a fresh copy of the logits (the copy is not timed). Needs CUDA.
"""

from __future__ import annotations

import argparse
import platform
import statistics
from collections.abc import Callable

import torch

import grammarsd as gs
from grammarsd.kernels.torch_ref import unpack_bitmask

BACKENDS = ("torch", "triton")


def _cuda_ms(fn: Callable[[], None]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end))


def bench_one(batch: int, vocab: int, dtype: torch.dtype, iters: int) -> dict[str, tuple[float, float]]:
    """``{backend: (first-call ms, median steady-state µs)}`` for one shape (results asserted)."""
    gen = torch.Generator(device="cuda").manual_seed(batch)
    logits = torch.randn(batch, vocab, device="cuda", dtype=dtype, generator=gen)
    width = (vocab + 31) // 32
    bitmask = torch.randint(
        -(2**31), 2**31 - 1, (batch, width), dtype=torch.int32, device="cuda", generator=gen
    )
    allowed = unpack_bitmask(bitmask.cpu(), vocab).cuda()
    expected = torch.where(allowed, logits, torch.full_like(logits, float("-inf")))
    out: dict[str, tuple[float, float]] = {}
    for backend in BACKENDS:
        work = logits.clone()
        first = _cuda_ms(lambda: gs.apply_token_bitmask_inplace(work, bitmask, backend=backend))  # noqa: B023
        assert torch.equal(work, expected), f"{backend} disagrees with torch.where"
        times = []
        for _ in range(iters):
            work.copy_(logits)
            times.append(
                _cuda_ms(lambda: gs.apply_token_bitmask_inplace(work, bitmask, backend=backend))  # noqa: B023
            )
        out[backend] = (first, 1e3 * statistics.median(times))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=128_256)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64, 4096])
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA device")
    import triton

    dtype = getattr(torch, args.dtype)
    print(
        f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
        f"python {platform.python_version()} | V={args.vocab} {args.dtype}"
    )
    print(f"{'batch':>6} {'backend':>8} {'first ms':>9} {'median µs':>10}")
    for batch in args.batch:
        for backend, (first, steady) in bench_one(batch, args.vocab, dtype, args.iters).items():
            print(f"{batch:>6} {backend:>8} {first:>9.1f} {steady:>10.1f}")


if __name__ == "__main__":
    main()
