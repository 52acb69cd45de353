"""Every real Debezium sample (tests/fixtures/debezium-samples) through the whole pipeline.

The sample scenario lands in three steps, with an incremental `dbt build` after each, and the
silver `t_types` of every variant is compared with the PostgreSQL state at that point:
1. snapshot row 1, insert row 2, update with the unchanged-TOAST placeholder for `big`;
2. update with REPLICA IDENTITY FULL, then the primary-key change 2 -> 3 (delete + create at
   one LSN, the create carrying the placeholder: `big` must come from the old key);
3. delete of row 3 and the truncate (dropped by the flattened variants and by `noisy`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt_scratch_project import make_project
from lakehouse import REPO, read_export, run_dbt

pytestmark = pytest.mark.dbt

SAMPLES = REPO / "tests" / "fixtures" / "debezium-samples"
TOPIC = "dbz.public.t_types"

T_TYPES = {
    "key": ["id"],
    "columns": {
        "id": "int",
        "amount": "numeric(12,2)",
        "d": "date",
        "ts": "timestamp",
        "tstz": "timestamptz",
        "flag": "boolean",
        "note": "text",
        "doc": "jsonb",
        "uid": "uuid",
        "bin": "bytea",
        "tags": "text[]",
        "big": "text",
    },
}

VARIANTS = {
    "default": {"shape": "envelope"},
    "nosch": {"shape": "envelope"},
    "noisy": {"shape": "envelope"},
    "strprec": {
        "shape": "envelope",
        "decimal_handling_mode": "string",
        "time_precision_mode": "connect",
    },
    "dbliso": {
        "shape": "envelope",
        "decimal_handling_mode": "double",
        "time_precision_mode": "isostring",
    },
    "unwrap_rw": {"shape": "flattened"},
    "unwrap_rwt": {
        "shape": "flattened",
        "decimal_handling_mode": "string",
        "time_precision_mode": "isostring",
    },
}
KEEPS_ROW_1 = {"noisy", "unwrap_rw", "unwrap_rwt"}  # no truncate event in these files


def records(variant: str) -> list[dict]:
    path = SAMPLES / f"{variant}.jsonl"
    assert path.exists(), f"Debezium samples not found at {SAMPLES}"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def payload(value: str) -> dict:
    parsed = json.loads(value)
    return parsed["payload"] if isinstance(parsed, dict) and "schema" in parsed else parsed


def op_and_id(record: dict) -> tuple[str, object]:
    event = payload(record["value"])
    if "__op" in event:
        return ("d" if event["__deleted"] == "true" else event["__op"]), event.get("id")
    image = event.get("after") or event.get("before") or {}
    return event["op"], image.get("id")


def stages(variant: str) -> list[list[str]]:
    """Landing values (tombstones dropped, as the S3 sink does) split into the three steps."""
    steps: list[list[str]] = [[], [], []]
    step = 0
    for record in records(variant):
        if record["topic"] != TOPIC or record["value"] is None:
            continue
        steps[step].append(record["value"])
        op, key = op_and_id(record)
        if step == 0 and op == "u":
            step = 1
        elif step == 1 and op == "c" and key == 3:
            step = 2
    return steps


def inserted(variant: str, key: int) -> dict:
    for record in records(variant):
        if record["topic"] == TOPIC and record["value"]:
            event = payload(record["value"])
            image = event if "__op" in event else event.get("after")
            if image and image.get("id") == key:
                return image
    raise AssertionError(f"no insert of id {key} in {variant}")


def expected_states(variant: str) -> list[dict[int, dict]]:
    big = inserted(variant, 1)["big"]
    ts1 = "2024-02-29T13:14:15.123000" if variant == "strprec" else "2024-02-29T13:14:15.123456"
    row1 = {
        "id": 1, "amount": "12345.67", "d": "2024-02-29", "ts": ts1,
        "tstz": "2024-02-29T11:14:15.123456Z", "flag": True, "note": "snap",
        "doc": {"a": 1, "b": [1, 2]}, "uid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "bin": "3q2+7w==", "tags": ["x", "y"], "big": big,
    }  # fmt: skip
    row2 = {
        "id": 2, "amount": "-0.50", "d": "1970-01-01", "ts": "2000-01-01T00:00:00.000000",
        "tstz": "2000-01-01T00:00:00.000000Z", "flag": False, "note": "upd-default", "doc": [],
        "uid": inserted(variant, 2)["uid"], "bin": "AA==", "tags": [], "big": big,
    }  # fmt: skip
    row3 = {**row2, "id": 3, "note": "upd-full"}
    return [{1: row1, 2: row2}, {1: row1, 3: row3}, {1: row1} if variant in KEEPS_ROW_1 else {}]


def lake_rows(export_dir: Path, variant: str) -> dict[int, dict]:
    state = {}
    for row in read_export(export_dir, f"silver.{variant}"):
        canonical = {name: row[name] for name in T_TYPES["columns"]}
        # `timestamp` (no zone) columns: compare the wall-clock digits
        if canonical["ts"] is not None:
            canonical["ts"] = canonical["ts"].removesuffix("Z")
        canonical["doc"] = json.loads(row["doc"]) if row["doc"] is not None else None
        canonical["tags"] = json.loads(row["tags"]) if row["tags"] is not None else None
        state[row["id"]] = canonical
    return state


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("samples")
    project = make_project(
        base / "project",
        {name: {**T_TYPES, **cfg, "topic": f"{name}.t_types"} for name, cfg in VARIANTS.items()},
    )
    landing = base / "landing"
    results = []
    for step in range(3):
        for variant in VARIANTS:
            folder = landing / "topics" / f"{variant}.t_types" / "partition=0"
            folder.mkdir(parents=True, exist_ok=True)
            offset = sum(len(stages(variant)[s]) for s in range(step))
            lines = stages(variant)[step]
            name = f"{variant}.t_types+0+{offset:010d}.json"
            (folder / name).write_text("".join(line + "\n" for line in lines))
        export_dir = base / "exports" / f"step{step + 1}"
        run_dbt(
            ["build"],
            lakehouse=base / "lakehouse",
            project_dir=project,
            variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
        )
        results.append(export_dir)
    return results


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("step", [0, 1, 2], ids=["toast-update", "pk-change", "delete-truncate"])
def test_sample_variant_reaches_source_state(exports: list[Path], variant: str, step: int) -> None:
    expected = expected_states(variant)[step]
    actual = lake_rows(exports[step], variant)
    assert actual == expected
