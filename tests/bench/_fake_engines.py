"""Engines with known answers and known faults, for testing the MaskBench runner itself.

Named to the runner as ``"_fake_engines:<Class>"`` (this folder is on ``sys.path`` under pytest).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from grammarsd.bench.engines import Engine, EngineMatcher


class _Fixed(EngineMatcher):
    """Every mask is all ones (``allow``) or all zeros; ``accept`` always answers ``accept``."""

    def __init__(self, bitmask: np.ndarray, allow: bool, accept: bool) -> None:
        self._bitmask, self._allow, self._accept = bitmask, allow, accept

    def fill(self) -> None:
        self._bitmask[:] = -1 if self._allow else 0

    def accept(self, token_id: int) -> bool:
        return self._accept

    def reset(self) -> None:
        pass


class FixedEngine(Engine):
    """Compiles anything; its matchers give the fixed answers of :class:`_Fixed`."""

    name = "fixed"
    package = "grammarsd"
    allow = True
    accept = True

    def compile(self, schema: Any) -> Any:
        return schema

    def matcher(self, compiled: Any, bitmask: np.ndarray) -> EngineMatcher:
        return _Fixed(bitmask, self.allow, self.accept)


class AllowAllEngine(FixedEngine):
    """Allows every token: valid instances pass, invalid ones are all accepted."""

    name = "allow-all"


class FaultyEngine(AllowAllEngine):
    """Fails on purpose, as a schema's ``title`` says: ``die`` (the process exits), ``hang``,
    ``raise`` (an unexpected exception)."""

    name = "faulty"
    refusals = (ValueError,)  # a KeyError is then an engine error, not a refusal

    def compile(self, schema: Any) -> Any:
        how = schema.get("title") if isinstance(schema, dict) else None
        if how == "die":
            os._exit(3)
        if how == "hang":
            time.sleep(600)
        if how == "raise":
            raise KeyError("boom")
        return schema


class LoggingEngine(AllowAllEngine):
    """Allows every token and appends a line to the file ``$FAKE_ENGINE_LOG`` per compile: its
    name and the schema as sorted JSON."""

    name = "logging-a"

    def compile(self, schema: Any) -> Any:
        with open(os.environ["FAKE_ENGINE_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{self.name} {json.dumps(schema, sort_keys=True)}\n")
        return schema


class OtherLoggingEngine(LoggingEngine):
    name = "logging-b"
