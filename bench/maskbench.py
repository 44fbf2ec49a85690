"""MaskBench: token-mask correctness and speed of grammarsd, xgrammar, llguidance and outlines-core.

    python bench/maskbench.py /work/shared/data/maskbench-dev --limit 200 --out /tmp/mb

Same as ``grammarsd bench maskbench``; see ``grammarsd.bench.maskbench`` for what is measured and
``docs/benchmarks.md`` for results.
"""

import sys

from grammarsd.bench.maskbench import main

if __name__ == "__main__":
    sys.exit(main())
