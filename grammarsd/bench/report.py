"""MaskBench report: per-engine summaries, ratios to grammarsd, Markdown tables, CDF plots, and the
hardware and versions the numbers were taken on.

Statistics (all over the schemas of one run):

* counts: schemas passing (status ``ok`` or ``empty_language``, and no wrong answer), languages
  proved empty, compile errors, timeouts, errors (crashes), and *instances* valid-rejected /
  invalid-accepted (a language proved empty rejects every instance);
* compile time (time to first mask) over the schemas the engine compiled;
* mask time over every mask fill of those schemas (one per token plus one per instance's EOS check);
* total time per schema: its compile time plus all its mask fills, what constraining every instance
  of it cost in all (an engine that defers work from compile to its first masks shows it here).

Ratios compare each peer with grammarsd on the schemas **both** compiled and ran (``ok``), as
``peer time / grammarsd time``: below 1 the peer is faster. The compile mean of those schemas is
also split into *bands* of grammarsd's compile times, slowest first (``compile_bands``): where a
mean comes from, since a few big schemas hold much of it.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from grammarsd.bench.maskbench import MaskBenchConfig, SchemaRecord

BASELINE = "grammarsd"


@dataclass(frozen=True)
class EngineSummary:
    """One engine's row of the report; times in milliseconds (compile) and microseconds (mask),
    ``nan`` when the engine compiled nothing."""

    engine: str
    schemas: int
    passing: int
    empty_languages: int
    compile_errors: int
    timeouts: int
    errors: int
    valid_instances: int
    invalid_instances: int
    valid_rejected: int
    invalid_accepted: int
    compile_ms_mean: float
    compile_ms_p50: float
    compile_ms_p99: float
    masks: int
    mask_us_mean: float
    mask_us_p50: float
    mask_us_p99: float
    mask_us_max: float


@dataclass(frozen=True)
class Ratio:
    """A peer's times divided by the baseline's, over ``paired`` schemas both ran."""

    engine: str
    paired: int
    compile_mean: float
    mask_mean: float
    mask_p50: float
    mask_p99: float
    total_mean: float  # compile plus all mask fills, per schema


#: Bands of the paired schemas by grammarsd's compile time, slowest first, as fractions of them.
BANDS = ((0.0, 0.01), (0.01, 0.05), (0.05, 0.1), (0.1, 0.25), (0.25, 0.5), (0.5, 1.0))


@dataclass(frozen=True)
class CompileBand:
    """The paired schemas ranked ``lo`` to ``hi`` (fractions, slowest first) by the baseline's
    compile time: their mean compile times (ms) and their share of the baseline's total."""

    lo: float
    hi: float
    schemas: int
    base_ms: float
    peer_ms: float
    base_share: float


def _stats(values: np.ndarray) -> tuple[float, float, float, float]:
    """mean, p50, p99, max (``nan`` for an empty array)."""
    if values.size == 0:
        return (float("nan"),) * 4
    p50, p99 = np.percentile(values, [50, 99])
    return float(values.mean()), float(p50), float(p99), float(values.max())


def mask_us(records: Sequence[SchemaRecord]) -> np.ndarray:
    """Every mask time of ``records`` in microseconds."""
    parts = [np.asarray(r.mask_ns, dtype=np.float64) for r in records if r.status == "ok"]
    return np.concatenate(parts) / 1e3 if parts else np.zeros(0)


def compile_ms(records: Sequence[SchemaRecord]) -> np.ndarray:
    """Compile times (time to first mask) of the compiled ``records`` in milliseconds."""
    return np.asarray(
        [1e3 * r.compile_s for r in records if r.status == "ok" and r.compile_s is not None],
        dtype=np.float64,
    )


def total_ms(records: Sequence[SchemaRecord]) -> np.ndarray:
    """Per compiled record, its compile time plus the sum of its mask times, in milliseconds."""
    return np.asarray(
        [1e3 * r.compile_s + sum(r.mask_ns) / 1e6
         for r in records if r.status == "ok" and r.compile_s is not None],
        dtype=np.float64,
    )


def summarize(engine: str, records: Sequence[SchemaRecord]) -> EngineSummary:
    """The summary row of one engine's records (one per schema)."""
    ran = [r for r in records if r.status in ("ok", "empty_language")]
    c_mean, c_p50, c_p99, _ = _stats(compile_ms(records))
    masks = mask_us(records)
    m_mean, m_p50, m_p99, m_max = _stats(masks)
    return EngineSummary(
        engine=engine,
        schemas=len(records),
        passing=sum(r.passed for r in records),
        empty_languages=sum(r.status == "empty_language" for r in records),
        compile_errors=sum(r.status == "compile_error" for r in records),
        timeouts=sum(r.status == "timeout" for r in records),
        errors=sum(r.status == "error" for r in records),
        valid_instances=sum(r.n_valid for r in ran),
        invalid_instances=sum(r.n_invalid for r in ran),
        valid_rejected=sum(r.valid_rejected for r in ran),
        invalid_accepted=sum(r.invalid_accepted for r in ran),
        compile_ms_mean=c_mean,
        compile_ms_p50=c_p50,
        compile_ms_p99=c_p99,
        masks=int(masks.size),
        mask_us_mean=m_mean,
        mask_us_p50=m_p50,
        mask_us_p99=m_p99,
        mask_us_max=m_max,
    )


