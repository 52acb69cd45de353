"""The same project on a Spark cluster and object storage: the `cluster` and `thrift` targets
build the sample from an `s3a://` landing zone into an `s3a://` warehouse, and a session target
builds beside the Thrift server.

One local standalone cluster from the pyspark wheel (master + 2 workers of 1 core, 127.0.0.1
only), started and always stopped by the fixture, on the object-store stack this file shares
with test_shared_metastore.py (object_store_stack.py): an S3-compatible store (SeaweedFS,
`devstack.objectstore`, credentials made up for the session and given through the
environment only) holding the sample's landing files, and the metastore service several
processes share (`devstack.metastore`, its tables in a real PostgreSQL). The cluster
build starts from an empty metastore and warehouse (this file runs first on the stack), and no
table data stays in the local lakehouse folder:
- `cluster` target: dbt's in-process driver on that master builds every model of the sample,
  Python bronze models included (the data tests, the same SQL on every target, run in the
  embedded builds of test_pipeline_e2e and, for the customers models, over Thrift below);
- `thrift` target: a Spark Thrift Server on the same cluster and the same metastore rebuilds
  the SQL models (`--full-refresh --exclude tag:cdc_bronze`) from the bronze tables the
  cluster build decoded, then runs the data tests of the customers models (the Thrift build's
  tables must equal the cluster build's cell for cell). Python models cannot run over Thrift:
  they need the in-process driver;
- while the Thrift server builds, an `embedded` session (its own Spark driver, another process)
  rebuilds the Pagila models (`+address +address_history`), which the Thrift build leaves out:
  two engines on one catalog at once, each reading the bronze tables the other reads. With the
  embedded Derby metastore the second would fail to open it.

Both must reach the sample's expected state (what the embedded target builds, checked the same
way in test_pipeline_e2e) and agree with each other cell for cell. test_shared_metastore.py
then continues the lakehouse these builds leave.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from lakehouse import (
    REPO,
    SAMPLE_TABLES,
    diff_states,
    expected_state,
    exported,
    lake_state,
    read_export,
    run_dbt,
)
from object_store_stack import LANDING, WAREHOUSE, ObjectStoreStack

from devstack import cluster, objectstore

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("object-store")]

SKIP_UNIT_TESTS = ["--exclude-resource-type", "unit_test"]
SQL_MODELS_ONLY = ["--exclude", "tag:cdc_bronze"]
NO_DATA_TESTS = ["--exclude-resource-type", "test"]
# The data tests run over Thrift too (~1.1 s each there): those of one table and its history.
THRIFT_DATA_TESTS = ["stg_northwind__customers_changes", "customers", "customers_history"]
# What the session target rebuilds while the Thrift server builds the rest (disjoint writes).
BESIDE_THRIFT = ["+address", "+address_history"]


def build(lakehouse: Path, landing: str, target: str, env: dict[str, str], *extra: str) -> Path:
    """`dbt build` on `target` without data tests; returns the export folder (local: the
    executors write it, on this machine)."""
    export_dir = lakehouse.parent / "exports" / target
    run_dbt(
        ["build", "--target", target, *extra, *SKIP_UNIT_TESTS, *NO_DATA_TESTS],
        lakehouse=lakehouse,
        variables={"cdc_landing_root": landing, "cdc_export_dir": str(export_dir)},
        env=env,
    )
    return export_dir


def run_span(target_path: Path) -> tuple[datetime, datetime]:
    """When a dbt command ran: its run_results.json's end time minus its elapsed time."""
    results = json.loads((target_path / "run_results.json").read_text())
    ended = datetime.fromisoformat(results["metadata"]["generated_at"].replace("Z", "+00:00"))
    return ended - timedelta(seconds=results["elapsed_time"]), ended


