"""What the embedded metastore's DataNucleus layer holds in a dbt process (test_metastore.py).

Run as `python metastore_probe.py` with CDC_LAKEHOUSE_DIR, CDC_TABLE_FORMAT and
DBT_PROFILES_DIR set, from the repository root. It runs a dbt command in this process (`dbt
show`: the adapter's session, dbt's listings and statements from its threads), then writes
tables of the format from new threads, as dbt's threads do (each thread's first metastore call
opens the metastore for that thread: Iceberg's commits and Hudi's sync with their own clients).
Prints one JSON object:
- `after_warm_up`: the map stores whose statement is built when the session's first write
  (adapter/dbt/adapters/sparksession/metastore_warm_up.py) is done, and the factory's identity;
- `after_command`, `after_writes`: the factory's identity then (the same unless a client opened
  the metastore with other settings and it was replaced), and the settings that changed;
- `left_in_default`: the tables the session left in `default`, and `left_in_warehouse`: the
  folders in its location;
- `blocked`: a second dbt command after the process's session is taken for a new one, with an
  object of the other kind under the first write's name (a table where it drops a view, a view
  where it drops a table): whether the command succeeded and the warnings dbt logged.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from dbt.cli.main import dbtRunner

OBJECT_STORE = "org.apache.hadoop.hive.metastore.ObjectStore"


def _object_store_static(spark: Any, name: str) -> Any:
    """A static field of Hive's ObjectStore, read by reflection through Spark's client loader."""
    client = spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    loader = client.clientLoader().classLoader()
    field = spark._jvm.java.lang.Class.forName(OBJECT_STORE, False, loader).getDeclaredField(name)
    field.setAccessible(True)
    return field.get(None)


def factory(spark: Any) -> Any:
    """The embedded metastore's DataNucleus persistence manager factory (Hive's ObjectStore
    keeps one per JVM)."""
    return _object_store_static(spark, "pmf")


def factory_settings(spark: Any) -> dict[str, str]:
    """The database settings the factory was opened with (ObjectStore's `prop`)."""
    settings = _object_store_static(spark, "prop")
    return {str(k): str(settings.get(k)) for k in settings.keySet().toArray()}


def built_map_stores(spark: Any) -> list[str]:
    """The map fields (`MTable.parameters`, ...) whose store has built its get statement."""
    manager = factory(spark).getNucleusContext().getStoreManager()
    jvm = spark._jvm
    rdbms = jvm.java.lang.Class.forName(
        "org.datanucleus.store.rdbms.RDBMSStoreManager", False, manager.getClass().getClassLoader()
    )
    field = rdbms.getDeclaredField("backingStoreByMemberName")
    field.setAccessible(True)
    stores = field.get(manager)
    built = []
    for name in stores.keySet().toArray():
        store = stores.get(name)
        if store.getClass().getSimpleName() != "JoinMapStore":
            continue
        statement = store.getClass().getDeclaredField("getStmtLocked")
        statement.setAccessible(True)
        if statement.get(store) is not None:
            built.append(".".join(str(name).split(".")[-2:]))
    return sorted(built)


def in_new_thread(work: Any) -> None:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the caller
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def main() -> None:
    from dbt.adapters.sparksession import metastore_warm_up

    report: dict[str, Any] = {}
    first_write = metastore_warm_up._first_write

    def observed_first_write(spark: Any) -> None:
        first_write(spark)
        report["after_warm_up"] = {
            "built": built_map_stores(spark),
            "factory": factory(spark).hashCode(),
            "settings": factory_settings(spark),
        }

    metastore_warm_up._first_write = observed_first_write
    # a whole dbt command: its session, its listings and statements from dbt's threads
    lakehouse = os.environ["CDC_LAKEHOUSE_DIR"]
    result = dbtRunner().invoke(
        ["show", "--inline", "select 1 as x", "--quiet", "--target-path", f"{lakehouse}/target"]
        + ["--log-path", f"{lakehouse}/logs"]
    )
    if not result.success:
        raise SystemExit(f"dbt show failed: {result.exception}")
    from pyspark.sql import SparkSession

    spark = SparkSession._instantiatedSession
    settings = report["after_warm_up"].pop("settings")
    report["after_command"] = {"factory": factory(spark).hashCode()}
    table_format = os.environ.get("CDC_TABLE_FORMAT", "iceberg")
    hudi = "tblproperties ('primaryKey' = 'id', 'type' = 'cow')"
    options = hudi if table_format == "hudi" else ""
    for name in ("probe_a", "probe_b"):
        in_new_thread(
            lambda name=name: spark.sql(
                f"create table default.{name} (id int, v int) using {table_format} {options}"
            )
        )
        in_new_thread(lambda name=name: spark.sql(f"insert into default.{name} values (1, 1)"))
    now = factory_settings(spark)
    report["after_writes"] = {
        "factory": factory(spark).hashCode(),
        "settings_changed": {
            key: [settings.get(key), now.get(key)]
            for key in sorted(set(settings) | set(now))
            if settings.get(key) != now.get(key) and "password" not in key.lower()
        },
    }
    report["left_in_default"] = sorted(
        row.tableName for row in spark.sql("show tables in default").collect()
    )
    location = spark.catalog.getDatabase("default").locationUri.removeprefix("file:")
    report["left_in_warehouse"] = sorted(os.listdir(location))
    report["blocked"] = blocked_first_write(spark, lakehouse, table_format)
    print("PROBE " + json.dumps(report), flush=True)


def blocked_first_write(spark: Any, lakehouse: str, table_format: str) -> dict[str, Any]:
    """A dbt command whose session's first write fails (really: an object of the other kind
    holds its name) must go on, with a warning."""
    from dbt.adapters.sparksession import metastore_warm_up

    name = metastore_warm_up.VIEW
    if table_format == "hudi":  # the first write drops a table there: a view holds the name
        spark.sql(f"create view {name} as select 1 as blocker")
    else:  # it drops a view: a table holds the name
        spark.sql(f"create table {name} (blocker int) using parquet")
    metastore_warm_up._done[0] = None  # the session is taken for a new one
    warnings: list[str] = []

    def warned(event: Any) -> None:
        if event.info.level == "warn":
            warnings.append(event.info.msg)

    result = dbtRunner(callbacks=[warned]).invoke(
        ["show", "--inline", "select 2 as x", "--quiet", "--target-path", f"{lakehouse}/target"]
        + ["--log-path", f"{lakehouse}/logs"]
    )
    kind = "view" if table_format == "hudi" else "table"
    spark.sql(f"drop {kind} {name}")
    return {
        "success": result.success,
        "warnings": warnings,
        "done": metastore_warm_up._done[0] is spark,
    }


if __name__ == "__main__":
    main()
