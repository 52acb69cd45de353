"""Credentials and connection manager: dbt-spark's, renamed, with `method: session` as default,
the method shown to macros (`target.method`), a sub-second poll interval for `method: thrift`,
and, in the session, statements that run on the live session (no session builder per
statement) and statements that commit with Iceberg snapshot properties (commit_properties.py)."""

import re
import threading
from dataclasses import dataclass
from typing import Any

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.spark.connections import (
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
)
from dbt.adapters.spark.session import Cursor, SessionConnectionWrapper
from dbt.adapters.sparksession import column_cache, commit_properties, relations
from dbt.adapters.sparksession.metastore_warm_up import warm_up
from dbt_common.exceptions import DbtRuntimeError


@dataclass
class SparkSessionCredentials(SparkCredentials):
    method: SparkConnectionMethod = SparkConnectionMethod.SESSION
    host: str = "localhost"
    # Thrift: dbt-spark sleeps this long between polls of a running statement (whole seconds,
    # 5 by default). Most statements of this project take well under a second, so whole
    # seconds of sleep dominated a build over Thrift.
    poll_interval: float = 0.2  # type: ignore[assignment]

    @property
    def type(self) -> str:
        return "sparksession"

    def _connection_keys(self) -> tuple[str, ...]:
        # `method` too (`target.method` in macros, `dbt debug`): whether this process holds the
        # Spark session (`session`) or talks to a server (`thrift`) decides where an
        # incremental batch may live (cdc_batch_relation).
        return (*super()._connection_keys(), "method")


class SparkSessionConnectionManager(SparkConnectionManager):
    TYPE = "sparksession"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        connection = super().open(connection)
        handle = connection.handle
        if type(handle) is SessionConnectionWrapper:
            connection.handle = CommittingSessionConnectionWrapper(handle.handle)
        return connection


# Classes that pyspark (and this project's Python models) look up by their simple name through
# py4j, registered with the session's JVM view: py4j resolves a simple name by trying it bare,
# then the view's single-class imports, then each of pyspark's package imports in turn, and every
# name that is not a class costs a lookup in every jar of the class path (a few hundred). In
# the test processes' builds the JVM spent 3.6-5.2% of its sampled time resolving py4j names
# (docs/testing.md, "Where the time goes"): `functions` behind every pyspark `col`/`expr`,
# `SparkSession$` behind every getOrCreate; `PythonUtils` behind every column list pyspark hands
# the JVM (2,118 lookups in the four builds of `python -m benchmarks.build_cpu`, each missing
# twice before pyspark's `org.apache.spark.api.python` import), and the classes behind each
# DataFrame created from Python rows (`createDataFrame`: `PythonRDD`, `SerDeUtil`,
# `SimplePythonFunction`, 57-114 lookups each).
_SIMPLE_NAMES = (
    "org.apache.spark.sql.functions",
    "org.apache.spark.sql.SparkSession$",
    "org.apache.spark.api.python.PythonUtils",
    "org.apache.spark.api.python.PythonRDD",
    "org.apache.spark.api.python.SerDeUtil",
    "org.apache.spark.api.python.SimplePythonFunction",
)


# The call site Spark records for every job and RDD (the Spark UI's "Description" and the event
# log): unless the thread has set one, Spark walks the JVM stack to find the caller, for every
# RDD and job; from Python that frame is py4j's reflection (`NativeMethodAccessorImpl.java:0`),
# of no use to anyone. The node dbt runs (the `node_id` of dbt's query comment) is set instead,
# once per node and thread: jobs are named after their model, and most walks are gone (2.4% of
# the driver's sampled CPU in an incremental build of the sample, then 1.0%: threads that never
# ran a statement here still walk; docs/benchmarks.md).
_NODE_ID = re.compile(r'"node_id": "([^"]+)"')
_call_site = threading.local()


def _set_call_site(session: Any, sql: str) -> None:
    found = _NODE_ID.search(sql, 0, 600)
    site = found.group(1) if found else "dbt"
    if getattr(_call_site, "value", None) == site:
        return
    context = session.sparkContext
    context.setLocalProperty("callSite.short", site)
    context.setLocalProperty("callSite.long", site)
    _call_site.value = site


class _LiveSessionCursor(Cursor):
    """dbt-spark's session cursor, without a session builder per statement.

    dbt-spark builds `SparkSession.builder.enableHiveSupport().config(...)` with every profile
    setting and calls `getOrCreate()` for each statement; on a live session that is a py4j
    lookup and the profile's settings applied again, a few milliseconds a statement and
    thousands of statements a build. The first statement of the process creates the session
    as it does (relations.session: the same builder and settings), with the embedded
    metastore's first write (metastore_warm_up.py); later ones run on that session."""

    def execute(self, sql: str, *parameters: Any) -> None:
        from pyspark.sql import SparkSession
        from pyspark.sql.utils import AnalysisException

        session = SparkSession._instantiatedSession  # what getOrCreate() would return
        if session is None or session._sc._jsc is None:
            # dbt-spark's builder with the profile's settings, and the metastore's first write
            session = relations.session(self.server_side_parameters)
        warm_up(session)  # a session some other code created: its first write, before this
        _register_simple_names(session)
        _set_call_site(session, sql)
        if len(parameters) > 0:
            sql = sql % parameters
        column_cache.wrote(sql)  # a write: the columns described before it are forgotten
        try:
            self._df = session.sql(sql)
        except AnalysisException as exc:
            raise DbtRuntimeError(str(exc)) from exc
        finally:
            column_cache.wrote(sql)  # and those described while it ran


_registered: list[Any] = [None]  # the session whose JVM view has _SIMPLE_NAMES


def _register_simple_names(session: Any) -> None:
    if session is None or _registered[0] is session:
        return
    from py4j.java_gateway import java_import

    for name in _SIMPLE_NAMES:
        java_import(session._jvm, name)
    _registered[0] = session


class CommittingSessionConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's session connection, on the live session (`_LiveSessionCursor`); a statement
    that asks for Iceberg commit properties runs inside them."""

    def cursor(self) -> "CommittingSessionConnectionWrapper":
        self._cursor = _LiveSessionCursor(server_side_parameters=self.handle.server_side_parameters)
        return self

    def execute(self, sql: str, bindings: list[Any] | None = None) -> None:
        properties = commit_properties.requested(sql)
        if properties is None:
            super().execute(sql, bindings)
        else:
            run = SessionConnectionWrapper.execute
            commit_properties.run_with(properties, lambda: run(self, sql, bindings))
