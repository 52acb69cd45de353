"""The embedded metastore's first table write, made once per session before dbt's threads write.

The embedded target's metastore (Hive 2.3.9's, in Derby) stores a table's and its serde's
parameters through DataNucleus (datanucleus-rdbms 4.1.19, the version Spark 3.5 ships), whose
`JoinMapStore.getValue` builds its SQL statement on first use without checking again inside its
lock: a second thread that enters while the first builds it replaces the statement's parameter
mapping under the first thread, which then fails with "Cannot invoke
StatementMappingIndex.getNumberOfParameterOccurrences() because ownerIdx is null"
(datanucleus/datanucleus-rdbms#288, fixed in 5.2.0; Hive 2.3 runs on 4.1 only). Spark's own
catalog calls take one lock, but Iceberg's commits (its own metastore clients) and Hudi's
metastore sync (its own client, on every Hudi write) do not: two models of one build writing
the metastore at the same moment, the process's first such writes, can fail one of them. CI
saw it on Hudi, a silver model's write: "HoodieMetaSyncException: Could not sync using the meta
sync class org.apache.hudi.hive.HiveSyncTool".

Once a store has built its statement, later calls only read it, as long as the process keeps one
DataNucleus factory (profiles/profiles.yml: the driver's JVM properties give every client of the
embedded metastore the same database settings; a client with others replaces the factory). So
the first session of a process writes a table's parameters once, alone, before any other
statement runs on it: a view created and dropped in `default` (the store Iceberg's commits
write; within the noise of a new process's first statements on 2 cores). On Hudi, whose sync
also writes a table's serde parameters (the store CI's failure was in), a table with a location
instead (its serde keeps the path): about 0.5 s more. A metastore service (CDC_METASTORE_URI) is
another JVM: devstack's makes the same first write before it serves (jvm/metastore,
LoopbackMetastore).

The first write is a guard, not a step of the run: when it fails (a metastore the process may
read but not write, a warm-up view another process holds), the session is used all the same and
the failure is logged as a warning with its cause; the statements that need the metastore report
their own errors.
"""

import shutil
import tempfile
import threading
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.sparksession.python_submissions import spark_error_detail

logger = AdapterLogger("Spark")

# Named after this project, in the database every Hive catalog has; dropped again at once (a
# process killed in between leaves it, and the next process drops it first).
VIEW = "default.cdc_lakehouse_metastore_warm_up"

_done: list[Any] = [None]  # the session whose metastore made its first write
_lock = threading.Lock()


def embedded_hive_metastore(spark: Any) -> bool:
    """Whether `spark`'s catalog is the Hive metastore running inside this JVM."""
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
        return False
    return not (spark._jsc.hadoopConfiguration().get("hive.metastore.uris") or "").strip()


def warm_up(spark: Any) -> None:
    """Make the embedded metastore's first table write on `spark`, once per session; every
    caller waits until it is done. Cheap after the first call: an identity check."""
    if _done[0] is spark:
        return
    with _lock:
        if _done[0] is spark:
            return
        if embedded_hive_metastore(spark):
            try:
                _first_write(spark)
            except Exception as exc:  # noqa: BLE001 - a guard: reported, the session goes on
                # the JVM's exception for py4j's errors (their own text only names the call)
                cause = (spark_error_detail(exc).strip().splitlines() or [repr(exc)])[0][:500]
                logger.warning(
                    f"The embedded metastore's first write ({VIEW}, created and dropped) "
                    "failed; models that write the metastore at the same moment may meet "
                    f"datanucleus/datanucleus-rdbms#288. Cause: {cause}"
                )
        _done[0] = spark


def _first_write(spark: Any) -> None:
    catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "")
    if not catalog.endswith("HoodieCatalog"):
        spark.sql(f"drop view if exists {VIEW}")
        spark.sql(f"create view {VIEW} as select 1 as warm_up")
        spark.sql(f"drop view {VIEW}")
        # Iceberg's session catalog makes it an Iceberg view, whose drop leaves its empty
        # metadata folder in the database's location: removed, not left in a user's warehouse
        _remove_folder(spark, spark.catalog.getDatabase("default").locationUri)
        return
    folder = tempfile.mkdtemp(prefix="cdc-metastore-warm-up-")
    try:
        spark.sql(f"drop table if exists {VIEW}")
        spark.sql(
            f"create table {VIEW} (warm_up int, part int) using parquet partitioned by (part) "
            f"location '{folder}'"
        )
        spark.sql(f"alter table {VIEW} add partition (part = 0)")  # a partition's parameters
        spark.sql(f"drop table {VIEW}")  # not managed: the folder stays, removed below
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_folder(spark: Any, database_location: str) -> None:
    """Remove the warm-up's folder under the database's location, if one is there."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{database_location.rstrip('/')}/{VIEW.split('.')[1]}")
    path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)
