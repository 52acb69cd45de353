"""A metastore several processes share: the Hive metastore service (`devstack.metastore`) on
127.0.0.1, its tables in a real PostgreSQL, and `CDC_METASTORE_URI` set for every dbt process.

The lakehouse is the one test_cluster_targets.py built before this file (object_store_stack.py: the
same metastore service and the same warehouse and landing zone in object storage), which this file
continues as a production loop continues what a first build made: while `python -m
cdc_lakehouse.runner.continuous` keeps building the customers tables of the sample in a loop,
another dbt process on the same lakehouse runs `dbt show`, a `dbt build` of the products tables and
`dbt docs generate`, one after the other (its JVM started once). With the embedded Derby metastore
it fails while the loop's process holds it. Nothing has landed since the cluster build, so the
loop's runs find no new file (its first run, which ends before the other processes start, builds the
customers tables from nothing when this file runs alone: the runs beside the others find nothing new
either way). The products build rebuilds its tables from the landing files (`--full-refresh`): every
write of a first build, beside the loop. Then two processes append to one Iceberg table at once:
every commit must survive (the metastore lock; without it Hive 2.3.9 lets one process overwrite the
other's commit). Last, Trino (single node, its Iceberg connector on the same metastore) and
pyiceberg (its Hive catalog, a Python user's way in) read the silver, history and gold tables those
processes built, and every cell equals Spark's. The tables live in object storage (SeaweedFS,
`devstack.objectstore`, `s3a://lake/warehouse`): every process, the metastore service, Trino's
native S3 file system and pyiceberg's reach them there."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lakehouse import REPO, DbtProcess, _worker_env, expected_state, read_export
from object_store_stack import LANDING, WAREHOUSE, ObjectStoreStack

from devstack import objectstore, trino
from sample.generator import northwind

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("object-store")]

NO_TESTS = ["--exclude-resource-type", "unit_test", "--exclude-resource-type", "test"]
LOOP_SELECT = ["+customers", "+customers_history"]
OTHER_SELECT = ["+products", "+products_history", "+dim_products"]
BUILT = [*LOOP_SELECT, *OTHER_SELECT]
# Read back through Trino: the loop's customers tables, the other build's products tables and
# gold table (`+dim_products` builds the order_details tables too).
TRINO_READS = [
    "silver.customers", "silver.customers_history", "silver.products",
    "silver.products_history", "silver.order_details", "gold.dim_products",
]  # fmt: skip


def trino_canonical(column: str, trino_type: str) -> str:
    """Trino SQL giving a column's value in the `cdc_export` hook's canonical text (what Spark
    writes to the export files), so rows compare cell for cell."""
    quoted = f'"{column}"'
    if trino_type.startswith(("decimal", "date")):
        return f"cast({quoted} as varchar)"
    if trino_type.startswith("timestamp"):
        # to_iso8601 keeps the 6 fraction digits; an instant is in UTC ('Z'), as Spark writes it
        return f"to_iso8601({quoted})"
    if trino_type == "varbinary":
        return f"to_base64({quoted})"
    if trino_type.startswith(("array", "map", "row")):
        return f"json_format(cast({quoted} as json))"
    return quoted


class Loop:
    """`python -m cdc_lakehouse.runner.continuous` in the background; its JSON run reports
    collected."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.reports: list[dict[str, Any]] = []
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith("{"):
                self.reports.append(json.loads(line))

    def wait_for_runs(self, count: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while len(self.reports) < count:
            assert self.proc.poll() is None, "the loop exited:\n" + "".join(self.output[-60:])
            assert time.monotonic() < deadline, "the loop is too slow:\n" + "".join(self.output)
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def shared(
    object_store_stack: ObjectStoreStack, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    stack = object_store_stack
    stack.begin("test_shared_metastore")
    root = tmp_path_factory.mktemp("shared")
    lakehouse = root / "lakehouse"
    loop_export, other_export = root / "exports" / "loop", root / "exports" / "other"
    loop_variables = json.dumps({"cdc_landing_root": LANDING, "cdc_export_dir": str(loop_export)})
    # The production layout: tables in object storage (SeaweedFS on 127.0.0.1, made-up keys in
    # the environment only), the catalog in PostgreSQL; every process started here inherits it.
    with stack.environ():
        loop: Loop | None = None
        try:
            loop = Loop(
                [
                    sys.executable,
                    "-m",
                    "cdc_lakehouse.runner.continuous",
                    "--every",
                    "30",
                    "--",
                    "build",
                    "--select",
                    *LOOP_SELECT,
                    *NO_TESTS,
                    "--vars",
                    loop_variables,
                    "--log-path",
                    str(root / "loop-logs"),
                    "--target-path",
                    str(root / "loop-target"),
                ],
                _worker_env(lakehouse),
            )
            loop.wait_for_runs(1)
            others_started = time.time()
            live = "select count(*) as n from silver.customers where not _cdc_is_deleted"
            # The other commands beside the loop: one more dbt process, its JVM started once.
            with DbtProcess(lakehouse, stack.env) as other:
                show = other.run(
                    ["show", "--inline", live, "--output", "json"],
                    variables={"cdc_landing_root": LANDING},
                )
                other.run(
                    # a whole build beside the loop, also on the tables the cluster build left
                    ["build", "--full-refresh", "--select", *OTHER_SELECT, *NO_TESTS],
                    variables={"cdc_landing_root": LANDING, "cdc_export_dir": str(other_export)},
                )
                other.run(
                    # compiled for the built models only: a CDC model's compilation queries its
                    # inputs, and run alone this file builds two of the sample's tables, not all
                    ["docs", "generate", "--select", *BUILT],
                    variables={"cdc_landing_root": LANDING},
                )
            others_ended = time.time()
            runs_then = len(loop.reports)
            # One more run after the others, then stop the loop while it waits for the next
            # (`--every 30`): its last export is complete.
            loop.wait_for_runs(runs_then + 1)
            loop.stop()
            appended = subprocess.run(
                [sys.executable, str(Path(__file__).with_name("concurrent_appends.py")),
                 stack.service.uri, WAREHOUSE],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            through_trino = read_through_trino(root / "trino", stack.service.uri)
            through_pyiceberg = read_through_pyiceberg(stack.service.uri, stack.store.endpoint)
            stored = objectstore.list_folder(stack.store, f"{WAREHOUSE}/silver.db")
        finally:
            if loop is not None:
                loop.stop()
            trino.stop(root / "trino")
    return {
        "show": show.stdout,
        "catalog": json.loads((lakehouse / "target" / "catalog.json").read_text()),
        "loop": loop.reports,
        "window": (others_started, others_ended),
        "appended": appended,
        "local_warehouse": lakehouse / "warehouse",
        "stored": stored,
        "trino": through_trino,
        "pyiceberg": through_pyiceberg,
        "spark": {
            relation: read_export(
                loop_export if "customers" in relation else other_export, relation
            )
            for relation in TRINO_READS
        },
    }


def read_through_trino(state_dir: Path, metastore_uri: str) -> dict[str, Any]:
    """Every relation of TRINO_READS as Trino reads it, in canonical text."""
    started = time.monotonic()
    server = trino.start(state_dir, metastore_uri=metastore_uri)
    tables: dict[str, Any] = {"start_seconds": time.monotonic() - started}
    for relation in TRINO_READS:
        columns, _ = trino.query(server.url, f"select * from lakehouse.{relation} limit 0")
        select = ", ".join(
            f'{trino_canonical(c["name"], c["type"])} as "{c["name"]}"' for c in columns
        )
        names, rows = trino.query(server.url, f"select {select} from lakehouse.{relation}")
        tables[relation] = [dict(zip([c["name"] for c in names], row, strict=True)) for row in rows]
    return tables


def pyiceberg_canonical(value: Any, field_type: Any) -> Any:
    """A value pyiceberg read (Arrow, as Python) in the `cdc_export` hook's canonical text."""
    from pyiceberg import types

    if value is None:
        return None
    if isinstance(field_type, types.DecimalType):
        return str(value)
    if isinstance(field_type, types.DateType):
        return value.isoformat()
    if isinstance(field_type, types.TimestamptzType):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(field_type, types.TimestampType):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(field_type, types.BinaryType | types.FixedType):
        return base64.b64encode(value).decode("ascii")
    if isinstance(field_type, types.ListType | types.MapType | types.StructType):
        # Spark's to_json: compact, keys in field order, non-ASCII as is
        return json.dumps(_jsonable(value, field_type), separators=(",", ":"), ensure_ascii=False)
    return value


def _jsonable(value: Any, field_type: Any) -> Any:
    """A nested value as JSON sees it: Arrow gives a map as (key, value) pairs."""
    from pyiceberg import types

    if value is None:
        return None
    if isinstance(field_type, types.MapType):
        return {k: _jsonable(v, field_type.value_type) for k, v in value}
    if isinstance(field_type, types.ListType):
        return [_jsonable(v, field_type.element_type) for v in value]
    if isinstance(field_type, types.StructType):
        return {f.name: _jsonable(value[f.name], f.field_type) for f in field_type.fields}
    return value


def read_through_pyiceberg(metastore_uri: str, s3_endpoint: str) -> dict[str, Any]:
    """Every relation of TRINO_READS as pyiceberg reads it (its Hive catalog on the same
    metastore service, the files through Arrow's S3 client), in canonical text."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(
        "lakehouse",
        type="hive",
        uri=metastore_uri,
        **{
            "s3.endpoint": s3_endpoint,
            "s3.region": "us-east-1",
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        },
    )
    tables: dict[str, Any] = {"listed": catalog.list_tables("silver")}
    for relation in TRINO_READS:
        table = catalog.load_table(relation)
        fields = table.schema().fields
        tables[relation] = [
            {f.name: pyiceberg_canonical(row[f.name], f.field_type) for f in fields}
            for row in table.scan().to_arrow().to_pylist()
        ]
    return tables


def test_dbt_show_reads_what_the_loop_built(shared: dict[str, Any]) -> None:
    customers = expected_state(northwind.TABLES_BY_NAME["customers"])
    assert '"n"' in shared["show"], shared["show"][-2000:]
    assert json.loads(shared["show"][shared["show"].index("{") :])["show"] == [
        {"n": len(customers)}
    ]


def test_docs_catalog_holds_both_processes_tables(shared: dict[str, Any]) -> None:
    nodes = shared["catalog"]["nodes"]
    built = {key.rsplit(".", 1)[-1] for key in nodes}
    assert {"customers", "products", "customers_history", "products_history"} <= built, built


def test_the_loop_kept_running_beside_the_others(shared: dict[str, Any]) -> None:
    reports = shared["loop"]
    assert all(r["success"] for r in reports), reports
    started, ended = shared["window"]
    # a loop run that began before the other dbt process's commands ended, and ended after
    # they began
    spans = [(datetime.fromisoformat(r["started"]).timestamp(), r["seconds"]) for r in reports]
    assert any(at - 1 < ended and at + seconds + 1 > started for at, seconds in spans), spans
    assert len(reports) >= 2


def test_concurrent_commits_to_one_table_all_survive(shared: dict[str, Any]) -> None:
    result = shared["appended"]
    # the exceptions' own lines first: a JVM stack trace alone would hide which one it was
    causes = [line for line in result.stderr.splitlines() if "Exception:" in line]
    assert result.returncode == 0, "\n".join(causes[:10]) + "\n" + result.stderr[-2000:]
    # 2 writers x 20 inserts, one commit each (the table is created empty)
    assert "rows=40 snapshots=40" in result.stdout, result.stdout[-2000:]
    # in the lakehouse's warehouse (the service's `default` database), not Hive's own default
    # /user/hive/warehouse
    location = result.stdout.split("location=", 1)[1].split()[0]
    assert location.startswith(f"{WAREHOUSE}/"), location


def test_tables_live_in_the_object_store(shared: dict[str, Any]) -> None:
    assert {"customers", "customers_history", "products"} <= set(shared["stored"])
    assert not shared["local_warehouse"].exists(), "a table was written to the local folder"


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.mark.parametrize("relation", TRINO_READS)
def test_trino_reads_what_spark_wrote(shared: dict[str, Any], relation: str) -> None:
    spark_rows = shared["spark"][relation]
    assert spark_rows, f"{relation}: Spark exported no rows"
    assert _sorted(shared["trino"][relation]) == _sorted(spark_rows)


def test_pyiceberg_lists_the_tables_not_the_views(shared: dict[str, Any]) -> None:
    listed = {name for _, name in shared["pyiceberg"]["listed"]}
    assert {"customers", "customers_history", "products"} <= listed, listed
    assert not any(name.endswith("__cdc_batch") for name in listed), listed


@pytest.mark.parametrize("relation", TRINO_READS)
def test_pyiceberg_reads_what_spark_wrote(shared: dict[str, Any], relation: str) -> None:
    spark_rows = shared["spark"][relation]
    assert spark_rows, f"{relation}: Spark exported no rows"
    assert _sorted(shared["pyiceberg"][relation]) == _sorted(spark_rows)
