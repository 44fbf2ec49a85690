"""MaskBench's warm-up loads every numba kernel a run goes on to use.

A kernel first called inside a timed compile or mask costs its load from numba's disk cache
there (20-40 ms) or, on a cold cache, its whole JIT compile (~1 s): one-time costs the
benchmark reports apart, in the warm-up. The oracle is numba's own record of what each
dispatcher has compiled: in a fresh process, after the warm-up, running the JSON Schema Test
Suite's draft 2020-12 schemas (compile, then a mask per token of each valid instance) must add
no signature to any dispatcher of the package.
"""

from __future__ import annotations

import json
import subprocess
import sys

from grammarsd.bench.test_suite import DEFAULT_SUITE

_PROBE = r"""
import importlib, json, pkgutil, sys
from pathlib import Path
import numpy as np
from numba.core.registry import CPUDispatcher
import grammarsd
from grammarsd.bench.engines import GrammarsdEngine
from grammarsd.bench.maskbench import Instance, SchemaCase, _warm_up, run_case
from grammarsd.bench.test_suite import load_suite_file, suite_files
from grammarsd.testing import hf_tokenizer

kernels = {}
for mod in pkgutil.walk_packages(grammarsd.__path__, "grammarsd."):
    if not mod.name.endswith("__main__"):
        for name, obj in vars(importlib.import_module(mod.name)).items():
            if isinstance(obj, CPUDispatcher):
                kernels[f"{obj.py_func.__module__}.{obj.py_func.__name__}"] = obj
tokenizer = hf_tokenizer("llama3")
engine = GrammarsdEngine(tokenizer)
_warm_up(engine, tokenizer)
loaded = {name: len(k.signatures) for name, k in kernels.items()}
bitmask = np.zeros((1, (engine.vocab_size + 31) // 32), dtype=np.int32)
ran = 0
for path in suite_files(Path(sys.argv[1]), "draft2020-12"):
    for case in load_suite_file(path):
        valid = tuple(Instance(True, tuple(tokenizer.encode(json.dumps(t["data"]),
                                                            add_special_tokens=False)))
                      for t in case["tests"] if t["valid"])
        record = run_case(engine, SchemaCase(path.name, case["schema"], valid), bitmask)
        ran += record.compile_s is not None
later = sorted(name for name, k in kernels.items() if len(k.signatures) != loaded[name])
print(json.dumps({"kernels": len(kernels), "ran": ran, "later": later}))
"""


def test_warm_up_loads_every_kernel_the_run_uses() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(DEFAULT_SUITE)], check=True,
                          capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kernels"] > 50 and report["ran"] > 250  # the probe saw the package and ran
    assert report["later"] == []
