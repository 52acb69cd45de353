"""A long-lived dbt process for one lakehouse: the tests' dbt commands with a warm JVM.

A test that builds the same lakehouse several times (the oracle's phases, incremental steps)
would otherwise pay a cold JVM and a cold JIT on every `dbt` command: about half of a small
incremental build. This process runs the commands with `dbtRunner`, the function the `dbt` CLI
calls, so dbt-spark's in-process SparkSession survives from one command to the next, and so
does dbt's parsed project (`cdc_lakehouse.runner.parsed`); results are what the CLI would give
(exit code 0 success, 1 failure, 2 error, and the same output).

One process serves every lakehouse of a test process in turn (lakehouse.py keeps the JVM's
metastore and warehouse in one folder and links each test's lakehouse to it): between two
lakehouses it drops every table and view (`reset`), which costs a fraction of a second, where a
new JVM costs about 60 CPU seconds of class loading and JIT compilation before it is warm.

Protocol: one JSON request per line on stdin, `{"args": [...], "cwd": project_dir}` for a dbt
command or `{"reset": true}`; one JSON reply per request (`{"returncode": int, "output": str}`)
on the file descriptor given as argv[1] (stdout is left to the JVM's own printing). Started and
stopped by `lakehouse.run_dbt` / `stop_dbt_worker`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def reset_catalog() -> str:
    """Drop every table, view and database of the session's catalog (the metastore is the
    JVM's own, see lakehouse.py), temporary views and cached data: the next command finds an
    empty lakehouse, as a new process would. Dropping through the catalog also empties
    Iceberg's and Spark's table caches. Data files stay: the caller deletes the warehouse."""
    from pyspark.sql import SparkSession

    spark = SparkSession._instantiatedSession
    if spark is None:  # no dbt command has opened the session yet
        return "no session"
    # Listed with SHOW TABLES / SHOW VIEWS (rows), not `spark.catalog.listTables`, which builds
    # a `catalog.Table` per entry: after the stepwise sample's builds that failed in this
    # session ("Error while decoding: argument type mismatch, newInstance(class
    # org.apache.spark.sql.catalog.Table)", pyspark 3.5.8), while a new session listed the same
    # metastore; the reset then stopped the next test's first build.
    dropped = 0
    for database in [row[0] for row in spark.sql("show databases").collect()]:
        views = {row.viewName for row in spark.sql(f"show views in `{database}`").collect()}
        for row in spark.sql(f"show tables in `{database}`").collect():
            if row.isTemporary:
                spark.catalog.dropTempView(row.tableName)
                continue
            kind = "view" if row.tableName in views else "table"
            spark.sql(f"drop {kind} if exists `{database}`.`{row.tableName}`")
            dropped += 1
        if database != "default":
            spark.sql(f"drop database if exists `{database}` cascade")
    spark.catalog.setCurrentDatabase("default")
    spark.catalog.clearCache()
    return f"dropped {dropped} tables and views"


def main() -> None:
    from cdc_lakehouse.runner.parsed import ParsedProject

    # dbt parses a project once and again only when its files or the parse options change,
    # as in the continuous driver (cdc_lakehouse/runner/parsed.py)
    project = ParsedProject()
    replies = os.fdopen(int(sys.argv[1]), "w")
    for line in sys.stdin:
        request = json.loads(line)
        output = io.StringIO()
        try:
            if request.get("reset"):
                output.write(reset_catalog())
                returncode = 0
            else:
                os.chdir(request["cwd"])
                with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                    result = project.invoke(request["args"])
                returncode = 0 if result.success else (2 if result.exception else 1)
                if result.exception is not None:
                    output.write(f"\n{type(result.exception).__name__}: {result.exception}\n")
        except BaseException:  # noqa: BLE001 - report anything to the test, keep serving
            output.write(traceback.format_exc())
            returncode = 2
        replies.write(json.dumps({"returncode": returncode, "output": output.getvalue()}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
