"""The same project on Delta Lake and Apache Hudi: `CDC_TABLE_FORMAT=delta|hudi` (one setting:
the profile's catalog and extension, dbt_project.yml's file_format) builds bronze, silver,
histories, gold, seeds, snapshots and the working tables in that format with the same
`cdc_merge` / `cdc_history` logic.

One scenario, the same for each format (a test process each: `xdist_group` per format), the
same deliveries and checks as sample_stepwise.py's `stepwise` (test_pipeline_e2e) on Iceberg:
1. each topic's first and last landing file, then the files between (late events across runs:
   silver takes the whole-log replace path, on Hudi the one that deletes the keys the result
   lacks in a statement of its own, since Hudi ignores `when not matched by source`), the data
   tests on the second build: silver and the histories' current versions equal the source in
   every column (arrays included: Hudi's row writer once read
   them back as null, see profiles/profiles.yml), and no data test fails;
2. the format's maintenance (`cdc_compact`, `cdc_expire_snapshots`, `cdc_remove_orphan_files`)
   on a bronze and a silver table, leaving the rows as they were;
3. a landing file delivered again under a new name: the next build changes no row and commits
   nothing to the tables of the other topics.
Format specifics: Delta's silver tables have deletion vectors; Hudi's silver and history tables
carry their record key and commit-time ordering, and a create on Hudi (a drop, then a create)
clears the files a killed create left without a catalog entry.

The lineage built is the customers, orders and order details tables (of the sample's seven) up
to three gold tables, a seed and a snapshot: every materialization and strategy, the TOAST
placeholder, key changes, the TRUNCATE, arrays and small decimals. The other sample tables take
the same code paths; they are built on Iceberg in test_pipeline_e2e. The oracle runs on a
format with `CDC_TABLE_FORMAT=delta make oracle`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from lakehouse import (
    copy_landing,
    exported,
    first_and_last_files,
    history_state_problems,
    read_export,
    run_dbt,
    show,
    source_state_problems,
    use_table_format,
)

from sample.generator import northwind

pytestmark = pytest.mark.system

FORMATS = [
    # (xdist reads a group name ending in "]" as a parametrized test id: no brackets)
    pytest.param(name, marks=pytest.mark.xdist_group(f"test_table_formats.py:{name}"))
    for name in ("delta", "hudi")
]
SELECTED = ["+dim_customers", "+fct_orders_customer_as_of", "+order_details_history"]
SNAPSHOT = "customers_snapshot"
TABLES = [northwind.TABLES_BY_NAME[name] for name in ("customers", "orders", "order_details")]
ORDERS_TOPIC = "northwind.public.orders"
CUSTOMERS = "silver.customers"
# The killed create planted on Hudi: customers' tombstones table, which step 2 (late files: the
# whole change log resolved again) drops and creates again.
ORPHAN = Path("warehouse") / "silver.db" / "customers__cdc_tombstones"
# Hudi's completed instants (a pending one ends in .requested or .inflight)
HUDI_COMMITS = {".commit", ".replacecommit", ".deltacommit"}


def build(lakehouse: Path, landing: Path, export: str, *, data_tests: bool = False) -> dict:
    """`dbt build` of the selected lineage (data tests only when asked; they may fail, the tests
    below say so). Returns the export folder, dbt's output and exit code."""
    export_dir = lakehouse / "exports" / export
    skipped = ["unit_test"] + ([] if data_tests else ["test"])
    result = run_dbt(
        ["build", "--select", *SELECTED, SNAPSHOT, "--exclude-resource-type", *skipped],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
        check=not data_tests,
    )
    return {"export": export_dir, "output": result.stdout, "returncode": result.returncode}


def operation(lakehouse: Path, macro: str, args: str, *, check: bool = True) -> str:
    result = run_dbt(["run-operation", macro, "--args", args], lakehouse=lakehouse, check=check)
    return result.stdout + result.stderr


def commits(lakehouse: Path, schema: str) -> dict[str, int]:
    """Commits of every table of a schema (silver: silver and history tables): Delta's
    `_delta_log/<version>.json`, Hudi's completed commit instants."""
    counted = {}
    for table in (lakehouse / "warehouse" / f"{schema}.db").iterdir():
        if (table / "_delta_log").is_dir():
            counted[table.name] = len(list((table / "_delta_log").glob("*.json")))
        elif (table / ".hoodie").is_dir():
            done = [f for f in (table / ".hoodie").rglob("*") if f.suffix in HUDI_COMMITS]
            counted[table.name] = len(done)
    return counted


