"""Statements that commit with Iceberg snapshot properties.

A statement that holds the comment `/* iceberg commit properties: {"key": "value", ...} */` (the
package's macros put it first; dbt may put its query comment before it) runs inside
Iceberg's `CommitMetadata.withCommitProperties`: the snapshot it commits carries those
properties in its summary (`<table>.snapshots`, column `summary`). A MERGE can so carry the
state a CDC run must record with its rows (the watermark) in the same commit, instead of a
second commit (`alter table ... set tblproperties`) after it.

`CommitMetadata` keeps the properties in a Java thread-local and only Java code can set it, so
the statement runs as a Java `Callable` that calls back into this process (py4j's callback
server), on the Java thread that set them. Iceberg documents this for SQL statements
(docs/spark-configuration.md, "Write options": "if you run SQL statements, you could use
org.apache.iceberg.spark.CommitMetadata"; apache/iceberg#7743). Snapshot properties from a
session setting came to Iceberg's Spark 4.0 runtime only (apache/iceberg#14545); this project
runs Spark 3.5.

Only the session method runs statements in this process; a Thrift target's macros keep the
table-property commit (see the package's cdc_commit_properties_supported).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_COMMENT = re.compile(r"/\* iceberg commit properties: (\{.*?\}) \*/", re.DOTALL)


def requested(sql: str) -> dict[str, str] | None:
    """The commit properties a statement asks for, or None."""
    found = _COMMENT.search(sql)
    if found is None:
        return None
    try:
        properties = json.loads(found.group(1))
    except ValueError as exc:
        raise ValueError(f"commit properties must be a JSON object: {found.group(1)}") from exc
    return {str(k): str(v) for k, v in properties.items()}


class _Statement:
    """The Java `Callable` that runs the statement; py4j calls `call` back in this process."""

    def __init__(self, run: Callable[[], Any]) -> None:
        self.run = run
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # handed back to the caller below, with its own type
            self.error = exc
            raise
        return None

    class Java:
        implements = ["java.util.concurrent.Callable"]


def run_with(properties: dict[str, str], run: Callable[[], Any]) -> None:
    """Call `run` (which runs a statement on the active Spark session) so that every Iceberg
    snapshot it commits carries `properties`."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started

    context = SparkContext._active_spark_context
    if context is None:
        raise RuntimeError("commit properties need a Spark session in this process")
    gateway = context._gateway
    ensure_callback_server_started(gateway)
    jvm = gateway.jvm
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(key, value)
    statement = _Statement(run)
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_properties, statement, jvm.java.lang.Class.forName("java.lang.RuntimeException")
        )
    except Exception:
        if statement.error is not None:
            raise statement.error from None
        raise
