"""The same project on Apache Hudi: `CDC_TABLE_FORMAT=hudi` (the profile's HoodieCatalog and
extension, dbt_project.yml's file_format) builds bronze, silver, histories, gold, seeds and the
working tables as Hudi tables with the same `cdc_merge` / `cdc_history` logic.

The sample, landed in two steps (each topic's first and last file, then the files between:
late events across runs, so silver takes the whole-log replace path, the one that on Hudi
deletes the keys the result lacks in a MERGE of its own, since Hudi ignores `when not matched
by source`), with the data tests on the second, must reach the expected source state, every
column of it: the second build rewrites files the first wrote, and Hudi's row writer once made
those read back with null arrays (see profiles/profiles.yml). Silver
and history tables carry their record key (silver: the primary key; history: the key and
`_cdc_valid_from_seq`) and commit-time ordering. Then Hudi's maintenance: clustering
(`cdc_compact`) and cleaning (`cdc_expire_snapshots`) on a silver table leave its rows as they
were; `cdc_remove_orphan_files` refuses with the reason. And a create on Hudi (a drop, then a
create) clears the files a killed create left without a catalog entry. (The CI subset for
Hudi; the oracle on Hudi runs with `CDC_TABLE_FORMAT=hudi make oracle`.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from lakehouse import (
    copy_landing,
    first_and_last_files,
    history_state_problems,
    run_dbt,
    source_state_problems,
    use_table_format,
)


def build(
    lakehouse: Path, landing: Path, export: str, *, data_tests: bool = False
) -> tuple[Path, str]:
    """Build (with the data tests: none may fail). Returns the export folder and dbt's output."""
    export_dir = lakehouse / "exports" / export
    skipped = ["unit_test"] + ([] if data_tests else ["test"])
    result = run_dbt(
        ["build", "--exclude-resource-type", *skipped],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
        check=not data_tests,
    )
    failing = failing_tests(result.stdout)
    if data_tests:
        others = re.findall(r"Failure in (?!test )\S+ \S+", result.stdout)
        assert not failing and not others, "\n".join(result.stdout.splitlines()[-80:])
    return export_dir, result.stdout


def failing_tests(output: str) -> set[str]:
    """Names of the data tests dbt reported as failed ("Failure in test <name> (...)")."""
    return set(re.findall(r"Failure in test (\S+) \(", output))


def show(lakehouse: Path, sql: str) -> list[dict[str, Any]]:
    """The rows of a query (dbt show's JSON output)."""
    out = run_dbt(
        ["show", "--inline", sql, "--limit", "-1", "--output", "json", "--log-format", "json"],
        lakehouse=lakehouse,
    ).stdout
    for line in out.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        preview = event.get("data", {}).get("preview")
        if preview is not None:
            return json.loads(preview)
    raise AssertionError(f"no rows in dbt show's output:\n{out[-2000:]}")


@pytest.fixture(scope="module")
def on_hudi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    previous = use_table_format("hudi")
    try:
        lakehouse = tmp_path_factory.mktemp("hudi")
        landing = lakehouse / "landing"
        copy_landing(landing, first_and_last_files())
        build(lakehouse, landing, "step1")
        # What a build killed while Hudi created a table leaves (its tables are dropped, then
        # created): files without a catalog entry, here where step 2 creates customers' batch.
        orphan = lakehouse / "warehouse" / "silver.db" / "customers__cdc_batch"
        (orphan / ".hoodie").mkdir(parents=True)
        (orphan / "part-0000.parquet").write_bytes(b"left by a killed run")
        copy_landing(landing)
        step2, step2_output = build(lakehouse, landing, "step2", data_tests=True)
        properties = {
            table: show(lakehouse, f"show tblproperties {table}")
            for table in ("silver.order_details", "silver.order_details_history")
        }
        customers = "silver.customers"
        columns = "customer_id, company_name, credit_limit, notes, tags, _cdc_seq, _cdc_file"
        checksum = f"select count(*) as n, sum(hash({columns})) as h from {customers}"
        rows_before = show(lakehouse, checksum)
        compact = run_dbt(
            ["run-operation", "cdc_compact", "--args", f"{{tables: [{customers}]}}"],
            lakehouse=lakehouse,
        )
        clean = run_dbt(
            ["run-operation", "cdc_expire_snapshots", "--args",
             f"{{tables: [{customers}], retain_last: 1}}"],
            lakehouse=lakehouse,
        )  # fmt: skip
        rows_after = show(lakehouse, checksum)
        orphans = run_dbt(
            ["run-operation", "cdc_remove_orphan_files", "--args", f"{{tables: [{customers}]}}"],
            lakehouse=lakehouse,
            check=False,
        )
        return {
            "lakehouse": lakehouse,
            "step2": step2,
            "step2_output": step2_output,
            "properties": properties,
            "rows": (rows_before, rows_after),
            "compact": compact.stdout,
            "clean": clean.stdout,
            "orphans": orphans,
        }
    finally:
        use_table_format(previous)


