"""JSONSchemaBench report: coverage and efficiency per subset and engine, tables and plots.

Metrics (Geng et al. 2025), over the schemas of one subset:

* **declared coverage**: the engine compiled the schema (no refusal, error or compile timeout);
* **empirical coverage**: the output is valid (parses, validates with format checking);
* **compliance**: empirical over declared, i.e. valid among the compiled;
* rates are bootstrapped: ``B`` resamples of the subset's schemas with replacement (seeded),
  reported as the median ± standard deviation of the resampled rate, in percent;
* **GCT** (s), **TTFT** (s) and **TPOT** (ms): medians over the schemas where the step happened.

The unconstrained baseline compiles nothing, so its declared coverage is 100 %.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from grammarsd.bench.report import environment

if TYPE_CHECKING:
    from grammarsd.bench.jsonschemabench import JsbConfig, JsbRecord

ALL = "all"
"""The subset name of the rows over every selected schema."""


@dataclass(frozen=True)
class Rate:
    """A bootstrapped rate in percent: median and standard deviation over the resamples, and the
    plain rate of the sample itself."""

    median: float
    std: float
    observed: float

    def __str__(self) -> str:
        return "–" if np.isnan(self.median) else f"{self.median:.1f} ± {self.std:.1f}"


def bootstrap(hits: np.ndarray, base: np.ndarray, *, resamples: int = 1000, seed: int = 0) -> Rate:
    """The rate ``sum(hits) / sum(base)`` (percent) over schemas, bootstrapped by resampling the
    schemas; ``hits`` and ``base`` are 0/1 arrays of equal length (``hits`` implies ``base``).
    Resamples whose base is empty are left out; ``nan`` when the base is empty."""
    hits = np.asarray(hits, dtype=np.float64)
    base = np.asarray(base, dtype=np.float64)
    if base.sum() == 0:
        return Rate(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(base), size=(resamples, len(base)))
    num, den = hits[idx].sum(axis=1), base[idx].sum(axis=1)
    rates = 100.0 * num[den > 0] / den[den > 0]
    return Rate(float(np.median(rates)), float(rates.std()), 100.0 * hits.sum() / base.sum())


@dataclass(frozen=True)
class Row:
    """One (subset, engine) line of the report."""

    subset: str
    engine: str
    schemas: int
    declared: Rate
    empirical: Rate
    compliance: Rate
    unsupported: int
    compile_timeouts: int
    errors: int
    max_tokens: int
    decoding_timeouts: int
    gct_s: float
    ttft_s: float
    tpot_ms: float


def _median(values: Sequence[float | None]) -> float:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else float("nan")


def summarize(subset: str, engine: str, records: Sequence[JsbRecord]) -> Row:
    """The report line of ``records`` (one engine, one subset or all of them)."""
    compiled = np.array([r.compiled for r in records])
    valid = np.array([r.valid for r in records])
    ones = np.ones(len(records))
    return Row(
        subset=subset,
        engine=engine,
        schemas=len(records),
        declared=bootstrap(compiled, ones),
        empirical=bootstrap(valid, ones),
        compliance=bootstrap(valid & compiled, compiled),
        unsupported=sum(r.compile_status == "unsupported" for r in records),
        compile_timeouts=sum(r.compile_status == "compile_timeout" for r in records),
        errors=sum(r.compile_status == "error" or r.decode_status == "error" for r in records),
        max_tokens=sum(r.decode_status == "max_tokens" for r in records),
        decoding_timeouts=sum(r.decode_status == "decoding_timeout" for r in records),
        gct_s=_median([r.gct_s for r in records if r.compiled]),
        ttft_s=_median([r.ttft_s for r in records]),
        tpot_ms=_median([r.tpot_ms for r in records]),
    )


def rows(records: Mapping[str, Sequence[JsbRecord]]) -> list[Row]:
    """Every (subset, engine) line, subsets in order of appearance, then ``all`` per engine."""
    subsets = list(dict.fromkeys(r.subset for recs in records.values() for r in recs))
    out = [
        summarize(subset, engine, [r for r in recs if r.subset == subset])
        for subset in subsets
        for engine, recs in records.items()
    ]
    if len(subsets) > 1:
        out += [summarize(ALL, engine, recs) for engine, recs in records.items()]
    return out


def _f(x: float, digits: int) -> str:
    return "–" if np.isnan(x) else f"{x:,.{digits}f}"


def markdown(table: Sequence[Row]) -> str:
    """The table: one line per subset and engine."""
    lines = [
        "| subset | engine | schemas | declared % | empirical % | compliance % | unsupported "
        "| compile timeout | error | max tokens | decoding timeout | GCT s | TTFT s | TPOT ms |",
        "|---|---|" + "---:|" * 12,
    ]
    for r in table:
        lines.append(
            f"| {r.subset} | {r.engine} | {r.schemas} | {r.declared} | {r.empirical} "
            f"| {r.compliance} | {r.unsupported} | {r.compile_timeouts} | {r.errors} "
            f"| {r.max_tokens} | {r.decoding_timeouts} | {_f(r.gct_s, 3)} | {_f(r.ttft_s, 2)} | {_f(r.tpot_ms, 1)} |"
        )
    return "\n".join(lines) + "\n"


def plot(
    table: Sequence[Row], records: Mapping[str, Sequence[JsbRecord]], out_dir: Path
) -> list[Path]:
    """``coverage.png`` (declared and empirical coverage per subset and engine) and ``tpot.png``
    (TPOT distribution per engine); returns the paths written."""
    try:
        import matplotlib
    except ImportError:
        from grammarsd.bench.jsonschemabench import JsonSchemaBenchError

        raise JsonSchemaBenchError(
            "JSONSchemaBench plots need matplotlib", hint="pip install 'grammarsd[bench]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(records)
    subsets = list(dict.fromkeys(r.subset for r in table))
    width = 0.8 / max(1, len(engines))
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(subsets) + 4), 4.2), sharey=True)
    for ax, metric in zip(axes, ("declared", "empirical"), strict=True):
        for k, engine in enumerate(engines):
            by = {r.subset: getattr(r, metric) for r in table if r.engine == engine}
            xs = np.arange(len(subsets)) + (k - (len(engines) - 1) / 2) * width
            ax.bar(
                xs,
                [by[s].median for s in subsets],
                width,
                yerr=[by[s].std for s in subsets],
                label=engine,
                capsize=2,
            )
        ax.set_xticks(np.arange(len(subsets)), subsets, rotation=20)
        ax.set_title(f"{metric} coverage")
        ax.set_ylim(0, 105)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("% of schemas (bootstrap median ± std)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(engines), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    coverage = out_dir / "coverage.png"
    fig.savefig(coverage, dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(engines) + 2), 4))
    data = [[r.tpot_ms for r in records[e] if r.tpot_ms is not None] for e in engines]
    ax.boxplot([d if d else [np.nan] for d in data], showfliers=False)
    ax.set_xticks(range(1, len(engines) + 1), engines, rotation=15)
    ax.set_ylabel("time per output token (ms)")
    ax.set_title("TPOT per engine (all subsets; boxes: quartiles, whiskers: 1.5 IQR)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    tpot = out_dir / "tpot.png"
    fig.savefig(tpot, dpi=120)
    plt.close(fig)
    return [coverage, tpot]


def write_report(
    cfg: JsbConfig, records: Mapping[str, Sequence[JsbRecord]], *, run_seconds: float
) -> str:
    """Write ``report.md``, ``environment.json`` and the plots under ``cfg.out_dir``; returns the
    Markdown."""
    from grammarsd.bench.jsonschemabench import UNCONSTRAINED

    table = rows(records)
    env: dict[str, Any] = environment([e for e in cfg.engines if e != UNCONSTRAINED])
    env["model"] = cfg.protocol.model or "smollm2 (default)"
    env["device"] = cfg.protocol.device
    env["torch_threads"] = cfg.threads
    env["workers"] = cfg.workers
    (cfg.out_dir / "environment.json").write_text(json.dumps(env, indent=2) + "\n", "utf-8")
    p = cfg.protocol
    text = (
        f"# JSONSchemaBench ({cfg.split} split, model {env['model']} on {p.device})\n\n"
        f"Greedy, at most {p.max_tokens} tokens, compile timeout {p.compile_timeout_s:g} s, "
        f"generation timeout {p.generation_timeout_s:g} s; rates are bootstrap median ± std over "
        "1000 resamples.\n\n"
        + markdown(table)
        + f"\nThis run: {run_seconds:.0f} s wall. Environment: "
        + ", ".join(f"{k} {v}" for k, v in env.items())
        + "\n"
    )
    (cfg.out_dir / "report.md").write_text(text, encoding="utf-8")
    plot(table, records, cfg.out_dir)
    return text


__all__ = [
    "ALL",
    "Rate",
    "Row",
    "bootstrap",
    "markdown",
    "plot",
    "rows",
    "summarize",
    "write_report",
]