def _paired(records: Sequence[SchemaRecord], baseline: Sequence[SchemaRecord]) -> tuple[
        list[SchemaRecord], list[SchemaRecord]]:
    """The ``ok`` records of the schemas both ran, in ``records``' order, and the baseline's
    records of the same schemas."""
    base = {r.schema: r for r in baseline if r.status == "ok"}
    mine = [r for r in records if r.status == "ok" and r.schema in base]
    return mine, [base[r.schema] for r in mine]


def ratio(engine: str, records: Sequence[SchemaRecord], baseline: Sequence[SchemaRecord]) -> Ratio:
    """``engine``'s times over the baseline's, on the schemas both have ``ok`` records for."""
    mine, theirs = _paired(records, baseline)
    a_mask, b_mask = mask_us(mine), mask_us(theirs)
    a_c, b_c = compile_ms(mine), compile_ms(theirs)
    a_t, b_t = total_ms(mine), total_ms(theirs)
    a = _stats(a_mask)
    b = _stats(b_mask)
    return Ratio(
        engine=engine,
        paired=len(mine),
        compile_mean=float(a_c.mean() / b_c.mean()) if a_c.size else float("nan"),
        mask_mean=a[0] / b[0] if a_mask.size and b_mask.size else float("nan"),
        mask_p50=a[1] / b[1] if a_mask.size and b_mask.size else float("nan"),
        mask_p99=a[2] / b[2] if a_mask.size and b_mask.size else float("nan"),
        total_mean=float(a_t.mean() / b_t.mean()) if a_t.size else float("nan"),
    )


def compile_bands(records: Sequence[SchemaRecord],
                  baseline: Sequence[SchemaRecord]) -> list[CompileBand]:
    """The paired schemas (both ``ok``) in ``BANDS`` of the baseline's compile time, slowest
    first; empty bands are left out."""
    pairs = [(b.compile_s, m.compile_s) for m, b in zip(*_paired(records, baseline), strict=True)
             if b.compile_s is not None and m.compile_s is not None]
    if not pairs:
        return []
    times = 1e3 * np.array(sorted(pairs, key=lambda pair: -pair[0]), dtype=np.float64)
    total = times[:, 0].sum()
    bands = []
    for lo, hi in BANDS:
        part = times[round(lo * len(times)):round(hi * len(times))]
        if len(part):
            bands.append(CompileBand(lo, hi, len(part), float(part[:, 0].mean()),
                                     float(part[:, 1].mean()), float(part[:, 0].sum() / total)))
    return bands


def environment(engine_specs: Sequence[str]) -> dict[str, Any]:
    """CPU model and count, GPU, OS, Python, numpy, numba, torch and every engine's package version."""
    from grammarsd.bench.engines import engine_class

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numba

    env: dict[str, Any] = {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
    }
    try:
        import torch

        env["torch"] = torch.__version__
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name()
    except ImportError:
        pass
    for spec in engine_specs:
        cls = engine_class(spec)
        env[cls.package] = cls.version()
    return env


def _fmt(x: float, digits: int = 1) -> str:
    return "–" if np.isnan(x) else f"{x:,.{digits}f}"