def test_the_tables_are_hudi_tables(on_hudi: dict[str, Any]) -> None:
    warehouse = on_hudi["lakehouse"] / "warehouse"
    for schema in ("bronze", "silver", "gold", "audit"):
        tables = [t for t in (warehouse / f"{schema}.db").iterdir() if t.is_dir()]
        assert tables, schema
        for table in tables:
            assert (table / ".hoodie").is_dir(), table
            assert not (table / "metadata").exists(), f"{table}: Iceberg metadata"


def test_silver_and_history_carry_their_record_keys(on_hudi: dict[str, Any]) -> None:
    silver, history = (
        {row["key"]: row["value"] for row in on_hudi["properties"][table]}
        for table in ("silver.order_details", "silver.order_details_history")
    )

    def values(properties: dict[str, str], *names: str) -> set[str]:
        """Values of the properties named `name` or ending in `.name` (Hudi keeps the table
        options under `option.` too)."""
        return {
            v
            for k, v in properties.items()
            if k in names or k.endswith(tuple(f".{n}" for n in names))
        }

    keys = ("primaryKey", "recordkey.field")
    assert "order_id,product_id" in values(silver, *keys), silver
    assert "order_id,product_id,_cdc_valid_from_seq" in values(history, *keys), history
    for properties in (silver, history):
        assert "COMMIT_TIME_ORDERING" in values(properties, "record.merge.mode"), properties


def test_late_files_reach_the_source_state(on_hudi: dict[str, Any]) -> None:
    problems = source_state_problems(on_hudi["step2"])
    assert not problems, "the Hudi lake differs from the source:\n" + "\n".join(problems)


def test_no_data_test_fails(on_hudi: dict[str, Any]) -> None:
    assert "PASS=" in on_hudi["step2_output"]
    assert not failing_tests(on_hudi["step2_output"])


def test_a_create_clears_what_a_killed_create_left(on_hudi: dict[str, Any]) -> None:
    output = on_hudi["step2_output"]
    assert "silver.customers__cdc_batch: deleted " in output, output[-3000:]
    assert not (on_hudi["lakehouse"] / "warehouse" / "silver.db" / "customers__cdc_batch").exists()


def test_history_current_versions_equal_the_source(on_hudi: dict[str, Any]) -> None:
    problems = history_state_problems(on_hudi["step2"])
    assert not problems, "the Hudi histories differ from the source:\n" + "\n".join(problems)


def test_maintenance_runs_on_hudi_and_keeps_the_rows(on_hudi: dict[str, Any]) -> None:
    assert "silver.customers: clustering" in on_hudi["compact"], on_hudi["compact"][-2000:]
    assert "silver.customers:" in on_hudi["clean"], on_hudi["clean"][-2000:]
    before, after = on_hudi["rows"]
    assert before == after
    orphans = on_hudi["orphans"]
    assert orphans.returncode != 0
    assert "Hudi has no such procedure" in orphans.stdout + orphans.stderr