@pytest.fixture(scope="module")
def builds(
    object_store_stack: ObjectStoreStack, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    stack = object_store_stack
    before = stack.begin("test_cluster_targets")
    # What the tests below check of the cluster build (every bronze table decoded on the
    # executors) needs a warehouse no other scenario wrote first.
    assert not before, f"the cluster build must start from an empty lakehouse, after {before}"
    root = tmp_path_factory.mktemp("cluster")
    lakehouse, state_dir = root / "lakehouse", root / "spark"
    # every process (dbt, the Thrift server the cluster module starts) reads the stack's env
    with stack.environ():
        try:
            state = cluster.start(state_dir, workers=2, worker_cores=1, worker_memory="1g")
            on_cluster = build(lakehouse, LANDING, "cluster", state.env())
            state = cluster.thrift_start(state_dir, project_dir=REPO, lakehouse=lakehouse)
            with ThreadPoolExecutor(max_workers=2) as pool:
                thrift_build = pool.submit(
                    build,
                    lakehouse,
                    LANDING,
                    "thrift",
                    state.env(),
                    "--full-refresh",
                    *SQL_MODELS_ONLY,
                    "--exclude",
                    *BESIDE_THRIFT,
                )
                # another folder for dbt's own files (target/, logs/): two dbt processes at once
                session_build = pool.submit(
                    build,
                    root / "session",
                    LANDING,
                    "embedded",
                    {"CDC_SPARK_MASTER": "local[1]"},
                    "--full-refresh",
                    "--select",
                    *BESIDE_THRIFT,
                    *SQL_MODELS_ONLY,
                )
                on_thrift, on_session = thrift_build.result(), session_build.result()
            spans = {
                "thrift": run_span(lakehouse / "target"),
                "session": run_span(root / "session" / "target"),
            }
            thrift_tests = run_dbt(
                ["test", "--target", "thrift", "--select", *THRIFT_DATA_TESTS, *SKIP_UNIT_TESTS],
                lakehouse=lakehouse,
                variables={"cdc_landing_root": LANDING},
                env=state.env(),
            )
            master = cluster.master_info(state)
            stored = objectstore.list_folder(stack.store, f"{WAREHOUSE}/silver.db")
            thrift_properties = (state_dir / "thrift.properties").stat().st_mode & 0o777
            thrift_command = next(p for p in state.processes if p.name == "thrift")
            command_line = Path(f"/proc/{thrift_command.pid}/cmdline").read_bytes()
        finally:
            cluster.stop(state_dir)
    return {
        "cluster": on_cluster,
        "thrift": on_thrift,
        "session": on_session,
        "session_lakehouse": root / "session",
        "spans": spans,
        "thrift_tests": thrift_tests.stdout,
        "master": master,
        "stored": stored,
        "lakehouse": lakehouse,
        "thrift_properties": thrift_properties,
        "thrift_command_line": command_line,
        "credentials": stack.credentials,
    }


def exported_tables(export_dir: Path) -> dict[str, list[dict]]:
    """Every exported lake table, rows sorted, for table-by-table equality (not the run audit,
    whose rows name the run)."""
    return {
        name: sorted(read_export(export_dir, name), key=lambda r: json.dumps(r, sort_keys=True))
        for name in exported(export_dir)
        if not name.startswith("audit.") and name != "cdc.types"
    }


def assert_matches_expected(export_dir: Path, tables: list | None = None) -> None:
    problems = []
    for table in SAMPLE_TABLES if tables is None else tables:
        diff = diff_states(expected_state(table), lake_state(export_dir, table))
        problems += [f"{table.name}: {line}" for line in diff[:20]]
    assert not problems, "silver differs from the expected source state:\n" + "\n".join(problems)


# The sample's tables the Thrift build made, and those the session build beside it made.
BUILT_BESIDE = [t for t in SAMPLE_TABLES if t.name == "address"]
BUILT_OVER_THRIFT = [t for t in SAMPLE_TABLES if t not in BUILT_BESIDE]


def test_cluster_target_builds_the_sample(builds: dict[str, Any]) -> None:
    assert_matches_expected(builds["cluster"])
    tables = exported_tables(builds["cluster"])
    bronze = [name for name in tables if name.startswith("bronze.")]
    assert len(bronze) == len(SAMPLE_TABLES), "the Python bronze models ran on the cluster"


def test_tables_live_in_the_object_store(builds: dict[str, Any]) -> None:
    silver = {t.name for t in SAMPLE_TABLES}
    assert silver <= set(builds["stored"]), builds["stored"]
    for lakehouse in (builds["lakehouse"], builds["session_lakehouse"]):
        # no table data in the local lakehouse folders, and no Derby metastore: every process
        # used the metastore service
        assert not (lakehouse / "warehouse").exists()
        assert not (lakehouse / "metastore_db").exists()


def test_object_store_keys_stay_off_command_lines(builds: dict[str, Any]) -> None:
    assert builds["thrift_properties"] == 0o600
    for value in builds["credentials"].values():
        assert value.encode() not in builds["thrift_command_line"]


def test_thrift_target_builds_the_sample(builds: dict[str, Any]) -> None:
    assert BUILT_BESIDE and BUILT_OVER_THRIFT
    assert_matches_expected(builds["thrift"], BUILT_OVER_THRIFT)


def test_session_target_built_while_the_thrift_server_did(builds: dict[str, Any]) -> None:
    (thrift_start, thrift_end), (session_start, session_end) = (
        builds["spans"]["thrift"],
        builds["spans"]["session"],
    )
    overlap = min(thrift_end, session_end) - max(thrift_start, session_start)
    assert overlap > timedelta(seconds=10), builds["spans"]
    assert_matches_expected(builds["session"], BUILT_BESIDE)


def declared_data_tests(models: list[str]) -> int:
    """How many data tests the project's YAML declares on `models` (on each model and on its
    columns)."""
    count = 0
    for path in (REPO / "models").rglob("*.yml"):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            if model["name"] in models:
                columns = model.get("columns", [])
                count += len(model.get("data_tests", []))
                count += sum(len(column.get("data_tests", [])) for column in columns)
    return count


def test_data_tests_run_over_thrift(builds: dict[str, Any]) -> None:
    # run_dbt raised if one failed; this checks that they ran (a selector typo selects nothing)
    match = re.search(r"Done\. PASS=(\d+) WARN=(\d+) ERROR=0", builds["thrift_tests"])
    declared = declared_data_tests(THRIFT_DATA_TESTS)
    assert declared, "no data tests declared on the Thrift selection's models"
    assert match and int(match.group(1)) + int(match.group(2)) >= declared, (
        declared,
        builds["thrift_tests"][-2000:],
    )


def test_thrift_and_cluster_builds_agree_cell_for_cell(builds: dict[str, Any]) -> None:
    # The Thrift and session builds rebuilt silver, gold and the rejects from the same bronze
    # rows, so even `_cdc_loaded_at` must agree.
    on_cluster = exported_tables(builds["cluster"])
    on_thrift = exported_tables(builds["thrift"])
    on_session = exported_tables(builds["session"])
    sql_built = {name for name in on_cluster if not name.startswith("bronze.")}
    assert not set(on_thrift) & set(on_session), "the two builds wrote disjoint models"
    assert set(on_thrift) | set(on_session) == sql_built
    for name in sorted(sql_built):
        rebuilt = on_thrift.get(name, on_session.get(name))
        assert rebuilt == on_cluster[name], f"{name} differs between the targets"
    # Column types of every model the Thrift and session builds made, views included (a view
    # read through the Hive metastore must keep `timestamp_ntz` on the server too).
    types = {}
    for target in ("cluster", "thrift", "session"):
        rows = read_export(builds[target], "cdc.types")
        types[target] = {
            (r["relation"], r["position"], r["column_name"], r["data_type"]) for r in rows
        }
    rebuilt_types = types["thrift"] | types["session"]
    relations = {row[0] for row in rebuilt_types}
    assert any(r.startswith("staging.") for r in relations), relations
    on_cluster_types = {row for row in types["cluster"] if row[0] in relations}
    assert rebuilt_types == on_cluster_types, rebuilt_types ^ on_cluster_types


def test_both_builds_ran_on_the_cluster_executors(builds: dict[str, Any]) -> None:
    """Not silently local: the master ran both applications, each on both workers' cores."""
    master = builds["master"]
    assert master["aliveworkers"] == 2
    apps = {app["name"]: app for app in master["completedapps"] + master["activeapps"]}
    assert apps["cdc-lakehouse-cluster"]["cores"] == 2
    assert apps["cdc-lakehouse-thrift"]["cores"] == 2
