"""Run a compiled Python model in this process, on the SparkSession dbt-spark already opened."""

from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.spark import SparkCredentials
from dbt.adapters.sparksession import column_cache
from dbt_common.exceptions import DbtRuntimeError

# The first line of the incremental materialization's Python statement that checkpoints a
# model's new events (sparksession_checkpoint_view)
CHECKPOINT_STATEMENT = "from dbt.adapters.sparksession.python_submissions import checkpoint_view"


def spark_error_detail(exc: BaseException) -> str:
    """What a failed Spark call says: the Java exception's text when py4j carries one (a
    Py4JJavaError's own message is little more than its class), else the error's message."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        return str(java.toString())
    return getattr(exc, "desc", None) or str(exc) or repr(exc)


def checkpoint_view(spark: Any, sql: str, name: str) -> None:
    """The rows of `sql`, computed once and checkpointed in this process (`localCheckpoint`:
    kept by Spark's block manager, their lineage cut), as the temporary view `name`. Each
    statement that reads the view reads those rows: they are not computed again, and not from
    tables the run has written since; a cached view (`cache table`) would be, since Spark
    refreshes a cache when a table its plan reads is written. Nothing goes through the catalog
    or the warehouse (a table would cost a create, a commit and a drop per run). The blocks are
    freed with the view (garbage collected); a lost executor fails the run, which then starts
    again from the watermark. Used by the incremental materialization (a Python statement,
    sparksession_checkpoint_view) and by macros that run while a model compiles
    (SparkSessionAdapter.checkpoint_view)."""
    spark.sql(sql).localCheckpoint(eager=True).createOrReplaceTempView(name)


class SessionPythonJobHelper(PythonJobHelper):
    def __init__(self, parsed_model: dict, credentials: SparkCredentials) -> None:
        self.parsed_model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> Any:
        from pyspark.sql import SparkSession

        # dbt-spark's session cursor created the session (with the profile's settings) when
        # the materialization ran its first SQL statement, so this returns that same session.
        spark = SparkSession.builder.getOrCreate()
        name = self.parsed_model.get("unique_id", "python model")
        namespace: dict[str, Any] = {"spark": spark, "__name__": "__dbt_python_model__"}
        # A Python model's code may write any table (the materialization's own statements
        # name theirs); a checkpoint only makes a temporary view.
        checkpoint = compiled_code.lstrip().startswith(CHECKPOINT_STATEMENT)
        if not checkpoint:
            column_cache.wrote_anything()
        try:
            exec(compile(compiled_code, name, "exec"), namespace)
        except Exception as exc:  # surface the model's own error, not a dbt internal one
            detail = spark_error_detail(exc)
            raise DbtRuntimeError(f"Python model {name} failed: {detail}") from exc
        finally:
            if not checkpoint:
                column_cache.wrote_anything()
        # Rows the code knows it produced (py_write_temp_view), or None: unknown.
        return namespace.get("dbt_rows_affected")
