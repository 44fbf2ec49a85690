"""Benchmarks of grammarsd against its peers (xgrammar, llguidance, outlines-core).

``maskbench``  the MaskBench runner: per-schema token-mask correctness and speed, resumable
``engines``    one adapter per engine behind ``Engine`` / ``EngineMatcher``
``report``     summaries, ratios to grammarsd, Markdown tables and CDF plots

Peers are optional (the ``bench`` extra); an engine is imported only inside the worker that runs it.
Run it as ``grammarsd bench maskbench DATA_DIR`` or ``python bench/maskbench.py DATA_DIR``.
"""

from grammarsd.bench.maskbench import (
    MaskBenchConfig,
    MaskBenchError,
    SchemaRecord,
    run_maskbench,
)

__all__ = ["MaskBenchConfig", "MaskBenchError", "SchemaRecord", "run_maskbench"]
