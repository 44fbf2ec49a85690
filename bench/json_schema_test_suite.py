"""Judge ``schema_to_grammar`` with the official JSON Schema Test Suite (refused, or exactly right).

    python bench/json_schema_test_suite.py [--suite DIR] [--drafts draft7 draft2020-12] [--out DIR]
    python bench/json_schema_test_suite.py --maskbench DIR [--sample N] [--any-order] [--matcher]

Same as ``grammarsd bench test-suite`` (plus the MaskBench sample mode); see
``grammarsd.bench.test_suite`` for what is judged and ``docs/json-schema.md`` for results.
"""

import sys

from grammarsd.bench.test_suite import main

if __name__ == "__main__":
    sys.exit(main())