# Maintenance of a bronze table (two builds appended files to it), a silver table and, on
# Delta, its tombstones (MERGEs left deletion vectors in them).
COMPACTED = ["bronze.bronze_northwind__orders", CUSTOMERS]
COMPACTED_TOO = {"delta": [f"{CUSTOMERS}__cdc_tombstones"], "hudi": []}
CHECKSUM = (
    "select count(*) as n, sum(hash(customer_id, company_name, credit_limit, notes, tags, "
    f"_cdc_seq, _cdc_file)) as h from {CUSTOMERS}"
)


@pytest.fixture(scope="module", params=FORMATS)
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    table_format = request.param
    previous = use_table_format(table_format)
    try:
        lakehouse = tmp_path_factory.mktemp(table_format)
        landing = lakehouse / "landing"
        facts: dict[str, Any] = {"format": table_format, "lakehouse": lakehouse}
        copy_landing(landing, first_and_last_files())
        build(lakehouse, landing, "step1")
        if table_format == "hudi":
            # What a build killed while Hudi created a table leaves (Hudi drops, then creates):
            # files without a catalog entry.
            orphan = f"{ORPHAN.parts[1].removesuffix('.db')}.{ORPHAN.name}"
            operation(lakehouse, "run_query", json.dumps({"sql": f"drop table {orphan} purge"}))
            assert not (lakehouse / ORPHAN).exists()
            (lakehouse / ORPHAN / ".hoodie").mkdir(parents=True)
            (lakehouse / ORPHAN / "part-0000.parquet").write_bytes(b"left by a killed run")
        copy_landing(landing)
        facts["step2"] = build(lakehouse, landing, "step2", data_tests=True)
        facts["properties"] = {
            table: {
                row["key"]: row["value"] for row in show(lakehouse, f"show tblproperties {table}")
            }
            for table in (CUSTOMERS, "silver.order_details", "silver.order_details_history")
        }
        facts["rows_before"] = show(lakehouse, CHECKSUM)
        facts["commits_before"] = commits(lakehouse, "silver"), commits(lakehouse, "bronze")
        tables = f"[{', '.join(COMPACTED + COMPACTED_TOO[table_format])}]"
        facts["compact"] = operation(lakehouse, "cdc_compact", f"{{tables: {tables}}}")
        facts["expire"] = operation(
            lakehouse, "cdc_expire_snapshots", f"{{tables: [{CUSTOMERS}], retain_last: 1}}"
        )
        facts["orphans"] = operation(
            lakehouse,
            "cdc_remove_orphan_files",
            f"{{tables: [{CUSTOMERS}], dry_run: true}}",
            check=table_format != "hudi",  # Hudi refuses (below)
        )
        facts["rows_after"] = show(lakehouse, CHECKSUM)
        facts["commits_maintained"] = commits(lakehouse, "silver"), commits(lakehouse, "bronze")
        # A file of the orders topic delivered again under a new name: the only new landing
        files = sorted((landing / "topics" / ORDERS_TOPIC).rglob("*.json"))
        shutil.copyfile(files[-1], files[-1].with_name(f"{ORDERS_TOPIC}+0+0000090000.json"))
        facts["replayed"] = build(lakehouse, landing, "replayed")
        facts["commits_after"] = commits(lakehouse, "silver")
        return facts
    finally:
        use_table_format(previous)


def lake_rows(export_dir: Path) -> dict[str, list[dict]]:
    """Silver and gold rows (not bronze, which keeps every landed line, nor the run audit)."""
    return {
        name: sorted(read_export(export_dir, name), key=lambda r: json.dumps(r, sort_keys=True))
        for name in exported(export_dir)
        if not name.startswith(("audit.", "bronze.", "cdc."))
    }


def failing_tests(output: str) -> set[str]:
    """Names of the data tests dbt reported as failed ("Failure in test <name> (...)")."""
    return set(re.findall(r"Failure in test (\S+) \(", output))


def test_every_table_is_in_the_format(lake: dict) -> None:
    marker = {"delta": "_delta_log", "hudi": ".hoodie"}[lake["format"]]
    warehouse = lake["lakehouse"] / "warehouse"
    for schema in ("bronze", "silver", "gold", "audit", "snapshots"):
        tables = [t for t in (warehouse / f"{schema}.db").iterdir() if t.is_dir()]
        assert tables, schema
        for table in tables:
            assert (table / marker).is_dir(), table
            assert not (table / "metadata").exists(), f"{table}: Iceberg metadata"


