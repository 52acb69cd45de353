"""A declared column whose type changes at the source, through `dbt build` (issue 37).

With schemas on, each event carries its own schema: a declared `smallint` widened to `int` and
a `numeric(5,2)` widened to `numeric(7,2)` at the source must widen bronze and silver in place,
and later events must arrive whole (they were all rejected as `cannot decode level as smallint`,
with only a warning, while silver kept the old values). A type the declaration cannot follow
stops the build naming the table, the column and both types. With schemas off, a change whose
value the declared type cannot hold is rejected, and the build fails instead of leaving that
key stale in silver.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from connect_events import connect_field as field
from connect_events import decimal_base64, envelope, wrapped
from dbt_scratch_project import bronze_model, make_project
from lakehouse import column_types, read_export, run_dbt

pytestmark = pytest.mark.dbt

DECLARED = {"id": "int", "level": "smallint", "points": "numeric(5,2)"}
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def points(precision: int, scale: int) -> dict[str, Any]:
    params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return field("points", "bytes", DECIMAL, **params)


BEFORE = [field("id", "int32"), field("level", "int16"), points(5, 2)]
AFTER = [field("id", "int32"), field("level", "int32"), points(7, 2)]
NEW_SCALE = [field("id", "int32"), field("level", "int32"), points(9, 4)]


def event(op: str, key: int, level: int, amount: str, lsn: int, scale: int = 2) -> dict:
    row = {"id": key, "level": level, "points": decimal_base64(Decimal(amount), scale)}
    return envelope(op, row, lsn)


def land(landing: Path, table: str, offset: int, lines: list[str]) -> None:
    topic = f"scratch.{table}"
    folder = landing / "topics" / topic / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{topic}+0+{offset:010d}.json").write_text("".join(f"{x}\n" for x in lines))


def silver(export: Path, table: str) -> dict[int, tuple]:
    return {
        r["id"]: (r["level"], Decimal(str(r["points"])))
        for r in read_export(export, f"silver.{table}")
    }


def test_a_declared_type_widened_at_the_source_flows_through(tmp_path: Path) -> None:
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    tables = {
        "members": {"topic": "scratch.members", "key": ["id"], "columns": DECLARED},
        "members_nosch": {"topic": "scratch.members_nosch", "key": ["id"], "columns": DECLARED},
    }
    project = make_project(tmp_path / "project", tables)

    def build(export: str, *, data_tests: bool = False, check: bool = True) -> tuple[Path, Any]:
        """A plain `dbt build`; the data tests (a fifth of a build) only where they matter."""
        export_dir = lakehouse / "exports" / export
        variables = {"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)}
        skipped = ["unit_test"] + ([] if data_tests else ["test"])
        result = run_dbt(
            ["build", "--exclude-resource-type", *skipped],
            lakehouse=lakehouse,
            project_dir=project,
            variables=variables,
            check=check,
        )
        return export_dir, result

    first = [event("c", 1, 7, "1.25", lsn=1), event("c", 2, -7, "-999.99", lsn=2)]
    land(landing, "members", 0, [wrapped(e, BEFORE) for e in first])
    land(landing, "members_nosch", 0, [json.dumps(e) for e in first])
    build("first")

    # ALTER ... smallint -> int, numeric(5,2) -> numeric(7,2): values only the new types hold.
    later = [event("u", 1, 70000, "12345.67", lsn=3), event("c", 3, -40000, "-0.01", lsn=4)]
    land(landing, "members", 2, [wrapped(e, AFTER) for e in later])
    widened, _ = build("widened")
    assert silver(widened, "members") == {
        1: (70000, Decimal("12345.67")),
        2: (-7, Decimal("-999.99")),
        3: (-40000, Decimal("-0.01")),
    }
    for relation in (f"bronze.{bronze_model('members')}", "silver.members"):
        types = column_types(widened, relation)
        assert (types["level"], types["points"]) == ("int", "decimal(7,2)"), relation
    rejected = read_export(widened, f"bronze.{bronze_model('members')}")
    assert [r["_cdc_reject_reason"] for r in rejected] == [None] * 4

    # A new scale contradicts the declaration: the build stops, naming table, column, types.
    # Schemas off, a value the declared smallint cannot hold is rejected, and its key must not
    # stay stale in silver in silence: the build fails (cdc_no_undecodable_changes).
    land(landing, "members", 4, [wrapped(event("u", 2, 1, "1.2345", lsn=5, scale=4), NEW_SCALE)])
    land(landing, "members_nosch", 2, [json.dumps(later[0])])
    _, failed = build("stopped", data_tests=True, check=False)
    assert failed.returncode != 0
    assert (
        "scratch.members: column points is declared numeric(5,2) (decimal(5,2)), but its events "
        "carry decimal(9,4)"
    ) in failed.stdout, failed.stdout[-3000:]
    failures = [line for line in failed.stdout.splitlines() if " FAIL " in line]
    assert any(
        f"cdc_no_undecodable_changes_{bronze_model('members_nosch')}" in line for line in failures
    ), failed.stdout[-3000:]
    skipped = [line for line in failed.stdout.splitlines() if " SKIP " in line]
    assert any("silver.members_nosch" in line for line in skipped), failed.stdout[-3000:]
