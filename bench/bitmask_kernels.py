"""Apply-bitmask time on a GPU: grammarsd's Triton and torch backends beside xgrammar's kernels.

    python bench/bitmask_kernels.py [--vocab 128256] [--batch 1 64 4096] [--dtype float32]
                                    [--density 0.01 0.5 0.99] [--iters 200]

For each batch size and share of allowed tokens (``--density``), every backend's result is first
checked against ``torch.where`` on a bool mask. Then, per call:

- ``gpu µs``: CUDA-event time of ``--iters`` back-to-back calls, divided by ``--iters`` (applying a
  mask twice changes nothing, so the calls need no fresh logits);
- ``host µs``: the Python-side time to launch one call (perf_counter over the same loop, no
  synchronisation inside it): what a decode step pays on the CPU before the GPU runs.

The first (JIT) call is reported apart. xgrammar's backends (``cuda``, ``triton``) run when
xgrammar imports; ratios are peer time / grammarsd Triton time (> 1: grammarsd is faster). Needs CUDA.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

import torch

import grammarsd as gs

Apply = Callable[[torch.Tensor, torch.Tensor], None]
DEVICE = "cuda"


def backends() -> dict[str, Apply]:
    """Every backend that runs here, by name; grammarsd's Triton backend first."""
    out: dict[str, Apply] = {
        "grammarsd-triton": lambda x, m: gs.apply_token_bitmask_inplace(x, m, backend="triton"),
        "grammarsd-torch": lambda x, m: gs.apply_token_bitmask_inplace(x, m, backend="torch"),
    }
    try:
        import xgrammar
    except ImportError as exc:
        print(f"# xgrammar not measured: {exc}")
        return out
    for name in ("cuda", "triton"):
        out[f"xgrammar-{name}"] = (
            lambda x, m, b=name: xgrammar.apply_token_bitmask_inplace(x, m, backend=b)  # type: ignore[misc]
        )
    return out


def random_bitmask(
    batch: int, vocab: int, density: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(int32 bitmask ``[batch, ceil(vocab / 32)]``, bool ``[batch, vocab]`` it was packed from),
    on the GPU, each token allowed with probability ``density``."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    allowed = torch.rand(batch, (vocab + 31) // 32 * 32, device=DEVICE, generator=gen) < density
    shifts = torch.arange(32, dtype=torch.int64, device=DEVICE)
    words = (allowed.view(batch, -1, 32).long() << shifts).sum(-1)
    packed = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    return packed, allowed[:, :vocab]


def time_backend(apply: Apply, logits: torch.Tensor, bitmask: torch.Tensor, iters: int) -> tuple[float, float]:
    """(GPU µs per call, host launch µs per call) over ``iters`` back-to-back calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        apply(logits, bitmask)
    host = time.perf_counter() - t0
    end.record()
    torch.cuda.synchronize()
    return 1e3 * start.elapsed_time(end) / iters, 1e6 * host / iters


def bench_shape(
    batch: int, vocab: int, density: float, dtype: torch.dtype, iters: int, apply_fns: dict[str, Apply]
) -> dict[str, tuple[float, float, float]]:
    """``{backend: (first-call ms, gpu µs, host µs)}`` for one shape; results asserted first."""
    gen = torch.Generator(device=DEVICE).manual_seed(batch)
    logits = torch.randn(batch, vocab, device=DEVICE, dtype=dtype, generator=gen)
    bitmask, allowed = random_bitmask(batch, vocab, density, seed=batch + 1)
    expected = torch.where(allowed, logits, torch.full_like(logits, float("-inf")))
    out = {}
    for name, apply in apply_fns.items():
        work = logits.clone()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        apply(work, bitmask)
        torch.cuda.synchronize()
        first = 1e3 * (time.perf_counter() - t0)
        assert torch.equal(work, expected), f"{name} disagrees with torch.where"
        time_backend(apply, work, bitmask, 10)  # warm
        out[name] = (first, *time_backend(apply, work, bitmask, iters))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=128_256)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64, 4096])
    ap.add_argument("--density", type=float, nargs="+", default=[0.01, 0.5, 0.99])
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA device")
    import triton

    apply_fns = backends()
    print(
        f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}"
        f" | python {platform.python_version()} | V={args.vocab} {args.dtype}"
    )
    print(f"{'batch':>6} {'density':>7} {'backend':>17} {'first ms':>9} {'gpu µs':>9} "
          f"{'host µs':>8} {'gpu ratio':>9}")
    for batch in args.batch:
        for density in args.density:
            rows = bench_shape(batch, args.vocab, density, getattr(torch, args.dtype), args.iters,
                               apply_fns)
            ours = rows["grammarsd-triton"][1]
            for name, (first, gpu, host) in rows.items():
                print(f"{batch:>6} {density:>7.2f} {name:>17} {first:>9.1f} {gpu:>9.1f} "
                      f"{host:>8.1f} {gpu / ours:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