def markdown(
    summaries: Sequence[EngineSummary],
    ratios: Sequence[Ratio],
    warmups: Mapping[str, Mapping[str, float]],
    env: Mapping[str, Any],
    bands: Mapping[str, Sequence[CompileBand]] | None = None,
) -> str:
    """The report as Markdown: results, ratios to grammarsd, compile bands per peer, warm-up
    and environment."""
    lines = [
        "| engine | schemas | passing | empty | compile err | timeout | error | valid rejected "
        "| invalid accepted | compile ms mean | p50 | p99 | mask µs mean | p50 | p99 | max |",
        "|---|" + "---:|" * 15,
    ]
    for s in summaries:
        lines.append(
            f"| {s.engine} | {s.schemas} | {s.passing} | {s.empty_languages} | {s.compile_errors} "
            f"| {s.timeouts} "
            f"| {s.errors} | {s.valid_rejected}/{s.valid_instances} "
            f"| {s.invalid_accepted}/{s.invalid_instances} | {_fmt(s.compile_ms_mean)} "
            f"| {_fmt(s.compile_ms_p50)} | {_fmt(s.compile_ms_p99)} | {_fmt(s.mask_us_mean)} "
            f"| {_fmt(s.mask_us_p50)} | {_fmt(s.mask_us_p99)} | {_fmt(s.mask_us_max, 0)} |"
        )
    if ratios:
        lines += [
            "",
            f"Peer time / {BASELINE} time on the schemas both compiled and ran (< 1: peer faster):",
            "",
            "| engine | paired schemas | compile mean | mask mean | mask p50 | mask p99 "
            "| compile + masks mean |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in ratios:
            lines.append(
                f"| {r.engine} | {r.paired} | {_fmt(r.compile_mean, 3)} | {_fmt(r.mask_mean, 3)} "
                f"| {_fmt(r.mask_p50, 3)} | {_fmt(r.mask_p99, 3)} | {_fmt(r.total_mean, 3)} |"
            )
    for engine, rows in (bands or {}).items():
        if not rows:
            continue
        lines += [
            "",
            f"Compile time on the schemas paired with {engine}, by band of {BASELINE}'s "
            "compile time (slowest first):",
            "",
            f"| band | schemas | {BASELINE} ms mean | {engine} ms mean | {engine} / {BASELINE} "
            f"| share of {BASELINE}'s total |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for b in rows:
            lines.append(
                f"| {100 * b.lo:g}–{100 * b.hi:g} % | {b.schemas} | {_fmt(b.base_ms, 2)} "
                f"| {_fmt(b.peer_ms, 2)} | {_fmt(b.peer_ms / b.base_ms, 3)} "
                f"| {_fmt(100 * b.base_share)} % |"
            )
    if warmups:
        lines += [
            "",
            "One-time costs per worker start (median over starts), not in compile times:",
            "",
            "| engine | starts | tokenizer set-up s | warm-up s (JIT, first compile) |",
            "|---|---:|---:|---:|",
        ]
        for name, w in warmups.items():
            lines.append(
                f"| {name} | {int(w['starts'])} | {w['setup_s']:.2f} | {w['warmup_s']:.2f} |"
            )
    lines += ["", "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items())]
    return "\n".join(lines) + "\n"


def read_warmups(out_dir: Path) -> dict[str, dict[str, float]]:
    """Median set-up and warm-up seconds per engine from ``warmup.jsonl``."""
    path = out_dir / "warmup.jsonl"
    rows: dict[str, list[dict[str, Any]]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows.setdefault(row["engine"], []).append(row)
    return {
        name: {
            "starts": float(len(r)),
            "setup_s": float(np.median([x["setup_s"] for x in r])),
            "warmup_s": float(np.median([x["warmup_s"] for x in r])),
        }
        for name, r in rows.items()
    }


def plot_cdfs(records: Mapping[str, Sequence[SchemaRecord]], out_dir: Path) -> list[Path]:
    """Write ``mask_time_cdf.png`` (fraction of masks under x µs) and ``compile_time_cdf.png``
    (fraction of *all* schemas compiled in under x ms: a curve tops out at the compiled share)."""
    from grammarsd.bench.maskbench import MaskBenchError

    try:
        import matplotlib
    except ImportError:
        raise MaskBenchError(
            "MaskBench plots need matplotlib", hint="pip install 'grammarsd[bench]'"
        ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for fname, title, xlabel, values, norm in (
        ("mask_time_cdf.png", "MaskBench: mask time per token", "µs (log)", mask_us, False),
        ("compile_time_cdf.png", "MaskBench: time to first mask", "ms (log)", compile_ms, True),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, recs in records.items():
            v = np.sort(values(recs))
            if v.size == 0:
                continue
            total = len(recs) if norm else v.size
            ax.step(v, np.arange(1, v.size + 1) / total, where="post", label=name)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.01)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of schemas" if norm else "fraction of masks")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def write_report(
    cfg: MaskBenchConfig,
    records: Mapping[str, Sequence[SchemaRecord]],
    *,
    run_seconds: float | None = None,
) -> str:
    """Summarize ``records`` (engine -> one record per schema), write ``report.md``,
    ``environment.json`` and the plots under ``cfg.out_dir``; return the Markdown."""
    summaries = [summarize(name, recs) for name, recs in records.items()]
    base = records.get(BASELINE)
    ratios = (
        [ratio(n, r, base) for n, r in records.items() if n != BASELINE] if base is not None else []
    )
    bands = ({n: compile_bands(r, base) for n, r in records.items() if n != BASELINE}
             if base is not None else {})
    env = environment(cfg.engines)
    (cfg.out_dir / "environment.json").write_text(json.dumps(env, indent=2) + "\n", "utf-8")
    text = markdown(summaries, ratios, read_warmups(cfg.out_dir), env, bands)
    n = len(next(iter(records.values()), []))
    header = (
        f"# MaskBench: {n} schemas from {cfg.data_dir}, tokenizer {cfg.tokenizer}, "
        f"timeout {cfg.timeout_s:g} s"
        + ("" if run_seconds is None else f", this run {run_seconds:.0f} s")
        + "\n\n"
    )
    (cfg.out_dir / "report.md").write_text(header + text, encoding="utf-8")
    plot_cdfs(records, cfg.out_dir)
    return header + text


__all__ = [
    "BANDS",
    "BASELINE",
    "CompileBand",
    "EngineSummary",
    "Ratio",
    "compile_bands",
    "compile_ms",
    "environment",
    "markdown",
    "mask_us",
    "plot_cdfs",
    "ratio",
    "read_warmups",
    "summarize",
    "write_report",
]
