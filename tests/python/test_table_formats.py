"""The same project on Delta Lake: `CDC_TABLE_FORMAT=delta` (one setting: the profile's catalog
and extension, dbt_project.yml's file_format) builds bronze, silver, histories, gold, seeds and
the working tables as Delta tables with the same `cdc_merge` / `cdc_history` logic.

The sample, landed in two steps as test_pipeline_e2e's `stepwise` (each topic's first and last
file, then the files between: late events across runs, the whole-log replace path) with the
data tests on the second, must reach the expected source state; then Delta's maintenance
(`cdc_compact`: OPTIMIZE and REORG ... APPLY (PURGE); `cdc_remove_orphan_files`: VACUUM ...
DRY RUN) runs on a bronze and a silver table, and a build after a landing file was delivered
again under a new name changes no row, and commits nothing to the tables of other topics.
(Delta builds take about twice Iceberg's time here, so this is the CI subset; the oracle on
Delta runs with `CDC_TABLE_FORMAT=delta make oracle`.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from lakehouse import (
    copy_landing,
    first_and_last_files,
    history_state_problems,
    read_export,
    run_dbt,
    source_state_problems,
    use_table_format,
)

ORDERS_TOPIC = "northwind.public.orders"


def build(lakehouse: Path, landing: Path, export: str, *, data_tests: bool = False) -> Path:
    export_dir = lakehouse / "exports" / export
    skipped = ["unit_test"] + ([] if data_tests else ["test"])
    run_dbt(
        ["build", "--exclude-resource-type", *skipped],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
    )
    return export_dir


def delta_versions(lakehouse: Path, schema: str = "silver") -> dict[str, int]:
    """Commits (`_delta_log/<version>.json`) of every table of a schema (silver: silver and
    history tables)."""
    tables = (lakehouse / "warehouse" / f"{schema}.db").iterdir()
    return {t.name: len(list((t / "_delta_log").glob("*.json"))) for t in tables if t.is_dir()}


@pytest.fixture(scope="module")
def on_delta(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    previous = use_table_format("delta")
    try:
        lakehouse = tmp_path_factory.mktemp("delta")
        landing = lakehouse / "landing"
        # each topic's first and last file, then the rest: late files across runs
        copy_landing(landing, first_and_last_files())
        build(lakehouse, landing, "step1")
        copy_landing(landing)
        step2 = build(lakehouse, landing, "step2", data_tests=True)
        before = delta_versions(lakehouse)
        # bronze (its loaded-files ledger no longer describes it after a commit), a silver
        # table and its tombstones (MERGEs left deletion vectors in them)
        bronze_before = delta_versions(lakehouse, "bronze")
        compacted_tables = (
            "[bronze.bronze_northwind__orders, silver.customers, silver.customers__cdc_tombstones]"
        )
        compact = run_dbt(
            ["run-operation", "cdc_compact", "--args", f"{{tables: {compacted_tables}}}"],
            lakehouse=lakehouse,
        )
        orphans = run_dbt(
            ["run-operation", "cdc_remove_orphan_files", "--args",
             "{tables: [silver.customers], dry_run: true}"],
            lakehouse=lakehouse,
        )  # fmt: skip
        bronze_after = delta_versions(lakehouse, "bronze")
        # A file of the orders topic delivered again under a new name: the only new landing
        files = sorted((landing / "topics" / ORDERS_TOPIC).rglob("*.json"))
        shutil.copyfile(files[-1], files[-1].with_name(f"{ORDERS_TOPIC}+0+0000090000.json"))
        replayed = build(lakehouse, landing, "replayed")
        after = delta_versions(lakehouse)
        return {
            "lakehouse": lakehouse,
            "step2": step2,
            "replayed": replayed,
            "versions": (before, after),
            "bronze_versions": (bronze_before, bronze_after),
            "compact": compact.stdout,
            "orphans": orphans.stdout,
        }
    finally:
        use_table_format(previous)


def lake_rows(export_dir: Path) -> dict[str, list[dict]]:
    """Silver and gold rows (not bronze, which keeps every landed line, nor the run audit)."""
    return {
        folder.name: sorted(
            read_export(export_dir, folder.name), key=lambda r: json.dumps(r, sort_keys=True)
        )
        for folder in sorted(p for p in export_dir.iterdir() if p.is_dir())
        if not folder.name.startswith(("audit.", "bronze.", "cdc."))
    }


def assert_matches_expected(export_dir: Path) -> None:
    problems = source_state_problems(export_dir)
    assert not problems, "the Delta lake differs from the source:\n" + "\n".join(problems)


def test_the_tables_are_delta_tables(on_delta: dict[str, Any]) -> None:
    warehouse = on_delta["lakehouse"] / "warehouse"
    for schema in ("bronze", "silver", "gold", "audit"):
        tables = [t for t in (warehouse / f"{schema}.db").iterdir() if t.is_dir()]
        assert tables, schema
        for table in tables:
            assert (table / "_delta_log").is_dir(), table
            assert not (table / "metadata").exists(), f"{table}: Iceberg metadata"
    # silver tables are created with deletion vectors on (Delta's merge-on-read)
    log = (warehouse / "silver.db" / "customers" / "_delta_log" / f"{0:020}.json").read_text()
    assert '"delta.enableDeletionVectors":"true"' in log, log[:2000]


def test_late_files_reach_the_source_state(on_delta: dict[str, Any]) -> None:
    assert_matches_expected(on_delta["step2"])


def test_history_current_versions_equal_the_source(on_delta: dict[str, Any]) -> None:
    problems = history_state_problems(on_delta["step2"])
    assert not problems, "the Delta histories differ from the source:\n" + "\n".join(problems)


def test_a_build_with_nothing_new_commits_nothing(on_delta: dict[str, Any]) -> None:
    """The replay build found a new file of the orders topic only: the silver and history
    tables of the other topics (not compacted either) get no new commit."""
    before, after = on_delta["versions"]
    untouched = [name for name in before if not name.startswith(("orders", "customers"))]
    assert any(name.endswith("_history") for name in untouched), untouched
    assert {n: after[n] for n in untouched} == {n: before[n] for n in untouched}


def test_maintenance_runs_on_delta(on_delta: dict[str, Any]) -> None:
    assert "silver.customers: optimize" in on_delta["compact"], on_delta["compact"][-2000:]
    assert "silver.customers: reorg apply (purge) done" in on_delta["compact"]
    assert "would be deleted" in on_delta["orphans"], on_delta["orphans"][-2000:]
    # OPTIMIZE committed to bronze (two builds appended files to it), nothing else did
    before, after = on_delta["bronze_versions"]
    compacted = "bronze_northwind__orders"
    assert after[compacted] > before[compacted], (before, after)
    assert {n: v for n, v in after.items() if n != compacted} == {
        n: v for n, v in before.items() if n != compacted
    }


def test_replay_after_compaction_changes_nothing(on_delta: dict[str, Any]) -> None:
    assert lake_rows(on_delta["replayed"]) == lake_rows(on_delta["step2"])
    assert_matches_expected(on_delta["replayed"])
