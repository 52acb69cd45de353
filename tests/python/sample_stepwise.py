"""The bundled sample built step by step in one lakehouse, shared by the files of group
`sample-stepwise` (conftest.py imports the fixture; dbt runs are the expensive part):
test_pipeline_e2e.py checks every step against the sample's expected state, and test_peers.py
compares the second step's tables, and the peers' on the same files, case by case
(`benchmarks.peers --ours-export`).

1. each topic's first and last landing file (`step1`), then the files between, late events
   across runs, with malformed lines (`step2`, whose data tests run): the peer comparison's
   `late_files` delivery;
2. a full refresh of the same landing zone: the whole sample at once, as `make run` builds it
   (`refresh`);
3. a no-op rebuild (`again`), then bronze compacted, its loaded-files ledger made wrong, and a
   landing file delivered again under a new name (`compacted`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from lakehouse import copy_landing, first_and_last_files, run_dbt, show

ORDERS_TOPIC = "northwind.public.orders"


def build(
    lakehouse: Path,
    landing: Path,
    export: str,
    *extra: str,
    data_tests: bool = True,
) -> Path:
    """`dbt build` of the whole project; data tests unless told not to. The dbt unit tests
    (data-independent) run on their own, in test_dbt_unit_tests.py."""
    export_dir = lakehouse / "exports" / export
    skipped = ["unit_test"] + ([] if data_tests else ["test"])
    run_dbt(
        ["build", *extra, "--exclude-resource-type", *skipped],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": str(landing), "cdc_export_dir": str(export_dir)},
    )
    return export_dir


def table_versions(lakehouse: Path) -> dict[str, int]:
    """Metadata versions (`*.metadata.json`: one per Iceberg commit, property changes included,
    or view replacement) of every staging view, silver and history table, gold table and dbt
    snapshot."""
    schemas = ("staging", "silver", "gold", "snapshots")
    tables = [t for s in schemas for t in (lakehouse / "warehouse" / f"{s}.db").iterdir()]
    return {
        f"{t.parent.name}/{t.name}": len(list((t / "metadata").glob("*.metadata.json")))
        for t in tables
    }


# What a dbt snapshot's current rows hold of silver: the timestamp strategy's key and commit
# time (customers), the check strategy's key and checked columns (products).
SNAPSHOTTED = {
    "customers": ["customer_id", "_cdc_source_ts"],
    "products": ["product_id", "product_name", "category", "unit_price", "units_in_stock",
                 "discontinued"],
}  # fmt: skip


def differences_from_silver(lakehouse: Path) -> dict[str, int]:
    """Per dbt snapshot: the rows its current versions and silver do not share (0 when the
    snapshot recorded every change silver committed)."""
    parts = []
    for table, columns in SNAPSHOTTED.items():
        listed = ", ".join(columns)
        snapshot = f"select {listed} from snapshots.{table}_snapshot where dbt_valid_to is null"
        silver = f"select {listed} from silver.{table}"
        parts.append(
            f"select '{table}' as snapshot, count(*) as n from ("
            f"(({snapshot}) except all ({silver})) union all (({silver}) except all ({snapshot})))"
        )
    return {row["snapshot"]: row["n"] for row in show(lakehouse, " union all ".join(parts))}


def resolution_sorts(lakehouse: Path) -> dict[str, int]:
    """Per silver model whose last build resolved the whole change log without carrying
    unchanged-TOAST values (its compiled SQL in target/compiled): how many sorts by the model's
    key the plan of that resolution holds (`EXPLAIN FORMATTED`). Its windows over a key's events
    share one order, so one sort must serve them all (cdc_event_order_columns)."""
    counts = {}
    for path in sorted((lakehouse / "target" / "compiled").glob("*/models/silver/*.sql")):
        sql = path.read_text()
        if "cdc_batch_kind: full" not in sql or "_cdc_carried__" in sql:
            continue
        found = re.search(r"over \(partition by (.+?) order by _cdc_seq", sql)
        assert found, f"{path.name}: no window over the key's events"
        keys = [key.strip(" `") for key in found[1].split(",")]
        plan = show(lakehouse, f"explain formatted {sql}")[0]["plan"]
        orders = re.findall(r"\(\d+\) Sort\nInput[^\n]*\nArguments: \[([^\]]*)\]", plan)
        leading = [
            [term.split("#")[0] for term in order.split(", ")][: len(keys)] for order in orders
        ]
        counts[path.stem] = leading.count(keys)
    return counts


def incremental_batches(lakehouse: Path) -> dict[str, str]:
    """Per silver model whose last build was an incremental run with changes (`cdc_batch_kind:
    changes`): its compiled SQL (target/compiled), the resolution of the new events."""
    found = {}
    for path in sorted((lakehouse / "target" / "compiled").glob("*/models/silver/*.sql")):
        sql = path.read_text()
        if "cdc_batch_kind: changes" in sql:
            found[path.stem] = sql
    return found


LOG_LINE = re.compile(r"^(?:\x1b\[0m)?\d\d:\d\d:\d\d\.\d+ ")
STATEMENT = re.compile(r"\]: On model\.[^.]+\.([^:]+): (.*)$")


def logged_statements(log: Path, offset: int = 0) -> dict[str, list[str]]:
    """Per model (its name): the statements dbt's debug log shows it sent after byte `offset`,
    in order (a statement's text runs to the next line of the log)."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    found: dict[str, list[list[str]]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        if not LOG_LINE.match(line):
            if lines is not None:
                lines.append(line)
            continue
        match = STATEMENT.search(line)
        lines = None
        if match:
            lines = [match[2]]
            found.setdefault(match[1], []).append(lines)
    return {name: ["\n".join(text) for text in texts] for name, texts in found.items()}


MALFORMED = [
    ('{"before": null, "after": {"order_id": 1', "invalid JSON"),
    ("{{EVENT_WITH_OP_X}}", "unknown op"),
    ("{{EVENT_WITHOUT_KEY}}", "missing key column order_id"),
]


def malformed_lines(good_event: str) -> list[str]:
    event = json.loads(good_event)
    unknown_op = {**event, "op": "x"}
    no_key = {**event, "after": {**event["after"], "order_id": None}}
    return [MALFORMED[0][0], json.dumps(unknown_op), json.dumps(no_key), good_event]


@pytest.fixture(scope="session")
def stepwise(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample in one lakehouse, built in five steps (the module docstring); the export
    folders of each build and what the tests below read of the steps between."""
    lakehouse = tmp_path_factory.mktemp("stepwise")
    landing = lakehouse / "landing"
    # Step 1 lands each topic's first and last file; the files between arrive in step 2, older
    # than what silver already holds (out of order across runs).
    copy_landing(landing, first_and_last_files())
    # The data tests run on step 2's state. The full refresh must rebuild every exported table
    # of that state cell for cell (asserted below, `_cdc_loaded_at` aside), so its data tests
    # would test the same rows again.
    step1 = build(lakehouse, landing, "step1", data_tests=False)
    copy_landing(landing)
    orders_files = sorted((landing / "topics" / ORDERS_TOPIC).rglob("*.json"))
    lines = orders_files[-1].read_text().splitlines()
    good_event = next(line for line in reversed(lines) if json.loads(line).get("after"))
    bad_file = orders_files[-1].with_name(f"{ORDERS_TOPIC}+0+0000095000.json")
    bad_file.write_text("\n".join(malformed_lines(good_event)) + "\n")
    before = table_versions(lakehouse)
    log = lakehouse / "logs" / "dbt.log"
    logged_before = log.stat().st_size
    # No rotation of dbt.log (10 MB by default) in the middle of step 2's part of it.
    step2 = build(lakehouse, landing, "step2", "--log-file-max-bytes", "0")
    step2_statements = logged_statements(log, logged_before)
    after = table_versions(lakehouse)
    batches = incremental_batches(lakehouse)
    snapshots_behind = differences_from_silver(lakehouse)
    refreshed = build(lakehouse, landing, "refresh", "--full-refresh", data_tests=False)
    sorts = resolution_sorts(lakehouse)

    # Nothing landed since the full refresh: the no-op build must leave every table as the
    # refresh left it (asserted below, table by table); its data tests would test the same rows.
    noop_before = table_versions(lakehouse)
    again = build(lakehouse, landing, "again", data_tests=False)
    noop_after = table_versions(lakehouse)
    # Compaction commits a new snapshot of bronze, so the names of its loaded files
    # (`__cdc_loaded_files`) no longer describe it: the next run must read them from bronze
    # itself and load only the file landed since, a replay: the sink delivered one file twice,
    # under a new start offset. The compaction runs as users run it, in a new `dbt` process
    # (`env`: a CLI subprocess, not the tests' warm one): there Iceberg's procedure is the first
    # to open the embedded metastore, which failed until the profile turned Hive's schema check
    # off for Iceberg's client too (apache/iceberg#7847, profiles.yml).
    run_dbt(
        ["run-operation", "cdc_compact", "--args", "{tables: [bronze.bronze_northwind__orders]}"],
        lakehouse=lakehouse,
        env={},
    )
    # The ledger now describes an older version; make it wrong too (one loaded file missing,
    # as after a post-hook that failed): the bronze pre-hook must drop it, else that file
    # would load twice.
    forgotten = str(orders_files[0].relative_to(landing))
    statement = (
        f"delete from bronze.bronze_northwind__orders__cdc_loaded_files where file = '{forgotten}'"
    )
    run_dbt(
        ["run-operation", "run_query", "--args", json.dumps({"sql": statement})],
        lakehouse=lakehouse,
    )
    # The replay is of the last good file (the malformed one would add rejects).
    shutil.copyfile(
        orders_files[-1], orders_files[-1].with_name(f"{ORDERS_TOPIC}+0+0000090000.json")
    )
    # Its silver and gold must equal the no-op's, cell for cell (asserted below), whose
    # rows step 2's data tests passed on: running them again would test the same rows.
    compacted = build(lakehouse, landing, "compacted", data_tests=False)
    return {
        "step1": step1,
        "step2": step2,
        "refresh": refreshed,
        "again": again,
        "compacted": compacted,
        "landing": landing,
        "bad_file": bad_file,
        "versions": (before, after),
        "snapshots_behind": snapshots_behind,
        "noop_versions": (noop_before, noop_after),
        "resolution_sorts": sorts,
        "incremental_batches": batches,
        "step2_statements": step2_statements,
    }
