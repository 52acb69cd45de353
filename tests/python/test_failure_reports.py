"""What a failed test says: a failed dbt command's causes come before its stack frames, and a
failure on the object-store stack carries the services' logged errors, not the noise of
clients closing connections. CI shows a part of a failed run's output: once, a cluster build's
"commit state unknown" reached it as 80 lines of frames without the cause."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from lakehouse import _checked, failure_causes
from object_store_stack import logged_errors

# The shape of a dbt build that failed on a Spark driver: what the driver logged, dbt's
# error, then Java's trace.
DBT_OUTPUT = """\
01:10:02  1 of 9 START sql table model silver.customers ........ [RUN]
01:10:08 ERROR HiveTableOperations: Cannot tell if commit to silver.customers succeeded
01:10:09  1 of 9 ERROR creating sql table model silver.customers [ERROR in 7.1s]
01:10:09  Runtime Error in model customers (models/silver/customers.sql)
  An error occurred while calling o71.sql.
: org.apache.iceberg.exceptions.CommitStateUnknownException: Metastore operation failed
Cannot determine whether the commit was successful or not.
\tat org.apache.iceberg.hive.HiveTableOperations.doCommit(HiveTableOperations.java:395)
\tat org.apache.iceberg.BaseMetastoreTableOperations.commit(BaseMetastoreTableOperations.java:127)
Caused by: MetaException(message:s3a://lake/warehouse/silver.db/customers is not a directory)
\tat org.apache.hadoop.hive.metastore.HiveMetaStoreClient.createTable(HiveMetaStoreClient.java:738)
\t... 55 more
Caused by: MetaException(message:s3a://lake/warehouse/silver.db/customers is not a directory)
01:10:09  Done. PASS=0 WARN=0 ERROR=1 SKIP=8 TOTAL=9
"""


def test_a_failed_dbt_command_names_its_causes_before_its_frames() -> None:
    causes = failure_causes(DBT_OUTPUT)
    assert causes == [
        "01:10:08 ERROR HiveTableOperations: Cannot tell if commit to silver.customers succeeded",
        "01:10:09  1 of 9 ERROR creating sql table model silver.customers [ERROR in 7.1s]",
        "01:10:09  Runtime Error in model customers (models/silver/customers.sql)",
        ": org.apache.iceberg.exceptions.CommitStateUnknownException: Metastore operation failed",
        "Caused by: MetaException(message:s3a://lake/warehouse/silver.db/customers is not a"
        " directory)",
    ]
    frames = "\tat x.y(Z.java:1)\n" * 90  # more frames than the output's end shows
    failed = subprocess.CompletedProcess(["dbt", "build"], 1, DBT_OUTPUT + frames, "")
    with pytest.raises(AssertionError) as raised:
        _checked(failed, ["build"], check=True)
    message = str(raised.value)
    assert message.index("Caused by: MetaException") < message.index("the end of its output")


METASTORE_LOG = """\
01:50:12.041 [pool-8-thread-1] ERROR org.apache.thrift.server.TThreadPoolServer - Thrift error occurred during processing of message.
org.apache.thrift.transport.TTransportException: null
\tat org.apache.thrift.transport.TIOStreamTransport.read(TIOStreamTransport.java:132) ~[libthrift-0.12.0.jar:0.12.0]
01:51:02.100 [pool-8-thread-7] ERROR org.apache.hadoop.hive.metastore.RetryingHMSHandler - MetaException(message:Exception thrown flushing changes to datastore)
\tat org.apache.hadoop.hive.metastore.RetryingHMSHandler.invokeInternal(RetryingHMSHandler.java:208) ~[hive-metastore-2.3.9.jar:2.3.9]
Caused by: org.postgresql.util.PSQLException: ERROR: duplicate key value violates unique constraint "SEQUENCE_TABLE_pkey"
01:51:03.000 [main] INFO org.apache.hadoop.hive.metastore.HiveMetaStore - 0: get_table
"""  # noqa: E501


def test_a_services_log_gives_its_errors_without_closed_connections(tmp_path: Path) -> None:
    log = tmp_path / "metastore.log"
    log.write_text(METASTORE_LOG)
    assert logged_errors(log) == [
        "01:51:02.100 [pool-8-thread-7] ERROR org.apache.hadoop.hive.metastore.RetryingHMSHandler"
        " - MetaException(message:Exception thrown flushing changes to datastore)",
        "  Caused by: org.postgresql.util.PSQLException: ERROR: duplicate key value violates"
        ' unique constraint "SEQUENCE_TABLE_pkey"',
    ]
    assert logged_errors(tmp_path / "missing.log") == ["(no log)"]
    log.write_text("E1205 01:52:00.000000 s3.go:42 put lake/warehouse: connection reset\n")
    assert logged_errors(log) == [
        "E1205 01:52:00.000000 s3.go:42 put lake/warehouse: connection reset"
    ]