def test_late_files_reach_the_source_state(lake: dict) -> None:
    problems = source_state_problems(lake["step2"]["export"], TABLES, equivalent_gold={})
    assert not problems, f"the {lake['format']} lake differs from the source:\n" + "\n".join(
        problems
    )


def test_history_current_versions_equal_the_source(lake: dict) -> None:
    problems = history_state_problems(lake["step2"]["export"], TABLES)
    assert not problems, f"the {lake['format']} histories differ:\n" + "\n".join(problems)


def test_no_data_test_fails(lake: dict) -> None:
    output = lake["step2"]["output"]
    assert "PASS=" in output
    others = re.findall(r"Failure in (?!test )\S+ \S+", output)
    assert not failing_tests(output) and not others, "\n".join(output.splitlines()[-80:])
    assert lake["step2"]["returncode"] == 0, "\n".join(output.splitlines()[-80:])


def test_maintenance_runs_and_keeps_the_rows(lake: dict) -> None:
    compact, expire, orphans = lake["compact"], lake["expire"], lake["orphans"]
    if lake["format"] == "delta":
        assert f"{CUSTOMERS}: optimize" in compact, compact[-2000:]
        assert f"{CUSTOMERS}: reorg apply (purge) done" in compact
        assert "would be deleted" in orphans, orphans[-2000:]
    else:
        assert f"{CUSTOMERS}: clustering" in compact, compact[-2000:]
        assert "Hudi has no such procedure" in orphans, orphans[-2000:]
    assert f"{CUSTOMERS}:" in expire, expire[-2000:]
    assert lake["rows_after"] == lake["rows_before"]
    # compaction committed to the compacted bronze table, to nothing else in bronze
    (_, bronze_before), (_, bronze_after) = lake["commits_before"], lake["commits_maintained"]
    compacted = COMPACTED[0].split(".")[1]
    assert bronze_after[compacted] > bronze_before[compacted], (bronze_before, bronze_after)
    assert {n: v for n, v in bronze_after.items() if n != compacted} == {
        n: v for n, v in bronze_before.items() if n != compacted
    }


def test_replay_after_maintenance_changes_nothing(lake: dict) -> None:
    assert lake_rows(lake["replayed"]["export"]) == lake_rows(lake["step2"]["export"])
    assert not source_state_problems(lake["replayed"]["export"], TABLES, equivalent_gold={})


def test_a_build_with_nothing_new_commits_nothing(lake: dict) -> None:
    """The replay build found a new file of the orders topic only: the silver and history
    tables of the other topics (not compacted either) get no new commit."""
    (before, _), after = lake["commits_maintained"], lake["commits_after"]
    untouched = [name for name in before if not name.startswith(("orders", "customers"))]
    assert any(name.endswith("_history") for name in untouched), untouched
    assert all(before[name] > 0 for name in untouched), before
    assert {n: after[n] for n in untouched} == {n: before[n] for n in untouched}


def test_format_specifics(lake: dict) -> None:
    properties = lake["properties"]
    if lake["format"] == "delta":
        # silver tables are created with deletion vectors on (Delta's merge-on-read)
        assert properties[CUSTOMERS].get("delta.enableDeletionVectors") == "true", properties
        return
    silver, history = properties["silver.order_details"], properties["silver.order_details_history"]

    def values(found: dict[str, str], *names: str) -> set[str]:
        """Values of the properties named `name` or ending in `.name` (Hudi keeps the table
        options under `option.` too)."""
        suffixes = tuple(f".{n}" for n in names)
        return {v for k, v in found.items() if k in names or k.endswith(suffixes)}

    keys = ("primaryKey", "recordkey.field")
    assert "order_id,product_id" in values(silver, *keys), silver
    assert "order_id,product_id,_cdc_valid_from_seq" in values(history, *keys), history
    for found in (silver, history):
        assert "COMMIT_TIME_ORDERING" in values(found, "record.merge.mode"), found
    # the create of customers' tombstones table cleared the killed create's files, and said so
    output = lake["step2"]["output"]
    assert f"{ORPHAN.parts[1].removesuffix('.db')}.{ORPHAN.name}: deleted " in output, output[
        -3000:
    ]
    # the table created there since holds none of them
    assert not (lake["lakehouse"] / ORPHAN / "part-0000.parquet").exists()
