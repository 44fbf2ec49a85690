"""Benchmarks of grammarsd against its peers (xgrammar, llguidance, outlines-core).

``maskbench``        the MaskBench runner: per-schema token-mask correctness and speed, resumable
``jsonschemabench``  JSONSchemaBench: one model and decode loop for every engine; coverage, GCT,
                     TTFT, TPOT (``jsonschemabench_report``: metrics, tables, plots)
``test_suite``       the JSON Schema Test Suite as judge of the JSON Schema compiler
``engines``          one adapter per engine behind ``Engine`` / ``EngineMatcher``, and
                     ``EngineConstraint`` to drive any engine through the decode loop
``workers``          worker processes with timeouts, crash recovery and restarts
``report``           MaskBench summaries, ratios to grammarsd, Markdown tables and CDF plots

Peers are optional (the ``bench`` extra); an engine is imported only inside the worker that runs it.
Run them as ``grammarsd bench maskbench DATA_DIR``, ``grammarsd bench jsonschemabench --data DIR``
and ``grammarsd bench test-suite``.
"""

from grammarsd.bench.maskbench import (
    MaskBenchConfig,
    MaskBenchError,
    SchemaRecord,
    run_maskbench,
)

__all__ = ["MaskBenchConfig", "MaskBenchError", "SchemaRecord", "run_maskbench"]
