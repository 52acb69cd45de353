"""Credentials and connection manager: dbt-spark's, renamed, with `method: session` as default,
the method shown to macros (`target.method`), a sub-second poll interval for `method: thrift`,
and, in the session, statements that commit with Iceberg snapshot properties
(commit_properties.py)."""

from dataclasses import dataclass
from typing import Any

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.spark.connections import (
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
)
from dbt.adapters.spark.session import SessionConnectionWrapper
from dbt.adapters.sparksession import commit_properties


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


class CommittingSessionConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's session connection; a statement that asks for Iceberg commit properties
    runs inside them."""

    def execute(self, sql: str, bindings: list[Any] | None = None) -> None:
        properties = commit_properties.requested(sql)
        if properties is None:
            super().execute(sql, bindings)
        else:
            run = SessionConnectionWrapper.execute
            commit_properties.run_with(properties, lambda: run(self, sql, bindings))
