"""JSONSchemaBench prompt demos (``grammarsd/bench/jsonschemabench_demos.json``): two per subset.

The oracle is ``jsonschema`` (Draft 2020-12 with its format checker): every hand-written ``output``
must validate against its ``schema``, and a broken output must not. Demos taken from the benchmark
must be ``train`` rows of ``MANIFEST.tsv`` with the data file's exact schema, so no ``val`` (evaluation)
schema leaks into the prompt; those checks skip when the data directory is absent (CI machines).
Set ``GRAMMARSD_JSONSCHEMABENCH_DIR`` to point them at another copy of the data.
"""

from __future__ import annotations

import csv
import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

DATA_DIR = Path(
    os.environ.get(
        "GRAMMARSD_JSONSCHEMABENCH_DIR",
        Path(__file__).resolve().parents[3] / "shared" / "data" / "jsonschemabench",
    )
)

SUBSETS = (
    "Github_easy",
    "Github_hard",
    "Github_medium",
    "Github_trivial",
    "Github_ultra",
    "Glaiveai2K",
    "JsonSchemaStore",
    "Kubernetes",
    "Snowplow",
    "WashingtonPost",
)
CUSTOM_PREFIX = "custom-"
MAX_SCHEMA_BYTES = 800  # "small": the manifest's byte count of the data file

DEMOS: dict[str, Any] = json.loads(
    (files("grammarsd.bench") / "jsonschemabench_demos.json").read_text(encoding="utf-8")
)
# (subset, demo) for every demo, with readable test ids
ALL_DEMOS = [(subset, demo) for subset, demos in DEMOS["subsets"].items() for demo in demos]
DEMO_IDS = [f"{subset}/{demo['id']}" for subset, demo in ALL_DEMOS]
MANIFEST_DEMOS = [(s, d) for s, d in ALL_DEMOS if not d["id"].startswith(CUSTOM_PREFIX)]
MANIFEST_DEMO_IDS = [f"{s}/{d['id']}" for s, d in MANIFEST_DEMOS]


def validator(schema: Any) -> jsonschema.Draft202012Validator:
    """The oracle: check the schema itself, then build a format-checking 2020-12 validator."""
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict[str, str]]:
    """MANIFEST.tsv rows keyed by id (ids are unique across subsets); skips without the data."""
    path = DATA_DIR / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip(f"JSONSchemaBench data not found at {DATA_DIR}")
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    by_id = {row["id"]: row for row in rows}
    assert len(by_id) == len(rows), "manifest ids are not unique"
    return by_id


def test_system_message_is_plain_prose() -> None:
    message = DEMOS["system_message"]
    assert isinstance(message, str) and "JSON" in message and "schema" in message
    assert "{" not in message and len(message) < 300


def test_file_has_exactly_the_benchmark_subsets() -> None:
    assert set(DEMOS) == {"system_message", "subsets"}
    assert sorted(DEMOS["subsets"]) == sorted(SUBSETS)


def test_manifest_has_the_same_subsets(manifest: dict[str, dict[str, str]]) -> None:
    assert sorted({row["subset"] for row in manifest.values()}) == sorted(SUBSETS)


@pytest.mark.parametrize("subset", SUBSETS)
def test_two_distinct_demos_per_subset(subset: str) -> None:
    demos = DEMOS["subsets"][subset]
    assert len(demos) == 2
    assert all(set(demo) == {"id", "schema", "output"} for demo in demos)
    assert demos[0]["id"] != demos[1]["id"]


@pytest.mark.parametrize(("subset", "demo"), ALL_DEMOS, ids=DEMO_IDS)
def test_output_validates_against_schema(subset: str, demo: dict[str, Any]) -> None:
    schema, output = demo["schema"], demo["output"]
    assert schema.get("type") == "object" and isinstance(output, dict)
    assert output, "demo outputs must not be the trivial {}"
    assert set(schema.get("required", [])) <= set(output)
    assert len(json.dumps(schema)) < MAX_SCHEMA_BYTES
    validator(schema).validate(output)


@pytest.mark.parametrize(("subset", "demo"), ALL_DEMOS, ids=DEMO_IDS)
def test_validator_rejects_broken_output(subset: str, demo: dict[str, Any]) -> None:
    """Negative control: the same oracle rejects a non-object and, where possible, a missing key."""
    check = validator(demo["schema"])
    assert not check.is_valid(list(demo["output"].values()))
    required = demo["schema"].get("required", [])
    for key in required:
        broken = {k: v for k, v in demo["output"].items() if k != key}
        assert not check.is_valid(broken), f"removing required {key!r} went unnoticed"


def test_negative_control_covers_required_keys() -> None:
    """Most demos have required properties, so the missing-key control is not vacuous."""
    with_required = [d for _, d in ALL_DEMOS if d["schema"].get("required")]
    assert len(with_required) >= len(ALL_DEMOS) // 2


@pytest.mark.parametrize(("subset", "demo"), MANIFEST_DEMOS, ids=MANIFEST_DEMO_IDS)
def test_demo_schema_is_a_small_train_schema(
    subset: str, demo: dict[str, Any], manifest: dict[str, dict[str, str]]
) -> None:
    row = manifest.get(demo["id"])
    assert row is not None, f"{demo['id']} is neither in MANIFEST.tsv nor {CUSTOM_PREFIX}*"
    assert row["split"] == "train", f"{demo['id']} is a {row['split']} schema"
    assert int(row["bytes"]) < MAX_SCHEMA_BYTES
    path = DATA_DIR / row["subset"] / f"{demo['id']}.json"
    assert json.loads(path.read_text(encoding="utf-8")) == demo["schema"]


def test_subsets_with_small_train_schemas_use_their_own(
    manifest: dict[str, dict[str, str]],
) -> None:
    """A subset borrows demos from another only when it has no small train schema of its own."""
    has_small_train = {
        row["subset"]
        for row in manifest.values()
        if row["split"] == "train" and int(row["bytes"]) < MAX_SCHEMA_BYTES
    }
    for subset in has_small_train:
        sources = {manifest[demo["id"]]["subset"] for demo in DEMOS["subsets"][subset]}
        assert sources == {subset}, subset
